/**
 * Typed intermediate form of redirection rules: tables, own chains and rules whose matches and
 * targets are data, not strings. The rule builder produces it, render-iptables.ts turns it into
 * restore text, and mutation testing edits it (remove a rule, drop a match) through the stable
 * rule ids — so "which rule matters" is asked of the IR, and the text stays the artifact.
 *
 * Every value that reaches rule text is typed and validated at construction (chain names, CIDRs,
 * ports, interface names, ipset names), so hostile input fails before any text exists.
 */
import type { Brand } from '../api/brand.js';
import type { Mark } from '../api/marks.js';
import type { Port } from '../api/ports.js';
import type { InterfaceName } from '../api/annotations.js';
import type { IpFamily } from '../host/netns-rules.js';

export type Table = 'raw' | 'mangle' | 'nat' | 'filter';
/** Render order of tables (the order iptables-save prints them). */
export const TABLE_ORDER: readonly Table[] = ['raw', 'mangle', 'nat', 'filter'];

export type BuiltinChain = 'PREROUTING' | 'INPUT' | 'FORWARD' | 'OUTPUT' | 'POSTROUTING';
const BUILTINS: readonly string[] = ['PREROUTING', 'INPUT', 'FORWARD', 'OUTPUT', 'POSTROUTING'];

/** A user chain the plan owns (declared `:NAME - [0:0]`). */
export type OwnChain = Brand<string, 'OwnChain'>;

export function ownChain(name: string): OwnChain {
  // iptables allows up to 28 characters; built-in names would make the chain a hook.
  if (!/^[A-Z][A-Z0-9_]{0,27}$/.test(name) || BUILTINS.includes(name)) {
    throw new Error(
      `invalid own chain name ${JSON.stringify(name)}: expected 1-28 characters of [A-Z0-9_] starting with a letter, not a built-in chain`,
    );
  }
  return name as OwnChain;
}

export function isBuiltin(chain: BuiltinChain | OwnChain): chain is BuiltinChain {
  return BUILTINS.includes(chain);
}

/** An address prefix of one family, in canonical text (`10.0.0.1/32`, `::1/128`). */
export interface Cidr {
  readonly family: IpFamily;
  readonly text: string;
}

const V4 = /^(25[0-5]|2[0-4]\d|1\d\d|[1-9]?\d)(\.(25[0-5]|2[0-4]\d|1\d\d|[1-9]?\d)){3}$/;
const V6 = /^[0-9a-f:]{2,39}$/;

function validV6(addr: string): boolean {
  if (!V6.test(addr)) return false;
  const halves = addr.split('::');
  if (halves.length > 2) return false;
  const groups = halves.flatMap((h) => (h === '' ? [] : h.split(':')));
  if (groups.some((g) => g.length === 0 || g.length > 4)) return false;
  return halves.length === 2 ? groups.length < 8 : groups.length === 8;
}

/** `cidr('169.254.7.127')` = /32, `cidr('::1')` = /128; lowercase IPv6 only, no zone ids. */
export function cidr(text: string): Cidr {
  const [addr = '', len, extra] = text.split('/');
  const family: IpFamily | undefined = V4.test(addr) ? 'ipv4' : validV6(addr) ? 'ipv6' : undefined;
  const max = family === 'ipv4' ? 32 : 128;
  const n = len === undefined ? max : /^\d{1,3}$/.test(len) ? Number(len) : NaN;
  if (!family || extra !== undefined || !(n >= 0 && n <= max)) {
    throw new Error(
      `invalid address ${JSON.stringify(text)}: expected an IPv4 or lowercase IPv6 address with an optional /prefix-length`,
    );
  }
  return { family, text: `${addr}/${n}` };
}

export function address(c: Cidr): string {
  return c.text.slice(0, c.text.indexOf('/'));
}

/** Name of an ipset(8) set the rules refer to. */
export type IpSetName = Brand<string, 'IpSetName'>;

export function ipSetName(name: string): IpSetName {
  if (!/^[a-z][a-z0-9_-]{0,30}$/.test(name))
    throw new Error(
      `invalid ipset name ${JSON.stringify(name)}: expected 1-31 characters of [a-z0-9_-] starting with a letter`,
    );
  return name as IpSetName;
}

type L4 = 'tcp' | 'udp' | 'icmp' | 'ipv6-icmp';
/** TCP flags in the order iptables-save prints them (libxt_tcp). */
export const TCP_FLAG_ORDER = ['FIN', 'SYN', 'RST', 'PSH', 'ACK', 'URG'] as const;
type TcpFlag = (typeof TCP_FLAG_ORDER)[number];
type CtState = 'NEW' | 'ESTABLISHED' | 'RELATED' | 'INVALID' | 'UNTRACKED';

