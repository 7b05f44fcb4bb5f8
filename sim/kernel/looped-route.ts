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
import { formatIp, ipEquals, isLoopback, type IpAddress } from '../../impl/api/ip/address.js';
import type { RouteDecision } from './fib.js';
import type { Packet } from './packet.js';

/** The output route a looped packet keeps, if any; `dstAtArrival` is its destination before nat PREROUTING. */
export function keptLoopRoute(
  sent: RouteDecision | undefined,
  dstAtArrival: IpAddress,
  dstNow: IpAddress,
): Extract<RouteDecision, { kind: 'local' }> | undefined {
  if (!sent || sent.kind !== 'local') return undefined;
  return ipEquals(dstAtArrival, dstNow) ? sent : undefined;
}

/**
 * A packet that arrives on lo without a kept route (its destination NATed in PREROUTING) is routed
 * on arrival, and IPv4's input route lookup (ip_route_input_slow) refuses loopback addresses with
 * route_localnet=0 on any device, lo included: a loopback destination is a martian destination, a
 * loopback source a martian source; the packet is dropped. E.g. a final ACK from 127.0.0.1 that
 * nat PREROUTING DNATs to the namespace's own address never arrives (differential seed 20261204,
 * checked on Linux 6.1: fixtures/fidelity/loopback-martian-after-dnat-seed-20261204.yaml). IPv6
 * checks ::1 only for packets from other devices (ip6_rcv_core; fixtures/fidelity/
 * loopback-no-martian-after-dnat-v6.yaml). Not modelled: early demux, which
 * may hand such a packet an established socket's cached route and skip the lookup.
 * Returns why the packet is dropped, or undefined.
 */
export function loopbackMartianOnLo(pkt: Packet): string | undefined {
  if (pkt.family !== 4) return undefined;
  if (isLoopback(pkt.dst)) return `martian destination ${formatIp(pkt.dst)} routed on arrival on lo (route_localnet=0)`;
  if (isLoopback(pkt.src))
    return `martian source ${formatIp(pkt.src)} to ${formatIp(pkt.dst)} routed on arrival on lo (route_localnet=0)`;
  return undefined;
}
