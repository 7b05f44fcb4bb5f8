/**
 * SimKernel: the simulated Linux networking of a whole machine set — every network namespace,
 * the devices between them, and the socket calls processes make. Deterministic: no real time,
 * no randomness (ephemeral ports are allocated lowest-first, SO_REUSEPORT picks by flow hash).
 *
 * The calls mirror the real tools and syscalls (ip link/addr/route/rule, iptables-restore,
 * socket/setsockopt/bind/listen/connect/getsockopt) so the same scenario can be replayed on a
 * real kernel and the outcomes compared.
 */
import { formatIp, isUnspecified, parseIp, unmapV4, type Family, type IpAddress } from '../../impl/api/ip/address.js';
import { parsePrefix } from '../../impl/api/ip/prefix.js';
import { Netns, type IpSetRegistry, type NetfilterEngine } from './netns.js';
import { Datapath, flowHash, type Delivery } from './datapath.js';
import { SimConfigError, SimErrnoError } from './errors.js';
import { fibLookup, isLocalAddress, selectSource } from './fib.js';
import {
  maySetMark,
  maySetTransparent,
  mayOpenRaw,
  parseKernelVersion,
  type Credentials,
  type KernelVersion,
} from './process.js';
import { parseTableName, TABLE_MAIN, type RouteType } from './route.js';
import { SimSocket, formatSockAddr, type SockAddr, type SockProto } from './socket.js';
import { Trace, type TraceEvent } from './trace.js';
import { NO_FLAGS, type L4Proto, type Packet, type TcpFlags } from './packet.js';
import type { Tuple } from './conntrack.js';
import { resetFor } from './tcp-reset.js';
import { Netfilter } from './netfilter/netfilter.js';
import { IpSets } from './netfilter/ipset.js';
import { NfTables } from './nftables/nftables.js';

export interface SimKernelOptions {
  /** Kernel version, e.g. '6.1' or '5.15'; decides version-dependent permission checks. */
  readonly kernelVersion?: string;
  /** Record packet traces (off for speed in benchmarks and large property runs). */
  readonly trace?: boolean;
  /** Replace the netfilter model (positive controls plug a deliberately wrong model in here). */
  readonly netfilterFactory?: (family: Family, ipsets: IpSets) => NetfilterEngine;
  /** Replace each namespace's nftables model (the nftables positive controls plug a wrong one in here). */
  readonly nftablesFactory?: () => NfTables;
}

export type SockOpt = 'SO_MARK' | 'IP_TRANSPARENT' | 'SO_REUSEPORT' | 'SO_REUSEADDR' | 'IPV6_V6ONLY';

/**
 * Where a send or connect on `s` goes: an IPv4-mapped destination (::ffff:a.b.c.d) on a
 * dual-stack AF_INET6 socket is IPv4 traffic, as on Linux (a reply to a peer the socket reported
 * mapped goes back over IPv4); on an IPV6_V6ONLY socket it stays an IPv6 address nothing routes.
 */
function sendDestination(s: SimSocket, dst: IpAddress): IpAddress {
  return s.family === 6 && !s.v6only ? unmapV4(dst) : dst;
}

/** `a` as the receiving socket reports it (SimSocket.reported), or as is without a socket. */
function reportedBy(s: SimSocket | undefined, a: SockAddr): SockAddr {
  return s ? s.reported(a) : a;
}

/**
 * 'reset': the handshake completed on the client, but a RST for the final ACK came back before
 * the caller ran (tcp-reset.ts): connect() fails with ECONNRESET.
 */
type ConnectOutcome = 'established' | 'refused' | 'timeout' | 'unreachable' | 'reset';

export interface ConnectResult {
  readonly outcome: ConnectOutcome;
  readonly client: SimSocket;
  /** The listening socket that accepted the connection. */
  readonly listener: SimSocket | undefined;
  /** The accepted (server-side) socket. */
  readonly server: SimSocket | undefined;
  /** Why it did not get established, in words. */
  readonly reason: string;
  readonly trace: readonly TraceEvent[];
}

export interface UdpResult {
  readonly outcome: 'delivered' | 'no-socket' | 'dropped' | 'unreachable';
  readonly socket: SimSocket | undefined;
  /** Source and destination as the receiver sees them. */
  readonly from: SockAddr | undefined;
  readonly to: SockAddr | undefined;
  readonly reason: string;
  readonly trace: readonly TraceEvent[];
}

interface RawResult {
  readonly delivery: Delivery['kind'];
  readonly socket: SimSocket | undefined;
  readonly reason: string;
  readonly trace: readonly TraceEvent[];
}

interface RouteSpec {
  readonly dst: string; // 'default' or CIDR / address
  readonly family?: Family; // needed for 'default'
  readonly via?: string;
  readonly dev?: string;
  readonly table?: string | number;
  readonly type?: RouteType;
  readonly src?: string;
  readonly metric?: number;
}