/** A match; `neg` renders `!`. Port matches need a `proto` match of tcp or udp in the same rule. */
export type Match =
  | { readonly kind: 'src'; readonly cidr: Cidr; readonly neg?: boolean }
  | { readonly kind: 'dst'; readonly cidr: Cidr; readonly neg?: boolean }
  | { readonly kind: 'in'; readonly iface: InterfaceName | 'lo'; readonly neg?: boolean }
  | { readonly kind: 'out'; readonly iface: InterfaceName | 'lo'; readonly neg?: boolean }
  | { readonly kind: 'proto'; readonly proto: L4; readonly neg?: boolean }
  /**
   * `-m tcp|udp` with optional ports; an empty one is what upstream writes (`-p tcp -m tcp`).
   * `tcpFlags` (tcp only): `--tcp-flags MASK COMP`, the flags among MASK that must be set;
   * `negTcpFlags` renders `! --tcp-flags` (e.g. `! --syn`: anything but a bare SYN).
   */
  | {
      readonly kind: 'l4';
      readonly dport?: Port;
      readonly sport?: Port;
      readonly negDport?: boolean;
      readonly tcpFlags?: { readonly mask: readonly TcpFlag[]; readonly comp: readonly TcpFlag[] };
      readonly negTcpFlags?: boolean;
    }
  | { readonly kind: 'multiport'; readonly dports: readonly Port[] }
  | { readonly kind: 'mark'; readonly mark: Mark; readonly neg?: boolean }
  | { readonly kind: 'connmark'; readonly mark: Mark; readonly neg?: boolean }
  /** xt_owner: only in OUTPUT/POSTROUTING; without a full socket only all-negated criteria match. */
  | { readonly kind: 'owner'; readonly socketExists?: boolean; readonly uid?: number; readonly negUid?: boolean }
  | { readonly kind: 'set'; readonly set: IpSetName; readonly dir: 'src' | 'dst' }
  | { readonly kind: 'ctstate'; readonly states: readonly CtState[]; readonly neg?: boolean };

export type Target =
  | { readonly kind: 'ACCEPT' }
  | { readonly kind: 'DROP' }
  | { readonly kind: 'RETURN' }
  | { readonly kind: 'jump'; readonly chain: OwnChain }
  | { readonly kind: 'REDIRECT'; readonly toPort: Port }
  /** mangle PREROUTING only; `onIp` unspecified means the arriving device's first address (the kernel's default). */
  | { readonly kind: 'TPROXY'; readonly onPort: Port; readonly onIp: '0.0.0.0' | '::'; readonly mark: Mark }
  | { readonly kind: 'SNAT'; readonly toSource: Cidr }
  | { readonly kind: 'CONNMARK-set'; readonly mark: Mark }
  | { readonly kind: 'CONNMARK-restore'; readonly nfmask: number; readonly ctmask: number }
  | { readonly kind: 'CT-zone'; readonly zone: number };

/** Stable, human-readable id of a rule within a ruleset, e.g. `nat/out/redirect-outbound`. */
type RuleId = Brand<string, 'RuleId'>;

export interface Rule {
  readonly id: RuleId;
  readonly table: Table;
  readonly chain: BuiltinChain | OwnChain;
  /** `insert-first` renders `-I CHAIN 1` (only for hooks that must run before others' rules). */
  readonly position: 'append' | 'insert-first';
  readonly matches: readonly Match[];
  readonly target: Target;
  /**
   * Why this rule matters for capture or authorization, in one line; absent for rules whose loss
   * only costs availability. Mutation testing must notice removing or weakening the flagged ones.
   */
  readonly security?: string;
}

export interface Ruleset {
  readonly family: IpFamily;
  /** Own chains per table, in declaration order. */
  readonly chains: readonly { readonly table: Table; readonly name: OwnChain }[];
  /** Rules in evaluation order within each chain; hooks on built-in chains jump to own chains. */
  readonly rules: readonly Rule[];
}

export function ruleId(id: string): RuleId {
  if (!/^[a-z0-9][a-z0-9/._:-]{0,127}$/.test(id))
    throw new Error(`invalid rule id ${JSON.stringify(id)}: expected [a-z0-9/._:-]`);
  return id as RuleId;
}

