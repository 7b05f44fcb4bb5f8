/**
 * The `-j` targets the model supports: their options, the tables/hooks the kernel accepts them
 * in, iptables-save rendering and compiled effect. Terminating vs continuing is the kernel's
 * (docs/design.md, 'The simulated kernel'): MARK/CONNMARK/LOG/CT/NOTRACK continue; ACCEPT/DROP/REJECT end the
 * table; NAT targets and TPROXY end it with a verdict the datapath carries out.
 */
import { formatIp, parseIp, AddressError, type Family, type IpAddress } from '../../../impl/api/ip/address.js';
import { RuleSyntaxError } from './errors.js';
import { quoteWord } from './lexer.js';
import type { CompiledTarget, RuleContext, TargetInstance, Take } from './rule.js';
import type { Hook, NatAction, TableName, TableVerdict } from './types.js';
import { hex, parseMarkMask, parsePort, parsePortRange, parseU32, PROTO_TCP, PROTO_UDP, U32_MAX } from './values.js';

const SUPPORTED_TARGETS = [
  'ACCEPT',
  'DROP',
  'REJECT',
  'RETURN',
  '<user chain>',
  'MARK',
  'CONNMARK',
  'REDIRECT',
  'TPROXY',
  'DNAT',
  'SNAT',
  'MASQUERADE',
  'CT',
  'NOTRACK',
  'LOG',
] as const;

const NO_OPTIONS = (): boolean => false;

function simple(
  name: string,
  compiled: CompiledTarget,
  tables?: readonly TableName[],
  hooks?: readonly Hook[],
): TargetInstance {
  return {
    name,
    tables,
    hooks,
    parseOption: NO_OPTIONS,
    finish: () => undefined,
    render: () => `-j ${name}`,
    compile: () => compiled,
  };
}

function needPortProto(rc: RuleContext, target: string): void {
  const p = rc.proto;
  if (!p || p.neg || (p.num !== PROTO_TCP && p.num !== PROTO_UDP)) {
    throw new RuleSyntaxError(`${target}: a port specification needs \`-p tcp' or \`-p udp' in the rule`);
  }
}

// ---------------------------------------------------------------- REJECT

const REJECT4: Record<string, string> = {
  'icmp-net-unreachable': 'icmp-net-unreachable',
  'net-unreach': 'icmp-net-unreachable',
  'icmp-host-unreachable': 'icmp-host-unreachable',
  'host-unreach': 'icmp-host-unreachable',
  'icmp-port-unreachable': 'icmp-port-unreachable',
  'port-unreach': 'icmp-port-unreachable',
  'icmp-proto-unreachable': 'icmp-proto-unreachable',
  'proto-unreach': 'icmp-proto-unreachable',
  'icmp-net-prohibited': 'icmp-net-prohibited',
  'net-prohib': 'icmp-net-prohibited',
  'icmp-host-prohibited': 'icmp-host-prohibited',
  'host-prohib': 'icmp-host-prohibited',
  'icmp-admin-prohibited': 'icmp-admin-prohibited',
  'admin-prohib': 'icmp-admin-prohibited',
  'tcp-reset': 'tcp-reset',
  'tcp-rst': 'tcp-reset',
};
const REJECT6: Record<string, string> = {
  'icmp6-no-route': 'icmp6-no-route',
  'no-route': 'icmp6-no-route',
  'icmp6-adm-prohibited': 'icmp6-adm-prohibited',
  'adm-prohibited': 'icmp6-adm-prohibited',
  'icmp6-addr-unreachable': 'icmp6-addr-unreachable',
  'addr-unreach': 'icmp6-addr-unreachable',
  'icmp6-port-unreachable': 'icmp6-port-unreachable',
  'port-unreach': 'icmp6-port-unreachable',
  'icmp6-policy-fail': 'icmp6-policy-fail',
  'policy-fail': 'icmp6-policy-fail',
  'icmp6-reject-route': 'icmp6-reject-route',
  'reject-route': 'icmp6-reject-route',
  'tcp-reset': 'tcp-reset',
};

