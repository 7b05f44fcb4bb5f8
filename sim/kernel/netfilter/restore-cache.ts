/**
 * Parsed restore results, cached by content. Without --noflush, iptables-restore rebuilds every
 * table the text names from scratch, so the result for those tables depends only on the text,
 * the family and the source name (kept in each rule for traces) — not on what was loaded before.
 * Simulations load the same texts over and over (every generated differential case, every pod
 * of a cluster with the same profile); parsing and compiling them once saves most of the cost.
 *
 * Sharing is safe because table states and compiled tables are never edited in place: a restore
 * works on copies (netfilter.ts) and swaps them in. Texts that use ipsets are not cached: their
 * parse checks the namespace's ipset registry.
 */
import type { Family } from '../../../impl/api/ip/address.js';
import type { CompiledTable, TableState } from './ruleset.js';
import type { RuleSpec } from './rule.js';
import type { TableName } from './types.js';

export interface CachedTable {
  readonly state: TableState;
  readonly compiled: CompiledTable;
}

type CachedRestore = ReadonlyMap<TableName, CachedTable>;

/** Bounded: generated rulesets differ case by case, so old entries are evicted (oldest first). */
const MAX_ENTRIES = 512;
const cache = new Map<string, CachedRestore>();

const keyOf = (family: Family, source: string, text: string): string => `${family}\u0000${source}\u0000${text}`;

/** May the result of restoring `text` (without --noflush) be cached? */
export function cacheable(text: string): boolean {
  return !text.includes('--match-set');
}

export function cachedRestore(family: Family, source: string, text: string): CachedRestore | undefined {
  const k = keyOf(family, source, text);
  const hit = cache.get(k);
  if (hit) {
    // Refresh: a hit moves to the young end of the insertion order.
    cache.delete(k);
    cache.set(k, hit);
  }
  return hit;
}

export function rememberRestore(family: Family, source: string, text: string, tables: CachedRestore): void {
  if (cache.size >= MAX_ENTRIES) {
    const oldest = cache.keys().next();
    if (!oldest.done) cache.delete(oldest.value);
  }
  cache.set(keyOf(family, source, text), tables);
}

// ---------------------------------------------------------------- single rules

/**
 * Parsed rule specs by their words. A generated ruleset differs from the last one in a few
 * lines (ports), so whole texts rarely repeat, but most of their rules do. A rule's parse depends
 * on the family, table and chain (hook checks), whether its -j/-g target names a user chain of the
 * table at that point, and the words; not on anything else (rules with ipsets are not cached).
 * RuleSpecs are never edited after parsing, so one parse can serve every table that has the rule.
 */
const RULES_MAX = 8192;
const rules = new Map<string, readonly RuleSpec[]>();

interface RuleKeyParts {
  readonly family: Family;
  readonly table: string;
  readonly chain: string;
  readonly words: readonly string[];
  hasUserChain(name: string): boolean;
}

const JUMPS = new Set(['-j', '--jump', '-g', '--goto']);

/** The cache key for a rule, or undefined when it must be parsed afresh. */
export function ruleKey(r: RuleKeyParts): string | undefined {
  let jumpsToUserChain = false;
  for (let i = 0; i < r.words.length; i++) {
    const w = r.words[i] as string;
    if (w === '--match-set') return undefined;
    if (JUMPS.has(w) && i + 1 < r.words.length) jumpsToUserChain = r.hasUserChain(r.words[i + 1] as string);
  }
  return `${r.family}\u0000${r.table}\u0000${r.chain}\u0000${jumpsToUserChain ? 1 : 0}\u0000${r.words.join('\u0000')}`;
}

export function cachedRule(key: string): readonly RuleSpec[] | undefined {
  return rules.get(key);
}

export function rememberRule(key: string, specs: readonly RuleSpec[]): void {
  if (rules.size >= RULES_MAX) rules.clear();
  rules.set(key, specs);
}
