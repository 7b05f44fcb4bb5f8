/**
 * The packet path through the simulated kernel, hook by hook, in the kernel's order
 * (the kernel's hook priorities, include/uapi/linux/netfilter_ipv4.h; docs/design.md, 'The simulated kernel'):
 *
 *   received:  raw PRE → conntrack → mangle PRE (TPROXY) → nat PRE → route →
 *              local:   mangle IN → filter IN → security IN → nat IN → confirm → socket
 *              forward: mangle FWD → filter FWD → security FWD → mangle POST → nat POST → confirm → xmit
 *   local out: route → raw OUT → conntrack → mangle OUT (re-route on change) → nat OUT →
 *              filter OUT → security OUT → mangle POST → nat POST → confirm → xmit
 *
 * Conntrack runs only in a namespace and family where a loaded rule needs it (the kernel's
 * nf_ct_netns_get; Netfilter.needsConntrack): elsewhere packets carry no entry and the nat tables
 * never run, so a connection open before such a rule arrives is picked up mid-stream afterwards.
 * NAT tables are consulted only for a connection's first packet (per manip type); every packet
 * is then rewritten from the conntrack entry. Crossing into another namespace over a veth
 * scrubs skb->mark and the conntrack reference (skb_scrub_packet with xnet); looping through
 * `lo` keeps both, so a looped packet is not re-tracked and nat PREROUTING is not consulted.
 *
 * nftables base chains (ns.nftables) run between the iptables tables by priority: an nft chain
 * runs after every iptables table (and conntrack, -200) of lower priority and before those of
 * higher or equal priority — on a tie the hook registered last runs first (nf_hook_entries_grow),
 * and the model takes nft tables as made after the iptables tables, as the lab runner loads them
 * (raw -300, mangle -150, filter 0, security 50; nat is the NAT core at
 * -100 for PREROUTING/OUTPUT and 100 for INPUT/POSTROUTING). nat-type nft chains are not placed by
 * priority: the NAT core runs them with the iptables nat table, in priority order (nft first on a
 * tie), until one binds (nf_nat_inet_fn). A namespace without nft tables pays one undefined check per hook.
 */
import {
  formatIp,
  ipEquals,
  isLoopback,
  loopbackAddress,
  type Family,
  type IpAddress,
} from '../../impl/api/ip/address.js';
import { fibLookup, masqueradeSource, type RouteDecision } from './fib.js';
import { PacketCt, invert, type ConnEntry, type Tuple } from './conntrack.js';
import type { CtTemplate } from './ct-template.js';
import { HookContext } from './hook-context.js';
import { flowHash } from './flow-hash.js';
import { formatRoute } from './route.js';
import { keptLoopRoute, loopbackMartianOnLo } from './looped-route.js';
import { formatSockAddr, type SimSocket } from './socket.js';
import { Trace, verdictText } from './trace.js';
import type { Netns } from './netns.js';
import type { Packet } from './packet.js';
import type {
  Hook,
  KernelSocketOwner,
  NatAction,
  SocketOwnerView,
  TableName,
  TableVerdict,
} from './netfilter/types.js';
import type { Link } from './link.js';
import type { HookChains, NftBaseRef } from './nftables/nftables.js';

/** What became of a packet. */
export type Delivery =
  | { readonly kind: 'delivered'; readonly ns: Netns; readonly socket: SimSocket; readonly packet: Packet }
  | { readonly kind: 'no-socket'; readonly ns: Netns; readonly packet: Packet }
  | { readonly kind: 'dropped'; readonly ns: Netns; readonly reason: string }
  | { readonly kind: 'rejected'; readonly ns: Netns; readonly with: string }
  /**
   * `rerouted`: the failure came from the re-route a hook triggered (ip_route_me_harder after
   * mangle/nat OUTPUT), not from the sender's own route lookup. The kernel then drops the packet
   * with that error (NF_DROP_ERR): sendmsg() reports it, but TCP ignores a SYN's transmit error
   * and retransmits, so connect() times out instead of failing.
   */
  | { readonly kind: 'unroutable'; readonly ns: Netns; readonly reason: string; readonly rerouted?: boolean };

/** Per-packet kernel state that travels with the packet (the skb beyond its headers). */
export interface Skb {
  readonly pkt: Packet;
  ct: PacketCt | undefined;
  /** CT --notrack was applied: the packet has the UNTRACKED pseudo-entry, no NAT. */
  untracked: boolean;
  /** CT --zone attached a template in raw (ct-template.ts); conntrack consumes it. */
  template: CtTemplate | undefined;
  zone: number;
  /** Sending socket (locally generated packets only). */
  sock: SimSocket | undefined;
  /** Socket assigned by TPROXY in PREROUTING. */
  assigned: SimSocket | undefined;
  /** Link-layer destination chosen by the sender's routing (for bridge forwarding). */
  nextHop: IpAddress;
  /** Hop budget, so a routing loop ends in a drop instead of a hang. */
  hops: number;
  /** skb_dst of a locally generated packet: the output route it was sent by (looped-route.ts). */
  dst: RouteDecision | undefined;
}

interface DatapathHost {
  netns(name: string): Netns;
  trace: Trace;
}

function describePacket(p: Packet): string {
  const s = p.family === 6 ? `[${formatIp(p.src)}]:${p.sport}` : `${formatIp(p.src)}:${p.sport}`;
  const d = p.family === 6 ? `[${formatIp(p.dst)}]:${p.dport}` : `${formatIp(p.dst)}:${p.dport}`;
  const flags =
    p.proto === 'tcp'
      ? ` [${[p.flags.syn && 'SYN', p.flags.ack && 'ACK', p.flags.fin && 'FIN', p.flags.rst && 'RST'].filter(Boolean).join(',')}]`
      : '';
  return `${p.proto} ${s} -> ${d}${flags} mark 0x${p.mark.toString(16)}`;
}

