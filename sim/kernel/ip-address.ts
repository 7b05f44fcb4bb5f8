/**
 * IPv4 and IPv6 addresses and prefixes. One representation for both families (a bigint of 32 or
 * 128 bits) so routing, matching and NAT code is family-agnostic. Text forms follow
 * RFC 4291 §2.2 for parsing and RFC 5952 for the canonical (shortest) v6 output.
 */

export type Family = 4 | 6;

export interface IpAddress {
  readonly family: Family;
  readonly value: bigint;
}

export interface IpPrefix {
  readonly addr: IpAddress; // host bits zero
  readonly len: number;
}

export class AddressError extends Error {}

const BITS: Record<Family, number> = { 4: 32, 6: 128 };

export function familyBits(f: Family): number {
  return BITS[f];
}

/**
 * Dotted quad: exactly four decimal parts of 1-3 digits without a leading zero (a lone 0 is
 * fine), each at most 255. Read by character codes: this runs for every pod address.
 */
function parseV4(text: string): bigint | undefined {
  let v = 0;
  let parts = 0;
  let i = 0;
  const n = text.length;
  while (parts < 4) {
    const start = i;
    let part = 0;
    while (i < n) {
      const c = text.charCodeAt(i);
      if (c < 48 || c > 57) break;
      part = part * 10 + (c - 48);
      i++;
    }
    const digits = i - start;
    if (digits === 0 || digits > 3 || (digits > 1 && text.charCodeAt(start) === 48) || part > 255) return undefined;
    v = v * 256 + part;
    parts++;
    if (parts < 4) {
      if (i >= n || text.charCodeAt(i) !== 46) return undefined;
      i++;
    }
  }
  return i === n ? BigInt(v) : undefined;
}

function parseV6(text: string): bigint | undefined {
  if (!/^[0-9a-fA-F:.]+$/.test(text)) return undefined;
  const dbl = text.split('::');
  if (dbl.length > 2) return undefined;
  const groups = (s: string): number[] | undefined => {
    if (s === '') return [];
    const out: number[] = [];
    const items = s.split(':');
    for (let i = 0; i < items.length; i++) {
      const g = items[i] ?? '';
      if (i === items.length - 1 && g.includes('.')) {
        const v4 = parseV4(g);
        if (v4 === undefined) return undefined;
        out.push(Number(v4 >> 16n), Number(v4 & 0xffffn));
      } else {
        if (!/^[0-9a-fA-F]{1,4}$/.test(g)) return undefined;
        out.push(parseInt(g, 16));
      }
    }
    return out;
  };
  const head = groups(dbl[0] ?? '');
  const tail = dbl.length === 2 ? groups(dbl[1] ?? '') : [];
  if (!head || !tail) return undefined;
  let all: number[];
  if (dbl.length === 2) {
    const missing = 8 - head.length - tail.length;
    if (missing < 1) return undefined;
    all = [...head, ...new Array<number>(missing).fill(0), ...tail];
  } else {
    all = head;
  }
  if (all.length !== 8) return undefined;
  let v = 0n;
  for (const g of all) v = (v << 16n) | BigInt(g);
  return v;
}

/**
 * Parsed addresses by text. Simulations parse the same few addresses over and over (every lab,
 * pod and rule names them as text); IpAddress is immutable, so one object can be shared. Bounded:
 * cleared when full (a cluster simulation may name many addresses).
 */
const PARSED = new Map<string, IpAddress>();
const PARSED_MAX = 4096;

/** Parse an IPv4 or IPv6 address; throws AddressError naming the text on failure. */
export function parseIp(text: string): IpAddress {
  const hit = PARSED.get(text);
  if (hit) return hit;
  const v4 = parseV4(text);
  const v6 = v4 === undefined && text.includes(':') ? parseV6(text) : undefined;
  let a: IpAddress;
  if (v4 !== undefined) a = Object.freeze({ family: 4, value: v4 });
  else if (v6 !== undefined) a = Object.freeze({ family: 6, value: v6 });
  else throw new AddressError(`invalid IP address ${JSON.stringify(text)}`);
  if (PARSED.size >= PARSED_MAX) PARSED.clear();
  PARSED.set(text, a);
  return a;
}

export function tryParseIp(text: string): IpAddress | undefined {
  try {
    return parseIp(text);
  } catch {
    return undefined;
  }
}

