/**
 * Runs one table's built-in chain at one hook (kernel ipt_do_table semantics):
 * - a jump pushes a return frame; falling off a user chain or a matching RETURN pops it;
 * - a goto replaces the current chain without pushing, so when the goto target ends, processing
 *   resumes after the rule that JUMPED into the chain that did the goto (iptables(8) -g;
 *   Semantics_Goto.thy);
 * - RETURN or falling off a built-in chain applies its policy;
 * - ACCEPT ends this table (accept), DROP/REJECT end it, NAT/TPROXY end it with their verdict;
 *   MARK/CONNMARK/LOG/CT/NOTRACK and rules without a target continue.
 * Hot path: no allocation per rule except the step records when tracing.
 */
import type { CompiledChain, CompiledRule, CompiledTable } from './ruleset.js';
import type { EvalContext, RuleStep, TableRun, TableVerdict } from './types.js';

const ACCEPT: TableVerdict = Object.freeze({ kind: 'accept' });
const DROP: TableVerdict = Object.freeze({ kind: 'drop' });
const NO_STEPS: readonly RuleStep[] = Object.freeze([]);

function ruleStep(r: CompiledRule, effect: string): RuleStep {
  return { table: r.table, chain: r.chain, position: r.position, line: r.line, text: r.text, effect };
}

function policyRun(table: CompiledTable, chain: CompiledChain, steps: RuleStep[] | undefined): TableRun {
  const verdict = chain.policy === 'ACCEPT' ? ACCEPT : DROP;
  if (steps)
    steps.push({
      table: table.name,
      chain: chain.name,
      position: 0,
      line: 0,
      text: `policy ${chain.policy}`,
      effect: chain.policy,
    });
  return { verdict, steps: steps ?? NO_STEPS };
}

export function runCompiled(table: CompiledTable, ctx: EvalContext, trace: boolean): TableRun {
  const base = table.chains.get(ctx.hook);
  if (!base || !base.builtin) return { verdict: ACCEPT, steps: NO_STEPS };
  const steps: RuleStep[] | undefined = trace ? [] : undefined;
  const stackChains: CompiledChain[] = [];
  const stackPos: number[] = [];
  let chain = base;
  let rules = chain.rules;
  let pos = 0;

  for (;;) {
    if (pos >= rules.length) {
      // Fell off the end: built-in → policy; user chain → back to the caller.
      if (stackChains.length === 0) return policyRun(table, base, steps);
      if (steps)
        steps.push({
          table: table.name,
          chain: chain.name,
          position: 0,
          line: 0,
          text: `end of chain ${chain.name}`,
          effect: 'return',
        });
      chain = stackChains.pop() as CompiledChain;
      pos = stackPos.pop() as number;
      rules = chain.rules;
      continue;
    }
    const r = rules[pos] as CompiledRule;
    pos++;
    const preds = r.preds;
    let hit = true;
    for (let i = 0; i < preds.length; i++) {
      if (!(preds[i] as (c: EvalContext) => boolean)(ctx)) {
        hit = false;
        break;
      }
    }
    if (!hit) continue;
    const t = r.target;
    if (steps) steps.push(ruleStep(r, r.effect));
    switch (t.k) {
      case 'none':
        continue;
      case 'continue':
        t.apply(ctx);
        continue;
      case 'accept':
        return { verdict: ACCEPT, steps: steps ?? NO_STEPS };
      case 'drop':
        return { verdict: DROP, steps: steps ?? NO_STEPS };
      case 'verdict':
        return { verdict: t.verdict, steps: steps ?? NO_STEPS };
      case 'return':
        if (stackChains.length === 0) return policyRun(table, base, steps);
        chain = stackChains.pop() as CompiledChain;
        pos = stackPos.pop() as number;
        rules = chain.rules;
        continue;
      case 'jump':
        stackChains.push(chain);
        stackPos.push(pos);
        chain = r.next as CompiledChain;
        rules = chain.rules;
        pos = 0;
        continue;
      case 'goto':
        chain = r.next as CompiledChain;
        rules = chain.rules;
        pos = 0;
        continue;
    }
  }
}