/** Assemble a ruleset, checking ids are unique and every chain a rule names or jumps to is declared. */
export function ruleset(family: IpFamily, chains: Ruleset['chains'], rules: readonly Rule[]): Ruleset {
  const ids = new Set<string>();
  const declared = new Set(chains.map((c) => `${c.table}/${c.name}`));
  if (declared.size !== chains.length)
    throw new Error(`ruleset ${family}: an own chain is declared twice in one table`);
  for (const r of rules) {
    if (ids.has(r.id)) throw new Error(`ruleset ${family}: rule id ${r.id} is used twice`);
    ids.add(r.id);
    if (!isBuiltin(r.chain) && !declared.has(`${r.table}/${r.chain}`))
      throw new Error(`rule ${r.id}: chain ${r.table}/${r.chain} is not declared`);
    if (isBuiltin(r.chain) && r.target.kind !== 'jump')
      throw new Error(
        `rule ${r.id}: a rule on built-in chain ${r.chain} must jump to an own chain (NetnsRules contract)`,
      );
    if (r.target.kind === 'jump' && !declared.has(`${r.table}/${r.target.chain}`))
      throw new Error(`rule ${r.id}: jump target ${r.table}/${r.target.chain} is not declared`);
    for (const m of r.matches) {
      if ((m.kind === 'src' || m.kind === 'dst') && m.cidr.family !== family) {
        throw new Error(`rule ${r.id}: ${m.kind} ${m.cidr.text} is not ${family}`);
      }
    }
    if (r.target.kind === 'TPROXY' && (r.target.onIp === '::') !== (family === 'ipv6'))
      throw new Error(`rule ${r.id}: TPROXY --on-ip ${r.target.onIp} is not ${family}`);
    if (r.target.kind === 'SNAT' && r.target.toSource.family !== family)
      throw new Error(`rule ${r.id}: SNAT to ${r.target.toSource.text} is not ${family}`);
  }
  return { family, chains, rules };
}

// ---------------------------------------------------------------- mutation support

/** The ruleset without one rule (mutation testing: "remove each generated rule"). */
function withoutRule(rs: Ruleset, id: RuleId): Ruleset {
  const rules = rs.rules.filter((r) => r.id !== id);
  if (rules.length === rs.rules.length) throw new Error(`withoutRule: no rule ${id} in the ${rs.family} ruleset`);
  return { ...rs, rules };
}

/** The ruleset with match `index` of rule `id` dropped (mutation testing: "weaken each match"). */
function withoutMatch(rs: Ruleset, id: RuleId, index: number): Ruleset {
  let found = false;
  const rules = rs.rules.map((r) => {
    if (r.id !== id) return r;
    if (index < 0 || index >= r.matches.length)
      throw new Error(`withoutMatch: rule ${id} has ${r.matches.length} matches; no index ${index}`);
    found = true;
    return { ...r, matches: r.matches.filter((_, i) => i !== index) };
  });
  if (!found) throw new Error(`withoutMatch: no rule ${id} in the ${rs.family} ruleset`);
  return { ...rs, rules };
}

export interface Mutant {
  /** e.g. `remove nat/out/redirect-outbound` or `weaken nat/out/redirect-outbound match 2 (mark)`. */
  readonly name: string;
  readonly rule: Rule;
  readonly ruleset: Ruleset;
}

/**
 * Every single-step mutant of a ruleset: each rule removed, and each match of each rule dropped
 * (a port match whose rule would lose its `-p` is dropped together with the `-p`, never alone,
 * so every mutant still renders to text the kernel accepts). Hooks are not mutated: removing
 * one disables a whole chain, which the per-rule mutants already cover.
 */
export function mutants(rs: Ruleset, opts: { onlySecurityRelevant?: boolean } = {}): Mutant[] {
  const out: Mutant[] = [];
  for (const r of rs.rules) {
    if (isBuiltin(r.chain)) continue;
    if (opts.onlySecurityRelevant && r.security === undefined) continue;
    out.push({ name: `remove ${r.id}`, rule: r, ruleset: withoutRule(rs, r.id) });
    r.matches.forEach((m, i) => {
      // REDIRECT, TPROXY and port matches need `-p tcp|udp`; without it the kernel would refuse the text.
      // An `-m tcp` without ports matches whatever `-p tcp` matched: dropping it changes nothing.
      if (m.kind === 'l4' && m.dport === undefined && m.sport === undefined) return;
      if (
        m.kind === 'proto' &&
        (r.target.kind === 'REDIRECT' ||
          r.target.kind === 'TPROXY' ||
          r.matches.some((x) => x.kind === 'l4' || x.kind === 'multiport'))
      )
        return;
      out.push({ name: `weaken ${r.id} match ${i} (${m.kind})`, rule: r, ruleset: withoutMatch(rs, r.id, i) });
    });
  }
  return out;
}
