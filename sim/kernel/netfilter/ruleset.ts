/**
 * The editable ruleset of one table (what restore edits), the kernel's commit-time checks
 * (chains exist, no jump loops, hook-restricted targets/matches only reachable from allowed hooks),
 * and compilation into the immutable form the evaluator runs.
 */
import type { IfaceSpec, Pred, RuleSpec } from './rule.js';
import { prefixHas } from './matches.js';
import type { CompiledTarget } from './rule.js';
import { TABLE_HOOKS, type EvalContext, type Hook, type TableName } from './types.js';
import { packetProtoNumber } from './values.js';

export type Policy = 'ACCEPT' | 'DROP';

interface RuleEntry {
  readonly spec: RuleSpec;
  readonly line: number;
  readonly source: string;
}

export interface ChainState {
  readonly name: string;
  /** The hook for a built-in chain. */
  readonly builtin: Hook | undefined;
  policy: Policy;
  rules: RuleEntry[];
}

export interface TableState {
  readonly name: TableName;
  readonly chains: Map<string, ChainState>;
}

export function emptyTable(name: TableName): TableState {
  const chains = new Map<string, ChainState>();
  for (const h of TABLE_HOOKS[name]) chains.set(h, { name: h, builtin: h, policy: 'ACCEPT', rules: [] });
  return { name, chains };
}

export function cloneTable(t: TableState): TableState {
  const chains = new Map<string, ChainState>();
  for (const [k, c] of t.chains) chains.set(k, { ...c, rules: [...c.rules] });
  return { name: t.name, chains };
}

/** A commit-time check failed; `line` is the rule (or declaration) to blame. */
export class TableCheckError extends Error {
  constructor(
    readonly line: number,
    message: string,
  ) {
    super(message);
  }
}

function chainTargetOf(spec: RuleSpec): { name: string; goto: boolean } | undefined {
  const c = spec.target?.compile();
  if (c && (c.k === 'jump' || c.k === 'goto')) return { name: c.chain, goto: c.k === 'goto' };
  return undefined;
}

/** Which built-in hooks reach each chain, and the kernel's loop check (ELOOP). */
function reachingHooks(t: TableState): Map<string, Set<Hook>> {
  const out = new Map<string, Set<Hook>>();
  for (const c of t.chains.values()) out.set(c.name, new Set());
  const color = new Map<string, 'gray' | 'black'>();
  const visit = (c: ChainState, path: string[]): void => {
    color.set(c.name, 'gray');
    for (const r of c.rules) {
      const tgt = chainTargetOf(r.spec);
      if (!tgt) continue;
      const next = t.chains.get(tgt.name);
      if (!next)
        throw new TableCheckError(
          r.line,
          `rule jumps to chain "${tgt.name}", which does not exist (any more) in table ${t.name}`,
        );
      const col = color.get(next.name);
      if (col === 'gray') {
        throw new TableCheckError(
          r.line,
          `jump loop: ${[...path, c.name, next.name].join(' -> ')} (the kernel refuses loops with ELOOP)`,
        );
      }
      if (col === undefined) visit(next, [...path, c.name]);
    }
    color.set(c.name, 'black');
  };
  for (const c of t.chains.values()) {
    if (!c.builtin) continue;
    visit(c, []);
    // Propagate this hook to every chain reachable from it.
    const stack = [c];
    const seen = new Set<string>();
    while (stack.length) {
      const cur = stack.pop() as ChainState;
      if (seen.has(cur.name)) continue;
      seen.add(cur.name);
      out.get(cur.name)?.add(c.builtin);
      for (const r of cur.rules) {
        const tgt = chainTargetOf(r.spec);
        const next = tgt && t.chains.get(tgt.name);
        if (next) stack.push(next);
      }
    }
  }
  return out;
}

/** The kernel's commit checks for one table. Throws TableCheckError. */
export function checkTable(t: TableState): void {
  // Every jump target must exist, even from chains no hook reaches.
  for (const c of t.chains.values()) {
    for (const r of c.rules) {
      const tgt = chainTargetOf(r.spec);
      if (tgt && !t.chains.has(tgt.name))
        throw new TableCheckError(
          r.line,
          `rule in chain ${c.name} jumps to chain "${tgt.name}", which does not exist in table ${t.name}`,
        );
    }
  }
  const hooks = reachingHooks(t);
  for (const c of t.chains.values()) {
    const hs = hooks.get(c.name) ?? new Set<Hook>();
    if (hs.size === 0) continue;
    for (const r of c.rules) {
      const limited: { what: string; allowed: readonly Hook[] }[] = [];
      const tg = r.spec.target;
      if (tg?.hooks) limited.push({ what: `target ${tg.name}`, allowed: tg.hooks });
      for (const m of r.spec.matches) if (m.hooks) limited.push({ what: `match ${m.module}`, allowed: m.hooks });
      for (const l of limited) {
        const bad = [...hs].filter((h) => !l.allowed.includes(h));
        if (bad.length > 0) {
          const via = c.builtin ? '' : ` (chain ${c.name} is reached from ${[...hs].join(', ')})`;
          throw new TableCheckError(
            r.line,
            `${l.what} is used at ${t.name} ${bad.join(', ')}${via}, but the kernel allows it only at ${l.allowed.join(', ')} (EINVAL)`,
          );
        }
      }
    }
  }
}

