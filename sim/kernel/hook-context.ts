/**
 * What the rules of one table see of a packet at one hook (EvalContext), over the packet's
 * per-packet kernel state (Skb). One object per table run, with its methods on the prototype:
 * the datapath runs several tables per packet, and a context built from closures allocated a
 * handful of functions each time (the sim's hot path; see bench/fidelity-ratio.ts). nft chains
 * get the same context (NftEvalContext adds the tproxy statement's socket lookup).
 */
import { addrType } from './fib.js';
import { flowHash } from './flow-hash.js';
import { CtTemplate, ctTargetApplies } from './ct-template.js';
import type { Family, IpAddress } from '../../impl/api/ip/address.js';
import type { Netns } from './netns.js';
import type { Packet } from './packet.js';
import type { Trace } from './trace.js';
import type { AddrType, ConntrackRef, Hook, IpSetView, SocketOwnerView } from './netfilter/types.js';
import type { Skb } from './datapath.js';
import type { NftEvalContext } from './nftables/model.js';

export class HookContext implements NftEvalContext {
  readonly family: Family;
  readonly packet: Packet;

  constructor(
    private readonly ns: Netns,
    private readonly skb: Skb,
    private readonly trace: Trace,
    private readonly describe: (p: Packet) => string,
    readonly hook: Hook,
    readonly inIface: string | undefined,
    readonly outIface: string | undefined,
    readonly socket: SocketOwnerView | undefined,
    /** conntrack classified the packet INVALID: rules see no entry. */
    private readonly invalid: boolean,
  ) {
    this.family = skb.pkt.family;
    this.packet = skb.pkt;
  }

  /** Before conntrack (raw), a CT --zone template stands in for the entry (ct-template.ts). */
  get ct(): ConntrackRef | undefined {
    const s = this.skb;
    return s.untracked || this.invalid ? undefined : (s.ct ?? s.template);
  }

  /** Live: a CT --notrack earlier in this raw chain already counts. */
  get untracked(): boolean {
    return this.skb.untracked;
  }

  addrType(addr: IpAddress, iface?: string): AddrType {
    return addrType(this.ns, addr, this.family, iface);
  }

  ipset(name: string): IpSetView | undefined {
    return this.ns.ipsets.get(name);
  }

  // xt_ct_target: a packet that already carries a template, UNTRACKED or an entry is left alone.
  setNotrack(): void {
    if (ctTargetApplies(this.skb)) this.skb.untracked = true;
  }

  setZone(zone: number): void {
    if (!ctTargetApplies(this.skb)) return;
    this.skb.zone = zone;
    this.skb.template = new CtTemplate(zone, this.family);
  }

  log(prefix: string): void {
    if (this.trace.enabled)
      this.trace.add({ kind: 'log', ns: this.ns.name, prefix, packet: this.describe(this.skb.pkt) });
  }

  /**
   * nft_tproxy_eval: an established socket for the 4-tuple, else a listener on `addr` (default:
   * the ingress device's first address of the family) at `port`; assigned only if transparent.
   * An established socket that is not transparent ends the lookup (the rule breaks), as in the kernel.
   */
  tproxyAssign(addr: IpAddress | undefined, port: number): boolean {
    const p = this.skb.pkt;
    const proto = p.proto === 'udp' ? 'udp' : 'tcp';
    const sockets = this.ns.sockets;
    let sock = sockets.findEstablished(proto, { addr: p.dst, port: p.dport }, { addr: p.src, port: p.sport });
    if (!sock) {
      const dev = this.inIface === undefined ? undefined : this.ns.links.get(this.inIface);
      const laddr = addr ?? dev?.addresses.find((a) => a.addr.family === p.family)?.addr ?? p.dst;
      sock = sockets.findListener(proto, laddr, port, flowHash(p), true);
    }
    if (!sock || !sock.transparent) return false;
    this.skb.assigned = sock;
    if (this.trace.enabled)
      this.trace.add({ kind: 'route', ns: this.ns.name, decision: `tproxy assigned ${sock.describe()}` });
    return true;
  }
}
