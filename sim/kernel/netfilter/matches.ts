/**
 * The `-m` match modules the model supports, each: option parsing (with `!` where iptables
 * allows it), validation, iptables-save rendering (option order as iptables 1.8.9 prints it)
 * and compilation into a closure. Anything else is rejected by name in createMatch().
 */
import { AddressError } from '../../../impl/api/ip/address.js';
import { formatPrefix, parsePrefix, type IpPrefix } from '../../../impl/api/ip/prefix.js';
import { RuleSyntaxError } from './errors.js';
import { quoteWord } from './lexer.js';
import type { MatchInstance, Pred, RuleContext, Take } from './rule.js';
import type { AddrType, CtState, EvalContext, Hook } from './types.js';
import {
  formatPortRange,
  hex,
  parseMarkMask,
  parsePortRange,
  parseU32,
  PROTO_TCP,
  PROTO_UDP,
  U32_MAX,
  type MarkMask,
} from './values.js';

const SUPPORTED_MATCHES = [
  'tcp',
  'udp',
  'multiport',
  'mark',
  'connmark',
  'conntrack',
  'state',
  'owner',
  'addrtype',
  'set',
  'comment',
] as const;

function once(seen: Set<string>, module: string, opt: string): void {
  if (seen.has(opt)) throw new RuleSyntaxError(`${module}: option "${opt}" can only be used once`);
  seen.add(opt);
}

function requireProto(rc: RuleContext, module: string, allowed: readonly number[]): number {
  const p = rc.proto;
  if (!p || p.neg || !allowed.includes(p.num)) {
    throw new RuleSyntaxError(
      `${module} match needs \`-p ${allowed.map((n) => (n === PROTO_TCP ? 'tcp' : 'udp')).join("' or `-p ")}' (not negated) before it`,
    );
  }
  return p.num;
}

// ---------------------------------------------------------------- tcp / udp

const TCP_FLAG_BITS: Record<string, number> = { FIN: 1, SYN: 2, RST: 4, PSH: 8, ACK: 16, URG: 32 };
const TCP_FLAG_ORDER = ['FIN', 'SYN', 'RST', 'PSH', 'ACK', 'URG'] as const;

function parseTcpFlags(text: string): number {
  if (text === 'ALL') return 63;
  if (text === 'NONE') return 0;
  let bits = 0;
  for (const f of text.split(',')) {
    const b = TCP_FLAG_BITS[f.toUpperCase()];
    if (b === undefined)
      throw new RuleSyntaxError(`tcp: unknown TCP flag "${f}" (use FIN,SYN,RST,PSH,ACK,URG, ALL or NONE)`);
    bits |= b;
  }
  return bits;
}

function formatTcpFlags(bits: number): string {
  if (bits === 0) return 'NONE';
  if (bits === 63) return 'ALL';
  return TCP_FLAG_ORDER.filter((f) => (bits & (TCP_FLAG_BITS[f] ?? 0)) !== 0).join(',');
}

/** `-m tcp` / `-m udp`: ports (and TCP flags). The protocol is part of the match (Ports_Fail lesson). */
export class PortsMatch implements MatchInstance {
  readonly hooks = undefined;
  private readonly seen = new Set<string>();
  sport: { neg: boolean; range: readonly [number, number] } | undefined;
  dport: { neg: boolean; range: readonly [number, number] } | undefined;
  flags: { neg: boolean; mask: number; comp: number } | undefined;
  constructor(readonly module: 'tcp' | 'udp') {}

  parseOption(opt: string, neg: boolean, take: Take): boolean {
    switch (opt) {
      case '--sport':
      case '--source-port':
        once(this.seen, this.module, '--sport');
        this.sport = { neg, range: parsePortRange(take(), `${this.module} --sport`) };
        return true;
      case '--dport':
      case '--destination-port':
        once(this.seen, this.module, '--dport');
        this.dport = { neg, range: parsePortRange(take(), `${this.module} --dport`) };
        return true;
      case '--tcp-flags': {
        if (this.module !== 'tcp') return false;
        once(this.seen, this.module, '--tcp-flags');
        const mask = parseTcpFlags(take());
        const comp = parseTcpFlags(take());
        this.flags = { neg, mask, comp };
        return true;
      }
      case '--syn':
        if (this.module !== 'tcp') return false;
        once(this.seen, this.module, '--tcp-flags');
        this.flags = { neg, mask: 1 | 2 | 4 | 16, comp: 2 };
        return true;
      default:
        return false;
    }
  }

