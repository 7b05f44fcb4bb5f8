/**
 * One network namespace: its devices, addresses, routing tables and policy rules, forwarding
 * switches, netfilter (separately for IPv4 and IPv6), nftables, ipsets, conntrack and sockets. Namespaces
 * share nothing; packets cross between them only over veth pairs (see datapath.ts).
 */
import { formatIp, parseIp, type Family, type IpAddress } from '../../impl/api/ip/address.js';
import { formatPrefix, parsePrefix, type IpPrefix } from '../../impl/api/ip/prefix.js';
import { primaryAddress, type Link, type LinkKind } from './link.js';
import { PolicyRules } from './policy-rule.js';
import { RouteTables, TABLE_LOCAL, TABLE_MAIN, type Route } from './route.js';
import { ConntrackTable } from './conntrack.js';
import { SocketTable } from './socket.js';
import { SimConfigError } from './errors.js';
import { NfTables } from './nftables/nftables.js';
import type { Hook, IpSetView, TableName, TableRun, EvalContext } from './netfilter/types.js';

/** The part of the netfilter model the datapath drives (sim/kernel/netfilter). */
export interface NetfilterEngine {
  runTable(table: TableName, hook: Hook, ctx: EvalContext, opts?: { readonly trace?: boolean }): TableRun;
  hasRules(table: TableName, hook: Hook): boolean;
  /**
   * Does a loaded rule need connection tracking (the kernel's nf_ct_netns_get at rule load)? The
   * namespace tracks this family's connections only while one does (see datapath.ts).
   */
  needsConntrack(): boolean;
  restore(text: string, opts?: { noflush?: boolean; source?: string }): void;
  save(table?: TableName): string;
}

export interface IpSetRegistry {
  get(name: string): IpSetView | undefined;
}

export class Netns {
  readonly links = new Map<string, Link>();
  readonly routes = new RouteTables();
  readonly rules = new PolicyRules();
  readonly sockets = new SocketTable();
  forwarding: Record<Family, boolean> = { 4: false, 6: false };
  /** nftables of every family (ip, ip6, inet), beside the iptables `netfilter` (sim/kernel/nftables/). */
  readonly nftables: NfTables;
  private nextIndex = 1;
  private conntrackTable: ConntrackTable | undefined;

  /** Made on first use: most pod namespaces of a cluster run never track a connection. */
  get conntrack(): ConntrackTable {
    return (this.conntrackTable ??= new ConntrackTable());
  }

  constructor(
    readonly name: string,
    readonly netfilter: Record<Family, NetfilterEngine>,
    readonly ipsets: IpSetRegistry,
    nftables: NfTables = new NfTables(),
  ) {
    this.nftables = nftables;
    // Every namespace starts with lo (down, as after `ip netns add`); bring it up explicitly
    // like a container runtime's loopback plugin does.
    const lo = this.addLink('lo', 'loopback');
    lo.addresses.push({ addr: { family: 4, value: 0x7f000001n }, prefix: parsePrefix('127.0.0.0/8') });
    lo.addresses.push({ addr: { family: 6, value: 1n }, prefix: parsePrefix('::1/128') });
  }

  addLink(name: string, kind: LinkKind): Link {
    if (!/^[A-Za-z0-9_.@-]{1,15}$/.test(name)) {
      throw new SimConfigError(
        `invalid device name ${JSON.stringify(name)} in ${this.name}: 1-15 characters of [A-Za-z0-9_.@-]`,
      );
    }
    if (this.links.has(name)) throw new SimConfigError(`device ${name} already exists in ${this.name}`);
    const link: Link = {
      name,
      index: this.nextIndex++,
      kind,
      netns: this.name,
      up: false,
      addresses: [],
      ...(kind === 'bridge' ? { ports: new Set<Link>() } : {}),
    };
    this.links.set(name, link);
    return link;
  }

  link(name: string): Link {
    const l = this.links.get(name);
    if (!l)
      throw new SimConfigError(
        `no device ${JSON.stringify(name)} in ${this.name} (devices: ${[...this.links.keys()].join(', ')})`,
      );
    return l;
  }