// ---------------------------------------------------------------- compiled form

export interface CompiledRule {
  readonly table: TableName;
  readonly chain: string;
  readonly position: number;
  readonly line: number;
  readonly source: string;
  /** `-A CHAIN ...` as iptables-save prints it. */
  readonly text: string;
  readonly preds: readonly Pred[];
  readonly target: CompiledTarget;
  /** Resolved chain for jump/goto. */
  next: CompiledChain | undefined;
  readonly effect: string;
}

export interface CompiledChain {
  readonly name: string;
  readonly builtin: Hook | undefined;
  readonly policy: Policy;
  readonly rules: readonly CompiledRule[];
}

export interface CompiledTable {
  readonly name: TableName;
  readonly chains: ReadonlyMap<string, CompiledChain>;
  /** True when no chain has rules and every policy is ACCEPT: the datapath may skip the table. */
  readonly empty: boolean;
}

function ifacePred(spec: IfaceSpec, dir: 'in' | 'out'): Pred {
  const wild = spec.name.endsWith('+');
  const base = wild ? spec.name.slice(0, -1) : spec.name;
  const neg = spec.neg;
  // The kernel compares against "" when the packet has no device in that direction.
  if (dir === 'in') return (ctx) => (wild ? (ctx.inIface ?? '').startsWith(base) : ctx.inIface === base) !== neg;
  return (ctx) => (wild ? (ctx.outIface ?? '').startsWith(base) : ctx.outIface === base) !== neg;
}

function compileSpec(spec: RuleSpec): Pred[] {
  const preds: Pred[] = [];
  if (spec.src) {
    const { prefix, neg } = spec.src;
    preds.push((ctx) => prefixHas(prefix, ctx.packet.src.value, ctx.packet.src.family) !== neg);
  }
  if (spec.dst) {
    const { prefix, neg } = spec.dst;
    preds.push((ctx) => prefixHas(prefix, ctx.packet.dst.value, ctx.packet.dst.family) !== neg);
  }
  if (spec.inIface) preds.push(ifacePred(spec.inIface, 'in'));
  if (spec.outIface) preds.push(ifacePred(spec.outIface, 'out'));
  if (spec.proto) {
    const { num, neg } = spec.proto;
    preds.push((ctx: EvalContext) => (packetProtoNumber(ctx.packet.proto, ctx.family) === num) !== neg);
  }
  for (const m of spec.matches) preds.push(m.compile());
  return preds;
}

function effectOf(spec: RuleSpec, t: CompiledTarget): string {
  switch (t.k) {
    case 'none':
      return 'no target (counted)';
    case 'jump':
      return `jump ${t.chain}`;
    case 'goto':
      return `goto ${t.chain}`;
    case 'return':
      return 'return';
    default:
      return (spec.target?.render() ?? '').replace(/^-j /, '');
  }
}

/** Built-in chains in hook order, then user chains sorted by name: iptables-save's order. */
export function chainsInSaveOrder(t: TableState): ChainState[] {
  const builtins = [...t.chains.values()].filter((c) => c.builtin);
  const users = [...t.chains.values()]
    .filter((c) => !c.builtin)
    .sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
  return [...builtins, ...users];
}

export function compileTable(t: TableState): CompiledTable {
  const chains = new Map<string, CompiledChain>();
  let empty = true;
  for (const c of chainsInSaveOrder(t)) {
    if (c.rules.length > 0 || c.policy !== 'ACCEPT') empty = false;
    const rules: CompiledRule[] = c.rules.map((r, i) => {
      const target: CompiledTarget = r.spec.target ? r.spec.target.compile() : { k: 'none' };
      return {
        table: t.name,
        chain: c.name,
        position: i + 1,
        line: r.line,
        source: r.source,
        text: `-A ${c.name} ${r.spec.text}`,
        preds: compileSpec(r.spec),
        target,
        next: undefined,
        effect: effectOf(r.spec, target),
      };
    });
    chains.set(c.name, { name: c.name, builtin: c.builtin, policy: c.policy, rules });
  }
  for (const c of chains.values()) {
    for (const r of c.rules) {
      if (r.target.k === 'jump' || r.target.k === 'goto') r.next = chains.get(r.target.chain);
    }
  }
  return { name: t.name, chains, empty };
}