  finish(rc: RuleContext): void {
    requireProto(rc, this.module, [this.module === 'tcp' ? PROTO_TCP : PROTO_UDP]);
  }

  render(): string {
    let s = `-m ${this.module}`;
    if (this.sport) s += `${this.sport.neg ? ' !' : ''} --sport ${formatPortRange(this.sport.range)}`;
    if (this.dport) s += `${this.dport.neg ? ' !' : ''} --dport ${formatPortRange(this.dport.range)}`;
    if (this.flags)
      s += `${this.flags.neg ? ' !' : ''} --tcp-flags ${formatTcpFlags(this.flags.mask)} ${formatTcpFlags(this.flags.comp)}`;
    return s;
  }

  compile(): Pred {
    const proto = this.module;
    const sp = this.sport;
    const dp = this.dport;
    const fl = this.flags;
    return (ctx) => {
      const p = ctx.packet;
      if (p.proto !== proto) return false;
      if (sp && (p.sport >= sp.range[0] && p.sport <= sp.range[1]) === sp.neg) return false;
      if (dp && (p.dport >= dp.range[0] && p.dport <= dp.range[1]) === dp.neg) return false;
      if (fl) {
        const f = p.flags;
        const bits = (f.fin ? 1 : 0) | (f.syn ? 2 : 0) | (f.rst ? 4 : 0) | (f.ack ? 16 : 0);
        if (((bits & fl.mask) === fl.comp) === fl.neg) return false;
      }
      return true;
    };
  }
}

// ---------------------------------------------------------------- multiport

class MultiportMatch implements MatchInstance {
  readonly module = 'multiport';
  readonly hooks = undefined;
  private which: 'dports' | 'sports' | 'ports' | undefined;
  private neg = false;
  private ranges: (readonly [number, number])[] = [];
  private proto = 0;

  parseOption(opt: string, neg: boolean, take: Take): boolean {
    const which =
      opt === '--dports' || opt === '--destination-ports'
        ? 'dports'
        : opt === '--sports' || opt === '--source-ports'
          ? 'sports'
          : opt === '--ports'
            ? 'ports'
            : undefined;
    if (!which) return false;
    if (this.which) throw new RuleSyntaxError('multiport: only one of --sports, --dports, --ports per match');
    this.which = which;
    this.neg = neg;
    const text = take();
    let count = 0;
    for (const item of text.split(',')) {
      const r = parsePortRange(item, `multiport --${which}`);
      if (item.includes(':') && r[0] >= r[1])
        throw new RuleSyntaxError(`multiport --${which}: invalid port range "${item}"`);
      count += r[0] === r[1] ? 1 : 2;
      this.ranges.push(r);
    }
    if (count > 15)
      throw new RuleSyntaxError(
        `multiport --${which}: too many ports in "${text}" (at most 15, a range counts as two)`,
      );
    return true;
  }

  finish(rc: RuleContext): void {
    if (!this.which) throw new RuleSyntaxError('multiport: needs --sports, --dports or --ports');
    this.proto = requireProto(rc, 'multiport', [PROTO_TCP, PROTO_UDP]);
  }

  render(): string {
    const list = this.ranges.map((r) => formatPortRange(r)).join(',');
    return `-m multiport${this.neg ? ' !' : ''} --${this.which ?? 'ports'} ${list}`;
  }

  compile(): Pred {
    const ranges = this.ranges;
    const neg = this.neg;
    const which = this.which;
    const proto = this.proto === PROTO_TCP ? 'tcp' : 'udp';
    const inAny = (port: number): boolean => {
      for (const r of ranges) if (port >= r[0] && port <= r[1]) return true;
      return false;
    };
    return (ctx) => {
      const p = ctx.packet;
      if (p.proto !== proto) return false;
      const hit =
        which === 'dports' ? inAny(p.dport) : which === 'sports' ? inAny(p.sport) : inAny(p.sport) || inAny(p.dport);
      return hit !== neg;
    };
  }
}

// ---------------------------------------------------------------- mark / connmark

class MarkMatch implements MatchInstance {
  readonly hooks = undefined;
  private mm: MarkMask | undefined;
  private neg = false;
  constructor(readonly module: 'mark' | 'connmark') {}

  parseOption(opt: string, neg: boolean, take: Take): boolean {
    if (opt !== '--mark') return false;
    if (this.mm) throw new RuleSyntaxError(`${this.module}: option "--mark" can only be used once`);
    this.mm = parseMarkMask(take(), `${this.module} --mark`);
    this.neg = neg;
    return true;
  }

