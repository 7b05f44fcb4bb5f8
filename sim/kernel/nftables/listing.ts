/**
 * The listing: tables in the block form `nft list ruleset` prints (tab-indented; sets, then
 * chains, in the order they were made; a base chain's `type T hook H priority P; policy P;`).
 * Rules print in the model's canonical words (listing text), not necessarily nft's byte for
 * byte: marks as 0x%08x, `counter` without values (the model keeps no counters), so a listing
 * changes only when the ruleset or a set's elements change — what drift detection needs.
 */
import type { NftTableState } from './model.js';
import { formatPriority } from './values.js';

export function listTable(t: NftTableState): string {
  const out: string[] = [`table ${t.family} ${t.name} {`];
  const blocks: string[][] = [];
  for (const s of t.sets.values()) {
    const b = [`\tset ${s.name} {`, `\t\ttype ${s.type}`];
    if (s.interval) b.push('\t\tflags interval');
    if (s.comment !== undefined) b.push(`\t\tcomment "${s.comment}"`);
    const el = s.elements();
    if (el.length > 0) b.push(`\t\telements = { ${el.join(', ')} }`);
    b.push('\t}');
    blocks.push(b);
  }
  for (const c of t.chains.values()) {
    const b = [`\tchain ${c.name} {`];
    if (c.base)
      b.push(
        `\t\ttype ${c.base.type} hook ${c.base.hook} priority ${formatPriority(c.base.priority, c.base.hook)}; policy ${c.base.policy};`,
      );
    for (const r of c.rules) b.push(`\t\t${r.listing}`);
    b.push('\t}');
    blocks.push(b);
  }
  blocks.forEach((b, i) => {
    if (i > 0) out.push('');
    out.push(...b);
  });
  out.push('}');
  return `${out.join('\n')}\n`;
}
