/**
 * Named sets (`add set inet T S { type ipv4_addr ; }`): typed elements that change at run time
 * (`add element`, `delete element`, or NfTables.addElements) without reloading rules. Rules
 * look a set up by name in their table at evaluation, so a new element counts for the next packet.
 */
import { NftSyntaxError } from './errors.js';
import { parseAddrValue, parseNumberValue, type Interval } from './values.js';

export type NftSetType = 'ipv4_addr' | 'ipv6_addr' | 'inet_service' | 'mark';
export const SET_TYPES: readonly NftSetType[] = ['ipv4_addr', 'ipv6_addr', 'inet_service', 'mark'];

export function setTypeName(t: NftSetType): string {
  switch (t) {
    case 'ipv4_addr':
      return 'IPv4 address';
    case 'ipv6_addr':
      return 'IPv6 address';
    case 'inet_service':
      return 'internet network service';
    case 'mark':
      return 'packet mark';
  }
}

interface Element {
  readonly lo: bigint;
  readonly hi: bigint;
  readonly text: string;
}

export class NftSetState {
  /** Exact elements by value; intervals (prefixes, ranges) in `ranges`. */
  private readonly exact = new Map<bigint, Element>();
  private ranges: Element[] = [];

  constructor(
    readonly name: string,
    readonly type: NftSetType,
    readonly interval: boolean,
    readonly comment: string | undefined,
  ) {}

  has(v: bigint): boolean {
    if (this.exact.has(v)) return true;
    for (const r of this.ranges) if (v >= r.lo && v <= r.hi) return true;
    return false;
  }

  get size(): number {
    return this.exact.size + this.ranges.length;
  }

  /** Parse one element of this set's type; throws NftSyntaxError as nft words it. */
  parseElement(text: string): Element {
    const iv = this.parseInterval(text);
    if (iv.lo !== iv.hi && !this.interval)
      throw new NftSyntaxError(
        `You must add 'flags interval' to your set declaration if you want to add prefix elements (set ${this.name}, element ${text})`,
      );
    return { lo: iv.lo, hi: iv.hi, text: iv.text };
  }

  private parseInterval(text: string): Interval & { readonly text: string } {
    if (this.type === 'ipv4_addr' || this.type === 'ipv6_addr') {
      const iv = parseAddrValue(text, this.type === 'ipv4_addr' ? 4 : 6);
      return { ...iv, text: iv.text };
    }
    const max = this.type === 'inet_service' ? 0xffff : 0xffffffff;
    const iv = parseNumberValue(text, max, this.type === 'inet_service' ? 'Service' : 'Mark');
    return { lo: BigInt(iv.lo), hi: BigInt(iv.hi), text: iv.text };
  }

  add(e: Element): void {
    if (e.lo === e.hi) this.exact.set(e.lo, e);
    else if (!this.ranges.some((r) => r.lo === e.lo && r.hi === e.hi)) this.ranges = [...this.ranges, e];
  }

  /** false when the element is not in the set (the kernel's ENOENT). */
  delete(e: Element): boolean {
    if (e.lo === e.hi) return this.exact.delete(e.lo);
    const before = this.ranges.length;
    this.ranges = this.ranges.filter((r) => !(r.lo === e.lo && r.hi === e.hi));
    return this.ranges.length < before;
  }

  flush(): void {
    this.exact.clear();
    this.ranges = [];
  }

  /** The elements in ascending order, as nft lists them. */
  elements(): string[] {
    return [...this.exact.values(), ...this.ranges]
      .sort((a, b) => (a.lo < b.lo ? -1 : a.lo > b.lo ? 1 : 0))
      .map((e) => e.text);
  }

  clone(): NftSetState {
    const s = new NftSetState(this.name, this.type, this.interval, this.comment);
    for (const [k, v] of this.exact) s.exact.set(k, v);
    s.ranges = this.ranges;
    return s;
  }
}