interface RuleSpecIp {
  readonly family: Family;
  /** Absent: the kernel's automatic priority (PolicyRules.defaultPriority), as `ip rule add` without one. */
  readonly priority?: number;
  readonly fwmark?: number;
  readonly mask?: number;
  readonly from?: string;
  readonly to?: string;
  readonly iif?: string;
  readonly oif?: string;
  readonly table?: string | number;
  readonly action?: 'lookup' | 'blackhole' | 'unreachable' | 'prohibit';
}

export class SimKernel {
  readonly version: KernelVersion;
  private readonly namespaces = new Map<string, Netns>();
  private readonly datapath: Datapath;
  private traceOn: boolean;
  private currentTrace: Trace;
  private nextSocketId = 1;
  private nextPacketId = 1;
  private readonly makeNetfilter: (family: Family, ipsets: IpSets) => NetfilterEngine;
  private readonly makeNftables: () => NfTables;

  constructor(opts: SimKernelOptions = {}) {
    this.version = parseKernelVersion(opts.kernelVersion ?? '6.1');
    this.traceOn = opts.trace ?? true;
    this.currentTrace = new Trace(this.traceOn);
    this.makeNetfilter = opts.netfilterFactory ?? ((family, ipsets) => new Netfilter(family, { ipsets }));
    this.makeNftables = opts.nftablesFactory ?? (() => new NfTables());
    const netns = (name: string): Netns => this.netns(name);
    const currentTrace = (): Trace => this.currentTrace;
    this.datapath = new Datapath({
      netns,
      get trace() {
        return currentTrace();
      },
    });
  }

  setTracing(on: boolean): void {
    this.traceOn = on;
  }

  // ------------------------------------------------------------ namespaces and devices

  addNetns(name: string): Netns {
    if (!/^[A-Za-z0-9_.:-]{1,64}$/.test(name))
      throw new SimConfigError(`invalid namespace name ${JSON.stringify(name)}: 1-64 characters of [A-Za-z0-9_.:-]`);
    if (this.namespaces.has(name)) throw new SimConfigError(`network namespace ${name} already exists`);
    const ipsets = new IpSets();
    const ns = new Netns(
      name,
      { 4: this.makeNetfilter(4, ipsets), 6: this.makeNetfilter(6, ipsets) },
      ipsets as IpSetRegistry,
      this.makeNftables(),
    );
    this.namespaces.set(name, ns);
    return ns;
  }

  netns(name: string): Netns {
    const ns = this.namespaces.get(name);
    if (!ns)
      throw new SimConfigError(
        `no network namespace ${JSON.stringify(name)} (have: ${[...this.namespaces.keys()].join(', ') || 'none'})`,
      );
    return ns;
  }

  hasNetns(name: string): boolean {
    return this.namespaces.has(name);
  }

  netnsNames(): string[] {
    return [...this.namespaces.keys()];
  }

  /** Destroy a namespace: its devices go, and so do the veth peers in other namespaces. */
  deleteNetns(name: string): void {
    const ns = this.netns(name);
    for (const link of ns.links.values()) {
      if (link.peer && link.peer.netns !== name) this.removeLink(this.netns(link.peer.netns), link.peer.name);
    }
    for (const s of ns.sockets.all()) s.state = 'closed';
    this.namespaces.delete(name);
  }

  addVeth(nsA: string, devA: string, nsB: string, devB: string): void {
    const a = this.netns(nsA).addLink(devA, 'veth');
    let b;
    try {
      b = this.netns(nsB).addLink(devB, 'veth');
    } catch (e) {
      this.netns(nsA).links.delete(devA);
      throw e;
    }
    a.peer = b;
    b.peer = a;
  }

  addBridge(ns: string, name: string): void {
    this.netns(ns).addLink(name, 'bridge');
  }

  setMaster(ns: string, dev: string, bridge: string): void {
    const n = this.netns(ns);
    const port = n.link(dev);
    const br = n.link(bridge);
    if (br.kind !== 'bridge') throw new SimConfigError(`${bridge} in ${ns} is not a bridge`);
    port.master = br;
    br.ports!.add(port);
  }

  removeLink(ns: Netns, dev: string): void {
    const l = ns.link(dev);
    if (l.master) l.master.ports!.delete(l);
    ns.routes.remove((r) => r.dev === dev);
    ns.links.delete(dev);
    if (l.peer && this.namespaces.get(l.peer.netns)?.links.get(l.peer.name) === l.peer) {
      const peerNs = this.netns(l.peer.netns);
      const p = l.peer;
      p.peer = undefined;
      l.peer = undefined;
      this.removeLink(peerNs, p.name);
    }
  }

