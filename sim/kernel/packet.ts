/**
 * A packet as the simulated kernel sees it: the L3/L4 header fields that netfilter, routing,
 * conntrack and socket lookup read, plus skb->mark. Fields are mutable because NAT and MARK
 * rewrite them in place, as the kernel rewrites the skb.
 */
import type { Family, IpAddress } from '../../impl/api/ip/address.js';

export type L4Proto = 'tcp' | 'udp' | 'icmp';

export interface TcpFlags {
  syn: boolean;
  ack: boolean;
  fin: boolean;
  rst: boolean;
}

export const NO_FLAGS: Readonly<TcpFlags> = Object.freeze({ syn: false, ack: false, fin: false, rst: false });

export interface Packet {
  /** Trace id, unique within a SimKernel. */
  readonly id: number;
  readonly family: Family;
  readonly proto: L4Proto;
  src: IpAddress;
  dst: IpAddress;
  /** 0 for protocols without ports. */
  sport: number;
  dport: number;
  flags: TcpFlags;
  /** skb->mark (uint32). Zeroed when the packet crosses into another netns. */
  mark: number;
  /** Opaque application payload, for UDP datagrams and probe messages. */
  payload?: string;
}
