/** How the node proxy's DNS listener is configured (NodeProxyOptions.dns; absent = no DNS listener). */
import type { SocketAddress } from '../../host/sockets.js';
import type { DnsRequestLog } from './dns-log.js';
import type { DnsNameSource } from './name-source.js';

export interface DnsProxyOptions {
  /**
   * Resolvers to forward unknown names to, tried in order: the one the pod would have used
   * (its resolv.conf nameserver, e.g. the cluster DNS service). Required: there is no default.
   */
  readonly upstream: readonly SocketAddress[];
  /** Names answered locally besides the pod-IP names of the workload index (e.g. services). */
  readonly names?: DnsNameSource;
  /** Default 'cluster.local'. */
  readonly clusterDomain?: string;
  readonly log?: DnsRequestLog;
  /** Per upstream attempt; default 5000 ms (a stub resolver's own default retry interval). */
  readonly forwardTimeoutMs?: number;
}

/** Resolved configuration the per-pod DNS server uses. */
export interface DnsProxyConfig {
  readonly upstream: readonly SocketAddress[];
  readonly names: DnsNameSource;
  readonly log: DnsRequestLog;
  readonly forwardTimeoutMs: number;
}