/**
 * Parsed prefixes by text, beside PARSED and for the same reason (every pod address and route
 * arrives as text); `exact` says whether the text had no host bits set, for `strict`.
 */
const PREFIXES = new Map<string, { readonly prefix: IpPrefix; readonly exact: boolean }>();

/** Parse `addr[/len]`; without a length the prefix is a host route (/32 or /128). */
export function parsePrefix(text: string, opts: { strict?: boolean } = {}): IpPrefix {
  let hit = PREFIXES.get(text);
  if (!hit) {
    const slash = text.indexOf('/');
    const addr = parseIp(slash < 0 ? text : text.slice(0, slash));
    const bits = BITS[addr.family];
    let len = bits;
    if (slash >= 0) {
      const l = text.slice(slash + 1);
      if (!/^[0-9]{1,3}$/.test(l) || Number(l) > bits) {
        throw new AddressError(`invalid prefix length in ${JSON.stringify(text)}: expected 0..${bits}`);
      }
      len = Number(l);
    }
    const masked = maskValue(addr.value, addr.family, len);
    const prefix: IpPrefix = Object.freeze({ addr: masked === addr.value ? addr : Object.freeze({ family: addr.family, value: masked }), len });
    hit = { prefix, exact: masked === addr.value };
    if (PREFIXES.size >= PARSED_MAX) PREFIXES.clear();
    PREFIXES.set(text, hit);
  }
  if (opts.strict && !hit.exact) {
    throw new AddressError(`prefix ${JSON.stringify(text)} has host bits set`);
  }
  return hit.prefix;
}

export function maskValue(value: bigint, family: Family, len: number): bigint {
  const bits = BITS[family];
  if (len === 0) return 0n;
  const hostBits = BigInt(bits - len);
  return (value >> hostBits) << hostBits;
}

export function prefixContains(p: IpPrefix, a: IpAddress): boolean {
  return p.addr.family === a.family && maskValue(a.value, a.family, p.len) === p.addr.value;
}

export function ipEquals(a: IpAddress, b: IpAddress): boolean {
  return a.family === b.family && a.value === b.value;
}

export function formatIp(a: IpAddress): string {
  if (a.family === 4) {
    const v = Number(a.value);
    return `${(v >>> 24) & 255}.${(v >>> 16) & 255}.${(v >>> 8) & 255}.${v & 255}`;
  }
  const groups: number[] = [];
  for (let i = 7; i >= 0; i--) groups.push(Number((a.value >> BigInt(i * 16)) & 0xffffn));
  // RFC 5952 §4.2: compress the longest run (>= 2) of zero groups, the first one on ties.
  let bestStart = -1;
  let bestLen = 1;
  for (let i = 0; i < 8;) {
    if (groups[i] !== 0) { i++; continue; }
    let j = i;
    while (j < 8 && groups[j] === 0) j++;
    if (j - i > bestLen) { bestStart = i; bestLen = j - i; }
    i = j;
  }
  const hex = groups.map((g) => g.toString(16));
  if (bestStart < 0) return hex.join(':');
  return `${hex.slice(0, bestStart).join(':')}::${hex.slice(bestStart + bestLen).join(':')}`;
}

export function formatPrefix(p: IpPrefix): string {
  return `${formatIp(p.addr)}/${p.len}`;
}

export const ANY4: IpAddress = { family: 4, value: 0n };
export const ANY6: IpAddress = { family: 6, value: 0n };
export function anyAddress(f: Family): IpAddress {
  return f === 4 ? ANY4 : ANY6;
}
export const LOOPBACK4: IpAddress = { family: 4, value: 0x7f000001n };
export const LOOPBACK6: IpAddress = { family: 6, value: 1n };
export function loopbackAddress(f: Family): IpAddress {
  return f === 4 ? LOOPBACK4 : LOOPBACK6;
}

export function isUnspecified(a: IpAddress): boolean {
  return a.value === 0n;
}

/** 127.0.0.0/8 or ::1. */
export function isLoopback(a: IpAddress): boolean {
  return a.family === 4 ? (a.value >> 24n) === 127n : a.value === 1n;
}

/** 224.0.0.0/4 or ff00::/8. */
export function isMulticast(a: IpAddress): boolean {
  return a.family === 4 ? (a.value >> 28n) === 0xen : (a.value >> 120n) === 0xffn;
}

/** Map key for an address (family-qualified, cheap to compare). */
export function ipKey(a: IpAddress): string {
  return `${a.family}:${a.value.toString(16)}`;
}
