/**
 * IP prefixes (CIDR blocks): `addr/len`, held with the host bits cleared, so containment is one
 * mask and compare. Parsing is by the address grammar of address.ts plus a decimal length.
 */
import { AddressError, PARSED_MAX, familyBits, formatIp, tryParseIp, type Family, type IpAddress } from './address.js';

export interface IpPrefix {
  readonly addr: IpAddress; // host bits zero
  readonly len: number;
}

interface ParsePrefixOptions {
  /** Refuse host bits set (`10.0.0.1/8`) instead of clearing them. */
  readonly strict?: boolean;
  /**
   * Refuse a length with a leading zero (`/08`), as CNI results and policies are checked. The
   * sim's readers of tool text (ip, iptables, ipset) have always taken it as decimal.
   */
  readonly canonicalLength?: boolean;
}

/** Host-bit counts as bigints, made once (route lookups mask an address per route). */
const SHIFTS: readonly bigint[] = Array.from({ length: 129 }, (_, i) => BigInt(i));

export function maskValue(value: bigint, family: Family, len: number): bigint {
  const bits = familyBits(family);
  if (len === 0) return 0n;
  const hostBits = SHIFTS[bits - len] ?? BigInt(bits - len);
  return (value >> hostBits) << hostBits;
}

/** The prefix of `len` bits around `addr` (host bits cleared); `len` must be in range. */
export function prefixOf(addr: IpAddress, len: number): IpPrefix {
  const masked = maskValue(addr.value, addr.family, len);
  return Object.freeze({
    addr: masked === addr.value ? addr : Object.freeze({ family: addr.family, value: masked }),
    len,
  });
}

const LENGTH = /^[0-9]{1,3}$/;

/**
 * A prefix length for `family` written in decimal, or undefined when it is not one or out of
 * range; `canonical` refuses leading zeros (see ParsePrefixOptions).
 */
export function parsePrefixLength(text: string, family: Family, canonical: boolean): number | undefined {
  if (!LENGTH.test(text) || (canonical && text.length > 1 && text.charCodeAt(0) === 48)) return undefined;
  const len = Number(text);
  return len <= familyBits(family) ? len : undefined;
}

interface Parsed {
  readonly prefix: IpPrefix;
  /** The text had no host bits set, for `strict`. */
  readonly exact: boolean;
  /** The length had a leading zero, for `canonicalLength`. */
  readonly padded: boolean;
}

/**
 * Parsed prefixes by text, beside address.ts's parsed addresses and for the same reason (every
 * pod address and route arrives as text). Bounded the same way.
 */
const PREFIXES = new Map<string, Parsed>();

/** The parsed text, or the reason it is not a prefix. */
function read(text: string): Parsed | string {
  const hit = PREFIXES.get(text);
  if (hit) return hit;
  const slash = text.indexOf('/');
  const addr = tryParseIp(slash < 0 ? text : text.slice(0, slash));
  if (!addr) return `invalid IP address ${JSON.stringify(slash < 0 ? text : text.slice(0, slash))}`;
  let len = familyBits(addr.family);
  let padded = false;
  if (slash >= 0) {
    const l = text.slice(slash + 1);
    const n = parsePrefixLength(l, addr.family, false);
    if (n === undefined)
      return `invalid prefix length in ${JSON.stringify(text)}: expected 0..${familyBits(addr.family)}`;
    len = n;
    padded = l.length > 1 && l.charCodeAt(0) === 48;
  }
  const prefix = prefixOf(addr, len);
  const parsed: Parsed = { prefix, exact: prefix.addr === addr, padded };
  if (PREFIXES.size >= PARSED_MAX) PREFIXES.clear();
  PREFIXES.set(text, parsed);
  return parsed;
}

function check(text: string, opts: ParsePrefixOptions): IpPrefix | string {
  const p = read(text);
  if (typeof p === 'string') return p;
  if (opts.canonicalLength && p.padded) return `invalid prefix length in ${JSON.stringify(text)}: leading zero`;
  if (opts.strict && !p.exact) return `prefix ${JSON.stringify(text)} has host bits set`;
  return p.prefix;
}

/** Parse `addr[/len]`; without a length the prefix is a host route (/32 or /128). Throws AddressError. */
export function parsePrefix(text: string, opts: ParsePrefixOptions = {}): IpPrefix {
  const p = check(text, opts);
  if (typeof p === 'string') throw new AddressError(p);
  return p;
}

/** As parsePrefix, undefined instead of an exception. */
export function tryParsePrefix(text: string, opts: ParsePrefixOptions = {}): IpPrefix | undefined {
  const p = check(text, opts);
  return typeof p === 'string' ? undefined : p;
}

/** ADDRESS/LEN with LEN in range for the family and without leading zeros (a CNI result's form). */
export function isCidr(s: unknown): s is string {
  return typeof s === 'string' && s.includes('/') && tryParsePrefix(s, { canonicalLength: true }) !== undefined;
}

export function prefixContains(p: IpPrefix, a: IpAddress): boolean {
  return p.addr.family === a.family && maskValue(a.value, a.family, p.len) === p.addr.value;
}

export function formatPrefix(p: IpPrefix): string {
  return `${formatIp(p.addr)}/${p.len}`;
}
