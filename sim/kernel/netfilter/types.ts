/**
 * The contract between the netfilter model (parser, ruleset, evaluator in this folder) and the
 * datapath that calls it at each hook (sim/kernel/datapath.ts).
 *
 * The datapath owns packets, conntrack, routing and sockets; the evaluator owns rules. At a hook,
 * the datapath calls `Netfilter.runTable(table, hook, ctx)` for each table in the kernel's
 * priority order (raw, [conntrack], mangle, nat, filter, security) and acts on the verdict.
 */
import type { Family, IpAddress } from '../../../impl/api/ip/address.js';
import type { Packet } from '../packet.js';

export type TableName = 'raw' | 'mangle' | 'nat' | 'filter' | 'security';
export type Hook = 'PREROUTING' | 'INPUT' | 'FORWARD' | 'OUTPUT' | 'POSTROUTING';

/** Built-in chains per table (kernel iptable_*.c valid-hook masks). */
export const TABLE_HOOKS: Readonly<Record<TableName, readonly Hook[]>> = {
  raw: ['PREROUTING', 'OUTPUT'],
  mangle: ['PREROUTING', 'INPUT', 'FORWARD', 'OUTPUT', 'POSTROUTING'],
  nat: ['PREROUTING', 'INPUT', 'OUTPUT', 'POSTROUTING'],
  filter: ['INPUT', 'FORWARD', 'OUTPUT'],
  security: ['INPUT', 'FORWARD', 'OUTPUT'],
};

export type CtState = 'NEW' | 'ESTABLISHED' | 'RELATED' | 'INVALID' | 'UNTRACKED';

/** addrtype(8) types the model distinguishes. */
export type AddrType =
  'UNSPEC' | 'UNICAST' | 'LOCAL' | 'BROADCAST' | 'ANYCAST' | 'MULTICAST' | 'BLACKHOLE' | 'UNREACHABLE' | 'PROHIBIT';

/** What the rules can see of, and do to, the packet's conntrack entry. */
export interface ConntrackRef {
  readonly state: CtState;
  /** Direction of this packet relative to the entry. */
  readonly direction: 'original' | 'reply';
  /** ctmark; CONNMARK writes it. */
  mark: number;
  readonly zone: number;
  /** Original-direction tuple, for `-m conntrack --ctorigdst` and friends if supported. */
  readonly origSrc: IpAddress;
  readonly origDst: IpAddress;
  readonly origSport: number;
  readonly origDport: number;
  /** The entry has NAT applied in that direction (for --ctstate SNAT/DNAT). */
  readonly snat: boolean;
  readonly dnat: boolean;
}

export interface IpSetView {
  readonly name: string;
  readonly type: string; // e.g. 'hash:ip', 'hash:net'
  readonly family: Family;
  has(addr: IpAddress): boolean;
}

/** Everything a match or target may read or change while one table runs at one hook. */
export interface EvalContext {
  readonly hook: Hook;
  readonly family: Family;
  /** Mutable: MARK writes packet.mark. NAT/TPROXY never write here — they return a verdict. */
  readonly packet: Packet;
  /** Ingress device (PREROUTING, INPUT, FORWARD), egress device (FORWARD, OUTPUT, POSTROUTING). */
  readonly inIface: string | undefined;
  readonly outIface: string | undefined;
  /**
   * The packet's conntrack entry; undefined when it has none, which is UNTRACKED when `untracked`
   * is true (CT --notrack) and INVALID otherwise — as nf_ct_get() returning NULL in the kernel,
   * where ctinfo tells the two apart. Without an entry connmark never matches and CONNMARK is a no-op.
   */
  readonly ct: ConntrackRef | undefined;
  readonly untracked?: boolean;
  /** The local socket that sent the packet (OUTPUT/POSTROUTING of locally generated packets). */
  readonly socket: SocketOwnerView | undefined;
  /** Address classification in this netns (`-m addrtype`); `iface` set for --limit-iface-*. */
  addrType(addr: IpAddress, iface?: string): AddrType;
  ipset(name: string): IpSetView | undefined;
  /** raw table: CT --notrack. */
  setNotrack(): void;
  /** raw table: CT --zone N (zone for the entry about to be created). */
  setZone(zone: number): void;
  /** LOG target: the datapath records it in the trace. */
  log(prefix: string): void;
}

export type NatAction =
  | { readonly kind: 'redirect'; readonly ports?: readonly [number, number] }
  | { readonly kind: 'dnat'; readonly addr?: IpAddress; readonly ports?: readonly [number, number] }
  | { readonly kind: 'snat'; readonly addr: IpAddress; readonly ports?: readonly [number, number] }
  | { readonly kind: 'masquerade'; readonly ports?: readonly [number, number] };

/** Result of running one table's built-in chain at one hook. */
export type TableVerdict =
  | { readonly kind: 'accept' }
  | { readonly kind: 'drop' }
  | { readonly kind: 'reject'; readonly with: string }
  | { readonly kind: 'nat'; readonly action: NatAction }
  | {
      readonly kind: 'tproxy';
      readonly port: number;
      readonly addr: IpAddress | undefined;
      /** --tproxy-mark value/mask, applied to packet.mark by the datapath when a socket is found. */
      readonly mark: { readonly value: number; readonly mask: number } | undefined;
    };

/** One rule-level step, for packet traces. */
export interface RuleStep {
  readonly table: TableName;
  readonly chain: string;
  /** 1-based position in the chain; 0 for the chain policy. */
  readonly position: number;
  /** 1-based line in the restore text the rule came from (0 for policies never written). */
  readonly line: number;
  /** The rule as written (normalised iptables-save form), or `policy ACCEPT`. */
  readonly text: string;
  /** What happened: 'jump CHAIN', 'goto CHAIN', 'return', 'ACCEPT', 'MARK ...', etc. */
  readonly effect: string;
}

export interface TableRun {
  readonly verdict: TableVerdict;
  readonly steps: readonly RuleStep[];
}

/** Owner of a socket opened by a process (it has a file: uid/gid criteria apply). */
interface FileSocketOwner {
  readonly uid: number;
  readonly gid: number;
}

/**
 * A kernel socket with no file behind it, such as the per-namespace TCP control socket that
 * sends IPv4 resets (ip_send_unicast_reply): xt_owner sees a socket (`--socket-exists` matches)
 * but no file, so `--uid-owner`/`--gid-owner` behave as for no socket.
 */
export interface KernelSocketOwner {
  readonly kernelSocket: true;
}

export type SocketOwnerView = FileSocketOwner | KernelSocketOwner;
