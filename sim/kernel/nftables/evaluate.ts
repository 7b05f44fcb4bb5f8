/**
 * Runs one base chain for one packet (nft_do_chain): a rule's matches and statements in order
 * (a failed match or a breaking statement ends the rule); `jump` pushes a return point, `goto`
 * does not; falling off or `return` from a regular chain resumes its caller, from the base chain
 * applies the policy. `accept` ends this base chain only — the hook goes on to its next base
 * chain (the datapath's business) — `drop` and `reject` end the packet, a NAT statement ends the
 * chain with its binding. Tracing off: no allocation per rule.
 */
import type { TableVerdict } from '../netfilter/types.js';
import type { NftChainState, NftEvalContext, NftRule, NftTableState, NftVerdict } from './model.js';

/** One rule or policy step of an nft chain run, for traces. */
export interface NftRuleStep {
  /** The chain the rule is in (the base chain or one jumped to). */
  readonly chain: string;
  /** 1-based position in the chain; 0 for the policy or the end of a regular chain. */
  readonly position: number;
  readonly line: number;
  readonly text: string;
  readonly effect: string;
}

export interface NftChainRun {
  readonly verdict: TableVerdict;
  readonly steps: readonly NftRuleStep[];
}

const ACCEPT: TableVerdict = Object.freeze({ kind: 'accept' });
const DROP: TableVerdict = Object.freeze({ kind: 'drop' });
const NO_STEPS: readonly NftRuleStep[] = Object.freeze([]);

function ruleHits(r: NftRule, ctx: NftEvalContext, t: NftTableState): boolean {
  const ops = r.ops;
  for (let i = 0; i < ops.length; i++) {
    const op = ops[i]!;
    if (op.k === 'match' ? !op.pred(ctx, t) : !op.apply(ctx, t)) return false;
  }
  return true;
}

function toTableVerdict(v: NftVerdict, family: 4 | 6): TableVerdict | undefined {
  switch (v.k) {
    case 'accept':
      return ACCEPT;
    case 'drop':
      return DROP;
    case 'reject':
      return {
        kind: 'reject',
        with: v.with !== '' ? v.with : family === 4 ? 'icmp-port-unreachable' : 'icmp6-port-unreachable',
      };
    case 'nat':
      return { kind: 'nat', action: v.action };
    default:
      return undefined;
  }
}

export function runNftChain(t: NftTableState, base: NftChainState, ctx: NftEvalContext, trace: boolean): NftChainRun {
  const steps: NftRuleStep[] | undefined = trace ? [] : undefined;
  const policy = (): NftChainRun => {
    const p = base.base!.policy;
    steps?.push({ chain: base.name, position: 0, line: 0, text: `policy ${p}`, effect: p });
    return { verdict: p === 'accept' ? ACCEPT : DROP, steps: steps ?? NO_STEPS };
  };
  const stackChains: NftChainState[] = [];
  const stackPos: number[] = [];
  let chain = base;
  let rules = chain.rules;
  let pos = 0;
  for (;;) {
    if (pos >= rules.length) {
      if (stackChains.length === 0) return policy();
      steps?.push({ chain: chain.name, position: 0, line: 0, text: `end of chain ${chain.name}`, effect: 'return' });
      chain = stackChains.pop()!;
      pos = stackPos.pop()!;
      rules = chain.rules;
      continue;
    }
    const r = rules[pos]!;
    pos++;
    if (!ruleHits(r, ctx, t)) continue;
    steps?.push({ chain: chain.name, position: pos, line: r.line, text: r.text, effect: r.effect });
    const v = r.verdict;
    if (v === undefined || v.k === 'continue') continue;
    if (v.k === 'return') {
      if (stackChains.length === 0) return policy();
      chain = stackChains.pop()!;
      pos = stackPos.pop()!;
      rules = chain.rules;
      continue;
    }
    if (v.k === 'jump' || v.k === 'goto') {
      if (v.k === 'jump') {
        stackChains.push(chain);
        stackPos.push(pos);
      }
      chain = t.chains.get(v.chain)!; // commit checked it exists
      rules = chain.rules;
      pos = 0;
      continue;
    }
    return { verdict: toTableVerdict(v, ctx.family)!, steps: steps ?? NO_STEPS };
  }
}
