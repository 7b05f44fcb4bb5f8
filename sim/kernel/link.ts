/**
 * Network devices: loopback, veth pairs (possibly across namespaces) and bridges. A device
 * belongs to exactly one namespace; a veth knows its peer; a bridge knows its ports.
 */
import type { Family, IpAddress } from '../../impl/api/ip/address.js';
import type { IpPrefix } from '../../impl/api/ip/prefix.js';

export type LinkKind = 'loopback' | 'veth' | 'bridge';

/** An address configured on a device (`ip addr add ADDR/LEN dev DEV`). */
interface IfAddress {
  readonly addr: IpAddress;
  readonly prefix: IpPrefix;
}

export interface Link {
  readonly name: string;
  readonly index: number;
  readonly kind: LinkKind;
  /** Name of the namespace the device lives in. */
  readonly netns: string;
  up: boolean;
  readonly addresses: IfAddress[];
  /** veth: the other end. */
  peer?: Link;
  /** A port's bridge (set when enslaved with `ip link set DEV master BR`). */
  master?: Link;
  /** bridge: its ports. */
  readonly ports?: Set<Link>;
  /** `net.ipv6.conf.<dev>.disable_ipv6` = 1: no IPv6 addresses or routes on the device. */
  ipv6Disabled?: boolean;
}

/** First address of a family on the device: the "primary" address REDIRECT uses. */
export function primaryAddress(link: Link, family: Family): IpAddress | undefined {
  return link.addresses.find((a) => a.addr.family === family)?.addr;
}