function describeDecision(d: RouteDecision): string {
  if (d.kind === 'local' || d.kind === 'unicast') {
    return `${d.kind} via rule ${d.rule.priority} (table ${d.rule.table}): ${formatRoute(d.route)}`;
  }
  return `${d.kind}${d.rule ? ` (rule ${d.rule.priority})` : ' (no route)'}`;
}

export class Datapath {
  constructor(private readonly host: DatapathHost) {}

  private get trace(): Trace {
    return this.host.trace;
  }

  // ---------------------------------------------------------------- local output

  /**
   * A socket (or a raw sender, when `sock` is undefined) sends `pkt` from namespace `ns`.
   * `kernelSender`: the packet leaves from a kernel socket with no file (xt_owner sees a socket
   * but no owner), e.g. the TCP control socket of IPv4 resets (tcp-reset.ts).
   */
  output(ns: Netns, pkt: Packet, sock: SimSocket | undefined, kernelSender?: KernelSocketOwner): Delivery {
    if (this.trace.enabled)
      this.trace.add({
        kind: 'packet',
        ns: ns.name,
        packet: describePacket(pkt),
        note: `send${sock ? ` from ${sock.describe()}` : ''}`,
      });
    let route = this.route(ns, pkt, undefined);
    if (route.kind !== 'local' && route.kind !== 'unicast') {
      return { kind: 'unroutable', ns, reason: `no route to ${formatIp(pkt.dst)} (${route.kind})` };
    }
    const martian = this.loopbackSourceOut(ns, pkt, route);
    if (martian) return { kind: 'unroutable', ns, reason: martian };
    const skb: Skb = {
      pkt,
      ct: undefined,
      untracked: false,
      template: undefined,
      zone: 0,
      sock,
      assigned: undefined,
      nextHop: route.nextHop,
      hops: 0,
      dst: undefined,
    };
    const owner: SocketOwnerView | undefined = sock ? { uid: sock.owner.uid, gid: sock.owner.gid } : kernelSender;
    // Every LOCAL_OUT table runs in one nf_hook call (__ip_local_out) whose state->out is the
    // device of the route taken before the hook: a re-route by mangle or nat OUTPUT changes where
    // the packet goes (POSTROUTING sees the new device), not what `-o` matches in later OUTPUT tables.
    const hookOutDev = route.dev;
    const nft = ns.nftables.chainsAt(pkt.family, 'OUTPUT');
    // Only a namespace with nft chains at OUTPUT allocates these (the iptables-only hot path does not).
    const nftOut =
      nft &&
      ((lo: number, hi: number, invalid: boolean): Delivery | undefined =>
        // nft chains of priority (lo, hi]; each route-type chain re-routes on a change (nf_route_table_hook)
        this.nftRange(ns, skb, nft, 'OUTPUT', lo, hi, undefined, hookOutDev, owner, invalid, (b) => {
          if (pkt.mark === b.mark && ipEquals(pkt.dst, b.dst) && ipEquals(pkt.src, b.src)) return undefined;
          const r = this.reroute(ns, skb, 'an nft route chain at OUTPUT');
          if (r.kind !== 'local' && r.kind !== 'unicast') return r;
          route = r;
          return undefined;
        }));

    let d = nftOut?.(-Infinity, -300, false);
    if (d) return d;
    // raw OUTPUT runs before conntrack: it may pick a zone or opt out of tracking.
    let v = this.runTable(ns, skb, 'raw', 'OUTPUT', undefined, hookOutDev, owner);
    if (v.kind !== 'accept') return this.terminal(ns, v, 'raw OUTPUT');
    d = nftOut?.(-300, -200, false);
    if (d) return d;
    const invalid = this.track(ns, skb);
    d = nftOut?.(-200, -150, invalid);
    if (d) return d;

    const before = { mark: pkt.mark, dst: pkt.dst, src: pkt.src };
    v = this.runTable(ns, skb, 'mangle', 'OUTPUT', undefined, hookOutDev, owner, invalid);
    if (v.kind !== 'accept') return this.terminal(ns, v, 'mangle OUTPUT');
    if (pkt.mark !== before.mark || !ipEquals(pkt.dst, before.dst) || !ipEquals(pkt.src, before.src)) {
      // ip_route_me_harder: a changed mark or address in mangle OUTPUT re-routes the packet.
      const r = this.reroute(ns, skb, 'mangle OUTPUT');
      if (r.kind !== 'local' && r.kind !== 'unicast') return r;
      route = r;
    }
    d = nftOut?.(-150, -100, invalid);
    if (d) return d;

    const dstBefore = pkt.dst;
    const natV = this.natHook(ns, skb, 'OUTPUT', undefined, hookOutDev, owner, invalid);
    if (natV) return natV;
    if (!ipEquals(pkt.dst, dstBefore)) {
      route = this.route(ns, pkt, undefined, 'destination NAT in OUTPUT: re-route');
      if (route.kind !== 'local' && route.kind !== 'unicast')
        return { kind: 'unroutable', ns, reason: `re-route after nat OUTPUT: ${route.kind}`, rerouted: true };
      const m = this.loopbackSourceOut(ns, pkt, route);
      if (m) return { kind: 'unroutable', ns, reason: `re-route after nat OUTPUT: ${m}`, rerouted: true };
      skb.nextHop = route.nextHop;
    }

    d = nftOut?.(-100, 0, invalid);
    if (d) return d;
    v = this.runTable(ns, skb, 'filter', 'OUTPUT', undefined, hookOutDev, owner, invalid);
    if (v.kind !== 'accept') return this.terminal(ns, v, 'filter OUTPUT');
    d = nftOut?.(0, 50, invalid);
    if (d) return d;
    v = this.runTable(ns, skb, 'security', 'OUTPUT', undefined, hookOutDev, owner, invalid);
    if (v.kind !== 'accept') return this.terminal(ns, v, 'security OUTPUT');
    d = nftOut?.(50, Infinity, invalid);
    if (d) return d;
    skb.dst = route;
    return this.postrouting(ns, skb, route.dev, owner, invalid);
  }

