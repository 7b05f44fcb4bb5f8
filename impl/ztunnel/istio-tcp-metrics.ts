/**
 * Istio's standard TCP metrics, labelled as ztunnel labels them (istio/ztunnel
 * src/proxy/metrics.rs, CommonTrafficLabels), so Istio's dashboards and alerts work unchanged:
 *
 *   istio_tcp_connections_opened_total   a connection the proxy took a decision on
 *   istio_tcp_connections_closed_total   …its end, with response_flags
 *   istio_tcp_connections_failed_total   …ends that were failures (DENY, CONNECT, TLS_FAILURE)
 *   istio_tcp_received_bytes_total       request bytes (client → server)
 *   istio_tcp_sent_bytes_total           response bytes (server → client)
 *   ambient_lab_proxy_connection_duration_seconds  (histogram; ztunnel has none)
 *
 * It reads the datapath's connection records (a ProxyConnectionLog beside the JSON-lines one),
 * so the metrics and the witness the property checks read cannot disagree. Labels:
 * - reporter: `source` for outbound, `destination` for inbound, as ztunnel;
 * - source_* / destination_*: the workload owning the address (outbound: the connection's
 *   source and its target; inbound: its source and this pod), `unknown` when no workload owns it;
 *   *_workload is the controller's name (workload-name.ts), *_canonical_service / *_app and
 *   *_canonical_revision / *_version as Istio derives them, *_cluster "Kubernetes" (Istio's
 *   default cluster id) for a known workload;
 * - source_principal: only from mTLS, as ztunnel: the peer certificate's identity inbound over
 *   HBONE, this pod's own identity outbound over HBONE, else `unknown`;
 *   destination_principal: the destination workload's identity;
 * - destination_service*: `unknown` (the lab has no Services);
 * - request_protocol `tcp`; connection_security_policy `mutual_tls` over HBONE, else `unknown`;
 * - response_flags: `-` on open and on a normal close, `DENY` for a policy denial (at connect or
 *   of a live connection), `CONNECT` for a failed upstream connect, `TLS_FAILURE` for a failed
 *   HBONE handshake.
 * Not labelled (ztunnel has them, the lab has nothing to put there): the locality labels.
 * Counted as ztunnel counts: a decision after the request is known opens (and at once closes) a
 * connection; refusals before that (self-calls, a proxy shutting down) are not connections here.
 */
import { spiffeId } from '../api/identity.js';
import type { Clock } from '../host/clock.js';
import type { Counter, Histogram, Metrics } from '../host/metrics.js';
import { canonicalRevision, canonicalService } from './workload-name.js';
import type { ProxyConnectionLog, ProxyConnectionRecord, ProxyWorkload, WorkloadLookup } from './proxy-deps.js';

const UNKNOWN = 'unknown';
/** Istio's default cluster id (CLUSTER_ID). */
const CLUSTER = 'Kubernetes';

export const ISTIO_TCP_LABELS = [
  'reporter',
  'source_workload',
  'source_canonical_service',
  'source_canonical_revision',
  'source_workload_namespace',
  'source_principal',
  'source_app',
  'source_version',
  'source_cluster',
  'destination_service',
  'destination_service_namespace',
  'destination_service_name',
  'destination_workload',
  'destination_canonical_service',
  'destination_canonical_revision',
  'destination_workload_namespace',
  'destination_principal',
  'destination_app',
  'destination_version',
  'destination_cluster',
  'request_protocol',
  'response_flags',
  'connection_security_policy',
] as const;
type TcpLabels = Record<(typeof ISTIO_TCP_LABELS)[number], string>;

/** Connection durations, seconds: from a millisecond to an hour. */
const DURATION_BUCKETS_S = [0.001, 0.005, 0.01, 0.05, 0.1, 0.5, 1, 5, 10, 60, 300, 3600];

/** Decisions that refuse before the request is known: not connections in ztunnel's metrics. */
const EARLY_REFUSALS = [
  /^self-call/,
  /^pod proxy is shutting down/,
  /^bad request/,
  /^unknown (source|local) workload/,
  /^original destination/,
];

/** ztunnel's response flag for a refusal or failure (ResponseFlags). */
function flagOf(r: ProxyConnectionRecord): string {
  if ((r.reason ?? '').startsWith('HBONE ')) return 'TLS_FAILURE';
  return r.event === 'denied' ? 'DENY' : 'CONNECT';
}

interface Open {
  readonly labels: TcpLabels;
  readonly since: number;
  flags: string;
}

function hostOf(endpoint: string): string {
  const m = /^\[(.+)\]:\d+$/.exec(endpoint) ?? /^(.+):\d+$/.exec(endpoint);
  return m ? m[1]! : endpoint;
}

function side(prefix: 'source' | 'destination', w: ProxyWorkload | undefined): Partial<TcpLabels> {
  if (!w) return {};
  const workload = w.workloadName ?? w.name;
  const app = canonicalService(w.labels, workload);
  const version = canonicalRevision(w.labels);
  return {
    [`${prefix}_workload`]: workload,
    [`${prefix}_canonical_service`]: app,
    [`${prefix}_canonical_revision`]: version,
    [`${prefix}_workload_namespace`]: w.namespace,
    [`${prefix}_app`]: app,
    [`${prefix}_version`]: version,
    [`${prefix}_cluster`]: CLUSTER,
  };
}

