/**
 * Which of a pod's TCP connections escaped capture (issue 19, "end the flows that escaped"). An app
 * with NET_ADMIN can insert `-I OUTPUT 1 -j ACCEPT` in its nat table and connect out directly;
 * strict's repair pass removes the rule (foreign-rules.ts), but conntrack keeps the connection's
 * un-NATed entry, so the flow stays uncaptured for as long as the app keeps it open. After a drift
 * repair, strict ends the flows this function returns (NodeAgent, through the PodFlows port) — and
 * once when it first applies the plan to a pod's netns: a connection open before enrollment that
 * the kernel did not reset (see docs/bypass-classes.md, live enrollment) is uncaptured too.
 *
 * A flow is left alone when it is:
 * - the proxy's (its socket's owner is the proxy's uid; strict refuses pods that declare it);
 * - loopback, or to the pod's own address (the plan does not capture those);
 * - with a host probe source address as its peer (kubelet probes reach the app uncaptured);
 * - captured: its conntrack entry is NATed (REDIRECT to the proxy's outbound or DNS listener), or
 *   carries the return mark (a connection the proxy made to the app, delivered over lo);
 * - inbound to a pod whose inbound is not captured (ingress mode), or of unknown direction there.
 * Anything else — an app socket whose connection conntrack tracked without NAT, or did not track
 * at all (a NOTRACK rule) — is escaped.
 *
 * Pure: flows in, flows out.
 */
import type { TcpFlow } from '../host/pod-flows.js';
import { RETURN_MARK } from '../api/marks.js';
import { ipEquals, isLoopback, parseIp, unmapV4, type IpAddress } from '../api/ip/address.js';

interface EscapeContext {
  readonly proxyUid: number;
  /** The pod's own addresses. */
  readonly podIps: readonly string[];
  /** Host probe source addresses (the probe SNAT addresses). */
  readonly probeSources: readonly string[];
  /** The pod's inbound is not captured (ingress mode): connections its peers opened are legitimate. */
  readonly inboundUncaptured: boolean;
}

export interface EscapedFlow {
  readonly flow: TcpFlow;
  readonly why: string;
}

/** An address with `::ffff:a.b.c.d` (a v4 connection on a dual-stack socket) read as `a.b.c.d`. */
function unmapped(ip: string): IpAddress {
  return unmapV4(parseIp(ip));
}

export function escapedFlows(flows: readonly TcpFlow[], ctx: EscapeContext): EscapedFlow[] {
  const own = ctx.podIps.map(unmapped);
  const probes = ctx.probeSources.map(unmapped);
  const out: EscapedFlow[] = [];
  for (const f of flows) {
    if (f.uid === ctx.proxyUid) continue;
    const local = unmapped(f.local.ip);
    const peer = unmapped(f.peer.ip);
    if (isLoopback(local) || isLoopback(peer)) continue;
    if (own.some((a) => ipEquals(a, peer))) continue;
    if (probes.some((a) => ipEquals(a, peer))) continue;
    const ct = f.conntrack;
    if (ct?.nat) continue;
    if (ct && (ct.mark & RETURN_MARK.mask) === RETURN_MARK.value) continue;
    if (ctx.inboundUncaptured && ct?.initiator !== 'local') continue;
    out.push({
      flow: f,
      why: ct
        ? `conntrack tracks it without NAT to the proxy (${ct.initiator === 'local' ? 'outbound' : 'inbound'})`
        : 'conntrack does not track it',
    });
  }
  return out;
}

/** `10.0.0.1:43210 -> 10.0.1.2:8080 uid 0 ESTAB` (log text). */
export function describeFlow(f: TcpFlow): string {
  const at = (ip: string, port: number): string => (ip.includes(':') ? `[${ip}]:${port}` : `${ip}:${port}`);
  return `${at(f.local.ip, f.local.port)} -> ${at(f.peer.ip, f.peer.port)} uid ${f.uid} ${f.state}`;
}
