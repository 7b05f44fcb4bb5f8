/**
 * Drift of the nftables backend's tables: the agent records each table's listing right after it
 * applied a plan (the kernel's canonical form; nft rewrites what it is given, so the document's
 * own text is not comparable) and a later read that differs — a rule added, removed or changed by
 * anyone — is drift. Tables named as ours (`istio-ambient-*`) that the plan does not write are
 * leftovers of another plan (the other profile, an older agent). Under strict (exclusive) every
 * other table of the namespace is foreign in either backend, and with the nftables backend any
 * iptables rule too: nftables base chains of any
 * table share the hooks with ours, so a foreign NAT chain of higher priority or a foreign iptables
 * DNAT can bind a connection before our redirect (strict's whole-ruleset apply removes them).
 *
 * Pure: reads an AppliedState (the port's read()) and a plan, returns text.
 */
import { isOwnTable, tableKey, type NftTableRef } from '../../api/nft-tables.js';
import type { AppliedState, IpFamily, RedirectionPlan } from '../../host/netns-rules.js';

/** The plan's tables as the kernel listed them right after apply, by `tableKey`. */
export type NftListing = Readonly<Record<string, string>>;

function nftState(state: AppliedState, plan: RedirectionPlan): Readonly<Record<string, string>> | undefined {
  if (state.nftables === undefined && plan.nftables !== undefined)
    throw new Error(
      'the plan has nftables tables but the rules adapter does not read nftables: the agent needs its nftables backend to check them',
    );
  return state.nftables;
}

/** The listing to keep after applying `plan` (read right after the apply); each plan table must be there. */
export function nftListingOf(state: AppliedState, plan: RedirectionPlan): NftListing | undefined {
  if (plan.nftables === undefined) return undefined;
  const now = nftState(state, plan) ?? {};
  const out: Record<string, string> = {};
  for (const t of plan.nftables.tables) {
    const listed = now[tableKey(t)];
    if (listed === undefined)
      throw new Error(`nftables table ${tableKey(t)} is not in the namespace right after the plan was applied`);
    out[tableKey(t)] = listed;
  }
  return out;
}

/** Tables named as ours that the namespace holds and `plan` does not write. */
export function nftLeftovers(state: AppliedState, plan: RedirectionPlan): NftTableRef[] {
  const now = nftState(state, plan);
  if (now === undefined) return [];
  const mine = new Set((plan.nftables?.tables ?? []).map(tableKey));
  return Object.keys(now)
    .map((key): NftTableRef => {
      const [family = '', name = ''] = key.split(' ');
      return { family: family as NftTableRef['family'], name };
    })
    .filter((t) => isOwnTable(t) && !mine.has(tableKey(t)));
}

/**
 * Every difference between the namespace's nftables and the plan: a plan table missing or listed
 * otherwise than at apply (`applied`), our leftovers, and under `exclusive` foreign tables and
 * iptables rules. Empty when the adapter does not read nftables and the plan has none.
 */
export function nftDrift(
  state: AppliedState,
  plan: RedirectionPlan,
  applied: NftListing | undefined,
  exclusive: boolean,
): string[] {
  const now = nftState(state, plan);
  if (now === undefined) return [];
  const out: string[] = [];
  for (const t of plan.nftables?.tables ?? []) {
    const key = tableKey(t);
    if (now[key] === undefined) out.push(`nftables table ${key} is missing`);
    else if (applied !== undefined && applied[key] !== now[key])
      out.push(`nftables table ${key} differs from its listing at apply`);
  }
  for (const t of nftLeftovers(state, plan)) out.push(`nftables table ${tableKey(t)} is not in the plan`);
  // Strict owns the whole ruleset in either backend: a foreign table's base chains share the hooks
  // (a `notrack` at raw priority keeps every connection from iptables' nat as from ours).
  if (exclusive)
    for (const key of Object.keys(now))
      if (!isOwnTable({ name: key.split(' ')[1] ?? '' })) out.push(`nftables table ${key} is foreign`);
  if (exclusive && plan.nftables !== undefined) {
    for (const f of ['ipv4', 'ipv6'] as const satisfies readonly IpFamily[]) {
      const rules = state.iptables[f].split('\n').filter((l) => l.startsWith('-A '));
      if (rules.length > 0) out.push(`${f} iptables holds foreign rules: ${rules.slice(0, 3).join(' | ')}`);
    }
  }
  return out;
}
