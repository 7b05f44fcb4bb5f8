/**
 * The sim `host-local` IPAM plugin: addresses from configured ranges, one per range set,
 * allocated deterministically (the next free address after the last one reserved, wrapping, as
 * host-local's iterator does), released on DEL by (container id, ifname), DEL idempotent.
 *
 * State lives in an IpamDisk, which belongs to the node (host-local keeps files under
 * /var/lib/cni/networks/<network>), so it survives runtime restarts and node reboots.
 */
import {
  CNI_ERR_INTERNAL,
  CniError,
  CniErrorCode,
  type CniDns,
  type CniEnv,
  type CniNetConf,
  type CniPlugin,
  type CniResult,
  type CniRoute,
} from '../../impl/api/cni.js';
import { formatIp, parseIp, type Family } from '../../impl/api/ip/address.js';
import { maskValue, parsePrefix, type IpPrefix } from '../../impl/api/ip/prefix.js';
import { skelPlugin } from './skel.js';

interface RangeConf {
  subnet: string;
  rangeStart?: string;
  rangeEnd?: string;
  gateway?: string;
}

interface Range {
  readonly subnet: IpPrefix;
  readonly start: bigint;
  readonly end: bigint;
  readonly gateway: bigint;
  /** The gateway as text, formatted once (every allocation reports it). */
  readonly gatewayText: string;
  readonly text: string;
}

interface Owner {
  readonly containerId: string;
  readonly ifname: string;
}

/** One network's allocations (host-local's <dataDir>/<network> directory). */
class HostLocalStore {
  /** key `${family}/${value}` → owner; changed only through reserve/release, which keep byOwner in step */
  private readonly owners = new Map<string, Owner>();
  /** last reserved address value per range set index */
  readonly lastReserved = new Map<number, bigint>();
  /** owner `${containerId}/${ifname}` → its keys, so lookups by owner do not scan every allocation */
  private readonly byOwner = new Map<string, Set<string>>();

  get allocated(): ReadonlyMap<string, Owner> {
    return this.owners;
  }

  /** Whether (containerId, ifname) holds any address here (ownedBy without the copy). */
  holdsAny(containerId: string, ifname: string): boolean {
    return (this.byOwner.get(ownerKey(containerId, ifname))?.size ?? 0) > 0;
  }

  ownedBy(containerId: string, ifname: string): string[] {
    const keys = this.byOwner.get(ownerKey(containerId, ifname));
    return keys ? [...keys] : [];
  }

  reserve(key: string, owner: Owner): void {
    this.release(key);
    this.owners.set(key, owner);
    const ok = ownerKey(owner.containerId, owner.ifname);
    let keys = this.byOwner.get(ok);
    if (!keys) this.byOwner.set(ok, (keys = new Set()));
    keys.add(key);
  }

  release(key: string): void {
    const o = this.owners.get(key);
    if (!o) return;
    this.owners.delete(key);
    const ok = ownerKey(o.containerId, o.ifname);
    const keys = this.byOwner.get(ok);
    keys?.delete(key);
    if (keys?.size === 0) this.byOwner.delete(ok);
  }
}

function ownerKey(containerId: string, ifname: string): string {
  return `${containerId}/${ifname}`;
}

/** A node's persistent IPAM state, per network. */
export class IpamDisk {
  private readonly stores = new Map<string, HostLocalStore>();

  store(network: string): HostLocalStore {
    let s = this.stores.get(network);
    if (!s) this.stores.set(network, (s = new HostLocalStore()));
    return s;
  }

  /** How many addresses are allocated on a network (for tests: no leak after DEL). */
  allocatedCount(network: string): number {
    return this.stores.get(network)?.allocated.size ?? 0;
  }
}

function key(family: Family, v: bigint): string {
  return `${family}/${v}`;
}

