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
import {
  loggingRoutes,
  metricsRoutes,
  readinessRoutes,
  readyzRoute,
  repairRoutes,
  statusRoutes,
} from './endpoint-routes.js';
import { serveEndpoints } from './http-endpoints.js';
import { NodeFileSystem } from './files.js';
import { detectIptablesTools } from './iptables-backend.js';
import { CliHostIpSets } from './ipsets-cli.js';
import { ClientNodeKubeApi, kubeConfigSource, loadKubeConfig } from './kube-client-node.js';
import { LogLevelControl, pinoLogger } from './logger-pino.js';
import { PromMetrics } from './metrics-prom.js';
import { agentSettings } from './node-agent-config.js';
import { ProcNetnsFinder } from './netns-finder-proc.js';
import { LinuxNetnsRules } from './netns-rules.js';
import { NftHostIpSets } from './nft-host-sets.js';
import { LinuxNftRules } from './nft-rules.js';
import { LinuxPodFlows } from './pod-flows.js';
import { HttpPluginEventTransport } from './plugin-events-http.js';
import { LinuxZdsTransport } from './zds-transport.js';

runComponent('ambient-lab-agent', async () => {
  const s = agentSettings(process.argv.slice(2), process.env);
  const { config } = s;
  const kubeconfig = kubeConfigSource(s.kubeconfigFlag, process.env, (p) => fs.existsSync(p));
  const logLevel = new LogLevelControl(s.logLevel);
  const log = pinoLogger({ name: 'ambient-lab-agent', control: logLevel });
  // One iptables variant for the node and every pod, chosen where the node's rules are (as upstream).
  const iptables = await detectIptablesTools(s.forceIptablesBinary, config.hostNetns);
  log.info('iptables variant', { variant: iptables.tools.variant, why: iptables.why });
  // nft: the nftables backend writes with it, and strict reads every pod's nftables ruleset with it
  // in either backend (a foreign table is drift). Checked here, before any work, so a node without
  // nft fails at start naming the package.
  const nft = config.backend === 'nftables' || config.profile === 'strict' ? new LinuxNftRules() : undefined;
  if (nft) {
    const tables = await nft.tables(config.hostNetns);
    log.info('nftables', { backend: config.backend ?? 'iptables', hostTables: tables.length });
  }
  const metrics = new PromMetrics();
  const finder = new ProcNetnsFinder({ sources: s.podUidSources });
  const clock = new SystemClock();
  const agent = new NodeAgent(config, {
    kube: new ClientNodeKubeApi(loadKubeConfig(kubeconfig)),
    rules: new LinuxNetnsRules({ iptables: iptables.tools, ...(nft ? { nftables: nft } : {}) }),
    flows: new LinuxPodFlows(),
    finder,
    ipsets:
      nft && config.backend === 'nftables'
        ? new NftHostIpSets(nft, config.hostNetns, config.profile)
        : new CliHostIpSets(),
    pluginEvents: new HttpPluginEventTransport(),
    zdsTransport: new LinuxZdsTransport(s.zdsSocket),
    clock,
    log,
    metrics,
    ...(s.installCheck
      ? { installCheck: new PluginInstallCheck(s.installCheck, { fs: new NodeFileSystem(), clock, log }) }
      : {}),
  });
  const ready = (): { ready: boolean; detail: string } => agent.health();
  const status = (): unknown => ({
    component: 'agent',
    node: config.nodeName,
    pid: process.pid,
    health: agent.health(),
    proxyConnected: agent.proxyConnected(),
    pods: agent.meshPods(),
    ...agent.progress(),
  });
  const servers = [
    await serveEndpoints('agent metrics', { host: s.listenAddress, port: s.metricsPort }, metricsRoutes(metrics)),
    await serveEndpoints(
      'agent readiness',
      { host: s.listenAddress, port: s.readinessPort },
      readinessRoutes('/readyz', ready),
    ),
    // status, log level, metrics and the repair action on a Unix socket (mode 0600: root on the
    // node), for operators and a harness outside the node's network namespace
    ...(s.statusSocket
      ? [
          await serveEndpoints('agent status socket', { socket: s.statusSocket }, [
            ...statusRoutes(status),
            readyzRoute(ready),
            ...metricsRoutes(metrics),
            ...loggingRoutes(logLevel),
            ...repairRoutes(async () => {
              await agent.repair();
              return agent.progress().repairs;
            }),
          ]),
        ]
      : []),
  ];
  await agent.start();
  log.info('agent ready', {
    node: config.nodeName,
    plugin: config.pluginEventAddress,
    zds: config.zdsAddress,
    metrics: `${s.listenAddress}:${servers[0]!.port}`,
    readiness: `${s.listenAddress}:${servers[1]!.port}`,
    ipv6: config.ipv6,
    dnsCapture: config.dnsCapture,
    backend: config.backend ?? 'iptables',
    systemNamespace: config.enrollment.systemNamespace,
    excludeNamespaces: config.enrollment.excludeNamespaces.join(','),
  });
  return async () => {
    await agent.stop();
    for (const server of servers) await server.close();
    finder.close();
  };
});