class RejectTarget implements TargetInstance {
  readonly name = 'REJECT';
  readonly tables: readonly TableName[] = ['filter'];
  readonly hooks: readonly Hook[] = ['INPUT', 'FORWARD', 'OUTPUT'];
  private with: string | undefined;
  parseOption(opt: string, take: Take, rc: RuleContext): boolean {
    if (opt !== '--reject-with') return false;
    const t = take();
    const table = rc.family === 4 ? REJECT4 : REJECT6;
    const w = table[t];
    if (!w)
      throw new RuleSyntaxError(
        `REJECT --reject-with: "${t}" is not valid for IPv${rc.family} (use one of ${Object.keys(table).join(', ')})`,
      );
    this.with = w;
    return true;
  }
  finish(rc: RuleContext): void {
    this.with ??= rc.family === 4 ? 'icmp-port-unreachable' : 'icmp6-port-unreachable';
    if (this.with === 'tcp-reset' && (!rc.proto || rc.proto.neg || rc.proto.num !== PROTO_TCP)) {
      throw new RuleSyntaxError("REJECT --reject-with tcp-reset needs `-p tcp'");
    }
  }
  render(): string {
    return `-j REJECT --reject-with ${this.with ?? ''}`;
  }
  compile(): CompiledTarget {
    return { k: 'verdict', verdict: { kind: 'reject', with: this.with ?? '' } };
  }
}

// ---------------------------------------------------------------- MARK / CONNMARK

/** xt_MARK / xt_CONNMARK set-xmark: new = (old & ~mask) ^ value. */
function xmark(old: number, value: number, mask: number): number {
  return ((old & ~mask) ^ value) >>> 0;
}

/** The --set-mark/--and-mark/--or-mark/--xor-mark spellings normalised to set-xmark (libxt_MARK). */
function parseMarkOp(opt: string, text: string, what: string): { value: number; mask: number } | undefined {
  switch (opt) {
    case '--set-xmark': {
      const m = parseMarkMask(text, `${what} ${opt}`);
      return { value: m.value, mask: m.mask };
    }
    case '--set-mark': {
      const m = parseMarkMask(text, `${what} ${opt}`);
      return { value: m.value, mask: (m.value | m.mask) >>> 0 };
    }
    case '--and-mark':
      return { value: 0, mask: ~parseU32(text, `${what} ${opt}`) >>> 0 };
    case '--or-mark': {
      const v = parseU32(text, `${what} ${opt}`);
      return { value: v, mask: v };
    }
    case '--xor-mark':
      return { value: parseU32(text, `${what} ${opt}`), mask: 0 };
    default:
      return undefined;
  }
}

class MarkTarget implements TargetInstance {
  readonly name = 'MARK';
  readonly tables = undefined;
  readonly hooks = undefined;
  private op: { value: number; mask: number } | undefined;
  parseOption(opt: string, take: Take): boolean {
    if (!['--set-xmark', '--set-mark', '--and-mark', '--or-mark', '--xor-mark'].includes(opt)) return false;
    if (this.op)
      throw new RuleSyntaxError('MARK: only one of --set-xmark, --set-mark, --and-mark, --or-mark, --xor-mark');
    this.op = parseMarkOp(opt, take(), 'MARK');
    return true;
  }
  finish(): void {
    if (!this.op) throw new RuleSyntaxError('MARK needs --set-xmark, --set-mark, --and-mark, --or-mark or --xor-mark');
  }
  render(): string {
    const op = this.op as { value: number; mask: number };
    return `-j MARK --set-xmark ${hex(op.value)}/${hex(op.mask)}`;
  }
  compile(): CompiledTarget {
    const { value, mask } = this.op as { value: number; mask: number };
    return {
      k: 'continue',
      apply: (ctx) => {
        ctx.packet.mark = xmark(ctx.packet.mark, value, mask);
      },
    };
  }
}

