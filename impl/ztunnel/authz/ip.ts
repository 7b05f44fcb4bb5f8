/**
 * IP addresses and CIDR blocks for policy matching, parsed strictly by hand (impl/ may not use
 * node:net). Public API:
 *
 *   parseIp(text): IpAddress | undefined         — "10.0.0.1", "fd00::1", "::ffff:10.0.0.1"
 *   parseCidr(text): Cidr | undefined            — an address ("10.0.0.1" = /32) or "addr/len"
 *   cidrContains(cidr, ip): boolean
 *
 * IPv4-mapped IPv6 addresses (::ffff:a.b.c.d) are canonicalised to IPv4, because a dual-stack
 * listener reports IPv4 peers that way and a policy's IPv4 block must still match them.
 * Families never match each other otherwise.
 */

export interface IpAddress {
  readonly family: 4 | 6;
  /** 4 or 16 bytes, network order. */
  readonly bytes: readonly number[];
}

export interface Cidr {
  readonly family: 4 | 6;
  /** The block's address with host bits cleared. */
  readonly bytes: readonly number[];
  readonly prefix: number;
  /** As written in the policy, for reasons and logs. */
  readonly text: string;
}

function parseV4(text: string): number[] | undefined {
  const parts = text.split('.');
  if (parts.length !== 4) return undefined;
  const out: number[] = [];
  for (const p of parts) {
    // No leading zeros (ambiguous octal in some parsers) and no signs or spaces.
    if (!/^(0|[1-9][0-9]{0,2})$/.test(p)) return undefined;
    const n = Number(p);
    if (n > 255) return undefined;
    out.push(n);
  }
  return out;
}

function parseV6(text: string): number[] | undefined {
  if (text.includes('%')) return undefined; // zone ids have no meaning in a policy
  const halves = text.split('::');
  if (halves.length > 2) return undefined;
  const groups = (s: string): number[] | undefined => {
    if (s === '') return [];
    const out: number[] = [];
    const items = s.split(':');
    for (let i = 0; i < items.length; i++) {
      const item = items[i]!;
      if (i === items.length - 1 && item.includes('.')) {
        const v4 = parseV4(item);
        if (!v4) return undefined;
        out.push((v4[0]! << 8) | v4[1]!, (v4[2]! << 8) | v4[3]!);
      } else {
        if (!/^[0-9a-fA-F]{1,4}$/.test(item)) return undefined;
        out.push(parseInt(item, 16));
      }
    }
    return out;
  };
  const head = groups(halves[0]!);
  const tail = halves.length === 2 ? groups(halves[1]!) : [];
  if (!head || !tail) return undefined;
  let words: number[];
  if (halves.length === 2) {
    const missing = 8 - head.length - tail.length;
    if (missing < 1) return undefined;
    words = [...head, ...new Array<number>(missing).fill(0), ...tail];
  } else {
    words = head;
  }
  if (words.length !== 8) return undefined;
  return words.flatMap((w) => [w >> 8, w & 0xff]);
}

function isV4Mapped(b: readonly number[]): boolean {
  return b.length === 16 && b.slice(0, 10).every((x) => x === 0) && b[10] === 0xff && b[11] === 0xff;
}

export function parseIp(text: string): IpAddress | undefined {
  if (text.includes(':')) {
    const b = parseV6(text);
    if (!b) return undefined;
    if (isV4Mapped(b)) return { family: 4, bytes: b.slice(12) };
    return { family: 6, bytes: b };
  }
  const b = parseV4(text);
  return b ? { family: 4, bytes: b } : undefined;
}

export function parseCidr(text: string): Cidr | undefined {
  const slash = text.indexOf('/');
  const addrText = slash < 0 ? text : text.slice(0, slash);
  // A mapped address with a prefix would need the prefix shifted; policies never need that.
  if (slash >= 0 && addrText.toLowerCase().startsWith('::ffff:') && addrText.includes('.')) return undefined;
  const ip = parseIp(addrText);
  if (!ip) return undefined;
  const max = ip.family === 4 ? 32 : 128;
  let prefix = max;
  if (slash >= 0) {
    const p = text.slice(slash + 1);
    if (!/^(0|[1-9][0-9]{0,2})$/.test(p)) return undefined;
    prefix = Number(p);
    if (prefix > max) return undefined;
  }
  // Host bits are cleared, as a netip.Prefix containment check ignores them.
  const bytes = ip.bytes.map((b, i) => {
    const bits = Math.max(0, Math.min(8, prefix - i * 8));
    return b & ((0xff << (8 - bits)) & 0xff);
  });
  return { family: ip.family, bytes, prefix, text };
}

export function cidrContains(cidr: Cidr, ip: IpAddress): boolean {
  if (cidr.family !== ip.family) return false;
  let left = cidr.prefix;
  for (let i = 0; left > 0; i++, left -= 8) {
    const bits = Math.min(8, left);
    const mask = (0xff << (8 - bits)) & 0xff;
    if ((ip.bytes[i]! & mask) !== cidr.bytes[i]) return false;
  }
  return true;
}

/** Canonical text of an address (IPv4 dotted; IPv6 lowercase, longest zero run compressed). */
export function formatIp(ip: IpAddress): string {
  if (ip.family === 4) return ip.bytes.join('.');
  const words: number[] = [];
  for (let i = 0; i < 16; i += 2) words.push((ip.bytes[i]! << 8) | ip.bytes[i + 1]!);
  let best = -1;
  let bestLen = 0;
  for (let i = 0; i < 8; ) {
    if (words[i] !== 0) { i++; continue; }
    let j = i;
    while (j < 8 && words[j] === 0) j++;
    if (j - i > bestLen && j - i >= 2) { best = i; bestLen = j - i; }
    i = j;
  }
  const hex = words.map((w) => w.toString(16));
  if (best < 0) return hex.join(':');
  return `${hex.slice(0, best).join(':')}::${hex.slice(best + bestLen).join(':')}`;
}