  /**
   * ip_route_me_harder after a hook changed a locally generated packet: its new route, or the
   * failure (the kernel drops the packet with the error; see Delivery `rerouted`).
   */
  private reroute(ns: Netns, skb: Skb, what: string): Extract<RouteDecision, { kind: 'local' | 'unicast' }> | Delivery {
    const pkt = skb.pkt;
    const route = this.route(ns, pkt, undefined, `${what} changed the packet: re-route`);
    if (route.kind !== 'local' && route.kind !== 'unicast')
      return { kind: 'unroutable', ns, reason: `re-route after ${what}: ${route.kind}`, rerouted: true };
    const m = this.loopbackSourceOut(ns, pkt, route);
    if (m) return { kind: 'unroutable', ns, reason: `re-route after ${what}: ${m}`, rerouted: true };
    skb.nextHop = route.nextHop;
    return route;
  }

  // ---------------------------------------------------------------- reception

  /** A packet arrives on device `dev` of namespace `ns`. */
  receive(ns: Netns, dev: Link, skb: Skb): Delivery {
    if (!dev.up) return this.drop(ns, `device ${dev.name} is down`);
    if (dev.master) return this.bridgeInput(ns, dev, skb);
    const pkt = skb.pkt;
    if (++skb.hops > 64) return this.drop(ns, 'hop limit exceeded (routing loop)');
    // Only a packet looped over lo still holds the route it was sent by; it is consumed here.
    const sentBy = dev.kind === 'loopback' ? skb.dst : undefined;
    skb.dst = undefined;
    const dstAtArrival = pkt.dst;

    const looped = dev.kind === 'loopback' && skb.ct !== undefined;
    // A zone chosen by CT --zone is a template consumed by conntrack at OUTPUT; a looped packet
    // that came out of it without an entry (INVALID) is tracked afresh here, in the default zone
    // unless raw PREROUTING picks one (found by the differential test). A template attached after
    // conntrack (nft `ct zone set` at a priority above -200 on a packet conntrack found INVALID)
    // rides along over lo, and conntrack here tracks in its zone (nf_conntrack_in takes the
    // template of skb->_nfct; found by the nftables differential test, seed 20261250).
    if (dev.kind === 'loopback' && skb.ct === undefined && !skb.untracked && skb.template === undefined) skb.zone = 0;
    let invalid = false;
    const nft = ns.nftables.chainsAt(pkt.family, 'PREROUTING');
    let d = nft && this.nftRange(ns, skb, nft, 'PREROUTING', -Infinity, -300, dev.name, undefined, undefined, false);
    if (d) return d;
    let v = this.runTable(ns, skb, 'raw', 'PREROUTING', dev.name, undefined, undefined);
    if (v.kind !== 'accept') return this.terminal(ns, v, 'raw PREROUTING');
    d = nft && this.nftRange(ns, skb, nft, 'PREROUTING', -300, -200, dev.name, undefined, undefined, false);
    if (d) return d;
    if (!looped)
      invalid = this.track(ns, skb); // an untracked packet is traced as UNTRACKED
    // A looped packet keeps its conntrack reference; an untracked one (raw NOTRACK) has none.
    else if (looped && skb.ct && this.trace.enabled)
      this.trace.add({
        kind: 'conntrack',
        ns: ns.name,
        state: skb.ct.state,
        zone: skb.zone,
        entry: skb.ct.entry.id,
        direction: `${skb.ct.direction}, carried over lo`,
      });

    d = nft && this.nftRange(ns, skb, nft, 'PREROUTING', -200, -150, dev.name, undefined, undefined, invalid);
    if (d) return d;
    v = this.runTable(ns, skb, 'mangle', 'PREROUTING', dev.name, undefined, undefined, invalid);
    if (v.kind === 'tproxy') {
      const r = this.tproxy(ns, dev, skb, v);
      if (r) return r;
    } else if (v.kind !== 'accept') return this.terminal(ns, v, 'mangle PREROUTING');
    d = nft && this.nftRange(ns, skb, nft, 'PREROUTING', -150, -100, dev.name, undefined, undefined, invalid);
    if (d) return d;

    const natV = this.natHook(ns, skb, 'PREROUTING', dev.name, undefined, undefined, invalid);
    if (natV) return natV;
    d = nft && this.nftRange(ns, skb, nft, 'PREROUTING', -100, Infinity, dev.name, undefined, undefined, invalid);
    if (d) return d;

    // Martian check (route_localnet=0): loopback addresses never arrive from a real device.
    if (dev.kind !== 'loopback' && (isLoopback(pkt.dst) || isLoopback(pkt.src))) {
      return this.drop(ns, `martian packet on ${dev.name}: loopback address from a non-loopback device`);
    }
    const kept = keptLoopRoute(sentBy, dstAtArrival, pkt.dst);
    if (kept) {
      if (this.trace.enabled)
        this.trace.add({
          kind: 'route',
          ns: ns.name,
          decision: `kept the output route (looped over lo): ${describeDecision(kept)}`,
        });
      return this.localIn(ns, dev, skb, invalid);
    }
    if (dev.kind === 'loopback') {
      const martian = loopbackMartianOnLo(pkt);
      if (martian) return this.drop(ns, martian);
    }
    const route = this.route(ns, pkt, dev.name);
    if (route.kind === 'local') return this.localIn(ns, dev, skb, invalid);
    if (route.kind === 'unicast') {
      if (!ns.forwarding[pkt.family]) return this.drop(ns, `not for this host and IPv${pkt.family} forwarding is off`);
      return this.forward(ns, dev, skb, route, invalid);
    }
    return this.drop(ns, `no route for received packet to ${formatIp(pkt.dst)} (${route.kind})`);
  }

