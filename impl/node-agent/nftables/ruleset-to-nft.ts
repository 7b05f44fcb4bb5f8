/**
 * The rule IR (rule-ir.ts) as nftables: how the `strict` profile is written for the nftables
 * backend, rule for rule the same ruleset the iptables backend restores, so mutation testing and
 * the behaviour tests of the IR hold for both backends.
 *
 * One table per iptables table and family (`ip` for the IPv4 ruleset, `ip6` for the IPv6 one),
 * named `<prefix>-<table>`; each built-in chain the IR hooks becomes a base chain at the priority
 * iptables-nft gives that table (raw −300, mangle −150, nat −100 for destination NAT and 100 for
 * source NAT, filter 0), with mangle OUTPUT of type `route` (a changed mark re-routes, as mangle
 * OUTPUT does) and nat chains of type `nat`. A hook inserted first (`-I CHAIN 1`, there so other
 * CNIs' rules in the shared built-in chain cannot pre-empt it) becomes a base chain one below the
 * table's priority: nftables orders tables by priority, not by position.
 *
 * Where nftables differs from the iptables match, the translation says so or refuses:
 * - `-m owner --uid-owner U` is `meta skuid U`; `--socket-exists ! --uid-owner U` is
 *   `meta skuid != U`. They differ only for sockets without a file (the kernel's own control
 *   sockets, which send IPv4 resets): xt_owner matches those with the negated uid, `meta skuid`
 *   never matches without a file. No process can send through such a socket, so no app-made
 *   packet is judged differently. An owner match nftables cannot say (`--socket-exists` alone,
 *   `! --uid-owner` without `--socket-exists`) is refused.
 * - `TPROXY` drops a packet no socket takes; nftables' `tproxy` statement instead ends the rule
 *   and lets the chain go on. Each TPROXY rule is therefore two: `counter tproxy … meta mark set …
 *   accept` and, with the same matches, `drop` (the failed tproxy changed nothing, so the same
 *   matches hold). The counter is what iptables' rule counter is to the real-kernel worlds: the
 *   trace of which packets TPROXY took (raw-SYN attribution).
 * - `CONNMARK --restore-mark` is supported with full masks only (`meta mark set ct mark`).
 *
 * Values reaching the text were validated when the IR was built (interface names, addresses,
 * marks, ports, set names, uids); each is checked again here where nftables' grammar is narrower.
 */
import type { Mark } from '../../api/marks.js';
import type { IpFamily } from '../../host/netns-rules.js';
import {
  address,
  isBuiltin,
  TABLE_ORDER,
  type Match,
  type Rule,
  type Ruleset,
  type Table,
  type Target,
} from '../rule-ir.js';
import type { NftChain, NftHook, NftRule, NftTable } from './nft-document.js';

/** iptables-nft's priorities (nf_ip_hook_priorities) per table and hook. */
const PRIORITY: Record<Table, number> = { raw: -300, mangle: -150, nat: -100, filter: 0 };
const SRC_NAT_PRIORITY = 100;

function hex(n: number): string {
  return `0x${(n >>> 0).toString(16)}`;
}

function markExpr(what: 'meta mark' | 'ct mark', m: Mark, neg: boolean | undefined): string {
  const op = neg ? '!=' : '==';
  return m.mask >>> 0 === 0xffffffff
    ? `${what} ${op} ${hex(m.value)}`
    : `${what} & ${hex(m.mask)} ${op} ${hex(m.value)}`;
}

function quotedIface(name: string): string {
  // nft strings: interface names are validated [A-Za-z0-9_.-]; quoting keeps `.`/`-` words whole.
  if (!/^[A-Za-z0-9_.@-]{1,15}$/.test(name))
    throw new Error(`interface ${JSON.stringify(name)}: not an interface name`);
  return `"${name}"`;
}