function parseRange(r: unknown, where: string): Range {
  if (typeof r !== 'object' || r === null || typeof (r as RangeConf).subnet !== 'string') {
    throw new CniError(CniErrorCode.InvalidNetworkConfig, `${where}: a range needs a "subnet"`);
  }
  const rc = r as RangeConf;
  let subnet: IpPrefix;
  try {
    subnet = parsePrefix(rc.subnet);
  } catch (e) {
    throw new CniError(
      CniErrorCode.InvalidNetworkConfig,
      `${where}: invalid subnet ${JSON.stringify(rc.subnet)}`,
      String(e),
    );
  }
  const f = subnet.addr.family;
  const bits = f === 4 ? 32 : 128;
  const size = 1n << BigInt(bits - subnet.len);
  const net = subnet.addr.value;
  const last = net + size - 1n;
  const addr = (t: string | undefined, d: bigint): bigint => {
    if (t === undefined) return d;
    const a = parseIp(t);
    if (a.family !== f || maskValue(a.value, f, subnet.len) !== net)
      throw new CniError(CniErrorCode.InvalidNetworkConfig, `${where}: ${t} is not in ${rc.subnet}`);
    return a.value;
  };
  const gateway = addr(rc.gateway, net + 1n);
  const start = addr(rc.rangeStart, net + 1n);
  const end = addr(rc.rangeEnd, f === 4 ? last - 1n : last);
  if (end < start) throw new CniError(CniErrorCode.InvalidNetworkConfig, `${where}: rangeEnd is before rangeStart`);
  return {
    subnet,
    start,
    end,
    gateway,
    gatewayText: formatIp({ family: f, value: gateway }),
    text: `${formatIp({ family: f, value: start })}-${formatIp({ family: f, value: end })}`,
  };
}

/**
 * Parsed range sets by the text of what they are parsed from: every call of a network brings
 * the same configuration, and parsing (prefixes, bigint bounds) costs more than this key. Only
 * successful parses are kept; the cache is bounded (a node has a handful of networks).
 */
const parsedRanges = new Map<string, Range[][]>();

function rangeSets(conf: CniNetConf): Range[][] {
  const ipam = conf.ipam ?? { type: 'host-local' };
  const key = JSON.stringify([
    conf.name,
    ipam['ranges'],
    ipam['subnet'],
    ipam['rangeStart'],
    ipam['rangeEnd'],
    ipam['gateway'],
  ]);
  let sets = parsedRanges.get(key);
  if (!sets) {
    sets = parseRangeSets(conf, ipam);
    if (parsedRanges.size >= 256) parsedRanges.clear();
    parsedRanges.set(key, sets);
  }
  return sets;
}

function parseRangeSets(conf: CniNetConf, ipam: NonNullable<CniNetConf['ipam']>): Range[][] {
  const where = `network ${conf.name}: ipam`;
  if (Array.isArray(ipam['ranges'])) {
    return (ipam['ranges'] as unknown[]).map((set, i) => {
      if (!Array.isArray(set) || set.length === 0)
        throw new CniError(
          CniErrorCode.InvalidNetworkConfig,
          `${where}.ranges[${i}] must be a non-empty list of ranges`,
        );
      return set.map((r, j) => parseRange(r, `${where}.ranges[${i}][${j}]`));
    });
  }
  if (typeof ipam['subnet'] === 'string') return [[parseRange(ipam, where)]];
  throw new CniError(CniErrorCode.InvalidNetworkConfig, `${where}: no "ranges" or "subnet" configured`);
}

function allocate(
  store: HostLocalStore,
  setIndex: number,
  set: Range[],
  owner: Owner,
): { range: Range; value: bigint } {
  // Candidates in order: every range of the set, start..end; begin after the last reservation.
  const last = store.lastReserved.get(setIndex);
  let ri = 0;
  let v = set[0]!.start;
  if (last !== undefined) {
    const i = set.findIndex((r) => last >= r.start && last <= r.end);
    if (i >= 0) {
      ri = i;
      v = last + 1n;
      if (v > set[i]!.end) {
        ri = (i + 1) % set.length;
        v = set[ri]!.start;
      }
    }
  }
  let total = 0n;
  for (const r of set) total += r.end - r.start + 1n;
  for (let n = 0n; n < total; n++) {
    const r = set[ri]!;
    const k = v !== r.gateway ? key(r.subnet.addr.family, v) : undefined;
    if (k !== undefined && !store.allocated.has(k)) {
      store.reserve(k, owner);
      store.lastReserved.set(setIndex, v);
      return { range: r, value: v };
    }
    v++;
    if (v > r.end) {
      ri = (ri + 1) % set.length;
      v = set[ri]!.start;
    }
  }
  throw new CniError(
    CNI_ERR_INTERNAL,
    `failed to allocate for range ${setIndex}`,
    `no IP addresses available in range set: ${set.map((r) => r.text).join(',')}`,
  );
}

