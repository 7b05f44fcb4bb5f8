/**
 * What a per-pod listener handler knows: the pod (uid, ZDS info, netns), the proxy's shared
 * dependencies, and the pod's registry of live connections (so a Del, a drain or a policy
 * change can reach them).
 */
import type { PodUid } from '../api/ids.js';
import type { NetnsId } from '../api/ids.js';
import type { MarkValue } from '../api/marks.js';
import type { Profile } from '../api/profile.js';
import type { WorkloadInfo } from '../api/zds/messages.js';
import type { Clock } from '../host/clock.js';
import type { HboneTransport } from '../host/hbone.js';
import type { Logger } from '../host/log.js';
import type { IpFamily, SocketAddress, Sockets } from '../host/sockets.js';
import type { AuthzRequest, Authorizer } from './authz/authorizer.js';
import type { PeerIdentity } from '../api/identity.js';
import type { DnsProxyConfig } from './dns/dns-config.js';
import type {
  ProxyConnectionLog,
  ProxyConnectionRecord,
  ProxyMetrics,
  ProxyWorkload,
  WorkloadLookup,
} from './proxy-deps.js';
import type { Relay } from './relay.js';

export interface ProxyDeps {
  readonly sockets: Sockets;
  readonly hbone: HboneTransport;
  readonly authorizer: Authorizer;
  readonly workloads: WorkloadLookup;
  readonly clock: Clock;
  readonly log: Logger;
  readonly connectionLog: ProxyConnectionLog;
  readonly metrics: ProxyMetrics;
  readonly trustDomain: string;
  /**
   * The deployment's profile (the agent's, from the same manifests). upstream: as ztunnel;
   * strict: outbound refuses plaintext to a destination pending enrollment (outbound.ts).
   */
  readonly profile: Profile;
  /** SO_MARK on every socket opened in a pod netns (upstream 0x539). */
  readonly mark: MarkValue;
  /** IP_TRANSPARENT on the listeners and source spoofing on inbound delivery (upstream default). */
  readonly transparent: boolean;
  readonly reusePort: boolean;
  readonly families: readonly IpFamily[];
  /** Upstream connect timeout (upstream 10 s). */
  readonly connectTimeoutMs: number;
  /** The DNS listener (15053) per pod; absent = not served. */
  readonly dns?: DnsProxyConfig;
}

/** A live connection the pod tracks. Inbound ones carry their authorization request for re-checks. */
export interface TrackedConnection {
  readonly relay: Relay;
  readonly authz?: AuthzRequest;
  readonly record: ProxyConnectionRecord;
}

export interface PodContext {
  readonly uid: PodUid;
  readonly info: WorkloadInfo;
  readonly netns: NetnsId;
  readonly deps: ProxyDeps;
  readonly log: Logger;
  /** The pod's own workload if the index knows it and it matches the ZDS info; else undefined (fail closed). */
  ownWorkload(): ProxyWorkload | undefined;
  ownIdentity(): PeerIdentity | undefined;
  track(c: TrackedConnection): void;
  untrack(c: TrackedConnection): void;
  /** The pod is shutting down: handlers must not start new relays. */
  readonly stopping: boolean;
}

/** Ports a connection must never be forwarded to: the proxy's own (ztunnel `illegal_ports`). */
export const ILLEGAL_PORTS: ReadonlySet<number> = new Set([15001, 15006, 15008]);

export function fmt(a: SocketAddress): string {
  return a.family === 6 ? `[${a.address}]:${a.port}` : `${a.address}:${a.port}`;
}

export function isLoopback(address: string): boolean {
  return address === '::1' || address.startsWith('127.') || address.startsWith('::ffff:127.');
}

/** IPv4-mapped IPv6 to IPv4 (ztunnel `to_canonical`). */
export function canonical(a: SocketAddress): SocketAddress {
  const m = /^::ffff:(\d+\.\d+\.\d+\.\d+)$/i.exec(a.address);
  return m ? { family: 4, address: m[1]!, port: a.port } : a;
}

export function record(ctx: PodContext, r: Omit<ProxyConnectionRecord, 'pod'>): ProxyConnectionRecord {
  const full: ProxyConnectionRecord = { pod: `${ctx.info.namespace}/${ctx.info.name}`, ...r };
  ctx.deps.connectionLog.record(full);
  return full;
}
