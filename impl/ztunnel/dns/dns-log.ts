/**
 * The DNS request log: one JSON line per DNS request the proxy handled, in the style of the
 * connection log (version, Clock time, event, pod, both addresses), plus counters.
 *
 *   answered-locally — answered from the proxy's own names (name-source.ts)
 *   forwarded        — relayed to the upstream resolver and its answer relayed back
 *   failed           — forwarding failed (timeout, unreachable); the client got SERVFAIL
 *   malformed        — the frame did not decode: FORMERR when it had a header, else dropped
 */
import type { Clock } from '../../host/clock.js';

const DNS_LOG_VERSION = 1;

type DnsRequestEvent = 'answered-locally' | 'forwarded' | 'failed' | 'malformed';

export interface DnsRequestRecord {
  readonly event: DnsRequestEvent;
  /** "ns/name" of the pod whose proxy served it. */
  readonly pod: string;
  readonly proto: 'udp' | 'tcp';
  /** The client, "ip:port" as the listener saw it. */
  readonly client: string;
  readonly question?: { readonly name: string; readonly type: string };
  /** RCODE of the reply sent (absent when nothing was sent). */
  readonly rcode?: number;
  /** Local answers: the addresses given. */
  readonly answers?: readonly string[];
  /** Forwarded / failed: the resolver asked, "ip:port". */
  readonly upstream?: string;
  readonly reason?: string;
}

export interface DnsRequestLog {
  record(r: DnsRequestRecord): void;
}

export class MemoryDnsLog implements DnsRequestLog {
  readonly records: DnsRequestRecord[] = [];
  record(r: DnsRequestRecord): void {
    this.records.push(r);
  }
}

/** JSON lines: {"v":1,"time":…,"kind":"dns","event":…,…}. */
export class JsonLinesDnsLog implements DnsRequestLog {
  constructor(
    private readonly clock: Clock,
    private readonly writeLine: (line: string) => void,
  ) {}
  record(r: DnsRequestRecord): void {
    this.writeLine(`${JSON.stringify({ v: DNS_LOG_VERSION, time: this.clock.now(), kind: 'dns', ...r })}\n`);
  }
}

/** Requests by event (the Linux exporter can read these). */
export class DnsCounters implements DnsRequestLog {
  readonly byEvent = new Map<DnsRequestEvent, number>();
  constructor(private readonly next?: DnsRequestLog) {}
  record(r: DnsRequestRecord): void {
    this.byEvent.set(r.event, (this.byEvent.get(r.event) ?? 0) + 1);
    this.next?.record(r);
  }
}