const TCP_FLAG_NFT: Record<string, string> = { FIN: 'fin', SYN: 'syn', RST: 'rst', PSH: 'psh', ACK: 'ack', URG: 'urg' };
const CT_STATE_NFT: Record<string, string> = {
  NEW: 'new',
  ESTABLISHED: 'established',
  RELATED: 'related',
  INVALID: 'invalid',
  UNTRACKED: 'untracked',
};

function addrWord(f: IpFamily): 'ip' | 'ip6' {
  return f === 'ipv4' ? 'ip' : 'ip6';
}

/** An address or prefix as nft writes it: a full-length prefix is the bare address. */
function addrText(c: { readonly family: IpFamily; readonly text: string }): string {
  const full = c.family === 'ipv4' ? '/32' : '/128';
  return c.text.endsWith(full) ? address(c) : c.text;
}

function renderMatch(m: Match, rule: Rule, family: IpFamily): string {
  const neg = (n: boolean | undefined): string => (n ? '!= ' : '');
  switch (m.kind) {
    case 'src':
      return `${addrWord(family)} saddr ${neg(m.neg)}${addrText(m.cidr)}`;
    case 'dst':
      return `${addrWord(family)} daddr ${neg(m.neg)}${addrText(m.cidr)}`;
    case 'in':
      return `iifname ${neg(m.neg)}${quotedIface(m.iface)}`;
    case 'out':
      return `oifname ${neg(m.neg)}${quotedIface(m.iface)}`;
    case 'proto':
      return `meta l4proto ${neg(m.neg)}${m.proto}`;
    case 'l4': {
      const p = l4Proto(rule);
      const parts: string[] = [];
      if (m.sport !== undefined) parts.push(`${p} sport ${m.sport}`);
      if (m.dport !== undefined) parts.push(`${p} dport ${m.negDport ? '!= ' : ''}${m.dport}`);
      if (m.tcpFlags !== undefined) {
        if (p !== 'tcp') throw new Error(`rule ${rule.id}: tcp flags need a tcp match`);
        const { mask, comp } = m.tcpFlags;
        if (mask.length === 0 || comp.some((f) => !mask.includes(f)))
          throw new Error(`rule ${rule.id}: tcp flags need a non-empty mask that holds every compared flag`);
        const flags = (fs: readonly string[]): string => fs.map((f) => TCP_FLAG_NFT[f]).join(' | ');
        const value = comp.length === 0 ? '0x0' : comp.length === 1 ? flags(comp) : `(${flags(comp)})`;
        parts.push(`tcp flags & (${flags(mask)}) ${m.negTcpFlags ? '!=' : '=='} ${value}`);
      } else if (m.negTcpFlags) throw new Error(`rule ${rule.id}: negTcpFlags without tcpFlags`);
      // An empty `-m tcp` adds nothing to the `meta l4proto tcp` already in the rule.
      return parts.join(' ');
    }
    case 'multiport':
      if (m.dports.length < 1 || m.dports.length > 15)
        throw new Error(`rule ${rule.id}: multiport takes 1-15 ports, got ${m.dports.length}`);
      return `${l4Proto(rule)} dport { ${m.dports.join(', ')} }`;
    case 'mark':
      return markExpr('meta mark', m.mark, m.neg);
    case 'connmark':
      return markExpr('ct mark', m.mark, m.neg);
    case 'owner': {
      if (m.uid === undefined || !Number.isInteger(m.uid) || m.uid < 0 || m.uid > 0xfffffffe)
        throw new Error(
          `rule ${rule.id}: an owner match without a valid uid has no nftables form (meta skuid needs one)`,
        );
      if (m.negUid && !m.socketExists)
        throw new Error(
          `rule ${rule.id}: \`! --uid-owner\` without \`--socket-exists\` also matches packets with no socket, which \`meta skuid !=\` never does; no nftables form`,
        );
      return `meta skuid ${m.negUid ? '!= ' : ''}${m.uid}`;
    }
    case 'set':
      return `${addrWord(family)} ${m.dir === 'src' ? 'saddr' : 'daddr'} @${m.set}`;
    case 'ctstate': {
      if (m.states.length === 0) throw new Error(`rule ${rule.id}: ct state needs at least one state`);
      const states = m.states.map((s) => CT_STATE_NFT[s]).join(', ');
      // A bitmask: the plain form matches any listed state; the negation is "none of them".
      return m.neg ? `ct state & (${states.replaceAll(', ', ' | ')}) == 0` : `ct state { ${states} }`;
    }
  }
}

