/**
 * Ruleset IR → iptables-restore / ip6tables-restore text that satisfies the NetnsRules contract
 * (impl/host/netns-rules.ts): one block per table, own chains declared `:NAME - [0:0]`, built-in
 * chains never declared, hooks jump to own chains, only -A/-I lines. Rules are written in
 * iptables-save's canonical shape (`-s/-d/-i/-o/-p` first, `-m tcp` spelled out, /32 and /128
 * prefixes) so what the kernel prints back can be compared with what we wrote.
 *
 * Deterministic: tables in a fixed order, chains and rules in IR order, one `#` line per rule
 * carrying its id (and, for security-relevant rules, why it matters) — restore ignores them.
 */
import { formatMark } from '../api/marks.js';
import {
  address,
  isBuiltin,
  TABLE_ORDER,
  TCP_FLAG_ORDER,
  type Match,
  type Rule,
  type Ruleset,
  type Target,
} from './rule-ir.js';
import type { RestoreText } from '../host/netns-rules.js';

/** The order in which iptables-save prints conntrack states (libxt_conntrack). */
const CTSTATE_ORDER: readonly string[] = ['INVALID', 'NEW', 'RELATED', 'ESTABLISHED', 'UNTRACKED', 'SNAT', 'DNAT'];

function neg(n: boolean | undefined): string {
  return n ? '! ' : '';
}

function hex(n: number): string {
  return `0x${(n >>> 0).toString(16)}`;
}

function renderMatch(m: Match, rule: Rule): string {
  switch (m.kind) {
    case 'src':
      return `${neg(m.neg)}-s ${m.cidr.text}`;
    case 'dst':
      return `${neg(m.neg)}-d ${m.cidr.text}`;
    case 'in':
      return `${neg(m.neg)}-i ${m.iface}`;
    case 'out':
      return `${neg(m.neg)}-o ${m.iface}`;
    case 'proto':
      return `${neg(m.neg)}-p ${m.proto}`;
    case 'l4': {
      const p = rule.matches.find((x) => x.kind === 'proto');
      if (!p || p.kind !== 'proto' || p.neg || (p.proto !== 'tcp' && p.proto !== 'udp')) {
        throw new Error(`rule ${rule.id}: a port match needs -p tcp or -p udp in the same rule`);
      }
      const parts = [`-m ${p.proto}`];
      if (m.sport !== undefined) parts.push(`--sport ${m.sport}`);
      if (m.dport !== undefined) parts.push(`${neg(m.negDport)}--dport ${m.dport}`);
      if (m.tcpFlags !== undefined) {
        if (p.proto !== 'tcp') throw new Error(`rule ${rule.id}: --tcp-flags needs -p tcp`);
        const { mask, comp } = m.tcpFlags;
        if (mask.length === 0 || comp.some((f) => !mask.includes(f)))
          throw new Error(`rule ${rule.id}: --tcp-flags needs a non-empty mask that holds every compared flag`);
        // iptables-save prints each list in libxt_tcp's order, whatever order it was given in.
        const flags = (fs: readonly string[]): string =>
          fs.length === 0 ? 'NONE' : TCP_FLAG_ORDER.filter((f) => fs.includes(f)).join(',');
        parts.push(`${neg(m.negTcpFlags)}--tcp-flags ${flags(mask)} ${flags(comp)}`);
      } else if (m.negTcpFlags) throw new Error(`rule ${rule.id}: negTcpFlags without tcpFlags`);
      return parts.join(' ');
    }
    case 'multiport':
      if (m.dports.length < 1 || m.dports.length > 15)
        throw new Error(`rule ${rule.id}: multiport takes 1-15 ports, got ${m.dports.length}`);
      return `-m multiport --dports ${m.dports.join(',')}`;
    case 'mark':
      return `-m mark ${neg(m.neg)}--mark ${formatMark(m.mark)}`;
    case 'connmark':
      return `-m connmark ${neg(m.neg)}--mark ${formatMark(m.mark)}`;
    case 'owner': {
      const parts = ['-m owner'];
      if (m.socketExists) parts.push('--socket-exists');
      if (m.uid !== undefined) {
        if (!Number.isInteger(m.uid) || m.uid < 0 || m.uid > 0xfffffffe)
          throw new Error(`rule ${rule.id}: uid ${m.uid} is not a valid uid`);
        parts.push(`${neg(m.negUid)}--uid-owner ${m.uid}`);
      }
      if (parts.length === 1) throw new Error(`rule ${rule.id}: an owner match needs --socket-exists or --uid-owner`);
      return parts.join(' ');
    }
    case 'set':
      return `-m set --match-set ${m.set} ${m.dir}`;
    case 'ctstate':
      if (m.states.length === 0) throw new Error(`rule ${rule.id}: --ctstate needs at least one state`);
      // iptables-save prints states in a fixed order; render the same so plans compare to saves.
      return `-m conntrack ${neg(m.neg)}--ctstate ${[...m.states].sort((a, b) => CTSTATE_ORDER.indexOf(a) - CTSTATE_ORDER.indexOf(b)).join(',')}`;
  }
}