  private localIn(ns: Netns, dev: Link, skb: Skb, invalid: boolean): Delivery {
    const nft = ns.nftables.chainsAt(skb.pkt.family, 'INPUT');
    // What nft's `meta skuid` sees at INPUT (only nft reads a socket here: xt_owner is OUTPUT/POSTROUTING only).
    const rx = nft && this.receivedOwner(ns, skb);
    let lo = -Infinity;
    for (const [table, prio] of IPT_FILTERING) {
      const d = nft && this.nftRange(ns, skb, nft, 'INPUT', lo, prio, dev.name, undefined, rx, invalid);
      if (d) return d;
      lo = prio;
      const v = this.runTable(ns, skb, table, 'INPUT', dev.name, undefined, undefined, invalid);
      if (v.kind !== 'accept') return this.terminal(ns, v, `${table} INPUT`);
    }
    let d = nft && this.nftRange(ns, skb, nft, 'INPUT', 50, 100, dev.name, undefined, rx, invalid);
    if (d) return d;
    const natV = this.natHook(ns, skb, 'INPUT', dev.name, undefined, rx, invalid);
    if (natV) return natV;
    d = nft && this.nftRange(ns, skb, nft, 'INPUT', 100, Infinity, dev.name, undefined, rx, invalid);
    if (d) return d;
    this.confirm(ns, skb);
    return this.deliver(ns, skb);
  }

  /**
   * The socket a received packet carries by INPUT (skb->sk): the one TPROXY assigned, else the
   * one TCP early demux found for its 4-tuple in ip_rcv_finish (after PREROUTING). For the
   * handshake's last ACK the kernel finds the request socket, which nft reads as its listener:
   * checked on Linux — `meta skuid 0 drop` at input lets a SYN through and drops that ACK. The
   * model's child socket exists from the SYN on and has its listener's owner, so it reads the same.
   */
  private receivedOwner(ns: Netns, skb: Skb): SocketOwnerView | undefined {
    const p = skb.pkt;
    const s =
      skb.assigned ??
      (p.proto === 'tcp'
        ? ns.sockets.findEstablished('tcp', { addr: p.dst, port: p.dport }, { addr: p.src, port: p.sport })
        : undefined);
    return s ? { uid: s.owner.uid, gid: s.owner.gid } : undefined;
  }

  private forward(
    ns: Netns,
    dev: Link,
    skb: Skb,
    route: Extract<RouteDecision, { kind: 'unicast' }>,
    invalid: boolean,
  ): Delivery {
    const nft = ns.nftables.chainsAt(skb.pkt.family, 'FORWARD');
    let lo = -Infinity;
    for (const [table, prio] of IPT_FILTERING) {
      const d = nft && this.nftRange(ns, skb, nft, 'FORWARD', lo, prio, dev.name, route.dev, undefined, invalid);
      if (d) return d;
      lo = prio;
      const v = this.runTable(ns, skb, table, 'FORWARD', dev.name, route.dev, undefined, invalid);
      if (v.kind !== 'accept') return this.terminal(ns, v, `${table} FORWARD`);
    }
    const d = nft && this.nftRange(ns, skb, nft, 'FORWARD', 50, Infinity, dev.name, route.dev, undefined, invalid);
    if (d) return d;
    skb.nextHop = route.nextHop;
    return this.postrouting(ns, skb, route.dev, undefined, invalid, dev.name);
  }

  private postrouting(
    ns: Netns,
    skb: Skb,
    outDev: string,
    owner: SocketOwnerView | undefined,
    invalid: boolean,
    inDev?: string,
  ): Delivery {
    const nft = ns.nftables.chainsAt(skb.pkt.family, 'POSTROUTING');
    let d = nft && this.nftRange(ns, skb, nft, 'POSTROUTING', -Infinity, -150, inDev, outDev, owner, invalid);
    if (d) return d;
    const v = this.runTable(ns, skb, 'mangle', 'POSTROUTING', inDev, outDev, owner, invalid);
    if (v.kind !== 'accept') return this.terminal(ns, v, 'mangle POSTROUTING');
    d = nft && this.nftRange(ns, skb, nft, 'POSTROUTING', -150, 100, inDev, outDev, owner, invalid);
    if (d) return d;
    const natV = this.natHook(ns, skb, 'POSTROUTING', inDev, outDev, owner, invalid);
    if (natV) return natV;
    d = nft && this.nftRange(ns, skb, nft, 'POSTROUTING', 100, Infinity, inDev, outDev, owner, invalid);
    if (d) return d;
    this.confirm(ns, skb);
    return this.xmit(ns, ns.link(outDev), skb);
  }

  // ---------------------------------------------------------------- devices

