/**
 * Routing tables (`ip route`): per namespace, numbered tables (local 255, main 254, default 253
 * and any other id) holding routes; lookup is longest prefix match, then lowest metric.
 */
import { formatIp, formatPrefix, prefixContains, type Family, type IpAddress, type IpPrefix } from './ip-address.js';

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
  /**
   * The kernel-managed routes of each device (proto kernel), in the order added: what a device's
   * address or state change replaces, found without scanning every table.
   */
  private readonly kernelByDev = new Map<string, Route[]>();

  add(route: Route): void {
    const list = this.tables.get(route.table) ?? [];
    const dup = list.find((r) => r.family === route.family && r.dst.addr.value === route.dst.addr.value
      && r.dst.len === route.dst.len && r.metric === route.metric && r.type === route.type);
    if (dup) throw new Error(`route exists: ${formatRoute(dup)} (RTNETLINK answers: File exists)`);
    list.push(route);
    this.tables.set(route.table, list);
    if (route.proto === 'kernel' && route.dev !== undefined) {
      const mine = this.kernelByDev.get(route.dev);
      if (mine) mine.push(route);
      else this.kernelByDev.set(route.dev, [route]);
    }
  }

  /** Remove routes matching the predicate; returns how many were removed. */
  remove(pred: (r: Route) => boolean): number {
    let n = 0;
    for (const [t, list] of this.tables) {
      if (!list.some(pred)) continue;
      const kept: Route[] = [];
      for (const r of list) {
        if (!pred(r)) kept.push(r);
        else {
          n++;
          this.forgetKernel(r);
        }
      }
      this.tables.set(t, kept);
    }
    return n;
  }

  /** Remove the kernel-managed routes of one device (what `remove(proto kernel && dev)` does, without a scan). */
  removeKernelRoutes(dev: string): number {
    const mine = this.kernelByDev.get(dev);
    if (!mine || mine.length === 0) return 0;
    this.kernelByDev.delete(dev);
    const gone = new Set(mine);
    for (const t of new Set(mine.map((r) => r.table))) {
      const list = this.tables.get(t);
      if (list) this.tables.set(t, list.filter((r) => !gone.has(r)));
    }
    return mine.length;
  }

  /**
   * Whether the device's kernel-managed routes are exactly `want` (same routes, any order): a
   * re-sync would then change nothing but their position in the tables.
   */
  kernelRoutesEqual(dev: string, want: readonly Route[]): boolean {
    const mine = this.kernelByDev.get(dev) ?? [];
    if (mine.length !== want.length) return false;
    return want.every((w) => mine.some((r) => sameRoute(r, w)));
  }

  private forgetKernel(r: Route): void {
    if (r.proto !== 'kernel' || r.dev === undefined) return;
    const mine = this.kernelByDev.get(r.dev);
    if (!mine) return;
    const i = mine.indexOf(r);
    if (i >= 0) mine.splice(i, 1);
    if (mine.length === 0) this.kernelByDev.delete(r.dev);
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
  return a.family === b.family && a.table === b.table && a.type === b.type && a.dev === b.dev
    && a.metric === b.metric && a.proto === b.proto && a.dst.len === b.dst.len
    && sameAddr(a.dst.addr, b.dst.addr) && sameAddr(a.via, b.via) && sameAddr(a.src, b.src);
}
