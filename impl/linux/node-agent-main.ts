/**
 * The node agent process (bin/ambient-lab-agent.js): a NodeAgent with the Linux adapters, run in
 * the node's host network namespace as root. Configuration: flags or AMBIENT_LAB_* variables —
 *   --node NAME (required)            --kubeconfig PATH (default: $KUBECONFIG, else the pod's service account)
 *   --profile upstream|strict         --ipv6 --dns-capture
 *   --plugin-socket PATH              (default /var/run/ambient-lab/cni/agent.sock)
 *   --zds-socket PATH                 (default /var/run/ambient-lab/zds/zds.sock)
 *   --host-netns PATH                 (default /proc/self/ns/net: the netns the agent runs in)
 *   --proxy-uid N --kubelet-uid N     (strict profile: owners of marked / probe sockets)
 *   --allowed-proxy-uids N,N          (ZDS peer check; default the proxy uid)
 *   --zds-socket-group GID --zds-socket-owner UID --zds-socket-mode OCTAL
 *                                     (who may connect to the ZDS socket path: default root-owned
 *                                      0600, or 0660 when a group is given; a non-root proxy's
 *                                      group with the agent in it needs no CAP_CHOWN)
 *   --pod-uid-sources cgroup[,environ] (how pods' processes are recognised; see netns-finder-proc.ts)
 *   --status-socket PATH              (the same endpoints on a Unix socket)
 *   --health-address HOST --health-port N (default 0.0.0.0:15021, /healthz /readyz /metrics /status)
 *   --repair-interval-ms N            --log-level debug|info|warn|error
 * SIGTERM stops serving and leaves the in-pod rules in place.
 */
import * as fs from 'node:fs';
import { netnsId } from '../api/ids.js';
import { DEFAULT_ENROLLMENT_CONFIG } from '../node-agent/enrollment.js';
import { NodeAgent } from '../node-agent/node-agent.js';
import { SystemClock } from './clock.js';
import { ComponentFlags, ConfigError, runComponent } from './component-main.js';
import { serveHealth, type HealthSource } from './health-http.js';
import { CliHostIpSets } from './ipsets-cli.js';
import { ClientNodeKubeApi, kubeConfigSource, loadKubeConfig } from './kube-client-node.js';
import { pinoLogger } from './logger-pino.js';
import { PromMetrics } from './metrics-prom.js';
import { ProcNetnsFinder, type PodUidSource } from './netns-finder-proc.js';
import { LinuxNetnsRules } from './netns-rules.js';
import { HttpPluginEventTransport } from './plugin-events-http.js';
import { checkZdsSocketOptions, LinuxZdsTransport } from './zds-transport.js';

function parseMode(v: string): number {
  if (!/^0?[0-7]{3}$/.test(v)) throw new ConfigError(`ambient-lab-agent: --zds-socket-mode must be an octal mode like 0660, got ${JSON.stringify(v)}`);
  return parseInt(v, 8);
}

function parseId(flag: string, v: string): number {
  const n = Number(v);
  if (!/^[0-9]+$/.test(v) || n > 0xfffffffe) throw new ConfigError(`ambient-lab-agent: --${flag} must be a numeric id, got ${JSON.stringify(v)}`);
  return n;
}

runComponent('ambient-lab-agent', async () => {
  const f = new ComponentFlags(process.argv.slice(2), process.env, 'ambient-lab-agent');
  const nodeName = f.str('node');
  const kubeconfig = kubeConfigSource(f.optional('kubeconfig'), process.env, (p) => fs.existsSync(p));
  const proxyUid = f.int('proxy-uid', 0);
  const sources = f.list('pod-uid-sources', ['cgroup']);
  for (const s of sources) if (s !== 'cgroup' && s !== 'environ') throw new Error(`--pod-uid-sources: unknown source ${JSON.stringify(s)} (cgroup, environ)`);
  const config = {
    nodeName,
    profile: f.oneOf('profile', ['upstream', 'strict'] as const, 'upstream'),
    ipv6: f.bool('ipv6', false),
    dnsCapture: f.bool('dns-capture', false),
    enrollment: DEFAULT_ENROLLMENT_CONFIG,
    proxyUid,
    kubeletUid: f.int('kubelet-uid', 0),
    allowedProxyUids: f.list('allowed-proxy-uids', [String(proxyUid)]).map(Number),
    pluginEventAddress: f.str('plugin-socket', '/var/run/ambient-lab/cni/agent.sock'),
    zdsAddress: f.str('zds-socket', '/var/run/ambient-lab/zds/zds.sock'),
    hostNetns: netnsId(f.str('host-netns', '/proc/self/ns/net')),
    repairIntervalMs: f.int('repair-interval-ms', 10_000),
  };
  const zdsGroup = f.optional('zds-socket-group');
  const zdsOwner = f.optional('zds-socket-owner');
  const zdsSocket = {
    mode: parseMode(f.str('zds-socket-mode', zdsGroup !== undefined ? '0660' : '0600')),
    owner: { ...(zdsOwner !== undefined ? { uid: parseId('zds-socket-owner', zdsOwner) } : {}), ...(zdsGroup !== undefined ? { gid: parseId('zds-socket-group', zdsGroup) } : {}) },
  };
  checkZdsSocketOptions(zdsSocket);
  const healthHost = f.str('health-address', '0.0.0.0');
  const healthPort = f.int('health-port', 15021, 0, 65535);
  const statusSocket = f.optional('status-socket');
  const level = f.oneOf('log-level', ['debug', 'info', 'warn', 'error'] as const, 'info');
  f.assertAllUsed();
  if (config.allowedProxyUids.some((u) => !Number.isInteger(u) || u < 0)) throw new Error('--allowed-proxy-uids must be a comma-separated list of uids');

  const log = pinoLogger({ name: 'ambient-lab-agent', level });
  const metrics = new PromMetrics();
  const finder = new ProcNetnsFinder({ sources: sources as PodUidSource[] });
  const agent = new NodeAgent(config, {
    kube: new ClientNodeKubeApi(loadKubeConfig(kubeconfig)),
    rules: new LinuxNetnsRules(),
    finder,
    ipsets: new CliHostIpSets(),
    pluginEvents: new HttpPluginEventTransport(),
    zdsTransport: new LinuxZdsTransport(zdsSocket),
    clock: new SystemClock(),
    log,
    metrics,
  });
  const healthSource: HealthSource = {
    live: () => agent.health().live,
    ready: () => agent.health(),
    metrics: async () => ({ contentType: metrics.contentType, text: await metrics.text() }),
    status: () => ({ component: 'agent', node: nodeName, pid: process.pid, health: agent.health(), proxyConnected: agent.proxyConnected(), pods: agent.meshPods(), ...agent.progress() }),
  };
  const health = await serveHealth(healthHost, healthPort, healthSource);
  // The same endpoints on a Unix socket, for a harness outside the node's network namespace.
  const statusServer = statusSocket ? await serveHealth(statusSocket, 0, healthSource) : undefined;
  await agent.start();
  log.info('agent ready', { node: nodeName, plugin: config.pluginEventAddress, zds: config.zdsAddress, health: `${healthHost}:${health.port}` });
  return async () => {
    await agent.stop();
    await health.close();
    await statusServer?.close();
    finder.close();
  };
});
