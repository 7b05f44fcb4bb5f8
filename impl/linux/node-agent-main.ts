/**
 * The node agent process (bin/ambient-lab-agent.js): a NodeAgent with the Linux adapters, run in
 * the node's host network namespace as root. Configuration: node-agent-config.ts (flags or
 * AMBIENT_LAB_* variables; a bad value exits 2 naming the flag).
 * SIGTERM stops serving and leaves the in-pod rules in place. With --cni-bin-dir/--cni-conf-dir,
 * /readyz is not ready until the plugin is installed and chained there (install-check.ts).
 */
import * as fs from 'node:fs';
import { PluginInstallCheck } from '../node-agent/install-check.js';
import { NodeAgent } from '../node-agent/node-agent.js';
import { SystemClock } from './clock.js';
import { runComponent } from './component-main.js';
import { serveHealth, type HealthSource } from './health-http.js';
import { NodeFileSystem } from './files.js';
import { detectIptablesTools } from './iptables-backend.js';
import { CliHostIpSets } from './ipsets-cli.js';
import { ClientNodeKubeApi, kubeConfigSource, loadKubeConfig } from './kube-client-node.js';
import { pinoLogger } from './logger-pino.js';
import { PromMetrics } from './metrics-prom.js';
import { agentSettings } from './node-agent-config.js';
import { ProcNetnsFinder } from './netns-finder-proc.js';
import { LinuxNetnsRules } from './netns-rules.js';
import { LinuxPodFlows } from './pod-flows.js';
import { HttpPluginEventTransport } from './plugin-events-http.js';
import { LinuxZdsTransport } from './zds-transport.js';

runComponent('ambient-lab-agent', async () => {
  const s = agentSettings(process.argv.slice(2), process.env);
  const { config } = s;
  const kubeconfig = kubeConfigSource(s.kubeconfigFlag, process.env, (p) => fs.existsSync(p));
  const log = pinoLogger({ name: 'ambient-lab-agent', level: s.logLevel });
  // One iptables variant for the node and every pod, chosen where the node's rules are (as upstream).
  const iptables = await detectIptablesTools(s.forceIptablesBinary, config.hostNetns);
  log.info('iptables variant', { variant: iptables.tools.variant, why: iptables.why });
  const metrics = new PromMetrics();
  const finder = new ProcNetnsFinder({ sources: s.podUidSources });
  const clock = new SystemClock();
  const agent = new NodeAgent(config, {
    kube: new ClientNodeKubeApi(loadKubeConfig(kubeconfig)),
    rules: new LinuxNetnsRules({ iptables: iptables.tools }),
    flows: new LinuxPodFlows(),
    finder,
    ipsets: new CliHostIpSets(),
    pluginEvents: new HttpPluginEventTransport(),
    zdsTransport: new LinuxZdsTransport(s.zdsSocket),
    clock,
    log,
    metrics,
    ...(s.installCheck
      ? { installCheck: new PluginInstallCheck(s.installCheck, { fs: new NodeFileSystem(), clock, log }) }
      : {}),
  });
  const healthSource: HealthSource = {
    live: () => agent.health().live,
    ready: () => agent.health(),
    metrics: async () => ({ contentType: metrics.contentType, text: await metrics.text() }),
    status: () => ({
      component: 'agent',
      node: config.nodeName,
      pid: process.pid,
      health: agent.health(),
      proxyConnected: agent.proxyConnected(),
      pods: agent.meshPods(),
      ...agent.progress(),
    }),
  };
  const health = await serveHealth(s.healthHost, s.healthPort, healthSource);
  // The same endpoints on a Unix socket, for a harness outside the node's network namespace.
  const statusServer = s.statusSocket
    ? await serveHealth(s.statusSocket, 0, healthSource, {
        repair: async () => {
          await agent.repair();
          return agent.progress().repairs;
        },
      })
    : undefined;
  await agent.start();
  log.info('agent ready', {
    node: config.nodeName,
    plugin: config.pluginEventAddress,
    zds: config.zdsAddress,
    health: `${s.healthHost}:${health.port}`,
    ipv6: config.ipv6,
    dnsCapture: config.dnsCapture,
    systemNamespace: config.enrollment.systemNamespace,
    excludeNamespaces: config.enrollment.excludeNamespaces.join(','),
  });
  return async () => {
    await agent.stop();
    await health.close();
    await statusServer?.close();
    finder.close();
  };
});
