/**
 * IPv4 and IPv6 addresses. One representation for both families (a bigint of 32 or 128 bits) so
 * routing, matching and NAT code is family-agnostic. Text forms follow RFC 4291 §2.2 for parsing
 * and RFC 5952 for the canonical (shortest) v6 output; no zone ids (`%eth0`), no leading zeros in
 * a dotted quad (ambiguous octal in some parsers).
 *
 * An IPv4-mapped IPv6 address (::ffff:a.b.c.d) stays IPv6 here, as the kernel sees it on a v6
 * socket; `unmapV4` gives the IPv4 address for callers that compare peers across families (a
 * dual-stack listener reports IPv4 peers mapped, and a policy's IPv4 block must still match).
 */

export type Family = 4 | 6;

export interface IpAddress {
  readonly family: Family;
  readonly value: bigint;
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

/**
 * The groups of one side of `::` (or of the whole text) into `out` from `at`: items of 1-4 hex
 * digits separated by `:`, the last one possibly a dotted quad (two groups) when `quadLast` —
 * only the end of the whole address may be one (RFC 4291 §2.2 item 3: the low-order 32 bits).
 * Returns the next index into `out`, or -1 when the text is not that. An empty side has no groups.
 */
function v6Groups(text: string, from: number, to: number, out: number[], at: number, quadLast: boolean): number {
  if (from === to) return at;
  let i = from;
  for (;;) {
    if (at >= 8) return -1;
    const start = i;
    let g = 0;
    let dot = false;
    while (i < to) {
      const c = text.charCodeAt(i);
      if (c === 58) break; // ':'
      if (c === 46) dot = true;
      else g = g * 16 + (c <= 57 ? c - 48 : (c | 32) - 87);
      i++;
    }
    if (dot) {
      if (!quadLast || i !== to) return -1;
      const v4 = parseV4(text.slice(start, to));
      if (v4 === undefined || at >= 7) return -1;
      const n = Number(v4);
      out[at++] = Math.floor(n / 65536);
      out[at++] = n % 65536;
      return at;
    }
    if (i === start || i - start > 4) return -1;
    out[at++] = g;
    if (i === to) return at;
    i++; // past ':'
  }
}

/**
 * RFC 4291 §2.2 text: eight groups, or fewer around one `::` standing for at least one zero
 * group, the last 32 bits possibly as a dotted quad. Read by character codes into a reused
 * group array (this runs for every pod address of a dual-stack cluster).
 */
const V6_GROUPS: number[] = [0, 0, 0, 0, 0, 0, 0, 0];
const V6_TAIL: number[] = [0, 0, 0, 0, 0, 0, 0, 0];

function parseV6(text: string): bigint | undefined {
  const n = text.length;
  if (n === 0) return undefined;
  for (let i = 0; i < n; i++) {
    const c = text.charCodeAt(i);
    const ok = (c >= 48 && c <= 58) || c === 46 || (c >= 65 && c <= 70) || (c >= 97 && c <= 102);
    if (!ok) return undefined;
  }
  const g = V6_GROUPS;
  const dbl = text.indexOf('::');
  if (dbl < 0) {
    if (v6Groups(text, 0, n, g, 0, true) !== 8) return undefined;
  } else {
    // A second `::`, or `:::` (a tail starting with an empty item), is not an address.
    if (text.indexOf('::', dbl + 1) >= 0) return undefined;
    const h = v6Groups(text, 0, dbl, g, 0, false);
    if (h < 0) return undefined;
    const t = v6Groups(text, dbl + 2, n, V6_TAIL, 0, true);
    if (t < 0 || h + t > 7) return undefined;
    for (let i = h; i < 8 - t; i++) g[i] = 0;
    for (let i = 0; i < t; i++) g[8 - t + i] = V6_TAIL[i]!;
  }
  return (
    (BigInt(g[0]! * 65536 + g[1]!) << 96n) |
    (BigInt(g[2]! * 65536 + g[3]!) << 64n) |
    (BigInt(g[4]! * 65536 + g[5]!) << 32n) |
    BigInt(g[6]! * 65536 + g[7]!)
  );
}

/**
 * Parsed addresses by text. Simulations parse the same few addresses over and over (every lab,
 * pod and rule names them as text); IpAddress is immutable, so one object can be shared. Bounded:
 * cleared when full (a cluster simulation may name many addresses).
 */
const PARSED = new Map<string, IpAddress>();
/** The bound of this cache and of prefix.ts's. */
export const PARSED_MAX = 4096;

/** An IPv4 or IPv6 address, or undefined when `text` is not one (no exception: API input). */
export function tryParseIp(text: string): IpAddress | undefined {
  const hit = PARSED.get(text);
  if (hit) return hit;
  const v4 = parseV4(text);
  const v6 = v4 === undefined && text.includes(':') ? parseV6(text) : undefined;
  let a: IpAddress;
  if (v4 !== undefined) a = Object.freeze({ family: 4, value: v4 });
  else if (v6 !== undefined) a = Object.freeze({ family: 6, value: v6 });
  else return undefined;
  if (PARSED.size >= PARSED_MAX) PARSED.clear();
  PARSED.set(text, a);
  return a;
}

/** Parse an IPv4 or IPv6 address; throws AddressError naming the text on failure. */
export function parseIp(text: string): IpAddress {
  const a = tryParseIp(text);
  if (!a) throw new AddressError(`invalid IP address ${JSON.stringify(text)}`);
  return a;
}

/** An IPv4 or IPv6 address in text form (a validator for configuration and API values). */
export function isIpAddress(s: unknown): s is string {
  return typeof s === 'string' && tryParseIp(s) !== undefined;
}

/** The IPv4 address an IPv4-mapped IPv6 address (::ffff:0:0/96) stands for; others unchanged. */
export function unmapV4(a: IpAddress): IpAddress {
  return a.family === 6 && a.value >> 32n === 0xffffn ? Object.freeze({ family: 4, value: a.value & 0xffffffffn }) : a;
}

/**
 * The IPv4-mapped IPv6 address (::ffff:a.b.c.d, RFC 4291 §2.5.5.2) of an IPv4 address, as an
 * AF_INET6 socket reports an IPv4 peer or local address; IPv6 addresses unchanged.
 */
export function mapV4(a: IpAddress): IpAddress {
  return a.family === 4 ? Object.freeze({ family: 6, value: (0xffffn << 32n) | a.value }) : a;
}

/** tryParseIp with an IPv4-mapped address read as its IPv4 address (see unmapV4). */
export function tryParseIpUnmapped(text: string): IpAddress | undefined {
  const a = tryParseIp(text);
  return a && unmapV4(a);
}

export function ipEquals(a: IpAddress, b: IpAddress): boolean {
  return a.family === b.family && a.value === b.value;
}

/** The 4 or 16 bytes of an address, network order (as DNS rdata and sockaddrs carry it). */
export function ipBytes(a: IpAddress): Uint8Array {
  const n = BITS[a.family] / 8;
  const out = new Uint8Array(n);
  let v = a.value;
  for (let i = n - 1; i >= 0; i--) {
    out[i] = Number(v & 0xffn);
    v >>= 8n;
  }
  return out;
}

/**
 * Canonical text: IPv4 dotted; IPv6 lowercase with the longest zero run (RFC 5952) compressed,
 * and an IPv4-mapped address in mixed notation, ::ffff:a.b.c.d (RFC 5952 §5, as Linux and
 * Node.js print it).
 */
export function formatIp(a: IpAddress): string {
  if (a.family === 4) {
    const v = Number(a.value);
    return `${(v >>> 24) & 255}.${(v >>> 16) & 255}.${(v >>> 8) & 255}.${v & 255}`;
  }
  if (a.value >> 32n === 0xffffn) return `::ffff:${formatIp(unmapV4(a))}`;
  const groups: number[] = [];
  for (let i = 7; i >= 0; i--) groups.push(Number((a.value >> BigInt(i * 16)) & 0xffffn));
  // RFC 5952 §4.2: compress the longest run (>= 2) of zero groups, the first one on ties.
  let bestStart = -1;
  let bestLen = 1;
  for (let i = 0; i < 8;) {
    if (groups[i] !== 0) {
      i++;
      continue;
    }
    let j = i;
    while (j < 8 && groups[j] === 0) j++;
    if (j - i > bestLen) {
      bestStart = i;
      bestLen = j - i;
    }
    i = j;
  }
  const hex = groups.map((g) => g.toString(16));
  if (bestStart < 0) return hex.join(':');
  return `${hex.slice(0, bestStart).join(':')}::${hex.slice(bestStart + bestLen).join(':')}`;
}

const ANY4: IpAddress = { family: 4, value: 0n };
const ANY6: IpAddress = { family: 6, value: 0n };
export function anyAddress(f: Family): IpAddress {
  return f === 4 ? ANY4 : ANY6;
}
const LOOPBACK4: IpAddress = { family: 4, value: 0x7f000001n };
const LOOPBACK6: IpAddress = { family: 6, value: 1n };
export function loopbackAddress(f: Family): IpAddress {
  return f === 4 ? LOOPBACK4 : LOOPBACK6;
}

export function isUnspecified(a: IpAddress): boolean {
  return a.value === 0n;
}

/** 127.0.0.0/8 or ::1. */
export function isLoopback(a: IpAddress): boolean {
  return a.family === 4 ? a.value >> 24n === 127n : a.value === 1n;
}

/** 224.0.0.0/4 or ff00::/8. */
export function isMulticast(a: IpAddress): boolean {
  return a.family === 4 ? a.value >> 28n === 0xen : a.value >> 120n === 0xffn;
}

/** Map key for an address (family-qualified, cheap to compare). */
export function ipKey(a: IpAddress): string {
  return `${a.family}:${a.value.toString(16)}`;
}
