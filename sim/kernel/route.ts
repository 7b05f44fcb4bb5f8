/**
 * Routing tables (`ip route`): per namespace, numbered tables (local 255, main 254, default 253
 * and any other id) holding routes; lookup is longest prefix match, then lowest metric.
 */
import { formatIp, type Family, type IpAddress } from '../../impl/api/ip/address.js';
import { formatPrefix, prefixContains, type IpPrefix } from '../../impl/api/ip/prefix.js';

export const TABLE_LOCAL = 255;
export const TABLE_MAIN = 254;
export const TABLE_DEFAULT = 253;

export type RouteType = 'unicast' | 'local' | 'blackhole' | 'unreachable' | 'prohibit';

export interface Route {
  readonly family: Family;
  readonly table: number;
  readonly type: RouteType;
  readonly dst: IpPrefix;
  /** Output device (required for unicast and local). */
  readonly dev: string | undefined;
  /** Next hop, for routes via a gateway. */
  readonly via: IpAddress | undefined;
  /** Preferred source address. */
  readonly src: IpAddress | undefined;
  readonly metric: number;
  /** 'kernel' for routes the kernel adds with an address; 'static' otherwise. */
  readonly proto: 'kernel' | 'static';
}

export function formatRoute(r: Route): string {
  const parts: string[] = [];
  if (r.type !== 'unicast') parts.push(r.type);
  const full = r.dst.len === (r.family === 4 ? 32 : 128);
  parts.push(r.dst.len === 0 ? 'default' : full ? formatIp(r.dst.addr) : formatPrefix(r.dst));
  if (r.via) parts.push('via', formatIp(r.via));
  if (r.dev) parts.push('dev', r.dev);
  if (r.table !== TABLE_MAIN) parts.push('table', tableName(r.table));
  if (r.proto === 'kernel') parts.push('proto kernel');
  if (r.src) parts.push('src', formatIp(r.src));
  if (r.metric) parts.push('metric', String(r.metric));
  return parts.join(' ');
}

export function tableName(t: number): string {
  return t === TABLE_LOCAL ? 'local' : t === TABLE_MAIN ? 'main' : t === TABLE_DEFAULT ? 'default' : String(t);
}

export function parseTableName(s: string): number {
  if (s === 'local') return TABLE_LOCAL;
  if (s === 'main') return TABLE_MAIN;
  if (s === 'default') return TABLE_DEFAULT;
  if (/^[0-9]+$/.test(s) && Number(s) > 0 && Number(s) < 2 ** 32) return Number(s);
  throw new Error(`invalid routing table ${JSON.stringify(s)}: expected local, main, default or a number`);
}

export class RouteTables {
  private readonly tables = new Map<number, Route[]>();
  /** How many kernel-managed routes each device has (made with the first one). */
  private kernelCount: Map<string, number> | undefined;

  add(route: Route): void {
    const list = this.tables.get(route.table) ?? [];
    const dup = list.find(
      (r) =>
        r.family === route.family &&
        r.dst.addr.value === route.dst.addr.value &&
        r.dst.len === route.dst.len &&
        r.metric === route.metric &&
        r.type === route.type,
    );
    if (dup) throw new Error(`route exists: ${formatRoute(dup)} (RTNETLINK answers: File exists)`);
    list.push(route);
    this.tables.set(route.table, list);
    if (route.proto === 'kernel' && route.dev !== undefined) {
      this.kernelCount ??= new Map();
      this.kernelCount.set(route.dev, (this.kernelCount.get(route.dev) ?? 0) + 1);
    }
  }

  /** Remove routes matching the predicate; returns how many were removed. */
  remove(pred: (r: Route) => boolean): number {
    let n = 0;
    for (const [t, list] of this.tables) {
      if (!list.some(pred)) continue; // most tables hold none: no copy
      const kept: Route[] = [];
      for (const r of list) {
        if (!pred(r)) kept.push(r);
        else {
          n++;
          if (r.proto === 'kernel' && r.dev !== undefined) this.uncount(r.dev);
        }
      }
      this.tables.set(t, kept);
    }
    return n;
  }

  /**
   * Whether the device's kernel-managed routes (proto kernel) are exactly `want` (same routes,
   * any order): a re-sync would then change nothing but their position in the tables. Counted
   * per device, compared by a scan (no per-device lists: they would cost memory in every pod's
   * namespace).
   */
  kernelRoutesEqual(dev: string, want: readonly Route[]): boolean {
    const n = this.kernelCount?.get(dev) ?? 0;
    if (n !== want.length) return false;
    if (n === 0) return true;
    let have = 0;
    for (const list of this.tables.values()) {
      for (const r of list) {
        if (r.proto !== 'kernel' || r.dev !== dev) continue;
        have++;
        if (have > want.length || !want.some((w) => sameRoute(r, w))) return false;
      }
    }
    return have === want.length;
  }

  private uncount(dev: string): void {
    const n = (this.kernelCount?.get(dev) ?? 0) - 1;
    if (n > 0) this.kernelCount!.set(dev, n);
    else this.kernelCount?.delete(dev);
  }

  /** Longest-prefix match in one table; routes whose device is down are skipped. */
  lookup(table: number, dst: IpAddress, isDevUp: (dev: string) => boolean): Route | undefined {
    const list = this.tables.get(table);
    if (!list) return undefined;
    let best: Route | undefined;
    for (const r of list) {
      if (r.family !== dst.family || !prefixContains(r.dst, dst)) continue;
      if (r.dev !== undefined && !isDevUp(r.dev)) continue;
      if (!best || r.dst.len > best.dst.len || (r.dst.len === best.dst.len && r.metric < best.metric)) best = r;
    }
    return best;
  }

  /** The routes of one table (a live view: do not edit). */
  inTable(table: number): readonly Route[] {
    return this.tables.get(table) ?? [];
  }

  all(): Route[] {
    return [...this.tables.values()].flat();
  }
}

function sameAddr(a: IpAddress | undefined, b: IpAddress | undefined): boolean {
  return a === b || (a !== undefined && b !== undefined && a.family === b.family && a.value === b.value);
}

/** Every field equal (addresses by value). */
function sameRoute(a: Route, b: Route): boolean {
  return (
    a.family === b.family &&
    a.table === b.table &&
    a.type === b.type &&
    a.dev === b.dev &&
    a.metric === b.metric &&
    a.proto === b.proto &&
    a.dst.len === b.dst.len &&
    sameAddr(a.dst.addr, b.dst.addr) &&
    sameAddr(a.via, b.via) &&
    sameAddr(a.src, b.src)
  );
}