  private xmit(ns: Netns, dev: Link, skb: Skb): Delivery {
    if (!dev.up) return this.drop(ns, `output device ${dev.name} is down`);
    if (dev.kind === 'loopback') {
      if (this.trace.enabled)
        this.trace.add({ kind: 'xmit', fromNs: ns.name, fromDev: 'lo', toNs: ns.name, toDev: 'lo', scrubbed: false });
      skb.sock = undefined;
      return this.receive(ns, dev, skb);
    }
    if (dev.kind === 'bridge') {
      const port = this.bridgePortFor(dev, skb.nextHop, undefined);
      if (!port) return this.drop(ns, `bridge ${dev.name}: no port leads to neighbour ${formatIp(skb.nextHop)}`);
      return this.xmit(ns, port, skb);
    }
    const peer = dev.peer;
    if (!peer) return this.drop(ns, `veth ${dev.name} has no peer`);
    const peerNs = this.host.netns(peer.netns);
    const crossed = peer.netns !== ns.name;
    if (this.trace.enabled)
      this.trace.add({
        kind: 'xmit',
        fromNs: ns.name,
        fromDev: dev.name,
        toNs: peer.netns,
        toDev: peer.name,
        scrubbed: crossed,
      });
    if (crossed) {
      // skb_scrub_packet(xnet=true): the mark and the conntrack reference do not survive.
      skb.pkt.mark = 0;
      skb.ct = undefined;
      skb.untracked = false;
      skb.template = undefined;
      skb.zone = 0;
    }
    skb.sock = undefined;
    skb.assigned = undefined;
    return this.receive(peerNs, peer, skb);
  }

  /**
   * A frame entering a bridge port: addressed to the bridge itself (the next hop is one of the
   * bridge's addresses) it goes up the stack as received on the bridge; otherwise it is switched
   * at layer 2 to the port whose far end owns the next hop. Without br_netfilter (not modelled,
   * and not loaded by default) switched frames do not traverse iptables.
   */
  private bridgeInput(ns: Netns, port: Link, skb: Skb): Delivery {
    const br = port.master!;
    if (!br.up) return this.drop(ns, `bridge ${br.name} is down`);
    // The host answers ARP/ND for any of its addresses on the bridge (arp_ignore=0).
    if (this.ownsAddress(ns, skb.nextHop)) return this.receive(ns, br, skb);
    const out = this.bridgePortFor(br, skb.nextHop, port);
    if (!out) return this.drop(ns, `bridge ${br.name}: no neighbour owns ${formatIp(skb.nextHop)}`);
    if (this.trace.enabled)
      this.trace.add({
        kind: 'route',
        ns: ns.name,
        decision: `bridge ${br.name}: switched ${port.name} -> ${out.name} (layer 2, no iptables)`,
      });
    return this.xmit(ns, out, skb);
  }

  private bridgePortFor(br: Link, nextHop: IpAddress, except: Link | undefined): Link | undefined {
    for (const p of br.ports ?? []) {
      if (p === except || !p.up || !p.peer) continue;
      const far = this.host.netns(p.peer.netns);
      if (
        p.peer.addresses.some((a) => ipEquals(a.addr, nextHop)) ||
        (far.links.get(p.peer.name) && this.ownsAddress(far, nextHop))
      )
        return p;
    }
    return undefined;
  }

  private ownsAddress(ns: Netns, a: IpAddress): boolean {
    for (const l of ns.links.values()) if (l.addresses.some((x) => ipEquals(x.addr, a))) return true;
    return false;
  }

  // ---------------------------------------------------------------- conntrack and NAT

  /** nf_conntrack_in; returns true when the packet is INVALID. */
  private track(ns: Netns, skb: Skb): boolean {
    skb.template = undefined; // nf_conntrack_in swaps the template for the real entry
    if (skb.untracked) {
      if (this.trace.enabled)
        this.trace.add({
          kind: 'conntrack',
          ns: ns.name,
          state: 'UNTRACKED',
          zone: skb.zone,
          entry: undefined,
          direction: undefined,
        });
      return false;
    }
    const fam = skb.pkt.family;
    if (!ns.netfilter[fam].needsConntrack() && !ns.nftables.needsConntrack(fam)) {
      // The kernel has not registered this family's conntrack hooks here (no iptables or nft rule needs them):
      // the packet carries no entry, the nat tables are never consulted, and a flow already
      // open when a rule turns tracking on is picked up mid-stream by its next segment.
      skb.ct = undefined;
      if (this.trace.enabled)
        this.trace.add({
          kind: 'conntrack',
          ns: ns.name,
          state: 'OFF',
          zone: skb.zone,
          entry: undefined,
          direction: undefined,
        });
      return false;
    }
    const r = ns.conntrack.classify(skb.pkt, skb.zone);
    if (r === 'invalid') {
      skb.ct = undefined;
      if (this.trace.enabled)
        this.trace.add({
          kind: 'conntrack',
          ns: ns.name,
          state: 'INVALID',
          zone: skb.zone,
          entry: undefined,
          direction: undefined,
        });
      return true;
    }
    skb.ct = r;
    if (this.trace.enabled)
      this.trace.add({
        kind: 'conntrack',
        ns: ns.name,
        state: r.state,
        zone: skb.zone,
        entry: r.entry.id,
        direction: r.direction,
      });
    return false;
  }

  private confirm(ns: Netns, skb: Skb): void {
    if (skb.ct && !skb.ct.entry.confirmed) ns.conntrack.confirm(skb.ct.entry);
  }

