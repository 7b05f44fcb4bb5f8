/**
 * Connection tracking, per network namespace and zone (nf_conntrack). An entry holds the
 * original-direction tuple and the reply tuple it expects; NAT is recorded by rewriting the reply
 * tuple once, when the connection's first packet passes the nat hooks, and every later packet
 * of either direction is rewritten from the entry (NAT once per connection, undone on replies).
 * Entries are created unconfirmed and inserted only when the packet survives to POSTROUTING or
 * INPUT (confirmation), so a dropped first packet leaves nothing behind. A namespace consults
 * its table only while a rule of the packet's family needs conntrack (datapath.ts); entries stay
 * when no rule does any more, as the kernel's stay until they time out.
 */
import { ipKey, type IpAddress } from '../../impl/api/ip/address.js';
import type { L4Proto, Packet } from './packet.js';
import type { ConntrackRef, CtState } from './netfilter/types.js';

export interface Tuple {
  readonly proto: L4Proto;
  readonly src: IpAddress;
  readonly sport: number;
  readonly dst: IpAddress;
  readonly dport: number;
}

function tupleOf(p: Packet): Tuple {
  return { proto: p.proto, src: p.src, sport: p.sport, dst: p.dst, dport: p.dport };
}

export function invert(t: Tuple): Tuple {
  return { proto: t.proto, src: t.dst, sport: t.dport, dst: t.src, dport: t.sport };
}

function tupleKey(zone: number, t: Tuple): string {
  return `${zone}|${t.proto}|${ipKey(t.src)}|${t.sport}|${ipKey(t.dst)}|${t.dport}`;
}

type Direction = 'original' | 'reply';

export class ConnEntry {
  mark = 0;
  seenReply = false;
  confirmed = false;
  /** TCP: a FIN or RST was seen; a later SYN on the same tuple opens a new connection. */
  closing = false;
  /** TCP: started by a SYN (state SYN_SENT until a reply is seen), not picked up mid-stream. */
  synSent = false;
  finOriginal = false;
  finReply = false;
  /** The destination / source NAT decision has been taken (possibly a null binding). */
  dstNatDone = false;
  srcNatDone = false;
  dnat = false;
  snat = false;

  constructor(
    readonly id: number,
    readonly zone: number,
    readonly orig: Tuple,
    public reply: Tuple,
  ) {}
}

/** The conntrack reference a packet carries through one namespace (skb->_nfct). */
export class PacketCt implements ConntrackRef {
  constructor(
    readonly entry: ConnEntry,
    readonly direction: Direction,
    readonly state: CtState,
  ) {}
  get mark(): number {
    return this.entry.mark;
  }
  set mark(v: number) {
    this.entry.mark = v >>> 0;
  }
  get zone(): number {
    return this.entry.zone;
  }
  get origSrc(): IpAddress {
    return this.entry.orig.src;
  }
  get origDst(): IpAddress {
    return this.entry.orig.dst;
  }
  get origSport(): number {
    return this.entry.orig.sport;
  }
  get origDport(): number {
    return this.entry.orig.dport;
  }
  get snat(): boolean {
    return this.entry.snat;
  }
  get dnat(): boolean {
    return this.entry.dnat;
  }
}

export class ConntrackTable {
  private readonly byTuple = new Map<string, { entry: ConnEntry; dir: Direction }>();
  private nextId = 1;

