/**
 * The nftables state of one network namespace, for every family (ip, ip6, inet): what `nft -f`
 * documents built, their listing, run-time set elements, and the base chains the datapath runs at
 * each hook. Applying a document is one transaction: it runs against a copy, passes the commit
 * checks, and only then replaces the state (an NftError leaves everything as it was).
 */
import type { Family } from '../../../impl/api/ip/address.js';
import type { Hook } from '../netfilter/types.js';
import { commitChecks } from './commit.js';
import { NftError, NftStateError, NftSyntaxError } from './errors.js';
import { runNftChain, type NftChainRun } from './evaluate.js';
import { listTable } from './listing.js';
import {
  HOOK_NAME,
  NFT_FAMILIES,
  tableKey,
  type NftChainState,
  type NftChainType,
  type NftEvalContext,
  type NftFamily,
  type NftTableState,
} from './model.js';
import { DocumentParser, type Tables } from './parse-document.js';

/** A base chain as the datapath sees it at one hook. */
export interface NftBaseRef {
  readonly table: NftTableState;
  readonly chain: NftChainState;
  readonly type: NftChainType;
  readonly priority: number;
  /** `inet T C`, for traces. */
  readonly label: string;
}

/**
 * The base chains of one family at one hook, sorted by priority; on a tie the chain made last
 * runs first, as the kernel inserts a newly registered hook before those of equal priority.
 */
export interface HookChains {
  /** filter- and route-type chains: each runs at its own priority. */
  readonly chains: readonly NftBaseRef[];
  /** nat-type chains: run by the NAT core at its fixed priority, in this order (nf_nat_inet_fn). */
  readonly nat: readonly NftBaseRef[];
}

function copyTable(t: NftTableState): NftTableState {
  const chains = new Map<string, NftChainState>();
  for (const [k, c] of t.chains) chains.set(k, { ...c });
  const sets = new Map([...t.sets].map(([k, s]) => [k, s.clone()] as const));
  return { family: t.family, name: t.name, chains, sets };
}

function familyApplies(f: NftFamily, fam: Family): boolean {
  return f === 'inet' || (f === 'ip' ? fam === 4 : fam === 6);
}

function checkFamily(family: string): NftFamily {
  if (!(NFT_FAMILIES as readonly string[]).includes(family))
    throw new NftStateError(`nft family "${family}" is not supported (ip, ip6, inet)`);
  return family as NftFamily;
}

export class NfTables {
  private state: Tables = new Map();
  /** Per family and hook; rebuilt after each change of tables or chains. */
  private index: Map<string, HookChains> | undefined = undefined;
  private ctNeeded: { 4: boolean; 6: boolean } = { 4: false, 6: false };
  /** Chains made so far (NftChainState.reg); a rejected document's numbers are simply skipped. */
  private regs = 0;

  /** Any table at all (the datapath's one check on the hot path). */
  get active(): boolean {
    return this.state.size > 0;
  }

  /**
   * `nft -f` with `text`. All-or-nothing: on NftError (naming source:line, the line and what is
   * supported) nothing changed.
   */
  apply(text: string, opts: { readonly source?: string } = {}): void {
    const source = opts.source ?? '<nft>';
    const lines = text.split('\n');
    const work: Tables = new Map();
    for (const [k, t] of this.state) work.set(k, copyTable(t));
    new DocumentParser(text, work, source, lines, () => ++this.regs).run();
    for (const t of work.values()) {
      try {
        commitChecks(t);
      } catch (e) {
        if (e instanceof NftSyntaxError) {
          const l = e.line ?? 1;
          throw new NftError(l, source, lines[l - 1] ?? '', e.message);
        }
        throw e;
      }
    }
    this.state = work;
    this.reindex();
  }

  /** The listing of every table (of `family`, or the one table named), in the block form nft prints. */
  list(family?: NftFamily, table?: string): string {
    if (table !== undefined) {
      if (family === undefined) throw new NftStateError('list: a table name needs its family');
      return listTable(this.mustTable(family, table));
    }
    return [...this.state.values()]
      .filter((t) => family === undefined || t.family === family)
      .map(listTable)
      .join('');
  }

  tables(): { readonly family: NftFamily; readonly name: string }[] {
    return [...this.state.values()].map((t) => ({ family: t.family, name: t.name }));
  }

  hasTable(family: NftFamily, name: string): boolean {
    return this.state.has(tableKey(family, name));
  }

  /** `nft delete table FAMILY NAME`; NftStateError when there is none. */
  deleteTable(family: NftFamily, name: string): void {
    if (!this.state.delete(tableKey(checkFamily(family), name)))
      throw new NftStateError(`no nftables table ${family} ${name} to delete (tables: ${this.describeTables()})`);
    this.reindex();
  }

