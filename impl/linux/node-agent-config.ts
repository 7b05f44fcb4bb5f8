/**
 * The node agent's configuration from flags or AMBIENT_LAB_* variables (node-agent-main.ts runs
 * it; tests read the DaemonSet's environment through it). Defaults follow upstream istio-cni's
 * chart where it has the setting (ambient.ipv6 and ambient.dnsCapture: on). Every value is
 * checked here: a bad one is a ConfigError naming the flag (the process exits 2).
 *   --node NAME (required)            --kubeconfig PATH (default: $KUBECONFIG, else the pod's service account)
 *   --profile upstream|strict         (default upstream)
 *   --backend iptables|nftables       (default iptables, as upstream's nativeNftables: false; nftables needs `nft`,
 *                                      Debian package nftables, and replaces ipset with nftables sets on the node)
 *   --ipv6 BOOL --dns-capture BOOL    (default true both, as upstream; --ipv6=false, --dns-capture=false turn them off)
 *   --exclude-namespaces --system-namespace --own-pod-prefixes   (enrollment-flags.ts; the installer reads the same)
 *   --host-probe-snat-ip ADDR         (default 169.254.7.127; upstream HOST_PROBE_SNAT_IP)
 *   --host-probe-snat-ipv6 ADDR       (default fd16:9254:7127:1337:ffff:ffff:ffff:ffff; upstream HOST_PROBE_SNAT_IPV6)
 *   --force-iptables-binary legacy|nft (default: detected in the node netns; upstream FORCE_IPTABLES_BINARY)
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
 *   --status-socket PATH              (/status, /readyz, /metrics, /logging and POST /repair on a Unix socket, mode 0600)
 *   --cni-bin-dir PATH --cni-conf-dir PATH (the node's CNI dirs, read-only: ready only while the plugin is
 *                                      installed there and chained into the conflist the runtime uses,
 *                                      as upstream's readiness; unset: no such condition)
 *   --listen-address HOST             (metrics and readiness; default 0.0.0.0, as upstream)
 *   --metrics-port N                  (default 15014, upstream's monitoring port: /metrics)
 *   --readiness-port N                (default 8000, upstream's: /readyz, and /healthz for liveness)
 *   --repair-interval-ms N            --log-level debug|info|warn|error
 */
import { isIPv4, isIPv6 } from 'node:net';
import { BACKENDS } from '../api/backend.js';
import { netnsId } from '../api/ids.js';
import type { IpFamily } from '../host/netns-rules.js';
import { enrollmentConfigOf } from '../api/enrollment-config.js';
import type { NodeAgentConfig } from '../node-agent/node-agent.js';
import { DEFAULT_PROBE_SNAT } from '../node-agent/rule-builder.js';
import { address, cidr, type Cidr } from '../node-agent/rule-ir.js';
import { ComponentFlags, ConfigError } from './component-main.js';
import { enrollmentSettingsFromFlags } from './enrollment-flags.js';
import { IPTABLES_BACKEND_CHOICES, type IptablesBackendChoice } from './iptables-backend.js';
import { LOG_LEVELS, type LogLevel } from './logger-pino.js';
import type { PodUidSource } from './netns-finder-proc.js';
import type { LinuxZdsTransportOptions } from './zds-transport.js';

const C = 'ambient-lab-agent';

interface AgentSettings {
  readonly config: NodeAgentConfig;
  readonly kubeconfigFlag: string | undefined;
  readonly podUidSources: readonly PodUidSource[];
  readonly zdsSocket: LinuxZdsTransportOptions;
  readonly listenAddress: string;
  readonly metricsPort: number;
  readonly readinessPort: number;
  readonly statusSocket: string | undefined;
  /** Readiness includes the plugin's install state in these dirs (install-check.ts); absent: not checked. */
  readonly installCheck?: { readonly cniBinDir: string; readonly cniConfDir: string };
  readonly logLevel: LogLevel;
  /** undefined: detect in the node netns (iptables-backend.ts). */
  readonly forceIptablesBinary: IptablesBackendChoice | undefined;
}

function parseMode(v: string): number {
  if (!/^0?[0-7]{3}$/.test(v))
    throw new ConfigError(`${C}: --zds-socket-mode must be an octal mode like 0660, got ${JSON.stringify(v)}`);
  return parseInt(v, 8);
}

function parseId(flag: string, v: string): number {
  const n = Number(v);
  if (!/^[0-9]+$/.test(v) || n > 0xfffffffe)
    throw new ConfigError(`${C}: --${flag} must be a numeric id, got ${JSON.stringify(v)}`);
  return n;
}

/**
 * A probe SNAT address: one unicast address of the family (no prefix, not unspecified, loopback
 * or multicast: each would make the probe carve-out match traffic that is not a probe, or none).
 */
function parseProbeSnat(flag: string, family: IpFamily, v: string): Cidr {
  const ok = family === 'ipv4' ? isIPv4(v) : isIPv6(v) && v === v.toLowerCase();
  if (!ok)
    throw new ConfigError(
      `${C}: --${flag} must be one ${family === 'ipv4' ? 'IPv4' : 'IPv6 (lowercase)'} address without a prefix length, got ${JSON.stringify(v)}`,
    );
  const c = cidr(v);
  const a = address(c);
  const bad =
    family === 'ipv4'
      ? a === '0.0.0.0' || a.startsWith('127.') || Number(a.split('.')[0]) >= 224
        ? 'unspecified, loopback, multicast or reserved'
        : undefined
      : /^(::|::1)$/.test(a) || /^ff/.test(a)
        ? 'unspecified, loopback or multicast'
        : undefined;
  if (bad)
    throw new ConfigError(
      `${C}: --${flag} ${JSON.stringify(v)} is ${bad}; use a link-local or private unicast address (upstream's default is ${address(DEFAULT_PROBE_SNAT[family])})`,
    );
  return c;
}