function l4Proto(rule: Rule): 'tcp' | 'udp' {
  const p = rule.matches.find((x) => x.kind === 'proto');
  if (!p || p.kind !== 'proto' || p.neg || (p.proto !== 'tcp' && p.proto !== 'udp'))
    throw new Error(`rule ${rule.id}: a port match needs a tcp or udp match in the same rule`);
  return p.proto;
}

function markSet(what: 'meta mark' | 'ct mark', m: Mark): string {
  // iptables --set-xmark V/M: (old & ~M) ^ V; V lies within M (marks.ts), so ^ is |.
  return m.mask >>> 0 === 0xffffffff
    ? `${what} set ${hex(m.value)}`
    : `${what} set ${what} & ${hex(~m.mask)} | ${hex(m.value)}`;
}

/** The statements that end the rule; TPROXY also yields its fallback drop (see the header). */
function renderTarget(t: Target, rule: Rule): { readonly text: string; readonly fallback?: string } {
  switch (t.kind) {
    case 'ACCEPT':
      return { text: 'accept' };
    case 'DROP':
      return { text: 'drop' };
    case 'RETURN':
      return { text: 'return' };
    case 'jump':
      return { text: `jump ${t.chain}` };
    case 'REDIRECT':
      l4Proto(rule);
      return { text: `redirect to :${t.toPort}` };
    case 'TPROXY':
      l4Proto(rule);
      // `counter`: as iptables counts a TPROXY rule's matches, so an observer can tell a packet took it
      return { text: `counter tproxy to :${t.onPort} ${markSet('meta mark', t.mark)} accept`, fallback: 'drop' };
    case 'SNAT':
      return { text: `snat to ${address(t.toSource)}` };
    case 'CONNMARK-set':
      return { text: markSet('ct mark', t.mark) };
    case 'CONNMARK-restore':
      if (t.nfmask >>> 0 !== 0xffffffff || t.ctmask >>> 0 !== 0xffffffff)
        throw new Error(`rule ${rule.id}: CONNMARK --restore-mark with partial masks has no single nftables statement`);
      return { text: 'meta mark set ct mark' };
    case 'CT-zone':
      if (!Number.isInteger(t.zone) || t.zone < 0 || t.zone > 65535)
        throw new Error(`rule ${rule.id}: ct zone ${t.zone}: expected 0..65535`);
      return { text: `ct zone set ${t.zone}` };
  }
}

/** Generic matches first, as render-iptables.ts orders them; then the others in IR order. */
const GENERIC_ORDER: Partial<Record<Match['kind'], number>> = { src: 0, dst: 1, in: 2, out: 3, proto: 4 };

function ruleText(r: Rule, family: IpFamily): string[] {
  const generic = r.matches
    .filter((m) => GENERIC_ORDER[m.kind] !== undefined)
    .sort((a, b) => (GENERIC_ORDER[a.kind] ?? 0) - (GENERIC_ORDER[b.kind] ?? 0));
  const others = r.matches.filter((m) => GENERIC_ORDER[m.kind] === undefined);
  // `meta l4proto tcp` must come before `tcp dport` so the statement has its protocol context.
  const matches = [...generic, ...others].map((m) => renderMatch(m, r, family)).filter((s) => s !== '');
  const target = renderTarget(r.target, r);
  const out = [[...matches, target.text].join(' ')];
  if (target.fallback !== undefined) out.push([...matches, target.fallback].join(' '));
  return out;
}