  /**
   * One nat hook: decide the connection's binding for this manip type if it is new, then rewrite
   * the packet from the entry. PREROUTING/OUTPUT do destination NAT, INPUT/POSTROUTING source NAT.
   * Returns a Delivery only when the packet is dropped here.
   */
  private natHook(
    ns: Netns,
    skb: Skb,
    hook: Hook,
    inDev: string | undefined,
    outDev: string | undefined,
    owner: SocketOwnerView | undefined,
    invalid: boolean,
  ): Delivery | undefined {
    const ct = skb.ct;
    if (!ct || skb.untracked) return undefined; // NAT needs conntrack
    const dstManip = hook === 'PREROUTING' || hook === 'OUTPUT';
    const e = ct.entry;
    const decided = dstManip ? e.dstNatDone : e.srcNatDone;
    if (!decided && ct.direction === 'original') {
      const nftNat = ns.nftables.chainsAt(skb.pkt.family, hook)?.nat;
      if (nftNat === undefined || nftNat.length === 0) {
        const v = this.runTable(ns, skb, 'nat', hook, inDev, outDev, owner, invalid);
        if (v.kind === 'drop' || v.kind === 'reject') return this.terminal(ns, v, `nat ${hook}`);
        if (v.kind === 'nat') {
          const r = this.bindNat(ns, skb, e, hook, v.action, inDev, outDev);
          if (typeof r === 'string') return this.drop(ns, r);
        }
      } else {
        const d = this.natChains(ns, skb, e, hook, nftNat, inDev, outDev, owner, invalid, dstManip ? -100 : 100);
        if (d) return d;
      }
      if (dstManip) e.dstNatDone = true;
      else e.srcNatDone = true;
    }
    // Rewrite from the entry: a packet must leave looking like the inverse of the other direction.
    const other = ct.direction === 'original' ? e.reply : e.orig;
    const p = skb.pkt;
    if (dstManip) {
      if (!ipEquals(p.dst, other.src) || p.dport !== other.sport) {
        if (this.trace.enabled)
          this.trace.add({
            kind: 'nat',
            ns: ns.name,
            hook,
            what: `destination ${formatIp(p.dst)}:${p.dport} -> ${formatIp(other.src)}:${other.sport}`,
          });
        p.dst = other.src;
        p.dport = other.sport;
      }
    } else if (!ipEquals(p.src, other.dst) || p.sport !== other.dport) {
      if (this.trace.enabled)
        this.trace.add({
          kind: 'nat',
          ns: ns.name,
          hook,
          what: `source ${formatIp(p.src)}:${p.sport} -> ${formatIp(other.dst)}:${other.dport}`,
        });
      p.src = other.dst;
      p.sport = other.dport;
    }
    return undefined;
  }

  /** Record a NAT binding in the entry's reply tuple; returns an error string to drop. */
  private bindNat(
    ns: Netns,
    skb: Skb,
    e: ConnEntry,
    hook: Hook,
    a: NatAction,
    inDev: string | undefined,
    outDev: string | undefined,
  ): string | undefined {
    const p = skb.pkt;
    const fam = p.family;
    const pickPort = (range: readonly [number, number] | undefined, current: number): number =>
      range ? range[0] : current;
    if (a.kind === 'redirect' || a.kind === 'dnat') {
      let addr: IpAddress;
      if (a.kind === 'redirect') {
        if (hook === 'OUTPUT') addr = loopbackAddress(fam);
        else {
          const primary = inDev ? this.redirectAddress(ns, inDev, fam, p.dst) : undefined;
          if (!primary) return `REDIRECT: ingress device ${inDev ?? '?'} has no IPv${fam} address (the kernel drops)`;
          addr = primary;
        }
      } else addr = a.addr ?? p.dst;
      const port = pickPort(a.ports, p.dport);
      e.reply = { ...e.reply, src: addr, sport: port };
      e.dnat = true;
      return undefined;
    }
    let addr: IpAddress;
    if (a.kind === 'snat') addr = a.addr;
    else {
      const cand = masqueradeSource(ns, outDev, skb.nextHop, p.dst);
      if (!cand) return `MASQUERADE: no IPv${fam} address to use for output device ${outDev ?? '?'} (the kernel drops)`;
      addr = cand;
    }
    let port = pickPort(a.ports, p.sport);
    // Keep the source port unless the resulting reply tuple is taken (nf_nat_used_tuple).
    const lo = a.ports ? a.ports[0] : 1024;
    const hi = a.ports ? a.ports[1] : 65535;
    const taken = (prt: number): boolean =>
      ns.conntrack.inUse(e.zone, invert({ ...e.orig, src: addr, sport: prt } as Tuple));
    for (let tries = 0; taken(port) && tries <= hi - lo; tries++) port = port >= hi ? lo : port + 1;
    e.reply = { ...e.reply, dst: addr, dport: port };
    e.snat = true;
    return undefined;
  }

  /** nf_nat_redirect: v4 uses the ingress device's primary address; v6 the first of matching scope. */
  private redirectAddress(ns: Netns, dev: string, fam: Family, dst: IpAddress): IpAddress | undefined {
    const link = ns.links.get(dev);
    if (!link) return undefined;
    if (fam === 4) return link.addresses.find((a) => a.addr.family === 4)?.addr;
    const linkLocal = (x: IpAddress): boolean => x.value >> 118n === 0x3fan; // fe80::/10
    return link.addresses.find((a) => a.addr.family === 6 && linkLocal(a.addr) === linkLocal(dst))?.addr;
  }

  // ---------------------------------------------------------------- TPROXY