class ConnmarkTarget implements TargetInstance {
  readonly name = 'CONNMARK';
  readonly tables = undefined;
  readonly hooks = undefined;
  private mode: 'set' | 'save' | 'restore' | undefined;
  private op = { value: 0, mask: 0 };
  private nfmask: number | undefined;
  private ctmask: number | undefined;
  parseOption(opt: string, take: Take): boolean {
    const setOp = ['--set-xmark', '--set-mark', '--and-mark', '--or-mark', '--xor-mark'].includes(opt);
    if (setOp || opt === '--save-mark' || opt === '--restore-mark') {
      if (this.mode)
        throw new RuleSyntaxError(
          'CONNMARK: only one of --set-xmark/--set-mark/--and-mark/--or-mark/--xor-mark/--save-mark/--restore-mark',
        );
      if (setOp) {
        this.mode = 'set';
        this.op = parseMarkOp(opt, take(), 'CONNMARK') as { value: number; mask: number };
      } else {
        this.mode = opt === '--save-mark' ? 'save' : 'restore';
      }
      return true;
    }
    if (opt === '--nfmask' || opt === '--ctmask' || opt === '--mask') {
      const v = parseU32(take(), `CONNMARK ${opt}`);
      if (opt !== '--ctmask') this.nfmask = v;
      if (opt !== '--nfmask') this.ctmask = v;
      return true;
    }
    return false;
  }
  finish(): void {
    if (!this.mode)
      throw new RuleSyntaxError('CONNMARK needs --set-xmark, --set-mark, --save-mark or --restore-mark (and friends)');
    if (this.mode === 'set' && (this.nfmask !== undefined || this.ctmask !== undefined)) {
      throw new RuleSyntaxError('CONNMARK: --nfmask/--ctmask/--mask only go with --save-mark or --restore-mark');
    }
  }
  render(): string {
    if (this.mode === 'set') return `-j CONNMARK --set-xmark ${hex(this.op.value)}/${hex(this.op.mask)}`;
    return `-j CONNMARK --${this.mode ?? 'save'}-mark --nfmask ${hex(this.nfmask ?? U32_MAX)} --ctmask ${hex(this.ctmask ?? U32_MAX)}`;
  }
  compile(): CompiledTarget {
    const nf = this.nfmask ?? U32_MAX;
    const ctm = this.ctmask ?? U32_MAX;
    const { value, mask } = this.op;
    // No conntrack entry: xt_CONNMARK does nothing.
    switch (this.mode) {
      case 'set':
        return {
          k: 'continue',
          apply: (ctx) => {
            if (ctx.ct) ctx.ct.mark = xmark(ctx.ct.mark, value, mask);
          },
        };
      case 'save':
        return {
          k: 'continue',
          apply: (ctx) => {
            if (ctx.ct) ctx.ct.mark = ((ctx.ct.mark & ~ctm) ^ (ctx.packet.mark & nf)) >>> 0;
          },
        };
      default:
        return {
          k: 'continue',
          apply: (ctx) => {
            if (ctx.ct) ctx.packet.mark = ((ctx.packet.mark & ~nf) ^ (ctx.ct.mark & ctm)) >>> 0;
          },
        };
    }
  }
}

// ---------------------------------------------------------------- NAT

function parsePortsDash(text: string, what: string): readonly [number, number] {
  const r = parsePortRange(text, what, '-');
  if (text.startsWith('-') || text.endsWith('-'))
    throw new RuleSyntaxError(`${what}: bad port range "${text}" (use p or p1-p2)`);
  return r;
}

function fmtPorts(r: readonly [number, number]): string {
  return r[0] === r[1] ? `${r[0]}` : `${r[0]}-${r[1]}`;
}