export class IstioTcpMetrics implements ProxyConnectionLog {
  private readonly opened: Counter;
  private readonly closed: Counter;
  private readonly failed: Counter;
  private readonly received: Counter;
  private readonly sent: Counter;
  private readonly duration: Histogram;
  /** Live connections by pod, direction, downstream 4-tuple and target (FIFO: HBONE streams can share one). */
  private readonly live = new Map<string, Open[]>();

  constructor(
    metrics: Metrics,
    private readonly clock: Clock,
    private readonly workloads: WorkloadLookup,
  ) {
    const counter = (name: string, help: string): Counter => metrics.counter(name, help, ISTIO_TCP_LABELS);
    this.opened = counter('istio_tcp_connections_opened_total', 'The total number of TCP connections opened');
    this.closed = counter('istio_tcp_connections_closed_total', 'The total number of TCP connections closed');
    this.failed = counter(
      'istio_tcp_connections_failed_total',
      'The total number of TCP connections that failed to establish',
    );
    this.received = counter(
      'istio_tcp_received_bytes_total',
      'The size of total bytes received during request in case of a TCP connection',
    );
    this.sent = counter(
      'istio_tcp_sent_bytes_total',
      'The size of total bytes sent during response in case of a TCP connection',
    );
    this.duration = metrics.histogram(
      'ambient_lab_proxy_connection_duration_seconds',
      'Time from a connection being forwarded to its end, by direction',
      DURATION_BUCKETS_S,
      ['direction'],
    );
  }

  record(r: ProxyConnectionRecord): void {
    switch (r.event) {
      case 'forwarded': {
        const labels = this.labelsOf(r);
        this.opened.inc(labels);
        this.push(r, { labels, since: this.clock.now(), flags: '-' });
        return;
      }
      case 'denied':
      case 'failed': {
        if (r.event === 'denied' && EARLY_REFUSALS.some((re) => re.test(r.reason ?? ''))) return;
        const labels = this.labelsOf(r);
        this.opened.inc(labels);
        const end = { ...labels, response_flags: flagOf(r) };
        this.closed.inc(end);
        this.failed.inc(end);
        return;
      }
      case 'closed-by-policy': {
        // the relay's own 'closed' follows: it carries the bytes and ends the connection
        const c = this.live.get(this.keyOf(r))?.[0];
        if (c) c.flags = 'DENY';
        return;
      }
      case 'closed': {
        const q = this.live.get(this.keyOf(r));
        const c = q?.shift();
        if (q && q.length === 0) this.live.delete(this.keyOf(r));
        const labels = { ...(c?.labels ?? this.labelsOf(r)), response_flags: c?.flags ?? '-' };
        this.closed.inc(labels);
        if (labels.response_flags !== '-') this.failed.inc(labels);
        // the log's bytesSent is what the proxy sent on: outbound toward the server, inbound toward the client
        const outbound = r.direction === 'outbound';
        const request = (outbound ? r.bytesSent : r.bytesReceived) ?? 0;
        const response = (outbound ? r.bytesReceived : r.bytesSent) ?? 0;
        if (request > 0) this.received.inc(labels, request);
        if (response > 0) this.sent.inc(labels, response);
        if (c) this.duration.observe((this.clock.now() - c.since) / 1000, { direction: r.direction });
        return;
      }
      case 'accepted':
        return;
    }
  }

  private push(r: ProxyConnectionRecord, o: Open): void {
    const k = this.keyOf(r);
    const q = this.live.get(k);
    if (q) q.push(o);
    else this.live.set(k, [o]);
  }

  private keyOf(r: ProxyConnectionRecord): string {
    return `${r.pod}|${r.direction}|${r.downstream.src}|${r.downstream.dst}|${r.target}`;
  }

  private labelsOf(r: ProxyConnectionRecord): TcpLabels {
    const outbound = r.direction === 'outbound';
    const mtls = r.mode === 'hbone' || r.direction === 'inbound-hbone';
    const source = this.workloads.byIp(hostOf(r.downstream.src));
    const destination = this.workloads.byIp(hostOf(r.target));
    const base: TcpLabels = Object.fromEntries(ISTIO_TCP_LABELS.map((l) => [l, UNKNOWN])) as TcpLabels;
    return {
      ...base,
      ...side('source', source),
      ...side('destination', destination),
      reporter: outbound ? 'source' : 'destination',
      // the source's principal only as mTLS proved it (ztunnel: derived_source)
      source_principal: mtls && r.srcIdentity ? r.srcIdentity : UNKNOWN,
      destination_principal: r.dstIdentity ?? (destination ? spiffeId(destination.identity) : UNKNOWN),
      request_protocol: 'tcp',
      response_flags: '-',
      connection_security_policy: mtls ? 'mutual_tls' : UNKNOWN,
    };
  }
}

/** Sends each record to every log in turn (the JSON lines and the metrics). */
export class TeeConnectionLog implements ProxyConnectionLog {
  constructor(private readonly logs: readonly ProxyConnectionLog[]) {}
  record(r: ProxyConnectionRecord): void {
    for (const l of this.logs) l.record(r);
  }
}