  /** `nft flush ruleset`. */
  flushRuleset(): void {
    this.state = new Map();
    this.reindex();
  }

  /** `nft add element FAMILY TABLE SET { ... }`: all or none (a bad element adds nothing). */
  addElements(family: NftFamily, table: string, set: string, elements: readonly string[]): void {
    const s = this.mustSet(family, table, set);
    const parsed = elements.map((e) => this.element(s, e));
    for (const e of parsed) s.add(e);
  }

  /** `nft delete element ...`: every element must be in the set (ENOENT otherwise), else nothing changes. */
  deleteElements(family: NftFamily, table: string, set: string, elements: readonly string[]): void {
    const s = this.mustSet(family, table, set);
    const parsed = elements.map((e) => this.element(s, e));
    for (const e of parsed)
      if (!s.elements().includes(e.text))
        throw new NftStateError(
          `element ${e.text} is not in set ${family} ${table} ${set} (No such file or directory)`,
        );
    for (const e of parsed) s.delete(e);
  }

  /** The elements of a named set, as listed. */
  elements(family: NftFamily, table: string, set: string): string[] {
    return this.mustSet(family, table, set).elements();
  }

  /**
   * Does a loaded rule need conntrack for `family`? nf_ct_netns_get runs when a rule with a ct
   * expression or statement (but notrack) or a NAT statement is loaded, for the table's family
   * (inet: both) — whether or not a base chain reaches the rule.
   */
  needsConntrack(family: Family): boolean {
    return this.ctNeeded[family];
  }

  /** The base chains of `family` at `hook`, or undefined when there are none. */
  chainsAt(family: Family, hook: Hook): HookChains | undefined {
    return this.index?.get(`${family}${hook}`);
  }

  run(ref: NftBaseRef, ctx: NftEvalContext, trace: boolean): NftChainRun {
    return runNftChain(ref.table, ref.chain, ctx, trace);
  }

  private reindex(): void {
    const ct = { 4: false, 6: false };
    const refs: { ref: NftBaseRef; fam: Family; hook: Hook }[] = [];
    for (const t of this.state.values()) {
      for (const c of t.chains.values()) {
        if (c.rules.some((r) => r.needsConntrack)) {
          if (familyApplies(t.family, 4)) ct[4] = true;
          if (familyApplies(t.family, 6)) ct[6] = true;
        }
        if (!c.base) continue;
        const ref: NftBaseRef = {
          table: t,
          chain: c,
          type: c.base.type,
          priority: c.base.priority,
          label: `${t.family} ${t.name} ${c.name}`,
        };
        for (const fam of [4, 6] as const)
          if (familyApplies(t.family, fam)) refs.push({ ref, fam, hook: HOOK_NAME[c.base.hook] });
      }
    }
    this.ctNeeded = ct;
    if (refs.length === 0) {
      this.index = undefined;
      return;
    }
    const index = new Map<string, { chains: NftBaseRef[]; nat: NftBaseRef[] }>();
    refs.sort((a, b) => a.ref.priority - b.ref.priority || b.ref.chain.reg - a.ref.chain.reg);
    for (const r of refs) {
      const k = `${r.fam}${r.hook}`;
      let e = index.get(k);
      if (!e) index.set(k, (e = { chains: [], nat: [] }));
      if (r.ref.type === 'nat') e.nat.push(r.ref);
      else e.chains.push(r.ref);
    }
    this.index = index;
  }

  private describeTables(): string {
    return (
      this.tables()
        .map((t) => `${t.family} ${t.name}`)
        .join(', ') || 'none'
    );
  }

  private mustTable(family: NftFamily, name: string): NftTableState {
    const t = this.state.get(tableKey(checkFamily(family), name));
    if (!t) throw new NftStateError(`no nftables table ${family} ${name} (tables: ${this.describeTables()})`);
    return t;
  }

  private mustSet(family: NftFamily, table: string, set: string): ReturnType<NftTableState['sets']['get']> & object {
    const t = this.mustTable(family, table);
    const s = t.sets.get(set);
    if (!s)
      throw new NftStateError(
        `no set ${set} in table ${family} ${table} (sets: ${[...t.sets.keys()].join(', ') || 'none'})`,
      );
    return s;
  }

  private element(s: ReturnType<NfTables['mustSet']>, text: string): ReturnType<typeof s.parseElement> {
    try {
      return s.parseElement(text);
    } catch (e) {
      if (e instanceof NftSyntaxError) throw new NftStateError(`set ${s.name}: ${e.message}`);
      throw e;
    }
  }
}

export { NftError, NftStateError };