/** `ip`, `ip:port[-port]`, `[v6]`, `[v6]:port[-port]`. IP ranges are not supported. */
function parseNatTo(
  text: string,
  what: string,
  family: Family,
): { addr: IpAddress; ports: readonly [number, number] | undefined } {
  let addrText = text;
  let portText: string | undefined;
  if (family === 6) {
    const m = /^\[([^\]]+)\](?::(.+))?$/.exec(text);
    if (m) {
      addrText = m[1] as string;
      portText = m[2];
    }
  } else {
    const i = text.indexOf(':');
    if (i >= 0) {
      addrText = text.slice(0, i);
      portText = text.slice(i + 1);
    }
  }
  if (addrText.includes('-'))
    throw new RuleSyntaxError(`${what}: address ranges ("${addrText}") are not supported by the model`);
  let addr: IpAddress;
  try {
    addr = parseIp(addrText);
  } catch (e) {
    throw new RuleSyntaxError(
      `${what}: ${e instanceof AddressError ? e.message : String(e)} in "${text}"${family === 6 ? ' (IPv6 with a port is written [addr]:port)' : ''}`,
    );
  }
  if (addr.family !== family)
    throw new RuleSyntaxError(`${what}: "${addrText}" is IPv${addr.family} but this is IPv${family}`);
  return { addr, ports: portText === undefined ? undefined : parsePortsDash(portText, what) };
}

function fmtNatTo(addr: IpAddress, ports: readonly [number, number] | undefined): string {
  const a = addr.family === 6 && ports ? `[${formatIp(addr)}]` : formatIp(addr);
  return ports ? `${a}:${fmtPorts(ports)}` : a;
}

class NatTarget implements TargetInstance {
  readonly tables: readonly TableName[] = ['nat'];
  readonly hooks: readonly Hook[];
  private addr: IpAddress | undefined;
  private ports: readonly [number, number] | undefined;
  constructor(readonly name: 'REDIRECT' | 'DNAT' | 'SNAT' | 'MASQUERADE') {
    this.hooks =
      name === 'REDIRECT' || name === 'DNAT'
        ? ['PREROUTING', 'OUTPUT']
        : name === 'SNAT'
          ? ['POSTROUTING', 'INPUT']
          : ['POSTROUTING'];
  }
  parseOption(opt: string, take: Take, rc: RuleContext): boolean {
    const n = this.name;
    if ((n === 'REDIRECT' || n === 'MASQUERADE') && (opt === '--to-ports' || opt === '--to-port')) {
      if (this.ports) throw new RuleSyntaxError(`${n}: --to-ports given twice`);
      this.ports = parsePortsDash(take(), `${n} --to-ports`);
      return true;
    }
    if ((n === 'DNAT' && opt === '--to-destination') || (n === 'SNAT' && opt === '--to-source')) {
      if (this.addr) throw new RuleSyntaxError(`${n}: ${opt} given twice (multiple ranges are not supported)`);
      const t = parseNatTo(take(), `${n} ${opt}`, rc.family);
      this.addr = t.addr;
      this.ports = t.ports;
      return true;
    }
    return false;
  }
  finish(rc: RuleContext): void {
    if ((this.name === 'DNAT' || this.name === 'SNAT') && !this.addr) {
      throw new RuleSyntaxError(
        `${this.name} needs ${this.name === 'DNAT' ? '--to-destination' : '--to-source'} (the model does not support port-only ranges)`,
      );
    }
    if (this.ports) needPortProto(rc, this.name);
  }
  render(): string {
    switch (this.name) {
      case 'DNAT':
        return `-j DNAT --to-destination ${fmtNatTo(this.addr as IpAddress, this.ports)}`;
      case 'SNAT':
        return `-j SNAT --to-source ${fmtNatTo(this.addr as IpAddress, this.ports)}`;
      default:
        return `-j ${this.name}${this.ports ? ` --to-ports ${fmtPorts(this.ports)}` : ''}`;
    }
  }
  compile(): CompiledTarget {
    let action: NatAction;
    const ports = this.ports;
    switch (this.name) {
      case 'REDIRECT':
        action = ports ? { kind: 'redirect', ports } : { kind: 'redirect' };
        break;
      case 'MASQUERADE':
        action = ports ? { kind: 'masquerade', ports } : { kind: 'masquerade' };
        break;
      case 'DNAT':
        action = ports
          ? { kind: 'dnat', addr: this.addr as IpAddress, ports }
          : { kind: 'dnat', addr: this.addr as IpAddress };
        break;
      default:
        action = ports
          ? { kind: 'snat', addr: this.addr as IpAddress, ports }
          : { kind: 'snat', addr: this.addr as IpAddress };
    }
    return { k: 'verdict', verdict: { kind: 'nat', action } };
  }
}

