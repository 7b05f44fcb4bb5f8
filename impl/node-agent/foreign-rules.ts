/**
 * Strict owns the pod's whole ruleset: anything in the tables its plan uses that the plan does
 * not put there is foreign, and so is anything at all in the tables it does not use; foreign is
 * drift. An app with NET_ADMIN in its pod netns can insert
 * `-I OUTPUT 1 -j ACCEPT` ahead of the hook into ISTIO_OUTPUT; drift() only looks at the plan's own
 * chains and hooks, so upstream never sees it (nor does istio-cni: VerifyIptablesState in
 * tools/istio-iptables/pkg/capture/helper.go checks ISTIO_* chains and that its own rules exist,
 * not what else the tables hold). Under strict such a rule, a user chain the plan does not
 * declare, or a built-in policy other than ACCEPT is reported here, and the agent re-applies the
 * plan replacing those tables whole (NetnsRules apply mode `exclusive`).
 *
 * A table the plan does not use must be empty (no rule, no user chain, every policy ACCEPT): with
 * DNS capture off the plan has no raw table, and an app's `-t raw -j CT --notrack` there keeps
 * every connection from nat's redirect and from TPROXY's `--ctstate NEW` (found by the attack
 * catalog's notrack tampering). Leftovers of our own chains there are drift()'s business too.
 *
 * Pure: reads an AppliedState (the port's read()) and a plan, returns text.
 */
import type { AppliedState, IpFamily, RedirectionPlan } from '../host/netns-rules.js';
import {
  BUILTIN_CHAINS,
  holdsAnything,
  parsePlanText,
  parseSave,
  TABLES,
  type PlanTable,
} from '../api/netns-rules-restore.js';
import { asSaved, byChain, chainOf } from './plan-drift.js';

const FAMILIES: readonly IpFamily[] = ['ipv4', 'ipv6'];

/**
 * What each built-in chain of `t` holds once the plan is restored into the empty table, as
 * iptables-save prints it: `-A` appends, `-I CHAIN [n]` inserts at n (1 when absent).
 */
function intendedBuiltins(t: PlanTable): Map<string, string[]> {
  const out = new Map<string, string[]>(BUILTIN_CHAINS[t.table].map((c) => [c, []]));
  for (const line of t.lines) {
    const chain = out.get(chainOf(line));
    if (chain === undefined) continue; // a rule in an own chain: drift() compares those
    const ins = /^-I \S+(?: (\d+))?/.exec(line.trim());
    if (ins) chain.splice(Number(ins[1] ?? '1') - 1, 0, asSaved(line));
    else chain.push(asSaved(line));
  }
  return out;
}

/**
 * Every difference, in the tables `plan` uses, that is not the plan's own chains (drift() covers
 * those): built-in chains holding anything but the plan's hooks in the plan's order, user chains
 * the plan does not declare, built-in policies other than ACCEPT. Empty: those tables hold
 * exactly the plan.
 */
export function foreignRules(state: AppliedState, plan: RedirectionPlan): string[] {
  const out: string[] = [];
  for (const f of FAMILIES) {
    const text = plan.iptables[f];
    if (text === undefined) continue;
    const saved = parseSave(state.iptables[f]);
    for (const t of parsePlanText(text)) {
      const s = saved.get(t.table);
      if (s === undefined) continue; // absent: an empty table, nothing foreign (missing hooks are drift())
      for (const decl of s.text.split('\n').filter((l) => l.startsWith(':'))) {
        const [name = '', policy = ''] = decl.slice(1).split(/\s+/);
        if (BUILTIN_CHAINS[t.table].includes(name)) {
          if (policy !== 'ACCEPT') out.push(`${f} ${t.table}: built-in chain ${name} has policy ${policy}, not ACCEPT`);
        } else if (!t.ownChains.includes(name)) {
          out.push(`${f} ${t.table}: user chain ${name} is not in the plan`);
        }
      }
      const haveBy = byChain(s.rules);
      for (const [chain, want] of intendedBuiltins(t)) {
        const have = haveBy.get(chain) ?? [];
        if (have.join('\n') !== want.join('\n'))
          out.push(
            `${f} ${t.table}: built-in chain ${chain} holds [${have.join(' | ')}], the plan [${want.join(' | ')}]`,
          );
      }
    }
    const used = parsePlanText(text).map((t) => t.table);
    for (const t of TABLES) {
      const s = saved.get(t);
      if (used.includes(t) || s === undefined || !holdsAnything(t, s)) continue;
      out.push(
        `${f} ${t}: the plan does not use this table, and it holds [${s.rules.join(' | ') || 'chains or policies'}]`,
      );
    }
  }
  return out;
}