  /**
   * nf_conntrack_in: find the packet's entry in the zone, or make a new unconfirmed one.
   * TCP: a RST, FIN or SYN-ACK without an entry is INVALID; a SYN or ACK without an entry starts
   * a connection (nf_conntrack_tcp_loose=1, the kernel default, picks up mid-stream flows).
   */
  classify(p: Packet, zone: number): PacketCt | 'invalid' {
    const t = tupleOf(p);
    let hit = this.byTuple.get(tupleKey(zone, t));
    if (hit && p.proto === 'tcp' && hit.entry.closing && p.flags.syn && !p.flags.ack && hit.dir === 'original') {
      // A new SYN on a closed connection's tuple (TIME_WAIT/CLOSE): the old entry is killed
      // and the packet starts a new connection (nf_conntrack_proto_tcp, -NF_REPEAT).
      this.remove(hit.entry);
      hit = undefined;
    }
    if (hit && p.proto === 'tcp' && hit.entry.synSent && !hit.entry.seenReply && !p.flags.syn && !p.flags.rst) {
      // tcp_conntracks[*][ack|fin][sSS] = sIV: until the SYN-ACK has been tracked, an ACK or FIN
      // of either direction is INVALID and the entry stays as it is — e.g. the handshake's ACK
      // when the SYN-ACK went through another zone (found by the differential test).
      return 'invalid';
    }
    if (hit && p.proto === 'tcp' && (p.flags.fin || p.flags.rst)) {
      const e = hit.entry;
      e.closing = true;
      if (p.flags.fin) {
        if (hit.dir === 'original') e.finOriginal = true;
        else e.finReply = true;
      }
      // Both sides closed (or reset): the entry would sit in TIME_WAIT/CLOSE until it expires,
      // where it only matters to a new SYN on the same tuple, which replaces it anyway. Drop it
      // now so long runs do not accumulate entries; this packet keeps its reference.
      if (p.flags.rst || (e.finOriginal && e.finReply)) this.remove(e);
    }
    if (hit) {
      if (hit.dir === 'reply') {
        hit.entry.seenReply = true;
        return new PacketCt(hit.entry, 'reply', 'ESTABLISHED');
      }
      return new PacketCt(hit.entry, 'original', hit.entry.seenReply ? 'ESTABLISHED' : 'NEW');
    }
    // tcp_conntracks[ORIGINAL][*][sNO]: RST, SYN-ACK and FIN cannot start a connection (sIV);
    // a SYN or a bare ACK (loose pickup) can.
    if (p.proto === 'tcp' && (p.flags.rst || p.flags.fin || (p.flags.syn && p.flags.ack))) return 'invalid';
    const e = new ConnEntry(this.nextId++, zone, t, invert(t));
    e.synSent = p.proto === 'tcp' && p.flags.syn;
    return new PacketCt(e, 'original', 'NEW');
  }

  /** Does a tuple (as a packet would carry it) already belong to a confirmed entry? */
  inUse(zone: number, t: Tuple): boolean {
    return this.byTuple.has(tupleKey(zone, t));
  }

  /** Like inUse, but a closing TCP entry does not count (a new SYN would replace it). */
  liveInUse(zone: number, t: Tuple): boolean {
    const hit = this.byTuple.get(tupleKey(zone, t));
    return hit !== undefined && !hit.entry.closing;
  }

  /** Insert an unconfirmed entry (both directions) once its first packet survived. */
  confirm(e: ConnEntry): void {
    if (e.confirmed) return;
    e.confirmed = true;
    this.byTuple.set(tupleKey(e.zone, e.orig), { entry: e, dir: 'original' });
    this.byTuple.set(tupleKey(e.zone, e.reply), { entry: e, dir: 'reply' });
  }

  /** The entry whose original or reply tuple is `t` (getorigdst looks up the socket's tuple). */
  find(zone: number, t: Tuple): { entry: ConnEntry; dir: Direction } | undefined {
    return this.byTuple.get(tupleKey(zone, t));
  }

  remove(e: ConnEntry): void {
    this.byTuple.delete(tupleKey(e.zone, e.orig));
    this.byTuple.delete(tupleKey(e.zone, e.reply));
  }

  flush(): void {
    this.byTuple.clear();
  }

  entries(): ConnEntry[] {
    const seen = new Set<ConnEntry>();
    for (const { entry } of this.byTuple.values()) seen.add(entry);
    return [...seen];
  }
}