  finish(): void {
    if (!this.mm) throw new RuleSyntaxError(`${this.module} match needs --mark value[/mask]`);
  }

  render(): string {
    const mm = this.mm as MarkMask;
    return `-m ${this.module}${this.neg ? ' !' : ''} --mark ${hex(mm.value)}${mm.mask === U32_MAX ? '' : `/${hex(mm.mask)}`}`;
  }

  compile(): Pred {
    const { value, mask } = this.mm as MarkMask;
    const neg = this.neg;
    if (this.module === 'mark') return (ctx) => ((ctx.packet.mark & mask) >>> 0 === value) !== neg;
    // No conntrack entry: the kernel's connmark match returns false (also under `!`).
    return (ctx) => ctx.ct !== undefined && ((ctx.ct.mark & mask) >>> 0 === value) !== neg;
  }
}

// ---------------------------------------------------------------- conntrack / state

const CT_STATES = ['INVALID', 'NEW', 'RELATED', 'ESTABLISHED', 'UNTRACKED', 'SNAT', 'DNAT'] as const;
type CtStateName = (typeof CT_STATES)[number];

function parseStates(text: string, module: string, allowed: readonly CtStateName[]): Set<CtStateName> {
  const out = new Set<CtStateName>();
  for (const s of text.split(',')) {
    const u = s.toUpperCase() as CtStateName;
    if (!allowed.includes(u))
      throw new RuleSyntaxError(`${module}: unknown state "${s}" (supported: ${allowed.join(', ')})`);
    out.add(u);
  }
  return out;
}

/** Conntrack state as the kernel's ctinfo sees it: no entry is INVALID unless ctx.untracked (types.ts); fakes without the flag count as UNTRACKED. */
function ctStateOf(ctx: EvalContext): CtState {
  return ctx.ct ? ctx.ct.state : ctx.untracked === false ? 'INVALID' : 'UNTRACKED';
}

function stateHit(states: ReadonlySet<CtStateName>, ctx: EvalContext): boolean {
  if (states.has(ctStateOf(ctx))) return true;
  const ct = ctx.ct;
  if (!ct) return false;
  return (states.has('SNAT') && ct.snat) || (states.has('DNAT') && ct.dnat);
}

function orderStates(states: ReadonlySet<CtStateName>): string {
  return CT_STATES.filter((s) => states.has(s)).join(',');
}

class ConntrackMatch implements MatchInstance {
  readonly module = 'conntrack';
  readonly hooks = undefined;
  private readonly seen = new Set<string>();
  private state: { neg: boolean; states: Set<CtStateName> } | undefined;
  private origsrc: { neg: boolean; prefix: IpPrefix } | undefined;
  private origdst: { neg: boolean; prefix: IpPrefix } | undefined;

  parseOption(opt: string, neg: boolean, take: Take, rc: RuleContext): boolean {
    switch (opt) {
      case '--ctstate':
        once(this.seen, 'conntrack', opt);
        this.state = { neg, states: parseStates(take(), 'conntrack --ctstate', CT_STATES) };
        return true;
      case '--ctorigsrc':
      case '--ctorigdst': {
        once(this.seen, 'conntrack', opt);
        const v = { neg, prefix: parseAddrOrPrefix(take(), `conntrack ${opt}`, rc) };
        if (opt === '--ctorigsrc') this.origsrc = v;
        else this.origdst = v;
        return true;
      }
      default:
        return false;
    }
  }

  finish(): void {
    if (this.seen.size === 0) throw new RuleSyntaxError('conntrack match needs --ctstate, --ctorigsrc or --ctorigdst');
  }

  render(): string {
    let s = '-m conntrack';
    if (this.state) s += `${this.state.neg ? ' !' : ''} --ctstate ${orderStates(this.state.states)}`;
    if (this.origsrc) s += `${this.origsrc.neg ? ' !' : ''} --ctorigsrc ${formatPrefix(this.origsrc.prefix)}`;
    if (this.origdst) s += `${this.origdst.neg ? ' !' : ''} --ctorigdst ${formatPrefix(this.origdst.prefix)}`;
    return s;
  }

  compile(): Pred {
    const st = this.state;
    const os = this.origsrc;
    const od = this.origdst;
    return (ctx) => {
      if (st && stateHit(st.states, ctx) === st.neg) return false;
      if (os || od) {
        // Tuple matches need an entry; without one the kernel's conntrack match fails.
        const ct = ctx.ct;
        if (!ct) return false;
        if (os && prefixHas(os.prefix, ct.origSrc.value, ct.origSrc.family) === os.neg) return false;
        if (od && prefixHas(od.prefix, ct.origDst.value, ct.origDst.family) === od.neg) return false;
      }
      return true;
    };
  }
}