function routesOf(conf: CniNetConf): CniRoute[] {
  const r = conf.ipam?.['routes'];
  if (r === undefined) return [];
  if (
    !Array.isArray(r) ||
    !r.every((x) => typeof x === 'object' && x !== null && typeof (x as CniRoute).dst === 'string')
  ) {
    throw new CniError(
      CniErrorCode.InvalidNetworkConfig,
      `network ${conf.name}: ipam.routes must be a list of {dst, gw?}`,
    );
  }
  return r as CniRoute[];
}

/**
 * host-local decodes CNI_ARGS into its known keys (IP, IgnoreUnknown) and, like the real one,
 * refuses any other key unless IgnoreUnknown=1 — which is why runtimes always send it.
 */
function checkArgs(env: CniEnv): void {
  const ignore = env.args.some(([k, v]) => k === 'IgnoreUnknown' && (v === '1' || v.toLowerCase() === 'true'));
  if (ignore) return; // runtimes always send it: the unknown list is built only to be reported
  const unknown = env.args.filter(([k]) => k !== 'IgnoreUnknown' && k !== 'IP').map(([k, v]) => `${k}=${v}`);
  if (unknown.length > 0) {
    throw new CniError(CNI_ERR_INTERNAL, `ARGS: unknown args [${unknown.map((u) => JSON.stringify(u)).join(' ')}]`);
  }
}

export function hostLocalPlugin(disk: IpamDisk): CniPlugin {
  const owner = (env: CniEnv): Owner => ({ containerId: env.containerId!, ifname: env.ifname! });
  return skelPlugin({
    async add(env, conf): Promise<CniResult> {
      checkArgs(env);
      const sets = rangeSets(conf);
      const routes = routesOf(conf);
      const store = disk.store(conf.name);
      const o = owner(env);
      if (store.holdsAny(o.containerId, o.ifname)) {
        throw new CniError(
          CNI_ERR_INTERNAL,
          `failed to allocate for ${o.containerId}/${o.ifname}`,
          'it already holds addresses on this network (duplicate allocation is not allowed; DEL first)',
        );
      }
      const ips = [];
      try {
        for (let i = 0; i < sets.length; i++) {
          const { range, value } = allocate(store, i, sets[i]!, o);
          const f = range.subnet.addr.family;
          ips.push({ address: `${formatIp({ family: f, value })}/${range.subnet.len}`, gateway: range.gatewayText });
        }
      } catch (e) {
        for (const k of store.ownedBy(o.containerId, o.ifname)) store.release(k); // all or nothing
        throw e;
      }
      const dns = conf.ipam?.['dns'] as CniDns | undefined;
      return { cniVersion: conf.cniVersion, ips, ...(routes.length ? { routes } : {}), ...(dns ? { dns } : {}) };
    },
    async del(env, conf): Promise<void> {
      rangeSets(conf); // a broken config fails DEL too, as host-local does
      const store = disk.store(conf.name);
      for (const k of store.ownedBy(env.containerId!, env.ifname!)) store.release(k);
    },
    async check(env, conf): Promise<void> {
      const store = disk.store(conf.name);
      const held = store.ownedBy(env.containerId!, env.ifname!);
      if (held.length === 0)
        throw new CniError(CNI_ERR_INTERNAL, `host-local: failed to find address for ${env.containerId}/${env.ifname}`);
    },
  });
}