// ---------------------------------------------------------------- TPROXY

class TproxyTarget implements TargetInstance {
  readonly name = 'TPROXY';
  readonly tables: readonly TableName[] = ['mangle'];
  readonly hooks: readonly Hook[] = ['PREROUTING'];
  private port: number | undefined;
  private ip: IpAddress | undefined;
  private mark = { value: 0, mask: 0 };
  private family: Family = 4;
  parseOption(opt: string, take: Take, rc: RuleContext): boolean {
    switch (opt) {
      case '--on-port':
        this.port = parsePort(take(), 'TPROXY --on-port');
        return true;
      case '--on-ip': {
        const t = take();
        let a: IpAddress;
        try {
          a = parseIp(t);
        } catch {
          throw new RuleSyntaxError(`TPROXY --on-ip: "${t}" is not an IP address`);
        }
        if (a.family !== rc.family)
          throw new RuleSyntaxError(`TPROXY --on-ip: "${t}" is IPv${a.family} but this is IPv${rc.family}`);
        this.ip = a;
        return true;
      }
      case '--tproxy-mark': {
        const m = parseMarkMask(take(), 'TPROXY --tproxy-mark');
        this.mark = { value: m.value, mask: m.mask };
        return true;
      }
      default:
        return false;
    }
  }
  finish(rc: RuleContext): void {
    this.family = rc.family;
    if (this.port === undefined) throw new RuleSyntaxError('TPROXY needs --on-port');
    needPortProto(rc, 'TPROXY');
  }
  render(): string {
    const ip = this.ip ? formatIp(this.ip) : this.family === 4 ? '0.0.0.0' : '::';
    return `-j TPROXY --on-port ${this.port ?? 0} --on-ip ${ip} --tproxy-mark ${hex(this.mark.value)}/${hex(this.mark.mask)}`;
  }
  compile(): CompiledTarget {
    const verdict: TableVerdict = {
      kind: 'tproxy',
      port: this.port ?? 0,
      addr: this.ip,
      mark:
        this.mark.mask === 0 && this.mark.value === 0 ? undefined : { value: this.mark.value, mask: this.mark.mask },
    };
    return { k: 'verdict', verdict };
  }
}

// ---------------------------------------------------------------- CT / NOTRACK / LOG

class CtTarget implements TargetInstance {
  readonly name = 'CT';
  readonly tables: readonly TableName[] = ['raw'];
  readonly hooks = undefined;
  private notrack = false;
  private zone: number | undefined;
  parseOption(opt: string, take: Take): boolean {
    if (opt === '--notrack') {
      this.notrack = true;
      return true;
    }
    if (opt === '--zone') {
      const z = parseU32(take(), 'CT --zone');
      if (z > 65535) throw new RuleSyntaxError('CT --zone: zone must be 0..65535');
      this.zone = z;
      return true;
    }
    return false;
  }
  finish(): void {
    if (this.notrack && this.zone !== undefined)
      throw new RuleSyntaxError('CT: --notrack cannot be combined with other options');
    if (!this.notrack && this.zone === undefined)
      throw new RuleSyntaxError('CT: the model supports only --notrack or --zone N');
  }
  render(): string {
    return this.notrack ? '-j CT --notrack' : `-j CT --zone ${this.zone ?? 0}`;
  }
  compile(): CompiledTarget {
    if (this.notrack) return { k: 'continue', apply: (ctx) => ctx.setNotrack() };
    const z = this.zone ?? 0;
    return { k: 'continue', apply: (ctx) => ctx.setZone(z) };
  }
}

const LOG_LEVELS: Record<string, number> = {
  emerg: 0,
  alert: 1,
  crit: 2,
  err: 3,
  error: 3,
  warning: 4,
  warn: 4,
  notice: 5,
  info: 6,
  debug: 7,
};

