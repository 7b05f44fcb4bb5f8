/**
 * The checks the kernel makes when a transaction commits (nf_tables_api.c): every jump and goto
 * names a regular chain of the same table (ENOENT; a base chain: EOPNOTSUPP), no chain reaches
 * itself (ELOOP), and each rule's statements suit every base chain that reaches it — NAT only in
 * nat-type chains at their hooks, tproxy only at prerouting, reject not at postrouting
 * (nft_chain_validate_hooks / nft_chain_validate_chain_type, walked from each base chain).
 */
import { NftSyntaxError } from './errors.js';
import type { NftBase, NftChainState, NftRule, NftTableState } from './model.js';

function targetOf(r: NftRule): string | undefined {
  const v = r.verdict;
  return v && (v.k === 'jump' || v.k === 'goto') ? v.chain : undefined;
}

export function commitChecks(t: NftTableState): void {
  for (const c of t.chains.values())
    for (const r of c.rules) {
      const to = targetOf(r);
      if (to === undefined) continue;
      const target = t.chains.get(to);
      if (!target)
        throw new NftSyntaxError(
          `Could not process rule: No such file or directory: chain ${to} (the target of ${r.verdict!.k} in chain ${c.name}) is not in table ${t.family} ${t.name}`,
          r.line,
        );
      if (target.base)
        throw new NftSyntaxError(
          `Could not process rule: Operation not supported: ${r.verdict!.k} to base chain ${to} (only regular chains can be jumped to)`,
          r.line,
        );
    }
  // ELOOP: a chain reachable from itself.
  const state = new Map<string, 'visiting' | 'done'>();
  const visit = (c: NftChainState): void => {
    state.set(c.name, 'visiting');
    for (const r of c.rules) {
      const to = targetOf(r);
      if (to === undefined) continue;
      const s = state.get(to);
      if (s === 'visiting')
        throw new NftSyntaxError(
          `Could not process rule: Too many links: ${r.verdict!.k} ${to} in chain ${c.name} makes a loop`,
          r.line,
        );
      if (s === undefined) visit(t.chains.get(to)!);
    }
    state.set(c.name, 'done');
  };
  for (const c of t.chains.values()) if (!state.has(c.name)) visit(c);
  // Statement constraints through every base chain.
  for (const c of t.chains.values()) if (c.base) checkReach(t, c, c.base, new Set());
}

function checkReach(t: NftTableState, c: NftChainState, base: NftBase, seen: Set<string>): void {
  if (seen.has(c.name)) return;
  seen.add(c.name);
  for (const r of c.rules) {
    for (const k of r.constraints) {
      const typeOk = k.type === undefined || k.type === base.type;
      const hookOk = k.hooks === undefined || k.hooks.includes(base.hook);
      if (!typeOk || !hookOk)
        throw new NftSyntaxError(
          `Could not process rule: Operation not supported: ${k.what} is valid only in ${k.type ? `a ${k.type}-type chain` : 'a chain'}${k.hooks ? ` at ${k.hooks.join(' or ')}` : ''}; chain ${c.name} is reached from base chain ${baseName(t, base)} (type ${base.type} hook ${base.hook})`,
          r.line,
        );
    }
    const to = targetOf(r);
    if (to !== undefined) checkReach(t, t.chains.get(to)!, base, seen);
  }
}

function baseName(t: NftTableState, base: NftBase): string {
  for (const c of t.chains.values()) if (c.base === base) return c.name;
  return '?';
}