class StateMatch implements MatchInstance {
  readonly module = 'state';
  readonly hooks = undefined;
  private state: { neg: boolean; states: Set<CtStateName> } | undefined;

  parseOption(opt: string, neg: boolean, take: Take): boolean {
    if (opt !== '--state') return false;
    if (this.state) throw new RuleSyntaxError('state: option "--state" can only be used once');
    this.state = {
      neg,
      states: parseStates(take(), 'state --state', ['INVALID', 'NEW', 'RELATED', 'ESTABLISHED', 'UNTRACKED']),
    };
    return true;
  }

  finish(): void {
    if (!this.state) throw new RuleSyntaxError('state match needs --state');
  }

  render(): string {
    const st = this.state as { neg: boolean; states: Set<CtStateName> };
    return `-m state${st.neg ? ' !' : ''} --state ${orderStates(st.states)}`;
  }

  compile(): Pred {
    const st = this.state as { neg: boolean; states: Set<CtStateName> };
    return (ctx) => st.states.has(ctStateOf(ctx)) !== st.neg;
  }
}

// ---------------------------------------------------------------- owner

function parseIdRange(text: string, what: string): readonly [number, number] {
  if (!/^[0-9]+(-[0-9]+)?$/.test(text)) {
    throw new RuleSyntaxError(
      `${what}: "${text}" is not a numeric id or id range (user/group names are not supported in the model)`,
    );
  }
  const [a, b] = text.split('-');
  const lo = parseU32(a as string, what);
  const hi = b === undefined ? lo : parseU32(b, what);
  if (lo > hi) throw new RuleSyntaxError(`${what}: invalid range "${text}"`);
  return [lo, hi];
}

class OwnerMatch implements MatchInstance {
  readonly module = 'owner';
  /** xt_owner: LOCAL_OUT and POST_ROUTING only. */
  readonly hooks: readonly Hook[] = ['OUTPUT', 'POSTROUTING'];
  private readonly seen = new Set<string>();
  private uid: { neg: boolean; range: readonly [number, number] } | undefined;
  private gid: { neg: boolean; range: readonly [number, number] } | undefined;
  private sock: { neg: boolean } | undefined;

  parseOption(opt: string, neg: boolean, take: Take): boolean {
    switch (opt) {
      case '--uid-owner':
        once(this.seen, 'owner', opt);
        this.uid = { neg, range: parseIdRange(take(), 'owner --uid-owner') };
        return true;
      case '--gid-owner':
        once(this.seen, 'owner', opt);
        this.gid = { neg, range: parseIdRange(take(), 'owner --gid-owner') };
        return true;
      case '--socket-exists':
        once(this.seen, 'owner', opt);
        this.sock = { neg };
        return true;
      default:
        return false;
    }
  }

  finish(): void {
    if (this.seen.size === 0)
      throw new RuleSyntaxError('owner match needs --uid-owner, --gid-owner or --socket-exists');
  }

  render(): string {
    const r = (x: readonly [number, number]): string => (x[0] === x[1] ? `${x[0]}` : `${x[0]}-${x[1]}`);
    let s = '-m owner';
    if (this.sock) s += `${this.sock.neg ? ' !' : ''} --socket-exists`;
    if (this.uid) s += `${this.uid.neg ? ' !' : ''} --uid-owner ${r(this.uid.range)}`;
    if (this.gid) s += `${this.gid.neg ? ' !' : ''} --gid-owner ${r(this.gid.range)}`;
    return s;
  }

  compile(): Pred {
    const { uid, gid, sock } = this;
    // xt_owner without a socket: matches iff every given criterion is negated.
    const noSocketResult = [uid, gid, sock].every((c) => c === undefined || c.neg);
    // xt_owner with a socket but no file (a kernel socket): only uid/gid decide, as for no socket.
    const noFileResult = [uid, gid].every((c) => c === undefined || c.neg);
    return (ctx) => {
      const s = ctx.socket;
      if (!s) return noSocketResult;
      if (sock && sock.neg) return false;
      if ('kernelSocket' in s) return noFileResult;
      if (uid && (s.uid >= uid.range[0] && s.uid <= uid.range[1]) === uid.neg) return false;
      if (gid && (s.gid >= gid.range[0] && s.gid <= gid.range[1]) === gid.neg) return false;
      return true;
    };
  }
}