  setLink(ns: string, dev: string, up: boolean): void {
    this.netns(ns).setUp(dev, up);
  }

  addAddress(ns: string, dev: string, cidr: string): void {
    this.netns(ns).addAddress(dev, cidr);
  }

  /** `ip netns exec NS sysctl -w net.ipv6.conf.<dev>.disable_ipv6=<0|1>`. */
  setIpv6Disabled(ns: string, dev: string, on: boolean): void {
    this.netns(ns).setIpv6Disabled(dev, on);
  }

  setForwarding(ns: string, family: Family, on: boolean): void {
    this.netns(ns).forwarding[family] = on;
  }

  addRoute(ns: string, spec: RouteSpec): void {
    const n = this.netns(ns);
    let dst;
    if (spec.dst === 'default') {
      if (!spec.family) throw new SimConfigError(`route 'default' in ${ns} needs a family (4 or 6)`);
      dst = parsePrefix(spec.family === 4 ? '0.0.0.0/0' : '::/0');
    } else dst = parsePrefix(spec.dst);
    const type = spec.type ?? 'unicast';
    const via = spec.via ? parseIp(spec.via) : undefined;
    if (via && via.family !== dst.addr.family)
      throw new SimConfigError(`route ${spec.dst} via ${spec.via}: address families differ`);
    if ((type === 'unicast' || type === 'local') && !spec.dev) {
      if (!via) throw new SimConfigError(`route ${spec.dst} in ${ns}: a ${type} route needs dev or via`);
    }
    let dev = spec.dev;
    if (dev !== undefined && n.link(dev).ipv6Disabled && dst.addr.family === 6) {
      throw new SimConfigError(`route ${spec.dst} dev ${dev} in ${ns}: IPv6 is disabled on nexthop device`);
    }
    if (dev === undefined && via) {
      // `ip route add X via G` resolves the device from the route to G.
      const d = fibLookup(n, { family: via.family, src: undefined, dst: via, mark: 0, iif: undefined, oif: undefined });
      if (d.kind !== 'unicast')
        throw new SimConfigError(
          `route ${spec.dst} via ${spec.via} in ${ns}: gateway is not reachable on a link (Nexthop has invalid gateway)`,
        );
      dev = d.dev;
    }
    const table =
      spec.table === undefined ? TABLE_MAIN : typeof spec.table === 'number' ? spec.table : parseTableName(spec.table);
    n.routes.add({
      family: dst.addr.family,
      table,
      type,
      dst,
      dev,
      via,
      src: spec.src ? parseIp(spec.src) : undefined,
      metric: spec.metric ?? 0,
      proto: 'static',
    });
  }

  addRule(ns: string, spec: RuleSpecIp): void {
    const n = this.netns(ns);
    const priority = spec.priority ?? n.rules.defaultPriority(spec.family);
    if (!Number.isInteger(priority) || priority < 0 || priority > 0xffffffff)
      throw new SimConfigError(`ip rule priority ${priority} out of range`);
    const table =
      spec.table === undefined ? TABLE_MAIN : typeof spec.table === 'number' ? spec.table : parseTableName(spec.table);
    const mask = spec.mask ?? 0xffffffff;
    n.rules.add({
      family: spec.family,
      priority,
      fwmark: spec.fwmark === undefined ? undefined : { value: spec.fwmark >>> 0, mask: mask >>> 0 },
      from: spec.from ? parsePrefix(spec.from) : undefined,
      to: spec.to ? parsePrefix(spec.to) : undefined,
      iif: spec.iif,
      oif: spec.oif,
      action: spec.action ?? 'lookup',
      table,
    });
  }

  /** iptables-restore / ip6tables-restore into a namespace. */
  iptablesRestore(ns: string, family: Family, text: string, opts: { noflush?: boolean; source?: string } = {}): void {
    this.netns(ns).netfilter[family].restore(text, opts);
  }

  /** `ipset restore` into a namespace (sets are shared by its IPv4 and IPv6 rules). */
  ipsetRestore(ns: string, text: string): void {
    this.ipsetsOf(ns).restore(text);
  }

  ipsetsOf(ns: string): IpSets {
    const sets = this.netns(ns).ipsets;
    if (!(sets instanceof IpSets)) throw new SimConfigError(`namespace ${ns} uses a custom ipset registry`);
    return sets;
  }

  iptablesSave(ns: string, family: Family): string {
    return this.netns(ns).netfilter[family].save();
  }

  // ------------------------------------------------------------ sockets

  socket(ns: string, proto: SockProto, family: Family, owner: Credentials, label = ''): SimSocket {
    const n = this.netns(ns);
    const s = new SimSocket(this.nextSocketId++, ns, family, proto, owner, label);
    n.sockets.add(s);
    return s;
  }

