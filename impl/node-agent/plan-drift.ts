/**
 * Exactly the plan: what in a pod's namespace belongs to this project but not to the pod's
 * current plan (leftovers), and every way the namespace differs from the plan (drift).
 *
 * Apply alone converges the plan's own chains, but leaves what the plan does not name: the raw
 * table's chains and conntrack-zone rules after DNS capture was turned off, the v6 tables, ip rule
 * and route after IPv6 capture was turned off, strict's filter chains after a switch to upstream.
 * An agent restarted with other settings only knows the new plan, so "ours" cannot be "the old
 * plan": it is the **universe**, every own chain, ip rule and route that any plan of either
 * profile can hold (upstream istio-cni removes every ISTIO_* chain and jump it finds instead; the
 * universe is those same chains, and leaves alone ISTIO_* chains that no plan of ours makes).
 *
 * Pure: reads an AppliedState (the port's read()) and plans, returns plans and text.
 */
import type { AppliedState, IpFamily, LocalRoute, PolicyRule, RedirectionPlan } from '../host/netns-rules.js';
import { BUILTIN_CHAINS, parsePlanText, parseSave, TABLES, type Table } from '../api/netns-rules-restore.js';
import { memoByText } from '../api/memo-by-text.js';
import { buildInpodPlan } from './rule-builder.js';
import { nftLeftovers } from './nftables/nft-drift.js';

const FAMILIES: readonly IpFamily[] = ['ipv4', 'ipv6'];

/** Own chains per table of one family's restore text (none for an absent family). */
function ownChains(text: string | undefined): Map<Table, Set<string>> {
  const out = new Map<Table, Set<string>>();
  if (text === undefined) return out;
  for (const t of parsePlanText(text)) out.set(t.table, new Set(t.ownChains));
  return out;
}

function sameRule(a: PolicyRule, b: PolicyRule): boolean {
  return (
    a.family === b.family &&
    a.priority === b.priority &&
    a.table === b.table &&
    a.fwmark.value === b.fwmark.value &&
    a.fwmark.mask === b.fwmark.mask
  );
}

function sameRoute(a: LocalRoute, b: LocalRoute): boolean {
  return a.family === b.family && a.type === b.type && a.dst === b.dst && a.dev === b.dev && a.table === b.table;
}

let universeCache: RedirectionPlan | undefined;

/**
 * Every own chain, ip rule and route any plan can hold: both profiles with every option that adds
 * chains or routing on (IPv6, DNS capture; ingress mode and virtual interfaces only change rules
 * inside the same chains, the probe SNAT address only rule text).
 */
export function universe(): RedirectionPlan {
  if (universeCache) return universeCache;
  const common = { ipv6: true, dnsCapture: true, ingressMode: false, virtualInterfaces: [] };
  const plans = [
    buildInpodPlan({ ...common, profile: 'upstream' }),
    buildInpodPlan({ ...common, profile: 'strict', proxyUid: 0, probePorts: [] }),
  ];
  const text: Partial<Record<IpFamily, string>> = {};
  for (const f of FAMILIES) {
    const chains = new Map<Table, Set<string>>();
    for (const p of plans)
      for (const [t, cs] of ownChains(p.iptables[f]))
        for (const c of cs) (chains.get(t) ?? chains.set(t, new Set()).get(t)!).add(c);
    text[f] = declarations(chains);
  }
  const rules: PolicyRule[] = [];
  const routes: LocalRoute[] = [];
  for (const p of plans) {
    for (const r of p.rules) if (!rules.some((x) => sameRule(x, r))) rules.push(r);
    for (const r of p.routes) if (!routes.some((x) => sameRoute(x, r))) routes.push(r);
  }
  universeCache = { iptables: { ipv4: text.ipv4!, ipv6: text.ipv6! }, rules, routes };
  return universeCache;
}

/** Restore text that only declares chains: enough for NetnsRules.remove to take them away. */
function declarations(chains: ReadonlyMap<Table, ReadonlySet<string>>): string {
  return TABLES.filter((t) => (chains.get(t)?.size ?? 0) > 0)
    .map((t) => `*${t}\n${[...chains.get(t)!].map((c) => `:${c} - [0:0]\n`).join('')}COMMIT\n`)
    .join('');
}

/** Chains of `family` in the universe that the namespace holds and the plan does not declare. */
function leftoverChains(state: AppliedState, plan: RedirectionPlan, family: IpFamily): Map<Table, Set<string>> {
  const saved = parseSave(state.iptables[family]);
  const mine = ownChains(plan.iptables[family]);
  const out = new Map<Table, Set<string>>();
  for (const [t, cs] of ownChains(universe().iptables[family])) {
    const present = saved.get(t)?.chains ?? [];
    const extra = [...cs].filter((c) => present.includes(c) && !mine.get(t)?.has(c));
    if (extra.length > 0) out.set(t, new Set(extra));
  }
  return out;
}

/**
 * What the namespace holds of the universe that `plan` does not contain, as a plan to hand to
 * NetnsRules.remove (hooks into the chains go with them); undefined when there is nothing.
 */
export function leftovers(state: AppliedState, plan: RedirectionPlan): RedirectionPlan | undefined {
  const iptables: Partial<Record<IpFamily, string>> = {};
  for (const f of FAMILIES) {
    const chains = leftoverChains(state, plan, f);
    if (chains.size > 0) iptables[f] = declarations(chains);
  }
  const { rules, routes } = leftoverRouting(state, plan);
  // Our nftables tables the plan does not write (another profile's or backend's), when read.
  const tables = nftLeftovers(state, plan);
  if (Object.keys(iptables).length === 0 && rules.length === 0 && routes.length === 0 && tables.length === 0)
    return undefined;
  return { iptables, rules, routes, ...(tables.length > 0 ? { nftables: { text: '', tables } } : {}) };
}