  setUp(name: string, up: boolean): void {
    const l = this.link(name);
    l.up = up;
    this.syncKernelRoutes(l);
  }

  /** `ip addr add ADDR/LEN dev DEV`: also installs the local and prefix routes the kernel adds. */
  addAddress(dev: string, cidr: string): void {
    const l = this.link(dev);
    const slash = cidr.indexOf('/');
    const prefix = parsePrefix(cidr);
    const addr = parseIp(slash < 0 ? cidr : cidr.slice(0, slash));
    if (l.addresses.some((a) => a.addr.family === addr.family && a.addr.value === addr.value)) {
      throw new SimConfigError(`address ${formatIp(addr)} already on ${dev} in ${this.name}`);
    }
    if (addr.family === 6 && l.ipv6Disabled) {
      // addrconf refuses addresses on a device whose IPv6 is off (`ip` prints "Permission denied").
      throw new SimConfigError(
        `address ${formatIp(addr)} on ${dev} in ${this.name}: IPv6 is disabled on the device (EACCES)`,
      );
    }
    if (addr.family === 4) l.addresses.push({ addr, prefix });
    else {
      // ipv6_link_dev_addr: a device's IPv6 list is sorted by scope, and a new address goes in
      // front of those of the same scope, so the newest global address comes first. What takes
      // "the first address" of a device (REDIRECT, TPROXY's default --on-ip, source selection
      // ties) takes the newest one; IPv4 keeps its primary first.
      const scope = (a: IpAddress): number => (a.value === 1n ? 1 : a.value >> 118n === 0x3fan ? 2 : 14);
      const at = l.addresses.findIndex((a) => a.addr.family === 6 && scope(addr) >= scope(a.addr));
      l.addresses.splice(at < 0 ? l.addresses.length : at, 0, { addr, prefix });
    }
    this.syncKernelRoutes(l);
  }

  /**
   * `sysctl net.ipv6.conf.<dev>.disable_ipv6=<on>`. Turning it on drops the device's IPv6
   * addresses and every IPv6 route through it, as the kernel does (addrconf_ifdown); turning it
   * off does not bring ::1 back here (the kernel re-adds it on lo; nothing in the sim needs that).
   */
  setIpv6Disabled(dev: string, on: boolean): void {
    const l = this.link(dev);
    l.ipv6Disabled = on;
    if (!on) return;
    for (let i = l.addresses.length - 1; i >= 0; i--) if (l.addresses[i]!.addr.family === 6) l.addresses.splice(i, 1);
    this.routes.remove((r) => r.family === 6 && r.dev === dev);
    this.syncKernelRoutes(l);
  }

  removeAddress(dev: string, addrText: string): void {
    const l = this.link(dev);
    const addr = parseIp(addrText.split('/')[0] ?? addrText);
    const i = l.addresses.findIndex((a) => a.addr.family === addr.family && a.addr.value === addr.value);
    if (i < 0) throw new SimConfigError(`address ${addrText} not on ${dev} in ${this.name}`);
    l.addresses.splice(i, 1);
    this.syncKernelRoutes(l);
  }

  /**
   * Kernel-managed routes of a device: `local ADDR` in table local, and the prefix in main while
   * up. Computed from the device's addresses and state; when they match the routes the device
   * already has, nothing changes (a cluster sets the bridge up for every pod: re-adding its
   * routes each time cost a scan of every table per call).
   */
  private syncKernelRoutes(l: Link): void {
    const want = l.kind === 'loopback' ? this.loopbackRoutes(l) : this.deviceRoutes(l);
    if (this.routes.kernelRoutesEqual(l.name, want)) return;
    this.routes.remove((r) => r.proto === 'kernel' && r.dev === l.name);
    for (const r of want) this.routes.add(r);
  }