  setsockopt(s: SimSocket, opt: SockOpt, value: number | boolean): void {
    const on = value === true || (typeof value === 'number' && value !== 0);
    switch (opt) {
      case 'SO_MARK':
        if (!maySetMark(s.owner, this.version)) {
          throw new SimErrnoError(
            'EPERM',
            'setsockopt(SO_MARK)',
            `uid ${s.owner.uid} lacks CAP_NET_ADMIN${this.version[0] > 5 || (this.version[0] === 5 && this.version[1] >= 17) ? ' (or CAP_NET_RAW)' : ` (CAP_NET_RAW suffices only from Linux 5.17; this kernel is ${this.version.join('.')})`}`,
          );
        }
        s.mark = typeof value === 'number' ? value >>> 0 : 0;
        return;
      case 'IP_TRANSPARENT':
        if (on && !maySetTransparent(s.owner))
          throw new SimErrnoError(
            'EPERM',
            'setsockopt(IP_TRANSPARENT)',
            `uid ${s.owner.uid} lacks CAP_NET_ADMIN or CAP_NET_RAW`,
          );
        s.transparent = on;
        return;
      case 'SO_REUSEPORT':
        s.reusePort = on;
        return;
      case 'SO_REUSEADDR':
        s.reuseAddr = on;
        return;
      case 'IPV6_V6ONLY':
        if (s.family !== 6) throw new SimErrnoError('EINVAL', 'setsockopt(IPV6_V6ONLY)', 'not an IPv6 socket');
        s.v6only = on;
        return;
    }
  }

  bind(s: SimSocket, address: string | IpAddress, port: number): void {
    const n = this.netns(s.netns);
    const addr = typeof address === 'string' ? parseIp(address) : address;
    if (s.state !== 'new') throw new SimErrnoError('EINVAL', 'bind', `${s.describe()} is already bound`);
    if (addr.family !== s.family && !(s.family === 6 && addr.family === 4)) {
      throw new SimErrnoError('EAFNOSUPPORT', 'bind', `IPv${addr.family} address on an IPv${s.family} socket`);
    }
    if (!Number.isInteger(port) || port < 0 || port > 65535)
      throw new SimErrnoError('EINVAL', 'bind', `port ${port} out of range`);
    if (!isUnspecified(addr) && !isLocalAddress(n, addr) && !s.transparent) {
      throw new SimErrnoError(
        'EADDRNOTAVAIL',
        'bind',
        `${formatIp(addr)} is not an address of ${s.netns} (IP_TRANSPARENT would allow it)`,
      );
    }
    const p = port === 0 ? n.sockets.ephemeralPort(s.proto, addr) : port;
    n.sockets.checkBind(s, addr, p);
    s.local = { addr, port: p };
    s.state = 'bound';
    n.sockets.indexBinding(s);
  }

  listen(s: SimSocket): void {
    if (s.proto !== 'tcp') throw new SimErrnoError('EOPNOTSUPP', 'listen', 'not a TCP socket');
    if (s.state === 'new') this.bind(s, s.family === 4 ? '0.0.0.0' : '::', 0);
    if (s.state !== 'bound') throw new SimErrnoError('EINVAL', 'listen', `${s.describe()} is ${s.state}`);
    // Re-check the reuseport group at listen time, as inet_csk_get_port does.
    this.netns(s.netns).sockets.checkBind(s, s.local!.addr, s.local!.port);
    s.state = 'listening';
  }

  /**
   * close(2). An established TCP socket sends a FIN through the datapath first, so conntrack
   * along the path sees the connection end (and a later SYN on the same tuple starts afresh).
   */
  close(s: SimSocket): void {
    this.sendControl(s, { ...NO_FLAGS, fin: true, ack: true });
    s.state = 'closed';
    this.namespaces.get(s.netns)?.sockets.unregister(s);
  }

  /**
   * SOCK_DESTROY (`ss -K`, tcp_abort): an established TCP socket sends a RST through the
   * datapath (so conntrack along the path sees the connection end) and is closed; a peer socket
   * the RST reaches is reset. Returns whether the RST reached an established peer socket.
   * The owner's next send fails (ENOTCONN here; ECONNABORTED on Linux).
   */
  destroy(s: SimSocket): { peerReset: boolean } {
    const d = this.sendControl(s, { ...NO_FLAGS, rst: true });
    let peerReset = false;
    if (d?.kind === 'delivered' && d.socket.state === 'established' && d.socket !== s) {
      d.socket.state = 'closed';
      this.namespaces.get(d.socket.netns)?.sockets.unregister(d.socket);
      peerReset = true;
    }
    s.state = 'closed';
    this.namespaces.get(s.netns)?.sockets.unregister(s);
    return { peerReset };
  }