/** The universe's ip rules and routes that the namespace holds and the plan does not. */
function leftoverRouting(state: AppliedState, plan: RedirectionPlan): { rules: PolicyRule[]; routes: LocalRoute[] } {
  const u = universe();
  return {
    rules: u.rules.filter((r) => state.rules.some((x) => sameRule(x, r)) && !plan.rules.some((x) => sameRule(x, r))),
    routes: u.routes.filter(
      (r) => state.routes.some((x) => sameRoute(x, r)) && !plan.routes.some((x) => sameRoute(x, r)),
    ),
  };
}

/** `-I CHAIN [n] ...` as iptables-save prints it: `-A CHAIN ...`. */
export function asSaved(line: string): string {
  return line.replace(/^-I (\S+)( \d+)?/, '-A $1').trim();
}

/**
 * The chain of a rule line (`-A CHAIN ...`): its second word, as `split(/\s+/)[1]` gives it for
 * ASCII whitespace. Scanned, not split: the repair loop calls it for every rule of every pod.
 */
export function chainOf(line: string): string {
  // ASCII whitespace (space, \t \n \v \f \r): what iptables-save and the renderer separate words with.
  const isSpace = (i: number): boolean => {
    const c = line.charCodeAt(i);
    return c === 32 || (c >= 9 && c <= 13);
  };
  let i = 0;
  while (i < line.length && !isSpace(i)) i++;
  while (i < line.length && isSpace(i)) i++;
  const start = i;
  while (i < line.length && !isSpace(i)) i++;
  return line.slice(start, i);
}

/** Rule lines by the chain they are in, in order (one pass: the checks look at every chain). */
export function byChain(lines: readonly string[]): Map<string, string[]> {
  const out = new Map<string, string[]>();
  for (const l of lines) {
    const c = chainOf(l);
    (out.get(c) ?? out.set(c, []).get(c)!).push(l);
  }
  return out;
}

function jumpTarget(line: string): string | undefined {
  return /\s-[jg]\s+(\S+)/.exec(line)?.[1];
}

/** What drift() compares a family's plan text with, per table: worked out once per text. */
interface PlannedTable {
  readonly table: Table;
  readonly ownChains: readonly string[];
  /** Rule lines as iptables-save prints them, by chain. */
  readonly byChain: ReadonlyMap<string, readonly string[]>;
  /** The hooks into own chains, sorted. */
  readonly hooks: readonly string[];
}

function isHookOf(table: Table, ownChains: readonly string[]): (line: string) => boolean {
  return (r) => BUILTIN_CHAINS[table].includes(chainOf(r)) && ownChains.includes(jumpTarget(r) ?? '');
}

const planned = memoByText((text: string): readonly PlannedTable[] =>
  parsePlanText(text).map((t) => {
    const want = t.lines.map(asSaved);
    return {
      table: t.table,
      ownChains: t.ownChains,
      byChain: byChain(want),
      hooks: want.filter(isHookOf(t.table, t.ownChains)).sort(),
    };
  }),
);

/**
 * Every difference between the namespace and exactly `plan` (empty: it holds exactly the plan):
 * own chains missing or holding other rules or another order, hooks into own chains missing or
 * repeated, the plan's ip rules and routes missing, and leftovers of the universe. Rules that are
 * nobody's business of ours (other chains, other hooks) are not looked at here; under strict,
 * foreignRules() (foreign-rules.ts) reports them in the plan's tables.
 */
export function drift(state: AppliedState, plan: RedirectionPlan): string[] {
  const out: string[] = [];
  for (const f of FAMILIES) {
    const text = plan.iptables[f];
    if (text !== undefined) {
      const saved = parseSave(state.iptables[f]);
      for (const t of planned(text)) {
        const s = saved.get(t.table);
        const haveBy = byChain(s?.rules ?? []);
        for (const c of t.ownChains) {
          if (!s?.chains.includes(c)) {
            out.push(`${f} ${t.table}: chain ${c} is missing`);
            continue;
          }
          const have = haveBy.get(c) ?? [];
          const exp = t.byChain.get(c) ?? [];
          if (have.join('\n') !== exp.join('\n'))
            out.push(`${f} ${t.table}: chain ${c} holds [${have.join(' | ')}], the plan [${exp.join(' | ')}]`);
        }
        const haveHooks = (s?.rules ?? []).filter(isHookOf(t.table, t.ownChains)).sort();
        const expHooks = t.hooks;
        if (haveHooks.join('\n') !== expHooks.join('\n'))
          out.push(`${f} ${t.table}: hooks [${haveHooks.join(' | ')}], the plan [${expHooks.join(' | ')}]`);
      }
    }
    for (const [t, cs] of leftoverChains(state, plan, f))
      out.push(`${f} ${t}: chain(s) ${[...cs].join(', ')} are not in the plan`);
  }
  for (const r of plan.rules)
    if (!state.rules.some((x) => sameRule(x, r)))
      out.push(
        `${r.family} ip rule fwmark ${r.fwmark.value}/${r.fwmark.mask} lookup ${r.table} pref ${r.priority} is missing`,
      );
  for (const r of plan.routes)
    if (!state.routes.some((x) => sameRoute(x, r)))
      out.push(`${r.family} route local ${r.dst} dev ${r.dev} table ${r.table} is missing`);
  const extra = leftoverRouting(state, plan);
  for (const r of extra.rules)
    out.push(
      `${r.family} ip rule fwmark ${r.fwmark.value}/${r.fwmark.mask} lookup ${r.table} pref ${r.priority} is not in the plan`,
    );
  for (const r of extra.routes)
    out.push(`${r.family} route local ${r.dst} dev ${r.dev} table ${r.table} is not in the plan`);
  return out;
}