// ---------------------------------------------------------------- addrtype

const ADDR_TYPES: readonly AddrType[] = [
  'UNSPEC',
  'UNICAST',
  'LOCAL',
  'BROADCAST',
  'ANYCAST',
  'MULTICAST',
  'BLACKHOLE',
  'UNREACHABLE',
  'PROHIBIT',
];

class AddrtypeMatch implements MatchInstance {
  readonly module = 'addrtype';
  private readonly seen = new Set<string>();
  private src: { neg: boolean; types: Set<AddrType> } | undefined;
  private dst: { neg: boolean; types: Set<AddrType> } | undefined;
  private limit: 'in' | 'out' | undefined;
  hooks: readonly Hook[] | undefined;

  parseOption(opt: string, neg: boolean, take: Take): boolean {
    switch (opt) {
      case '--src-type':
      case '--dst-type': {
        once(this.seen, 'addrtype', opt);
        const types = new Set<AddrType>();
        for (const t of take().split(',')) {
          const u = t.toUpperCase() as AddrType;
          if (!ADDR_TYPES.includes(u))
            throw new RuleSyntaxError(`addrtype ${opt}: unknown type "${t}" (supported: ${ADDR_TYPES.join(', ')})`);
          types.add(u);
        }
        if (opt === '--src-type') this.src = { neg, types };
        else this.dst = { neg, types };
        return true;
      }
      case '--limit-iface-in':
      case '--limit-iface-out':
        if (neg) throw new RuleSyntaxError(`addrtype: ${opt} cannot be negated`);
        if (this.limit) throw new RuleSyntaxError('addrtype: only one of --limit-iface-in and --limit-iface-out');
        this.limit = opt === '--limit-iface-in' ? 'in' : 'out';
        // xt_addrtype checkentry: iface-in not at OUTPUT/POSTROUTING, iface-out not at PREROUTING/INPUT.
        this.hooks = this.limit === 'in' ? ['PREROUTING', 'INPUT', 'FORWARD'] : ['FORWARD', 'OUTPUT', 'POSTROUTING'];
        return true;
      default:
        return false;
    }
  }

  finish(): void {
    if (!this.src && !this.dst) throw new RuleSyntaxError('addrtype match needs --src-type or --dst-type');
  }

  render(): string {
    const f = (x: { neg: boolean; types: Set<AddrType> }, o: string): string =>
      `${x.neg ? ' !' : ''} ${o} ${ADDR_TYPES.filter((t) => x.types.has(t)).join(',')}`;
    let s = '-m addrtype';
    if (this.src) s += f(this.src, '--src-type');
    if (this.dst) s += f(this.dst, '--dst-type');
    if (this.limit) s += ` --limit-iface-${this.limit}`;
    return s;
  }

  compile(): Pred {
    const { src, dst, limit } = this;
    return (ctx) => {
      const iface = limit === 'in' ? ctx.inIface : limit === 'out' ? ctx.outIface : undefined;
      if (src && src.types.has(ctx.addrType(ctx.packet.src, iface)) === src.neg) return false;
      if (dst && dst.types.has(ctx.addrType(ctx.packet.dst, iface)) === dst.neg) return false;
      return true;
    };
  }
}

// ---------------------------------------------------------------- set

class SetMatch implements MatchInstance {
  readonly module = 'set';
  readonly hooks = undefined;
  private name: string | undefined;
  private dir: 'src' | 'dst' = 'dst';
  private neg = false;

  parseOption(opt: string, neg: boolean, take: Take, rc: RuleContext): boolean {
    if (opt !== '--match-set') return false;
    if (this.name !== undefined) throw new RuleSyntaxError('set: only one --match-set per -m set (use another -m set)');
    const name = take();
    const dir = take();
    if (dir !== 'src' && dir !== 'dst') {
      throw new RuleSyntaxError(
        `set --match-set ${name}: direction "${dir}" is not supported (the model supports single-dimension src or dst)`,
      );
    }
    if (!rc.ipsets)
      throw new RuleSyntaxError(
        `set --match-set ${name}: this Netfilter has no ipset registry (pass one to its constructor)`,
      );
    const view = rc.ipsets.get(name);
    if (!view)
      throw new RuleSyntaxError(
        `set --match-set: ipset "${name}" does not exist (create it before loading rules, as the kernel requires)`,
      );
    if (view.family !== rc.family)
      throw new RuleSyntaxError(
        `set --match-set: ipset "${name}" is family inet${view.family === 6 ? '6' : ''}, rules are IPv${rc.family}`,
      );
    this.name = name;
    this.dir = dir;
    this.neg = neg;
    return true;
  }