  /**
   * The segment an established TCP socket sends as it ends (FIN on close, RST on destroy), through
   * the datapath untraced, so conntrack along the path sees the connection end. Undefined when the
   * socket has no established connection (nothing is sent).
   */
  private sendControl(s: SimSocket, flags: TcpFlags): Delivery | undefined {
    const n = this.namespaces.get(s.netns);
    if (!n || s.proto !== 'tcp' || s.state !== 'established' || !s.local || !s.remote) return undefined;
    const seg = this.segmentOf(s, s.local, s.remote, flags);
    const saved = this.currentTrace;
    this.currentTrace = new Trace(false);
    try {
      return this.datapath.output(n, seg, s);
    } finally {
      this.currentTrace = saved;
    }
  }

  /** Drop a socket without a FIN (a connection attempt that never completed). */
  private abort(s: SimSocket): void {
    s.state = 'closed';
    this.namespaces.get(s.netns)?.sockets.unregister(s);
  }

  /** getsockopt(SO_ORIGINAL_DST): the original destination from conntrack (default zone only). */
  originalDst(s: SimSocket): SockAddr {
    const n = this.netns(s.netns);
    if (!s.local || !s.remote)
      throw new SimErrnoError('ENOTCONN', 'getsockopt(SO_ORIGINAL_DST)', `${s.describe()} is not connected`);
    const t: Tuple = {
      proto: s.proto,
      src: s.local.addr,
      sport: s.local.port,
      dst: s.remote.addr,
      dport: s.remote.port,
    };
    const hit = n.conntrack.find(0, t);
    if (!hit)
      throw new SimErrnoError(
        'ENOENT',
        'getsockopt(SO_ORIGINAL_DST)',
        `no conntrack entry in zone 0 for ${formatSockAddr(s.local)} <-> ${formatSockAddr(s.remote)}`,
      );
    return { addr: hit.entry.orig.dst, port: hit.entry.orig.dport };
  }

  // ------------------------------------------------------------ TCP