  private tproxy(ns: Netns, dev: Link, skb: Skb, v: Extract<TableVerdict, { kind: 'tproxy' }>): Delivery | undefined {
    const p = skb.pkt;
    const proto = p.proto === 'udp' ? 'udp' : 'tcp';
    let sock = ns.sockets.findEstablished(proto, { addr: p.dst, port: p.dport }, { addr: p.src, port: p.sport });
    if (sock && !sock.transparent) sock = undefined;
    if (!sock) {
      const laddr = v.addr ?? this.tproxyLocalAddress(dev, p);
      sock = ns.sockets.findListener(proto, laddr, v.port, flowHash(p), true);
    }
    if (!sock) return this.drop(ns, `TPROXY: no transparent socket for port ${v.port} (the kernel drops)`);
    skb.assigned = sock;
    if (v.mark) {
      const old = p.mark;
      p.mark = ((p.mark & ~v.mark.mask) ^ v.mark.value) >>> 0;
      if (this.trace.enabled)
        this.trace.add({ kind: 'mark', ns: ns.name, from: old, to: p.mark, why: 'TPROXY --tproxy-mark' });
    }
    if (this.trace.enabled)
      this.trace.add({ kind: 'route', ns: ns.name, decision: `TPROXY assigned ${sock.describe()}` });
    return undefined;
  }

  private tproxyLocalAddress(dev: Link, p: Packet): IpAddress {
    return dev.addresses.find((a) => a.addr.family === p.family)?.addr ?? p.dst;
  }

  // ---------------------------------------------------------------- sockets

  private deliver(ns: Netns, skb: Skb): Delivery {
    const p = skb.pkt;
    const proto = p.proto === 'udp' ? 'udp' : p.proto === 'tcp' ? 'tcp' : undefined;
    if (!proto) return this.drop(ns, `no ${p.proto} socket model: delivered nowhere`);
    let sock = skb.assigned;
    if (!sock) sock = ns.sockets.findEstablished(proto, { addr: p.dst, port: p.dport }, { addr: p.src, port: p.sport });
    if (!sock && (proto === 'udp' || (p.flags.syn && !p.flags.ack))) {
      sock = ns.sockets.findListener(proto, p.dst, p.dport, flowHash(p));
    }
    if (!sock) {
      if (this.trace.enabled)
        this.trace.add({ kind: 'drop', ns: ns.name, reason: `no socket for ${proto} ${formatIp(p.dst)}:${p.dport}` });
      return { kind: 'no-socket', ns, packet: p };
    }
    if (this.trace.enabled)
      this.trace.add({
        kind: 'deliver',
        ns: ns.name,
        socket: `${sock.describe()}${sock.remote ? ` peer ${formatSockAddr(sock.remote)}` : ''}`,
      });
    return { kind: 'delivered', ns, socket: sock, packet: p };
  }

  // ---------------------------------------------------------------- helpers

  /** Trace events format addresses and rule text; with tracing off they are skipped, not built. */
  private route(ns: Netns, pkt: Packet, iif: string | undefined, why?: string): RouteDecision {
    const d = fibLookup(ns, {
      family: pkt.family,
      src: iif === undefined ? undefined : pkt.src,
      dst: pkt.dst,
      mark: pkt.mark,
      iif,
      oif: undefined,
    });
    if (this.trace.enabled)
      this.trace.add({ kind: 'route', ns: ns.name, decision: `${why ? `${why}: ` : ''}${describeDecision(d)}` });
    return d;
  }

  /**
   * IPv4 refuses an output route that would carry a 127/8 source out of a non-loopback device
   * (__mkroute_output: -EINVAL), before any OUTPUT hook runs: e.g. a SYN-ACK of a connection
   * made to 127.0.0.1 from a foreign source is never sent, whatever mangle OUTPUT would have
   * re-marked. Local routes go out of lo, so they pass. Returns why, or undefined.
   */
  private loopbackSourceOut(ns: Netns, pkt: Packet, route: RouteDecision): string | undefined {
    if (pkt.family !== 4 || route.kind !== 'unicast' || !isLoopback(pkt.src)) return undefined;
    if (ns.link(route.dev).kind === 'loopback') return undefined;
    return `loopback source ${formatIp(pkt.src)} may not leave by ${route.dev} (route to ${formatIp(pkt.dst)}: EINVAL)`;
  }

  /**
   * The NAT core for a connection's first packet when nft nat chains exist at this hook: the
   * iptables nat table (at `iptPriority`) and the nft nat chains in priority order (iptables first
   * on a tie), until one binds a NAT; a drop ends the packet (nf_nat_inet_fn).
   */
  private natChains(
    ns: Netns,
    skb: Skb,
    e: ConnEntry,
    hook: Hook,
    nat: readonly NftBaseRef[],
    inDev: string | undefined,
    outDev: string | undefined,
    owner: SocketOwnerView | undefined,
    invalid: boolean,
    iptPriority: number,
  ): Delivery | undefined {
    let iptDone = false;
    for (let i = 0; i <= nat.length; i++) {
      const ref = nat[i];
      let v: TableVerdict;
      let where: string;
      if (!iptDone && (ref === undefined || ref.priority > iptPriority)) {
        iptDone = true;
        i--;
        v = this.runTable(ns, skb, 'nat', hook, inDev, outDev, owner, invalid);
        where = `nat ${hook}`;
      } else if (ref !== undefined) {
        v = this.runNft(ns, skb, ref, hook, inDev, outDev, owner, invalid);
        where = `nft ${ref.label} (${hook})`;
      } else break;
      if (v.kind === 'drop' || v.kind === 'reject') return this.terminal(ns, v, where);
      if (v.kind === 'nat') {
        const r = this.bindNat(ns, skb, e, hook, v.action, inDev, outDev);
        if (typeof r === 'string') return this.drop(ns, r);
        return undefined;
      }
    }
    return undefined;
  }