  finish(): void {
    if (this.name === undefined) throw new RuleSyntaxError('set match needs --match-set NAME src|dst');
  }

  render(): string {
    return `-m set${this.neg ? ' !' : ''} --match-set ${this.name ?? ''} ${this.dir}`;
  }

  compile(): Pred {
    const name = this.name as string;
    const dst = this.dir === 'dst';
    const neg = this.neg;
    return (ctx) => {
      const set = ctx.ipset(name);
      // A set that vanished matches nothing (the kernel keeps referenced sets alive instead).
      if (!set) return false;
      return set.has(dst ? ctx.packet.dst : ctx.packet.src) !== neg;
    };
  }
}

// ---------------------------------------------------------------- comment

class CommentMatch implements MatchInstance {
  readonly module = 'comment';
  readonly hooks = undefined;
  private text: string | undefined;

  parseOption(opt: string, neg: boolean, take: Take): boolean {
    if (opt !== '--comment') return false;
    if (neg) throw new RuleSyntaxError('comment: --comment cannot be negated');
    if (this.text !== undefined) throw new RuleSyntaxError('comment: option "--comment" can only be used once');
    const t = take();
    if (t.length > 255) throw new RuleSyntaxError('comment: --comment is longer than 255 characters');
    this.text = t;
    return true;
  }

  finish(): void {
    if (this.text === undefined) throw new RuleSyntaxError('comment match needs --comment TEXT');
  }

  render(): string {
    return `-m comment --comment ${quoteWord(this.text ?? '')}`;
  }

  compile(): Pred {
    return () => true;
  }
}

// ---------------------------------------------------------------- helpers + factory

export function prefixHas(p: IpPrefix, value: bigint, family: number): boolean {
  if (p.addr.family !== family) return false;
  if (p.len === 0) return true;
  const bits = BigInt((family === 4 ? 32 : 128) - p.len);
  return value >> bits === p.addr.value >> bits;
}

/** `addr`, `addr/len` or (v4) `addr/dotted.mask`; host bits are cleared as iptables does. */
export function parseAddrOrPrefix(text: string, what: string, rc: { readonly family: number }): IpPrefix {
  let t = text;
  const slash = t.indexOf('/');
  if (slash >= 0 && t.slice(slash + 1).includes('.')) {
    const maskText = t.slice(slash + 1);
    let m: IpPrefix;
    try {
      m = parsePrefix(maskText);
    } catch {
      throw new RuleSyntaxError(`${what}: bad mask "${maskText}" in "${text}"`);
    }
    const v = Number(m.addr.value);
    const len = 32 - Math.log2((~v >>> 0) + 1);
    if (m.addr.family !== 4 || !Number.isInteger(len))
      throw new RuleSyntaxError(`${what}: mask "${maskText}" is not contiguous (use a prefix length)`);
    t = `${t.slice(0, slash)}/${len}`;
  }
  let p: IpPrefix;
  try {
    p = parsePrefix(t);
  } catch (e) {
    const why = e instanceof AddressError ? e.message : String(e);
    throw new RuleSyntaxError(`${what}: ${why} (host names are not supported; give an address or prefix)`);
  }
  if (p.addr.family !== rc.family) {
    throw new RuleSyntaxError(
      `${what}: "${text}" is an IPv${p.addr.family} address but this is ${rc.family === 4 ? 'iptables (IPv4)' : 'ip6tables (IPv6)'}`,
    );
  }
  return p;
}

export function createMatch(name: string): MatchInstance {
  switch (name) {
    case 'tcp':
      return new PortsMatch('tcp');
    case 'udp':
      return new PortsMatch('udp');
    case 'multiport':
      return new MultiportMatch();
    case 'mark':
      return new MarkMatch('mark');
    case 'connmark':
      return new MarkMatch('connmark');
    case 'conntrack':
      return new ConntrackMatch();
    case 'state':
      return new StateMatch();
    case 'owner':
      return new OwnerMatch();
    case 'addrtype':
      return new AddrtypeMatch();
    case 'set':
      return new SetMatch();
    case 'comment':
      return new CommentMatch();
    default:
      throw new RuleSyntaxError(
        `match module "${name}" is not supported by the model (supported: ${SUPPORTED_MATCHES.join(', ')})`,
      );
  }
}
