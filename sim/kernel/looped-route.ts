/**
 * A packet sent over `lo` arrives still carrying the route it was sent with: loopback_xmit keeps
 * skb_dst, and ip_rcv_finish / ip6_rcv_finish look a route up only for a packet without a valid
 * dst. So a packet sent by a local route is delivered locally even when mangle POSTROUTING has
 * changed its mark since that route was chosen (a fresh input lookup with the new mark could pick
 * another table — e.g. forward, and drop with forwarding off). Found by the differential property
 * (seed 20261201, IPv6; checked on Linux 6.1 for both families: fixtures/fidelity/v6-looped-syn-reroute-seed-20261201.yaml,
 * fixtures/fidelity/v4-looped-syn-kept-route.yaml).
 *
 * NAT in PREROUTING that changes the destination drops the dst (nf_nat_ipv4_in, nf_nat_ipv6_in),
 * so such a packet is routed afresh. Only `local` output routes are kept here: a unicast route
 * via lo behaves differently per family (IPv4 marks it RTCF_LOCAL, IPv6 gives it ip6_forward as
 * input) and is not verified on a real kernel yet, so those packets are still routed on arrival.
 */
import { ipEquals, type IpAddress } from './ip-address.js';
import type { RouteDecision } from './fib.js';

/** The output route a looped packet keeps, if any; `dstAtArrival` is its destination before nat PREROUTING. */
export function keptLoopRoute(sent: RouteDecision | undefined, dstAtArrival: IpAddress, dstNow: IpAddress): Extract<RouteDecision, { kind: 'local' }> | undefined {
  if (!sent || sent.kind !== 'local') return undefined;
  return ipEquals(dstAtArrival, dstNow) ? sent : undefined;
}