/**
 * One own-chain rule as the `add rule` commands of its table's document (two for TPROXY): the
 * exact lines rulesetTables and renderNft write for it, so a rendered plan can be edited by rule
 * (mutation testing through the nftables backend).
 */
export function ruleCommands(r: Rule, family: IpFamily, prefix: string): string[] {
  if (isBuiltin(r.chain)) throw new Error(`rule ${r.id}: hooks are base chains in nftables, not rules`);
  const table = `${family === 'ipv4' ? 'ip' : 'ip6'} ${prefix}-${r.table}`;
  return ruleText(r, family).map((text) => `add rule ${table} ${r.chain} ${text}`);
}

const HOOK_OF: Record<string, NftHook> = {
  PREROUTING: 'prerouting',
  INPUT: 'input',
  FORWARD: 'forward',
  OUTPUT: 'output',
  POSTROUTING: 'postrouting',
};

function baseChain(table: Table, hook: NftHook, first: boolean): NftChain {
  const srcNat = table === 'nat' && (hook === 'postrouting' || hook === 'input');
  const priority = (srcNat ? SRC_NAT_PRIORITY : PRIORITY[table]) - (first ? 1 : 0);
  const type = table === 'nat' ? 'nat' : table === 'mangle' && hook === 'output' ? 'route' : 'filter';
  return { name: hook, base: { type, hook, priority } };
}

/** nft chain names the IR's own chains keep; the base chains are named for their hooks. */
function checkChainName(name: string): void {
  if (!/^[A-Za-z][A-Za-z0-9_-]{0,30}$/.test(name))
    throw new Error(`nft chain name ${JSON.stringify(name)} is not valid`);
}

/**
 * One family's ruleset as nft tables (`ip` or `ip6`), named `<prefix>-<table>`, in the order
 * raw, mangle, nat, filter. Tables the ruleset does not use are left out.
 */
export function rulesetTables(rs: Ruleset, prefix: string): NftTable[] {
  if (!/^[a-z][a-z0-9-]{0,40}$/.test(prefix))
    throw new Error(`nft table prefix ${JSON.stringify(prefix)} is not valid`);
  const family = rs.family === 'ipv4' ? 'ip' : 'ip6';
  const tables: NftTable[] = [];
  for (const table of TABLE_ORDER) {
    const rules = rs.rules.filter((r) => r.table === table);
    const own = rs.chains.filter((c) => c.table === table);
    if (rules.length === 0 && own.length === 0) continue;
    const hooks = rules.filter((r) => isBuiltin(r.chain));
    const bases = new Map<string, NftChain>();
    for (const h of hooks) {
      const hook = HOOK_OF[h.chain];
      if (hook === undefined) throw new Error(`rule ${h.id}: ${h.chain} is not a hook`);
      const chain = baseChain(table, hook, h.position === 'insert-first');
      const seen = bases.get(hook);
      if (seen && seen.base?.priority !== chain.base?.priority)
        throw new Error(`rule ${h.id}: ${table} ${h.chain} mixes inserted-first and appended hooks`);
      bases.set(hook, chain);
    }
    for (const c of own) checkChainName(c.name);
    const nftRules: NftRule[] = [];
    // Hooks first, as render-iptables.ts writes them, then the own chains' rules in IR order.
    for (const r of [...hooks, ...rules.filter((r) => !isBuiltin(r.chain))]) {
      const chain = isBuiltin(r.chain) ? (HOOK_OF[r.chain] as string) : r.chain;
      for (const text of ruleText(r, rs.family)) nftRules.push({ chain, text });
    }
    tables.push({
      family,
      name: `${prefix}-${table}`,
      chains: [...bases.values(), ...own.map((c) => ({ name: c.name }))],
      rules: nftRules,
    });
  }
  return tables;
}
