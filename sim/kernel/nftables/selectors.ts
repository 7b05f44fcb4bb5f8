/**
 * What a match can read from a packet (nft's payload, meta, ct and fib expressions), each with
 * its value type, its implicit protocol dependency and how it reads the packet. A read that
 * returns undefined breaks the rule whatever the operator — `!=` included — as the kernel's
 * expressions do (NFT_BREAK): `meta skuid` without a full socket with a file, `ct mark` without
 * a conntrack entry, a payload of another protocol (the implicit `meta l4proto` dependency).
 */
import type { NftEvalContext } from './model.js';

export type ValueKind =
  | 'addr4'
  | 'addr6'
  | 'port'
  | 'l4proto'
  | 'nfproto'
  | 'u32'
  | 'u16'
  | 'ifname'
  | 'ctstate'
  | 'ctdir'
  | 'tcpflags'
  | 'fibtype';

export interface Selector {
  /** Canonical words, as the listing prints them. */
  readonly name: string;
  readonly kind: ValueKind;
  /** The network protocol it implies (ip / ip6 payload). */
  readonly nf?: 4 | 6;
  /** The transport protocol it implies (tcp / udp payload). */
  readonly l4?: 'tcp' | 'udp';
  /** Reads conntrack (nf_ct_netns_get at load). */
  readonly ct?: boolean;
  /** Value for ifname selectors. */
  getString?(ctx: NftEvalContext): string;
  get?(ctx: NftEvalContext): bigint | undefined;
}

export const L4PROTO_NUMBERS: Readonly<Record<string, number>> = {
  icmp: 1,
  tcp: 6,
  udp: 17,
  gre: 47,
  esp: 50,
  ah: 51,
  icmpv6: 58,
  'ipv6-icmp': 58,
  sctp: 132,
  udplite: 136,
};
const PROTO_NUM: Readonly<Record<string, bigint>> = { tcp: 6n, udp: 17n, icmp: 1n };

export const NFPROTO_NUMBERS: Readonly<Record<string, number>> = { ipv4: 2, ipv6: 10 };

/** ct state bits (nf_conntrack_common.h NF_CT_STATE_BIT, untracked bit 6). */
export const CT_STATE_BITS: Readonly<Record<string, number>> = {
  invalid: 1,
  established: 2,
  related: 4,
  new: 8,
  untracked: 64,
};
export const CT_DIRECTIONS: Readonly<Record<string, number>> = { original: 0, reply: 1 };

export const TCP_FLAG_BITS: Readonly<Record<string, number>> = {
  fin: 1,
  syn: 2,
  rst: 4,
  psh: 8,
  ack: 16,
  urg: 32,
  ecn: 64,
  cwr: 128,
};

/** fib address types (RTN_*); the model's addrtype names, lower-cased. */
export const FIB_TYPES: Readonly<Record<string, number>> = {
  unspec: 0,
  unicast: 1,
  local: 2,
  broadcast: 3,
  anycast: 4,
  multicast: 5,
  blackhole: 6,
  unreachable: 7,
  prohibit: 8,
};

function ctStateBits(ctx: NftEvalContext): bigint {
  const ct = ctx.ct;
  if (!ct) return ctx.untracked ? 64n : 1n;
  switch (ct.state) {
    case 'NEW':
      return 8n;
    case 'ESTABLISHED':
      return 2n;
    case 'RELATED':
      return 4n;
    case 'INVALID':
      return 1n;
    case 'UNTRACKED':
      return 64n;
  }
}

function tcpFlagBits(ctx: NftEvalContext): bigint {
  const f = ctx.packet.flags;
  return BigInt((f.fin ? 1 : 0) | (f.syn ? 2 : 0) | (f.rst ? 4 : 0) | (f.ack ? 16 : 0));
}

function addrSel(name: string, fam: 4 | 6, which: 'src' | 'dst'): Selector {
  return {
    name,
    kind: fam === 4 ? 'addr4' : 'addr6',
    nf: fam,
    get: (ctx) => (ctx.packet.family === fam ? ctx.packet[which].value : undefined),
  };
}

function portSel(name: string, proto: 'tcp' | 'udp' | undefined, which: 'sport' | 'dport'): Selector {
  if (proto === undefined)
    // th: the transport header's ports whatever the protocol; the model's packets have ports
    // only for TCP and UDP (an ICMP packet's bytes there are its checksum: never matched here).
    return {
      name,
      kind: 'port',
      get: (ctx) => (ctx.packet.proto === 'icmp' ? undefined : BigInt(ctx.packet[which])),
    };
  return {
    name,
    kind: 'port',
    l4: proto,
    get: (ctx) => (ctx.packet.proto === proto ? BigInt(ctx.packet[which]) : undefined),
  };
}