  /**
   * The nft filter/route chains at `hook` with priority in (lo, hi]; a Delivery when one ends the
   * packet. `afterRoute` runs after each route-type chain with the packet's fields before it.
   */
  private nftRange(
    ns: Netns,
    skb: Skb,
    hc: HookChains,
    hook: Hook,
    lo: number,
    hi: number,
    inIface: string | undefined,
    outIface: string | undefined,
    owner: SocketOwnerView | undefined,
    invalid: boolean,
    afterRoute?: (before: { mark: number; dst: IpAddress; src: IpAddress }) => Delivery | undefined,
  ): Delivery | undefined {
    const p = skb.pkt;
    for (const ref of hc.chains) {
      if (ref.priority <= lo) continue;
      if (ref.priority > hi) break;
      const before = ref.type === 'route' && afterRoute ? { mark: p.mark, dst: p.dst, src: p.src } : undefined;
      const v = this.runNft(ns, skb, ref, hook, inIface, outIface, owner, invalid);
      if (v.kind !== 'accept') return this.terminal(ns, v, `nft ${ref.label} (${hook})`);
      if (before) {
        const d = afterRoute!(before);
        if (d) return d;
      }
    }
    return undefined;
  }

  private runNft(
    ns: Netns,
    skb: Skb,
    ref: NftBaseRef,
    hook: Hook,
    inIface: string | undefined,
    outIface: string | undefined,
    owner: SocketOwnerView | undefined,
    invalid: boolean,
  ): TableVerdict {
    const markBefore = skb.pkt.mark;
    // A socket tproxy assigned in prerouting is the packet's socket from then on (skb->sk).
    const sk = owner ?? (skb.assigned && { uid: skb.assigned.owner.uid, gid: skb.assigned.owner.gid });
    const ctx = new HookContext(ns, skb, this.trace, describePacket, hook, inIface, outIface, sk, invalid);
    const run = ns.nftables.run(ref, ctx, this.trace.enabled);
    if (this.trace.enabled) {
      this.trace.add({
        kind: 'nft',
        ns: ns.name,
        hook,
        chain: ref.label,
        type: ref.type,
        priority: ref.priority,
        steps: run.steps,
        verdict: verdictText(run.verdict),
      });
      if (skb.pkt.mark !== markBefore)
        this.trace.add({ kind: 'mark', ns: ns.name, from: markBefore, to: skb.pkt.mark, why: `nft ${ref.label}` });
    }
    return run.verdict;
  }

  private runTable(
    ns: Netns,
    skb: Skb,
    table: TableName,
    hook: Hook,
    inIface: string | undefined,
    outIface: string | undefined,
    owner: SocketOwnerView | undefined,
    invalid = false,
  ): TableVerdict {
    const nf = ns.netfilter[skb.pkt.family];
    if (!nf.hasRules(table, hook)) return ACCEPT;
    const markBefore = skb.pkt.mark;
    const ctx = new HookContext(ns, skb, this.trace, describePacket, hook, inIface, outIface, owner, invalid);
    const run = nf.runTable(table, hook, ctx, { trace: this.trace.enabled });
    if (this.trace.enabled)
      this.trace.add({ kind: 'table', ns: ns.name, hook, table, steps: run.steps, verdict: verdictText(run.verdict) });
    if (this.trace.enabled && skb.pkt.mark !== markBefore)
      this.trace.add({ kind: 'mark', ns: ns.name, from: markBefore, to: skb.pkt.mark, why: `${table} ${hook}` });
    return run.verdict;
  }

  private terminal(ns: Netns, v: TableVerdict, where: string): Delivery {
    if (v.kind === 'reject') {
      if (this.trace.enabled) this.trace.add({ kind: 'drop', ns: ns.name, reason: `REJECT in ${where} (${v.with})` });
      return { kind: 'rejected', ns, with: v.with };
    }
    if (v.kind === 'drop') return this.drop(ns, `DROP in ${where}`);
    return this.drop(ns, `${verdictText(v)} is not valid in ${where}`);
  }

  private drop(ns: Netns, reason: string): Delivery {
    if (this.trace.enabled) this.trace.add({ kind: 'drop', ns: ns.name, reason });
    return { kind: 'dropped', ns, reason };
  }

  /** Hand a packet to a device from outside the stack (AF_PACKET): no netfilter, no routing here. */
  injectRaw(ns: Netns, dev: Link, pkt: Packet, nextHop: IpAddress): Delivery {
    if (this.trace.enabled)
      this.trace.add({
        kind: 'packet',
        ns: ns.name,
        packet: describePacket(pkt),
        note: `AF_PACKET send on ${dev.name} (skips this namespace's netfilter)`,
      });
    const skb: Skb = {
      pkt,
      ct: undefined,
      untracked: false,
      template: undefined,
      zone: 0,
      sock: undefined,
      assigned: undefined,
      nextHop,
      hops: 0,
      dst: undefined,
    };
    return this.xmit(ns, dev, skb);
  }
}

const ACCEPT: TableVerdict = Object.freeze({ kind: 'accept' });

/** The iptables tables that filter at INPUT and FORWARD, with their priorities, in order. */
const IPT_FILTERING: readonly (readonly ['mangle' | 'filter' | 'security', number])[] = [
  ['mangle', -150],
  ['filter', 0],
  ['security', 50],
];

export { flowHash };