class LogTarget implements TargetInstance {
  readonly name = 'LOG';
  readonly tables = undefined;
  readonly hooks = undefined;
  private prefix: string | undefined;
  private level = 4;
  parseOption(opt: string, take: Take): boolean {
    if (opt === '--log-prefix') {
      const p = take();
      if (p.length > 29) throw new RuleSyntaxError(`LOG --log-prefix: "${p}" is longer than 29 characters`);
      this.prefix = p;
      return true;
    }
    if (opt === '--log-level') {
      const t = take();
      const n = LOG_LEVELS[t.toLowerCase()] ?? (/^[0-7]$/.test(t) ? Number(t) : undefined);
      if (n === undefined) throw new RuleSyntaxError(`LOG --log-level: "${t}" is not 0..7 or a level name`);
      this.level = n;
      return true;
    }
    return false;
  }
  finish(): void {
    /* all options optional */
  }
  render(): string {
    let s = '-j LOG';
    if (this.prefix !== undefined) s += ` --log-prefix ${quoteWord(this.prefix)}`;
    if (this.level !== 4) s += ` --log-level ${this.level}`;
    return s;
  }
  compile(): CompiledTarget {
    const prefix = this.prefix ?? '';
    return { k: 'continue', apply: (ctx) => ctx.log(prefix) };
  }
}

/** `-j CHAIN` / `-g CHAIN` to a user chain; existence and loops are checked at commit. */
class ChainTarget implements TargetInstance {
  readonly tables = undefined;
  readonly hooks = undefined;
  constructor(
    readonly name: string,
    readonly goto: boolean,
  ) {}
  parseOption(): boolean {
    return false;
  }
  finish(): void {
    /* checked at commit */
  }
  render(): string {
    return `${this.goto ? '-g' : '-j'} ${this.name}`;
  }
  compile(): CompiledTarget {
    return { k: this.goto ? 'goto' : 'jump', chain: this.name };
  }
}

const BUILTIN_CHAIN_NAMES = new Set(['PREROUTING', 'INPUT', 'FORWARD', 'OUTPUT', 'POSTROUTING']);

/** A target by name; `userChain` says whether the table has a user chain of that name. */
export function createTarget(name: string, goto: boolean, userChain: boolean): TargetInstance {
  if (goto) {
    if (BUILTIN_CHAIN_NAMES.has(name)) throw new RuleSyntaxError(`-g ${name}: cannot goto a built-in chain`);
    if (!userChain)
      throw new RuleSyntaxError(
        `-g ${name}: chain "${name}" does not exist in this table (declare it with :${name} - [0:0] or -N first)`,
      );
    return new ChainTarget(name, true);
  }
  switch (name) {
    case 'ACCEPT':
      return simple('ACCEPT', { k: 'accept' });
    // iptables refuses DROP in nat: "The nat table is not intended for filtering" (checked on 1.8.9).
    case 'DROP':
      return simple('DROP', { k: 'drop' }, ['raw', 'mangle', 'filter', 'security']);
    case 'RETURN':
      return simple('RETURN', { k: 'return' });
    case 'REJECT':
      return new RejectTarget();
    case 'MARK':
      return new MarkTarget();
    case 'CONNMARK':
      return new ConnmarkTarget();
    case 'REDIRECT':
    case 'DNAT':
    case 'SNAT':
    case 'MASQUERADE':
      return new NatTarget(name);
    case 'TPROXY':
      return new TproxyTarget();
    case 'CT':
      return new CtTarget();
    case 'NOTRACK': {
      const t = simple('NOTRACK', { k: 'continue', apply: (ctx) => ctx.setNotrack() }, ['raw']);
      return t;
    }
    case 'LOG':
      return new LogTarget();
    default:
      if (BUILTIN_CHAIN_NAMES.has(name)) throw new RuleSyntaxError(`-j ${name}: cannot jump to a built-in chain`);
      if (userChain) return new ChainTarget(name, false);
      throw new RuleSyntaxError(
        `-j ${name}: no such target or chain (supported targets: ${SUPPORTED_TARGETS.join(', ')}; user chains must be declared before use)`,
      );
  }
}