  /**
   * connect(2) on a TCP socket: the three-way handshake, every segment through the datapath.
   * SYN lost → timeout; RST back (no listener) or REJECT → refused; SYN-ACK that does not find
   * the client's socket → timeout; otherwise established, with the accepting listener.
   */
  connect(s: SimSocket, dstText: string | IpAddress, dport: number): ConnectResult {
    const trace = this.beginTrace();
    const fail = (outcome: ConnectOutcome, reason: string): ConnectResult => {
      this.abort(s);
      return { outcome, client: s, listener: undefined, server: undefined, reason, trace: trace.events };
    };
    if (s.proto !== 'tcp') throw new SimErrnoError('EOPNOTSUPP', 'connect', 'use sendUdp for UDP sockets');
    if (s.state !== 'new' && s.state !== 'bound')
      throw new SimErrnoError('EISCONN', 'connect', `${s.describe()} is ${s.state}`);
    const n = this.netns(s.netns);
    const dst = sendDestination(s, typeof dstText === 'string' ? parseIp(dstText) : dstText);
    const fam = dst.family;
    const route = fibLookup(n, { family: fam, src: undefined, dst, mark: s.mark, iif: undefined, oif: undefined });
    if (route.kind !== 'local' && route.kind !== 'unicast')
      return fail('unreachable', `connect: ENETUNREACH: no route to ${formatIp(dst)} (${route.kind})`);
    let src = s.local && !isUnspecified(s.local.addr) ? s.local.addr : selectSource(n, route, dst);
    if (!src) return fail('unreachable', `connect: EADDRNOTAVAIL: no IPv${fam} source address in ${s.netns}`);
    if (src.family !== fam) src = selectSource(n, route, dst) ?? src;
    // ip_route_output_key_hash_rcu: a source that is not a local address needs FLOWI_FLAG_ANYSRC
    // (IP_TRANSPARENT/IP_FREEBIND), else the route lookup fails with ENETUNREACH — e.g. a local
    // route in a policy table for a foreign destination picks the destination as source.
    if (!s.transparent && !isLocalAddress(n, src)) {
      return fail(
        'unreachable',
        `connect: ENETUNREACH: source ${formatIp(src)} chosen for ${formatIp(dst)} is not an address of ${s.netns}`,
      );
    }
    const sport =
      s.local?.port ||
      n.sockets.ephemeralPort('tcp', src, (p) => n.conntrack.liveInUse(0, { proto: 'tcp', src, sport: p, dst, dport }));
    const wasBound = s.local !== undefined;
    s.local = { addr: src, port: sport };
    s.remote = { addr: dst, port: dport };
    if (!wasBound) n.sockets.indexBinding(s);
    s.state = 'established'; // SYN-SENT, registered so the SYN-ACK can find it
    n.sockets.registerEstablished(s);

    const syn = this.packet(fam, 'tcp', src, sport, dst, dport, { ...NO_FLAGS, syn: true }, s.mark);
    const d1 = this.datapath.output(n, syn, s);
    if (d1.kind === 'rejected') return fail('refused', `SYN rejected in ${d1.ns.name} (${d1.with})`);
    if (d1.kind === 'dropped') return fail('timeout', `SYN dropped in ${d1.ns.name}: ${d1.reason}`);
    if (d1.kind === 'unroutable')
      return d1.rerouted
        ? fail('timeout', `SYN dropped in ${d1.ns.name}: ${d1.reason} (a SYN's transmit error does not fail connect)`)
        : fail('unreachable', `SYN: ${d1.reason}`);
    const rx = d1.kind === 'delivered' ? d1 : undefined;
    if (!rx || rx.socket.state !== 'listening') {
      // No listener: the receiver answers with RST, which must make it back to be seen as refused.
      const at = d1.kind === 'no-socket' ? d1 : undefined;
      if (!at && rx) return fail('timeout', `SYN reached ${rx.socket.describe()}, which is not listening`);
      const d = this.sendReset(at!.ns, at!.packet, undefined);
      const p = at!.packet;
      if (d.kind === 'delivered' && d.socket === s)
        return fail('refused', `no listener on ${formatIp(p.dst)}:${p.dport} in ${at!.ns.name} (RST)`);
      return fail(
        'timeout',
        `no listener on ${formatIp(p.dst)}:${p.dport} in ${at!.ns.name}, and its RST did not reach the client (${d.kind}${'reason' in d ? `: ${d.reason}` : ''})`,
      );
    }
    const listener = rx.socket;
    const serverNs = rx.ns;
    const seen = rx.packet;
    const child = new SimSocket(
      this.nextSocketId++,
      serverNs.name,
      listener.family,
      'tcp',
      listener.owner,
      listener.label,
    );
    child.local = { addr: seen.dst, port: seen.dport };
    child.remote = { addr: seen.src, port: seen.sport };
    child.mark = listener.mark;
    child.transparent = listener.transparent;
    child.acceptedFrom = listener;
    child.state = 'established';
    serverNs.sockets.add(child);
    serverNs.sockets.registerEstablished(child);

    // inet_csk_route_req: the SYN-ACK leaves from the address the SYN was sent to. In IPv4 a
    // source that is not a local address (__ip_dev_find) needs FLOWI_FLAG_ANYSRC — a transparent
    // listener — or the route lookup fails and no SYN-ACK is sent: e.g. a SYN to a foreign address
    // delivered here by a local route in a policy table. IPv6 (inet6_csk_route_req) does not check.
    if (fam === 4 && !listener.transparent && !isLocalAddress(serverNs, seen.dst)) {
      this.abort(child);
      return fail(
        'timeout',
        `SYN-ACK from ${child.describe()} not sent: source ${formatIp(seen.dst)} is not a local address of ${serverNs.name} and ${listener.describe()} is not IP_TRANSPARENT (route lookup: ENETUNREACH)`,
      );
    }
    const synack = this.packet(
      fam,
      'tcp',
      seen.dst,
      seen.dport,
      seen.src,
      seen.sport,
      { ...NO_FLAGS, syn: true, ack: true },
      child.mark,
    );
    const d2 = this.datapath.output(serverNs, synack, child);
    if (d2.kind !== 'delivered' || d2.socket !== s) {
      this.abort(child);
      const where =
        d2.kind === 'delivered'
          ? `reached ${d2.socket.describe()} instead of the client`
          : d2.kind === 'no-socket'
            ? `found no socket in ${d2.ns.name}`
            : `${d2.kind} in ${d2.ns.name}${'reason' in d2 ? `: ${d2.reason}` : ''}`;
      return fail('timeout', `SYN-ACK from ${child.describe()} ${where}`);
    }
    const ack = this.packet(fam, 'tcp', src, sport, dst, dport, { ...NO_FLAGS, ack: true }, s.mark);
    const d3 = this.datapath.output(n, ack, s);
    if (d3.kind !== 'delivered' || d3.socket !== child) {
      this.abort(child);
      // An ACK that finds no connection where it lands (nothing, or only a listener) is answered
      // with a RST; if that gets back, the client's fresh connection is reset (tcp-reset.ts).
      const stray =
        d3.kind === 'no-socket'
          ? { at: d3, answerer: d3.ns.sockets.findListener('tcp', d3.packet.dst, d3.packet.dport, flowHash(d3.packet)) }
          : d3.kind === 'delivered' && d3.socket.state === 'listening'
            ? { at: d3, answerer: d3.socket }
            : undefined;
      if (stray) {
        const d = this.sendReset(stray.at.ns, stray.at.packet, stray.answerer);
        const by = stray.answerer ? stray.answerer.describe() : `${stray.at.ns.name} (no socket)`;
        if (d.kind === 'delivered' && d.socket === s)
          return fail(
            'reset',
            `final ACK found no connection in ${stray.at.ns.name}; the RST from ${by} reset the client (ECONNRESET)`,
          );
        return fail(
          'timeout',
          `final ACK found no connection in ${stray.at.ns.name}, and the RST from ${by} did not reach the client (${d.kind} in ${d.ns.name}${'reason' in d ? `: ${d.reason}` : ''})`,
        );
      }
      return fail('timeout', `final ACK did not reach the accepted socket (${d3.kind} in ${d3.ns.name})`);
    }
    listener.acceptQueue.push(child);
    return {
      outcome: 'established',
      client: s,
      listener,
      server: child,
      reason: `accepted by ${listener.describe()}`,
      trace: trace.events,
    };
  }