function renderTarget(t: Target): string {
  switch (t.kind) {
    case 'ACCEPT':
    case 'DROP':
    case 'RETURN':
      return `-j ${t.kind}`;
    case 'jump':
      return `-j ${t.chain}`;
    case 'REDIRECT':
      return `-j REDIRECT --to-ports ${t.toPort}`;
    case 'TPROXY':
      // iptables-save prints all three options of TPROXY v1, --on-ip included even when unset.
      return `-j TPROXY --on-port ${t.onPort} --on-ip ${t.onIp} --tproxy-mark ${formatMark(t.mark)}`;
    case 'SNAT':
      return `-j SNAT --to-source ${address(t.toSource)}`;
    case 'CONNMARK-set':
      return `-j CONNMARK --set-xmark ${formatMark(t.mark)}`;
    case 'CONNMARK-restore':
      return `-j CONNMARK --restore-mark --nfmask ${hex(t.nfmask)} --ctmask ${hex(t.ctmask)}`;
    case 'CT-zone':
      if (!Number.isInteger(t.zone) || t.zone < 0 || t.zone > 65535)
        throw new Error(`CT --zone ${t.zone}: expected 0..65535`);
      return `-j CT --zone ${t.zone}`;
  }
}

/** Generic matches first, in iptables-save's order; then the `-m` matches in IR order. */
const GENERIC_ORDER: Partial<Record<Match['kind'], number>> = { src: 0, dst: 1, in: 2, out: 3, proto: 4 };

/** One rule as a restore line (`-A CHAIN ...` or `-I CHAIN 1 ...`). */
export function renderRule(rule: Rule): string {
  const generic = rule.matches
    .filter((m) => GENERIC_ORDER[m.kind] !== undefined)
    .sort((a, b) => (GENERIC_ORDER[a.kind] ?? 0) - (GENERIC_ORDER[b.kind] ?? 0));
  const kinds = new Set<string>();
  for (const m of generic) {
    if (kinds.has(m.kind)) throw new Error(`rule ${rule.id}: more than one ${m.kind} match`);
    kinds.add(m.kind);
  }
  const others = rule.matches.filter((m) => GENERIC_ORDER[m.kind] === undefined);
  const head = rule.position === 'insert-first' ? `-I ${rule.chain} 1` : `-A ${rule.chain}`;
  return [
    head,
    ...generic.map((m) => renderMatch(m, rule)),
    ...others.map((m) => renderMatch(m, rule)),
    renderTarget(rule.target),
  ].join(' ');
}

/**
 * The restore text for one family. `title` goes into a leading comment (profile, variant).
 * Tables without own chains are left out entirely, so a plan never touches tables it does not use.
 */
export function renderRestore(rs: Ruleset, title?: string): RestoreText {
  const out: string[] = [];
  if (title !== undefined) {
    if (/[\n\r]/.test(title)) throw new Error('renderRestore: the title must be one line');
    out.push(`# ${title}`);
  }
  for (const table of TABLE_ORDER) {
    const chains = rs.chains.filter((c) => c.table === table);
    if (chains.length === 0) continue;
    out.push(`*${table}`);
    for (const c of chains) out.push(`:${c.name} - [0:0]`);
    const rules = rs.rules.filter((r) => r.table === table);
    // Hooks first so every own chain is reachable as soon as its rules exist in the dump.
    for (const r of [...rules.filter((r) => isBuiltin(r.chain)), ...rules.filter((r) => !isBuiltin(r.chain))]) {
      if (r.security !== undefined && /[\n\r]/.test(r.security))
        throw new Error(`rule ${r.id}: the security reason must be one line`);
      out.push(`# ${r.id}${r.security !== undefined ? ` [security] ${r.security}` : ''}`);
      out.push(renderRule(r));
    }
    out.push('COMMIT');
  }
  return `${out.join('\n')}\n`;
}
