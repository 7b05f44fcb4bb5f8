/**
 * Value parsers shared by matches and targets: uint32 (strtoul base-0 like iptables: 0x hex,
 * leading-0 octal, decimal), marks value[/mask], ports and port ranges, protocols.
 */
import { RuleSyntaxError } from './errors.js';
import type { Family } from '../../../impl/api/ip/address.js';

export const U32_MAX = 0xffffffff;

export function parseU32(text: string, what: string): number {
  let v: number;
  if (/^0[xX][0-9a-fA-F]{1,8}$/.test(text)) v = parseInt(text.slice(2), 16);
  else if (/^0[0-7]+$/.test(text)) v = parseInt(text.slice(1), 8);
  else if (/^(0|[1-9][0-9]*)$/.test(text)) v = Number(text);
  else throw new RuleSyntaxError(`${what}: "${text}" is not a number (use decimal or 0x hex)`);
  if (!Number.isSafeInteger(v) || v > U32_MAX) throw new RuleSyntaxError(`${what}: "${text}" does not fit in 32 bits`);
  return v;
}

export function hex(v: number): string {
  return `0x${(v >>> 0).toString(16)}`;
}

export interface MarkMask {
  readonly value: number;
  readonly mask: number;
}

/** `value[/mask]`; the mask defaults to 0xffffffff. */
export function parseMarkMask(text: string, what: string): MarkMask & { readonly hasMask: boolean } {
  const slash = text.indexOf('/');
  if (slash < 0) return { value: parseU32(text, what), mask: U32_MAX, hasMask: false };
  return { value: parseU32(text.slice(0, slash), what), mask: parseU32(text.slice(slash + 1), what), hasMask: true };
}

export function parsePort(text: string, what: string): number {
  if (!/^(0|[1-9][0-9]{0,4})$/.test(text) || Number(text) > 65535) {
    throw new RuleSyntaxError(`${what}: "${text}" is not a port (0..65535; service names are not supported)`);
  }
  return Number(text);
}

/** `p`, `a:b`, `:b` (0:b), `a:` (a:65535), as the tcp/udp matches take them. */
export function parsePortRange(text: string, what: string, sep = ':'): readonly [number, number] {
  const i = text.indexOf(sep);
  if (i < 0) {
    const p = parsePort(text, what);
    return [p, p];
  }
  const lo = i === 0 ? 0 : parsePort(text.slice(0, i), what);
  const hi = i === text.length - 1 ? 65535 : parsePort(text.slice(i + 1), what);
  if (lo > hi) throw new RuleSyntaxError(`${what}: invalid port range "${text}" (first port is above the last)`);
  return [lo, hi];
}

export function formatPortRange(r: readonly [number, number], sep = ':'): string {
  return r[0] === r[1] ? String(r[0]) : `${r[0]}${sep}${r[1]}`;
}

export const PROTO_TCP = 6;
export const PROTO_UDP = 17;
const PROTO_ICMP = 1;
const PROTO_ICMPV6 = 58;

const PROTO_NAMES: Record<string, number> = {
  tcp: 6,
  udp: 17,
  icmp: 1,
  icmpv6: 58,
  'ipv6-icmp': 58,
  gre: 47,
  esp: 50,
  ah: 51,
  sctp: 132,
  udplite: 136,
};
/** Names iptables-save prints (from /etc/protocols on Debian). */
const PROTO_PRINT: Record<number, string> = {
  6: 'tcp',
  17: 'udp',
  1: 'icmp',
  58: 'ipv6-icmp',
  47: 'gre',
  50: 'esp',
  51: 'ah',
  132: 'sctp',
  136: 'udplite',
};

/** Protocol number; 0 means `all`. */
export function parseProto(text: string): number {
  const t = text.toLowerCase();
  if (t === 'all') return 0;
  const named = PROTO_NAMES[t];
  if (named !== undefined) return named;
  if (/^(0|[1-9][0-9]{0,2})$/.test(t) && Number(t) <= 255) return Number(t);
  throw new RuleSyntaxError(
    `unknown protocol "${text}" (supported: tcp, udp, icmp, icmpv6/ipv6-icmp, all, gre, esp, ah, sctp, udplite or a number 0..255)`,
  );
}

export function formatProto(n: number): string {
  return PROTO_PRINT[n] ?? String(n);
}

/** The IP protocol number of a simulated packet. */
export function packetProtoNumber(proto: 'tcp' | 'udp' | 'icmp', family: Family): number {
  return proto === 'tcp' ? PROTO_TCP : proto === 'udp' ? PROTO_UDP : family === 4 ? PROTO_ICMP : PROTO_ICMPV6;
}