  /**
   * Send one data segment on an established connection; `delivered` when the peer socket got it.
   * A segment that lands where no established socket owns its 4-tuple (no socket, or only a
   * listener — e.g. one REDIRECTed mid-stream to a proxy port) is answered with a RST
   * (tcp-reset.ts); if that RST reaches this socket, the connection is reset (`reset`: the
   * socket is closed, as after ECONNRESET).
   */
  sendTcp(
    s: SimSocket,
    payload: string,
  ): { delivered: boolean; reset: boolean; reason: string; trace: readonly TraceEvent[] } {
    const trace = this.beginTrace();
    if (s.state !== 'established' || !s.local || !s.remote)
      throw new SimErrnoError('ENOTCONN', 'send', `${s.describe()} is not connected`);
    const pkt = this.segmentOf(s, s.local, s.remote, { ...NO_FLAGS, ack: true });
    pkt.payload = payload;
    const d = this.datapath.output(this.netns(s.netns), pkt, s);
    if (d.kind === 'delivered' && d.socket.state === 'established') {
      d.socket.inbox.push({
        from: { addr: d.packet.src, port: d.packet.sport },
        to: { addr: d.packet.dst, port: d.packet.dport },
        payload,
      });
      return { delivered: true, reset: false, reason: `reached ${d.socket.describe()}`, trace: trace.events };
    }
    const stray =
      d.kind === 'no-socket'
        ? { at: d, answerer: d.ns.sockets.findListener('tcp', d.packet.dst, d.packet.dport, flowHash(d.packet)) }
        : d.kind === 'delivered' && d.socket.state === 'listening'
          ? { at: d, answerer: d.socket }
          : undefined;
    if (!stray) {
      const why = d.kind === 'delivered' ? `reached ${d.socket.describe()}` : 'reason' in d ? d.reason : d.kind;
      return { delivered: false, reset: false, reason: `segment lost: ${why}`, trace: trace.events };
    }
    const by = stray.answerer ? stray.answerer.describe() : `${stray.at.ns.name} (no socket)`;
    const r = this.sendReset(stray.at.ns, stray.at.packet, stray.answerer);
    if (r.kind === 'delivered' && r.socket === s) {
      s.state = 'closed';
      this.namespaces.get(s.netns)?.sockets.unregister(s);
      return {
        delivered: false,
        reset: true,
        reason: `segment found no connection in ${stray.at.ns.name}; the RST from ${by} reset the sender (ECONNRESET)`,
        trace: trace.events,
      };
    }
    return {
      delivered: false,
      reset: false,
      reason: `segment found no connection in ${stray.at.ns.name}; the RST from ${by} did not reach the sender (${r.kind} in ${r.ns.name})`,
      trace: trace.events,
    };
  }

  // ------------------------------------------------------------ UDP

