/**
 * What the node proxy needs from the rest of ztunnel, as small interfaces: the workload index
 * (pod IP -> workload), a connection log and metrics. The workload index and the connection
 * log record have their own modules (workloads.ts, connection-log.ts); these are the narrow
 * views the datapath uses, so a test can hand in a fake.
 */
import type { PodUid } from '../api/ids.js';
import type { PeerIdentity } from '../api/identity.js';

/** A workload as the datapath needs it. */
export interface ProxyWorkload {
  readonly uid: string;
  readonly name: string;
  /** The controller it is reported under in metrics (workload-name.ts); absent: the pod's name. */
  readonly workloadName?: string;
  readonly namespace: string;
  readonly serviceAccount: string;
  readonly labels: Readonly<Record<string, string>>;
  readonly ips: readonly string[];
  /** In the mesh (HBONE-capable): outbound traffic to it is tunnelled to its 15008. */
  readonly enrolled: boolean;
  /**
   * Selected for the mesh but not served yet: the node agent decided its pod or namespace label
   * puts it in the mesh and marked it `ambient.istio.io/redirection: pending` (its rules are in
   * place or being applied, no node proxy has acknowledged it). Absent means false. Under strict
   * a source proxy refuses to send it plaintext (outbound.ts); upstream sends plaintext.
   */
  readonly pending?: boolean;
  readonly identity: PeerIdentity;
}

export interface WorkloadLookup {
  byIp(ip: string): ProxyWorkload | undefined;
  byUid(uid: PodUid): ProxyWorkload | undefined;
}

export type ConnectionDirection = 'outbound' | 'inbound-plaintext' | 'inbound-hbone';

export type ConnectionEvent =
  // taken from the listener, before any decision or upstream connect: a witness reading the log
  // can tell "this proxy holds the connection" from "nobody took it" while the upstream connect
  // is still pending (it may take the whole connect timeout when SYNs are dropped)
  | 'accepted'
  | 'forwarded' // relayed to the destination (outbound) or delivered to the app (inbound)
  | 'denied' // refused by policy, self-call, bad target, fail-closed
  | 'failed' // the upstream connect or HBONE handshake failed
  | 'closed' // ended normally
  | 'closed-by-policy'; // a live connection the new policy denies

/** One connection-log line: both 4-tuples and identities, the witness property checks read. */
export interface ProxyConnectionRecord {
  readonly event: ConnectionEvent;
  readonly direction: ConnectionDirection;
  readonly pod: string;
  /** Downstream: the accepted connection (client -> proxy listener). */
  readonly downstream: { readonly src: string; readonly dst: string };
  /** Where the client meant to go (original destination / CONNECT authority). */
  readonly target: string;
  /** Upstream: the connection the proxy opened (proxy -> next hop), when one was opened. */
  readonly upstream?: { readonly src: string; readonly dst: string };
  readonly srcIdentity?: string;
  readonly dstIdentity?: string;
  readonly mode?: 'hbone' | 'passthrough' | 'plaintext';
  readonly reason?: string;
  readonly bytesSent?: number;
  readonly bytesReceived?: number;
}

export interface ProxyConnectionLog {
  record(r: ProxyConnectionRecord): void;
}

/**
 * Counters the proxy keeps beside its connection records; impl/linux exports them with
 * prom-client. Connections and bytes are counted from the records (istio-tcp-metrics.ts).
 */
export interface ProxyMetrics {
  denied(direction: ConnectionDirection, reason: string): void;
  podsServed(n: number): void;
}

/** In-memory metrics (the sim's, and the source the Linux exporter reads). */
export class CountingMetrics implements ProxyMetrics {
  readonly deniedBy = new Map<string, number>();
  pods = 0;

  denied(d: ConnectionDirection, reason: string): void {
    const k = `${d}:${reason}`;
    this.deniedBy.set(k, (this.deniedBy.get(k) ?? 0) + 1);
  }

  podsServed(n: number): void {
    this.pods = n;
  }
}

/** A connection log that keeps records in memory (tests, and the sim's witness). */
export class MemoryConnectionLog implements ProxyConnectionLog {
  readonly records: ProxyConnectionRecord[] = [];
  record(r: ProxyConnectionRecord): void {
    this.records.push(r);
  }
}