const SOCKET_UID: Selector['get'] = (ctx) => {
  const s = ctx.socket;
  return s !== undefined && 'uid' in s ? BigInt(s.uid) : undefined;
};
const SOCKET_GID: Selector['get'] = (ctx) => {
  const s = ctx.socket;
  return s !== undefined && 'gid' in s ? BigInt(s.gid) : undefined;
};

const META = {
  l4proto: { name: 'meta l4proto', kind: 'l4proto', get: (ctx) => PROTO_NUM[ctx.packet.proto] } as Selector,
  nfproto: {
    name: 'meta nfproto',
    kind: 'nfproto',
    get: (ctx) => (ctx.packet.family === 4 ? 2n : 10n),
  } as Selector,
  mark: { name: 'meta mark', kind: 'u32', get: (ctx) => BigInt(ctx.packet.mark) } as Selector,
  skuid: { name: 'meta skuid', kind: 'u32', get: SOCKET_UID } as Selector,
  skgid: { name: 'meta skgid', kind: 'u32', get: SOCKET_GID } as Selector,
  // nft_meta_store_ifname: no device reads as the empty name (it does not break), so
  // `oifname != "lo"` matches in prerouting.
  iifname: { name: 'iifname', kind: 'ifname', getString: (ctx) => ctx.inIface ?? '' } as Selector,
  oifname: { name: 'oifname', kind: 'ifname', getString: (ctx) => ctx.outIface ?? '' } as Selector,
} satisfies Record<string, Selector>;

export const META_KEYS = Object.keys(META);
export function metaSelector(key: string): Selector | undefined {
  return (META as Record<string, Selector>)[key];
}

/** Keys nft accepts without `meta` in front. */
export const BARE_META = new Set(['mark', 'skuid', 'skgid', 'iifname', 'oifname']);

const CT = {
  state: { name: 'ct state', kind: 'ctstate', ct: true, get: ctStateBits } as Selector,
  mark: {
    name: 'ct mark',
    kind: 'u32',
    ct: true,
    get: (ctx) => (ctx.ct ? BigInt(ctx.ct.mark >>> 0) : undefined),
  } as Selector,
  zone: {
    name: 'ct zone',
    kind: 'u16',
    ct: true,
    get: (ctx) => (ctx.ct ? BigInt(ctx.ct.zone) : undefined),
  } as Selector,
  direction: {
    name: 'ct direction',
    kind: 'ctdir',
    ct: true,
    get: (ctx) => (ctx.ct ? (ctx.ct.direction === 'original' ? 0n : 1n) : undefined),
  } as Selector,
} satisfies Record<string, Selector>;

export const CT_KEYS = Object.keys(CT);
export function ctSelector(key: string): Selector | undefined {
  return (CT as Record<string, Selector>)[key];
}

export function payloadSelector(proto: string, field: string): Selector | undefined {
  switch (`${proto} ${field}`) {
    case 'ip saddr':
      return addrSel('ip saddr', 4, 'src');
    case 'ip daddr':
      return addrSel('ip daddr', 4, 'dst');
    case 'ip6 saddr':
      return addrSel('ip6 saddr', 6, 'src');
    case 'ip6 daddr':
      return addrSel('ip6 daddr', 6, 'dst');
    case 'tcp sport':
    case 'tcp dport':
    case 'udp sport':
    case 'udp dport':
      return portSel(`${proto} ${field}`, proto as 'tcp' | 'udp', field as 'sport' | 'dport');
    case 'th sport':
    case 'th dport':
      return portSel(`th ${field}`, undefined, field as 'sport' | 'dport');
    case 'tcp flags':
      return {
        name: 'tcp flags',
        kind: 'tcpflags',
        l4: 'tcp',
        get: (ctx) => (ctx.packet.proto === 'tcp' ? tcpFlagBits(ctx) : undefined),
      };
    default:
      return undefined;
  }
}

export const FIB_DADDR_TYPE: Selector = {
  name: 'fib daddr type',
  kind: 'fibtype',
  get: (ctx) => BigInt(FIB_TYPES[ctx.addrType(ctx.packet.dst).toLowerCase()] ?? 0),
};
