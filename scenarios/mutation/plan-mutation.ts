/**
 * Mutants of the in-pod rule builder applied to the RENDERED plan the agent hands to the kernel
 * (the sim world's `mutatePlan` hook): the mutant list comes from the IR (rule-ir.ts `mutants`),
 * and each mutant is applied to the text by rule id — the `# <id>` line the renderer writes
 * before every rule — so the plan under test is the agent's own text with one line changed. A plan
 * of the nftables backend (strict) is edited the same way: the rule's `add rule` commands, as the
 * translator writes them, replaced or removed.
 */
import type { RedirectionPlan, IpFamily } from '../../impl/host/netns-rules.js';
import { buildInpodRules, type InpodOptions } from '../../impl/node-agent/rule-builder.js';
import { mutants, type Mutant } from '../../impl/node-agent/rule-ir.js';
import { renderRule } from '../../impl/node-agent/render-iptables.js';
import { OWN_TABLE_PREFIX } from '../../impl/api/nft-tables.js';
import { ruleCommands } from '../../impl/node-agent/nftables/ruleset-to-nft.js';

export interface PlanMutant {
  /** e.g. `ipv4 remove nat/out/redirect-outbound`. */
  readonly name: string;
  readonly family: IpFamily;
  readonly ruleId: string;
  /** The original rule line and its replacement (undefined: the rule is removed). */
  readonly line: string;
  readonly replacement: string | undefined;
  /** The same rule through the nftables backend (strict's translation): its commands and theirs after the mutation. */
  readonly nft: { readonly lines: readonly string[]; readonly replacement: readonly string[] | undefined };
}

export function planMutants(o: InpodOptions): PlanMutant[] {
  const ir = buildInpodRules(o);
  const out: PlanMutant[] = [];
  for (const family of ['ipv4', 'ipv6'] as const) {
    const rs = ir.iptables[family];
    if (!rs) continue;
    for (const m of mutants(rs, { onlySecurityRelevant: true })) out.push(toPlanMutant(family, m));
  }
  return out;
}

function toPlanMutant(family: IpFamily, m: Mutant): PlanMutant {
  const line = renderRule(m.rule);
  const mutated = m.ruleset.rules.find((r) => r.id === m.rule.id);
  return {
    name: `${family} ${m.name}`,
    family,
    ruleId: m.rule.id,
    line,
    replacement: mutated ? renderRule(mutated) : undefined,
    nft: {
      lines: ruleCommands(m.rule, family, OWN_TABLE_PREFIX),
      replacement: mutated ? ruleCommands(mutated, family, OWN_TABLE_PREFIX) : undefined,
    },
  };
}

/**
 * The mutant applied to a plan of the nftables backend. Only strict's document is the IR
 * translated, so only there are the rule's commands found; upstream's document is istio-cni's own
 * words (upstream-rules.ts), which a mutant of the IR cannot name: refused, never a silent no-op.
 */
function applyNftMutant(
  plan: RedirectionPlan,
  m: PlanMutant,
  nft: NonNullable<RedirectionPlan['nftables']>,
): RedirectionPlan {
  const lines = nft.text.split('\n');
  const at = lines.findIndex((_, i) => m.nft.lines.every((l, k) => lines[i + k] === l));
  if (at < 0) {
    if (nft.tables.some((t) => t.family === 'inet'))
      throw new Error(
        `mutant ${m.name}: the upstream profile's nftables document is istio-cni's own words, not the IR's; run mutants on the iptables backend (or the strict profile)`,
      );
    return plan; // this pod's plan has no such rule (e.g. no probe ports declared)
  }
  lines.splice(at, m.nft.lines.length, ...(m.nft.replacement ?? []));
  return { ...plan, nftables: { ...nft, text: lines.join('\n') } };
}

/** Apply one mutant to a rendered plan (unchanged when it lacks the rule); throws when the rule's text differs from the IR's. */
export function applyPlanMutant(plan: RedirectionPlan, m: PlanMutant): RedirectionPlan {
  if (plan.nftables) return applyNftMutant(plan, m, plan.nftables);
  const text = plan.iptables[m.family];
  if (text === undefined) throw new Error(`mutant ${m.name}: the plan has no ${m.family} rules`);
  const lines = text.split('\n');
  const at = lines.findIndex((l) => l === `# ${m.ruleId}` || l.startsWith(`# ${m.ruleId} [security]`));
  if (at < 0) return plan; // this pod's plan has no such rule (e.g. no probe ports declared)
  if (lines[at + 1] !== m.line) {
    throw new Error(
      `mutant ${m.name}: rule ${m.ruleId} is not in the plan as rendered from the IR (expected line ${JSON.stringify(m.line)}, found ${JSON.stringify(lines[at + 1])}); build the mutants with the same options as the agent`,
    );
  }
  if (m.replacement === undefined) lines.splice(at, 2);
  else lines[at + 1] = m.replacement;
  return { ...plan, iptables: { ...plan.iptables, [m.family]: lines.join('\n') } };
}