  sendUdp(s: SimSocket, dstText: string | IpAddress, dport: number, payload: string): UdpResult {
    const trace = this.beginTrace();
    if (s.proto !== 'udp') throw new SimErrnoError('EOPNOTSUPP', 'sendto', 'not a UDP socket');
    const n = this.netns(s.netns);
    const dst = sendDestination(s, typeof dstText === 'string' ? parseIp(dstText) : dstText);
    const route = fibLookup(n, {
      family: dst.family,
      src: undefined,
      dst,
      mark: s.mark,
      iif: undefined,
      oif: undefined,
    });
    const res = (outcome: UdpResult['outcome'], reason: string, sock?: SimSocket, p?: Packet): UdpResult => ({
      outcome,
      reason,
      socket: sock,
      from: p ? reportedBy(sock, { addr: p.src, port: p.sport }) : undefined,
      to: p ? reportedBy(sock, { addr: p.dst, port: p.dport }) : undefined,
      trace: trace.events,
    });
    if (route.kind !== 'local' && route.kind !== 'unicast') return res('unreachable', `no route to ${formatIp(dst)}`);
    if (!s.local) this.bind(s, s.family === 4 ? '0.0.0.0' : '::', 0);
    const src = !isUnspecified(s.local!.addr) ? s.local!.addr : selectSource(n, route, dst);
    if (!src) return res('unreachable', 'no source address');
    // (UDP does one route lookup with no source, so a foreign source picked by a local route is
    // sent as is — unlike TCP connect, whose second lookup refuses it.)
    const pkt = this.packet(dst.family, 'udp', src, s.local!.port, dst, dport, NO_FLAGS, s.mark);
    pkt.payload = payload;
    const d = this.datapath.output(n, pkt, s);
    if (d.kind === 'delivered') {
      d.socket.inbox.push({
        from: { addr: d.packet.src, port: d.packet.sport },
        to: { addr: d.packet.dst, port: d.packet.dport },
        payload,
      });
      return res('delivered', `received by ${d.socket.describe()}`, d.socket, d.packet);
    }
    if (d.kind === 'no-socket')
      return res(
        'no-socket',
        `no UDP socket on ${formatIp(d.packet.dst)}:${d.packet.dport} in ${d.ns.name}`,
        undefined,
        d.packet,
      );
    return res(d.kind === 'unroutable' ? 'unreachable' : 'dropped', 'reason' in d ? d.reason : d.kind);
  }

  // ------------------------------------------------------------ AF_PACKET

  /**
   * Send a crafted packet with an AF_PACKET socket out of `dev`: it skips the sender's routing
   * and netfilter entirely (needs CAP_NET_RAW). Reports where the packet ended up.
   */
  sendRaw(
    ns: string,
    owner: Credentials,
    dev: string,
    spec: {
      proto: L4Proto;
      src: string;
      sport: number;
      dst: string;
      dport: number;
      flags?: Partial<TcpFlags>;
      nextHop?: string;
    },
  ): RawResult {
    const trace = this.beginTrace();
    if (!mayOpenRaw(owner)) throw new SimErrnoError('EPERM', 'socket(AF_PACKET)', `uid ${owner.uid} lacks CAP_NET_RAW`);
    const n = this.netns(ns);
    const src = parseIp(spec.src);
    const dst = parseIp(spec.dst);
    if (src.family !== dst.family) throw new SimConfigError('sendRaw: source and destination families differ');
    const pkt = this.packet(
      dst.family,
      spec.proto,
      src,
      spec.sport,
      dst,
      spec.dport,
      { ...NO_FLAGS, ...spec.flags },
      0,
    );
    const d = this.datapath.injectRaw(n, n.link(dev), pkt, spec.nextHop ? parseIp(spec.nextHop) : dst);
    return {
      delivery: d.kind,
      socket: d.kind === 'delivered' ? d.socket : undefined,
      reason: d.kind === 'delivered' ? `reached ${d.socket.describe()}` : 'reason' in d ? d.reason : d.kind,
      trace: trace.events,
    };
  }

  // ------------------------------------------------------------ helpers

  /** Send the RST answering `segment` (as it arrived in `ns`) from a kernel control socket. */
  private sendReset(ns: Netns, segment: Packet, answerer: SimSocket | undefined): Delivery {
    const r = resetFor(segment, answerer);
    // ip_send_unicast_reply: an IPv4 RST from a non-local address needs a transparent answerer
    // (IP_REPLY_ARG_NOSRCCHECK), else its route lookup fails and no RST is sent (tcp-reset.ts).
    if (segment.family === 4 && !answerer?.transparent && !isLocalAddress(ns, r.src)) {
      return {
        kind: 'unroutable',
        ns,
        reason: `RST not sent: its source ${formatIp(r.src)} is not a local address of ${ns.name} (route lookup: ENETUNREACH)`,
      };
    }
    return this.datapath.output(
      ns,
      this.packet(segment.family, 'tcp', r.src, r.sport, r.dst, r.dport, r.flags, r.mark),
      undefined,
      r.sender,
    );
  }

  private beginTrace(): Trace {
    this.currentTrace = new Trace(this.traceOn);
    return this.currentTrace;
  }

  /** A TCP segment of connected socket `s` (its local and remote ends, its mark). */
  private segmentOf(s: SimSocket, local: SockAddr, remote: SockAddr, flags: TcpFlags): Packet {
    return this.packet(local.addr.family, 'tcp', local.addr, local.port, remote.addr, remote.port, flags, s.mark);
  }

  private packet(
    family: Family,
    proto: L4Proto,
    src: IpAddress,
    sport: number,
    dst: IpAddress,
    dport: number,
    flags: TcpFlags,
    mark: number,
  ): Packet {
    return { id: this.nextPacketId++, family, proto, src, dst, sport, dport, flags: { ...flags }, mark: mark >>> 0 };
  }
}