export function agentSettings(argv: readonly string[], env: NodeJS.ProcessEnv): AgentSettings {
  const f = new ComponentFlags(argv, env, C);
  const nodeName = f.str('node');
  const kubeconfigFlag = f.optional('kubeconfig');
  const proxyUid = f.int('proxy-uid', 0);
  const sources = f.list('pod-uid-sources', ['cgroup']);
  for (const s of sources)
    if (s !== 'cgroup' && s !== 'environ')
      throw new ConfigError(`${C}: --pod-uid-sources: unknown source ${JSON.stringify(s)} (cgroup, environ)`);
  const snat4 = f.optional('host-probe-snat-ip');
  const snat6 = f.optional('host-probe-snat-ipv6');
  const probeSnat = {
    ipv4: snat4 === undefined ? DEFAULT_PROBE_SNAT.ipv4 : parseProbeSnat('host-probe-snat-ip', 'ipv4', snat4),
    ipv6: snat6 === undefined ? DEFAULT_PROBE_SNAT.ipv6 : parseProbeSnat('host-probe-snat-ipv6', 'ipv6', snat6),
  };
  const force = f.optional('force-iptables-binary');
  if (force !== undefined && !(IPTABLES_BACKEND_CHOICES as readonly string[]).includes(force)) {
    throw new ConfigError(
      `${C}: --force-iptables-binary must be one of ${IPTABLES_BACKEND_CHOICES.join(', ')} (or unset to detect), got ${JSON.stringify(force)}`,
    );
  }
  const profile = f.oneOf('profile', ['upstream', 'strict'] as const, 'upstream');
  const backend = f.oneOf('backend', BACKENDS, 'iptables');
  // Strict exempts from capture only marked packets from the proxy uid's sockets; at uid 0 every
  // root app would share that exemption, so strict will not run with it.
  if (profile === 'strict' && proxyUid === 0) {
    throw new ConfigError(
      `${C}: --profile strict with --proxy-uid 0 (the default): strict lets only the proxy uid's marked packets skip capture, so every root app would skip it too; ` +
        'run the proxy as its own uid (the proxy DaemonSet runs as 1337) and set --proxy-uid (AMBIENT_LAB_PROXY_UID) to it',
    );
  }
  const allowed = f.list('allowed-proxy-uids', [String(proxyUid)]);
  const config: NodeAgentConfig = {
    nodeName,
    profile,
    ipv6: f.bool('ipv6', true),
    dnsCapture: f.bool('dns-capture', true),
    enrollment: enrollmentConfigOf(enrollmentSettingsFromFlags(f, C)),
    proxyUid,
    kubeletUid: f.int('kubelet-uid', 0),
    allowedProxyUids: allowed.map((u) => parseId('allowed-proxy-uids', u)),
    pluginEventAddress: f.str('plugin-socket', '/var/run/ambient-lab/cni/agent.sock'),
    zdsAddress: f.str('zds-socket', '/var/run/ambient-lab/zds/zds.sock'),
    hostNetns: netnsId(f.str('host-netns', '/proc/self/ns/net')),
    repairIntervalMs: f.int('repair-interval-ms', 10_000),
    backend,
    // Only when set: the builders' default is upstream's, and an absent field keeps plans as they were.
    ...(snat4 !== undefined || snat6 !== undefined ? { probeSnat } : {}),
  };
  const zdsGroup = f.optional('zds-socket-group');
  const zdsOwner = f.optional('zds-socket-owner');
  const zdsSocket: LinuxZdsTransportOptions = {
    mode: parseMode(f.str('zds-socket-mode', zdsGroup !== undefined ? '0660' : '0600')),
    owner: {
      ...(zdsOwner !== undefined ? { uid: parseId('zds-socket-owner', zdsOwner) } : {}),
      ...(zdsGroup !== undefined ? { gid: parseId('zds-socket-group', zdsGroup) } : {}),
    },
  };
  // Readiness waits for the plugin in these dirs (install-check.ts); both or neither.
  const cniBinDir = f.optional('cni-bin-dir');
  const cniConfDir = f.optional('cni-conf-dir');
  if ((cniBinDir === undefined) !== (cniConfDir === undefined))
    throw new ConfigError(
      `${C}: --cni-bin-dir and --cni-conf-dir go together: give both (ready only once the plugin is installed and chained there) or neither`,
    );
  const listenAddress = f.str('listen-address', '0.0.0.0');
  const metricsPort = f.int('metrics-port', 15014, 0, 65535);
  const readinessPort = f.int('readiness-port', 8000, 0, 65535);
  const statusSocket = f.optional('status-socket');
  const logLevel = f.oneOf('log-level', LOG_LEVELS, 'info');
  f.assertAllUsed();
  return {
    config,
    kubeconfigFlag,
    podUidSources: sources as PodUidSource[],
    zdsSocket,
    ...(cniBinDir !== undefined && cniConfDir !== undefined ? { installCheck: { cniBinDir, cniConfDir } } : {}),
    listenAddress,
    metricsPort,
    readinessPort,
    statusSocket,
    logLevel,
    forceIptablesBinary: force as IptablesBackendChoice | undefined,
  };
}