  /** The kernel routes a non-loopback device's addresses give it, in the order they are added. */
  private deviceRoutes(l: Link): Route[] {
    const out: Route[] = [];
    for (const [i, a] of l.addresses.entries()) {
      // An IPv4 secondary address (in the subnet of an earlier one on the device) gets its local
      // route with the primary as preferred source (fib_add_ifaddr), so connecting to it from
      // this namespace uses the primary as source. IPv6 has no primaries: source = destination.
      const primary =
        a.addr.family === 4
          ? l.addresses
              .slice(0, i)
              .find(
                (p) =>
                  p.addr.family === 4 && p.prefix.len === a.prefix.len && p.prefix.addr.value === a.prefix.addr.value,
              )
          : undefined;
      out.push({
        family: a.addr.family,
        table: TABLE_LOCAL,
        type: 'local',
        dst: hostPrefix(a.addr),
        dev: l.name,
        via: undefined,
        src: primary?.addr ?? a.addr,
        metric: 0,
        proto: 'kernel',
      });
      const full = a.addr.family === 4 ? 32 : 128;
      if (l.up && a.prefix.len < full) {
        const dup = out.some(
          (r) =>
            r.table === TABLE_MAIN &&
            r.dst.len === a.prefix.len &&
            r.dst.addr.value === a.prefix.addr.value &&
            r.family === a.addr.family,
        );
        if (!dup)
          out.push({
            family: a.addr.family,
            table: TABLE_MAIN,
            type: 'unicast',
            dst: a.prefix,
            dev: l.name,
            via: undefined,
            src: a.addr,
            metric: a.addr.family === 6 ? 256 : 0,
            proto: 'kernel',
          });
      }
    }
    return out;
  }

  /**
   * Addresses on lo: each gets `local ADDR` in table local and, for IPv4, its whole prefix is
   * local too (fib_add_ifaddr installs the prefix route as RTN_LOCAL on a loopback device, which
   * is why all of 127.0.0.0/8 is local). Only while lo is up.
   */
  private loopbackRoutes(lo: Link): Route[] {
    const out: Route[] = [];
    if (!lo.up) return out;
    const addLocal = (dst: IpPrefix, src: IpAddress): void => {
      if (out.some((r) => r.family === dst.addr.family && r.dst.len === dst.len && r.dst.addr.value === dst.addr.value))
        return;
      out.push({
        family: dst.addr.family,
        table: TABLE_LOCAL,
        type: 'local',
        dst,
        dev: 'lo',
        via: undefined,
        src,
        metric: 0,
        proto: 'kernel',
      });
    };
    for (const a of lo.addresses) {
      if (a.addr.family === 4 && a.prefix.len < 32) addLocal(a.prefix, a.addr);
      addLocal(hostPrefix(a.addr), a.addr);
    }
    return out;
  }

  primaryAddress(dev: string, family: Family): IpAddress | undefined {
    const l = this.links.get(dev);
    return l ? primaryAddress(l, family) : undefined;
  }

  /** `ip addr`-like summary, for lab output and debugging. */
  describe(): string {
    const lines = [`netns ${this.name}`];
    for (const l of this.links.values()) {
      const extra = l.peer ? ` peer ${l.peer.name}@${l.peer.netns}` : l.master ? ` master ${l.master.name}` : '';
      lines.push(
        `  ${l.index}: ${l.name} (${l.kind}) ${l.up ? 'UP' : 'DOWN'}${extra} ${l.addresses.map((a) => `${formatIp(a.addr)}/${a.prefix.len}`).join(' ')}`,
      );
    }
    for (const r of this.routes.all())
      lines.push(`  route ${formatPrefix(r.dst)} ${r.type} table ${r.table}${r.dev ? ` dev ${r.dev}` : ''}`);
    return lines.join('\n');
  }
}

/** ADDR/32 or ADDR/128 without a round trip through text. */
function hostPrefix(a: IpAddress): IpPrefix {
  return { addr: a, len: a.family === 4 ? 32 : 128 };
}

/**
 * The sim's namespace handles look like the real runtime's (`/var/run/netns/NAME`, as CNI_NETNS
 * carries them); adapters map them back to the sim namespace name. A bare name is accepted too.
 */
export function simNetnsName(handle: string): string {
  const m = /^\/(?:var\/)?run\/netns\/([A-Za-z0-9_.:-]+)$/.exec(handle);
  return m ? m[1]! : handle;
}

export function simNetnsPath(name: string): string {
  return `/var/run/netns/${name}`;
}
