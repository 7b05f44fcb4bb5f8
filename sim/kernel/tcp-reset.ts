/**
 * The RST a TCP stack sends for a segment that belongs to no connection (tcp_v4_send_reset,
 * tcp_v6_send_reset).
 *
 * - A SYN to a port nobody listens on gets a RST: connect() is refused if it makes it back.
 * - A non-SYN segment (e.g. the handshake's final ACK) that finds no established socket gets a
 *   RST too — whether it finds nothing at all, or only a listener (tcp_rcv_state_process in
 *   LISTEN answers a bare ACK with a reset). If that RST reaches the connecting socket, which
 *   has just moved to ESTABLISHED on the SYN-ACK, the connection is reset: connect() reports
 *   ECONNRESET (the RST is processed before the caller runs; see ConnectOutcome 'reset').
 *   Mesh rules make this happen: a CONNMARK --restore-mark on the client's final ACK that
 *   re-routes it through a local route table delivers the ACK to the client's own namespace.
 *
 * The reset leaves from the address the segment was sent to. In IPv4 (ip_send_unicast_reply) that
 * source must be a local address unless the answering socket is transparent
 * (IP_REPLY_ARG_NOSRCCHECK); otherwise the route lookup fails and no RST is sent — e.g. a SYN
 * DNATed to a foreign address and looped back by a local policy route: the client times out
 * instead of being refused. IPv6 (tcp_v6_send_reset) does not check the source.
 *
 * The reset is sent from the namespace's TCP control socket, a kernel socket without a file. IPv4
 * (ip_send_unicast_reply) attaches it to the reset (skb->sk = ctl_sk), so `-m owner --socket-exists`
 * matches while `--uid-owner`/`--gid-owner` behave as for no socket; IPv6 (tcp_v6_send_response:
 * ip6_xmit(ctl_sk, ...)) leaves skb->sk unset, so the reset has no socket at all. Both checked on
 * the real kernel (fixtures/fidelity/rst-ctl-socket-exists-*.yaml). Its mark
 * is the answering socket's SO_MARK — the listener's when a listener answered, 0 when no socket
 * did (fwmark_reflect, off by default, is not modelled). The reply swaps the segment's
 * addresses and ports; sequence numbers are not modelled.
 */
import { NO_FLAGS, type Packet, type TcpFlags } from './packet.js';
import type { IpAddress } from '../../impl/api/ip/address.js';
import type { SimSocket } from './socket.js';
import type { KernelSocketOwner } from './netfilter/types.js';

/** The per-namespace TCP control socket, as `-m owner` sees it (a socket, no file). */
const TCP_CONTROL_SOCKET: KernelSocketOwner = Object.freeze({ kernelSocket: true });

interface ResetReply {
  readonly src: IpAddress;
  readonly sport: number;
  readonly dst: IpAddress;
  readonly dport: number;
  readonly flags: TcpFlags;
  readonly mark: number;
  /** The socket the reset leaves from, as netfilter sees it: the control socket (IPv4) or none (IPv6). */
  readonly sender: KernelSocketOwner | undefined;
}

/** The RST answering `segment` (as it was seen on arrival); `answerer` is the listener that found it, if any. */
export function resetFor(segment: Packet, answerer: SimSocket | undefined): ResetReply {
  // A RST answering a SYN acknowledges it (RST+ACK); one answering an ACK carries the ACK's
  // number as its sequence and no ACK flag.
  const flags = { ...NO_FLAGS, rst: true, ack: segment.flags.syn };
  return {
    src: segment.dst,
    sport: segment.dport,
    dst: segment.src,
    dport: segment.sport,
    flags,
    mark: answerer?.mark ?? 0,
    sender: segment.family === 4 ? TCP_CONTROL_SOCKET : undefined,
  };
}
