/**
 * Reading one kind-world connection attempt from what the components logged: the pod apps'
 * accept lines (e2e/netns/world-pod-app.ts, via `kubectl logs`), the node proxies' connection
 * logs, and the node-side evidence of redirection and service (node-evidence.ts). The same
 * reading as the netns world, on text fetched from the cluster.
 */
import type { ConnectionLogRecord } from '../../impl/ztunnel/connection-log.js';
import type { Acceptor, ConnectResult, Delivery, PodRef, ProxyLogEntry } from '../../scenarios/world.js';
import { attemptError, tcpConnectOutcome, type ConnectOutcome } from '../netns/probe-protocol.js';
import type { NodeEvidence } from './node-evidence.js';

export const ep = (ip: string, port: number): string => (ip.includes(':') ? `[${ip}]:${port}` : `${ip}:${port}`);
export const tupleText = (e: { ip: string; port: number }): string => ep(e.ip, e.port);

/** One accept the pod app logged (world-pod-app.ts). */
export interface AppAccept {
  readonly ev: 'accept' | 'datagram';
  readonly port: number;
  readonly peer: string;
  readonly tag?: string;
}

/** The pod app's log lines for `tag` (other lines — node warnings — are skipped). */
export function appAccepts(log: string, tag: string): AppAccept[] {
  const out: AppAccept[] = [];
  for (const line of log.split('\n')) {
    if (!line.includes(tag)) continue;
    try {
      const e = JSON.parse(line) as Partial<AppAccept>;
      if (
        (e.ev === 'accept' || e.ev === 'datagram') &&
        e.tag === tag &&
        typeof e.port === 'number' &&
        typeof e.peer === 'string'
      )
        out.push(e as AppAccept);
    } catch {
      // not one of the app's JSON lines
    }
  }
  return out;
}

/** A connection-log record as a World ProxyLogEntry (the real worlds': netns, containers, kind). */
export function toProxyLogEntry(node: string, r: ConnectionLogRecord): ProxyLogEntry {
  const [ns, name] = r.pod.includes('/') ? r.pod.split('/') : [undefined, undefined];
  return {
    node,
    pod: ns && name ? { namespace: ns, name } : undefined,
    event: r.event === 'failed' ? 'error' : r.event === 'closed-by-policy' ? 'denied' : r.event,
    direction: r.direction,
    srcIdentity: r.srcIdentity,
    dstIdentity: r.dstIdentity,
    allowed: r.decision?.allow,
    reason: r.decision?.reason ?? r.reason ?? '',
  };
}

/**
 * Attribute one attempt (the same reading as the netns world): the first hop is a proxy record
 * whose downstream source is the client (matched by source port when the client's address is
 * not known, as for outside), else an app accept whose peer is the client; deliveries are the
 * app accepts tagged for this attempt, via a proxy when a proxy's upstream source is their peer
 * (that record's node and pod are proxyNode and proxyFor).
 */
export function attribute(input: {
  readonly outcome: ConnectOutcome;
  readonly client: { readonly ip: string | undefined; readonly port: number };
  readonly records: readonly { readonly node: string; readonly r: ConnectionLogRecord }[];
  readonly accepts: readonly { readonly pod: PodRef; readonly a: AppAccept }[];
}): Pick<ConnectResult, 'outcome' | 'error' | 'acceptedBy' | 'acceptedIn' | 'deliveries' | 'proxyLog'> {
  const { outcome: out, client, records, accepts } = input;
  const isClient = (t: string): boolean =>
    client.ip !== undefined ? t === ep(client.ip, client.port) : t.endsWith(`:${client.port}`);
  const mine = records.filter(
    (x) =>
      isClient(tupleText(x.r.downstream.src)) ||
      accepts.some((d) => x.r.upstream && tupleText(x.r.upstream.src) === d.a.peer),
  );
  const first = mine.find((x) => isClient(tupleText(x.r.downstream.src)));
  let acceptedBy: Acceptor | undefined;
  let acceptedIn: ConnectResult['acceptedIn'];
  if (first) {
    acceptedBy =
      first.r.direction === 'outbound'
        ? 'proxy-outbound'
        : first.r.direction === 'inbound-hbone'
          ? 'proxy-hbone'
          : 'proxy-inbound';
    const [ns, name] = first.r.pod.split('/');
    acceptedIn = ns && name ? { namespace: ns, name } : { node: first.node };
  } else {
    const direct = accepts.find((d) => isClient(d.a.peer));
    if (direct) {
      acceptedBy = 'app';
      acceptedIn = direct.pod;
    } else if (out.result === 'established') acceptedBy = 'other';
  }
  const deliveries: Delivery[] = accepts.map((d) => {
    // the proxy record whose upstream leg is the connection the app saw: which node's proxy, for which pod
    const via = mine.find((x) => x.r.upstream !== undefined && tupleText(x.r.upstream.src) === d.a.peer);
    if (!via) return { pod: d.pod, port: d.a.port, peer: d.a.peer, viaProxy: false };
    const [ns, name] = via.r.pod.split('/');
    return {
      pod: d.pod,
      port: d.a.port,
      peer: d.a.peer,
      viaProxy: true,
      proxyNode: via.node,
      ...(ns && name ? { proxyFor: { namespace: ns, name } } : {}),
    };
  });
  const outcome: ConnectResult['outcome'] =
    out.result === 'sent' ? (deliveries.length > 0 ? 'delivered' : 'not-delivered') : tcpConnectOutcome(out);
  return {
    outcome,
    ...(outcome === 'error' ? { error: attemptError(out) } : {}),
    acceptedBy,
    ...(acceptedIn ? { acceptedIn } : {}),
    deliveries,
    proxyLog: mine.map(({ node, r }) => toProxyLogEntry(node, r)),
  };
}

/** PodObservation's node-side half from one node's evidence. */
export function nodeSideOf(uid: string, ev: NodeEvidence | undefined): { redirected: boolean; served: boolean } {
  const sb = ev?.sandboxes.get(uid);
  if (!sb) return { redirected: false, served: false };
  return { redirected: sb.redirected, served: ev?.served?.get(uid) === sb.netnsInode };
}
