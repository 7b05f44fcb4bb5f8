/**
 * Netfilter of one network namespace for one address family (iptables or ip6tables): the
 * rules loaded by restore(), their iptables-save form, and evaluation of a table at a hook.
 */
import type { Family } from '../../../impl/api/ip/address.js';
import { RestoreError } from './errors.js';
import { runCompiled } from './evaluate.js';
import type { IpSets } from './ipset.js';
import { ALL_TABLES, applyRestore } from './parse-restore.js';
import { cloneTable, compileTable, emptyTable, type CompiledTable, type TableState } from './ruleset.js';
import { cacheable, cachedRestore, rememberRestore, type CachedTable } from './restore-cache.js';
import { saveTable } from './save.js';
import type { RuleSpec } from './rule.js';
import type { EvalContext, Hook, TableName, TableRun } from './types.js';

/** One rule with a stable identity: `${table}/${chain}/${position}` in the current ruleset. */
interface RuleInfo {
  readonly id: string;
  readonly table: TableName;
  readonly chain: string;
  /** 1-based position in the chain. */
  readonly position: number;
  /** 1-based line of the restore text it came from, and that text's source name. */
  readonly line: number;
  readonly source: string;
  /** `-A CHAIN ...` as iptables-save prints it. */
  readonly text: string;
}

/** Remove (no replacement) or replace (replacement = rule spec after `-A CHAIN`) one rule. */
interface RuleEdit {
  readonly table: TableName;
  readonly chain: string;
  readonly position: number;
  readonly replacement?: string;
}

interface RestoreOptions {
  readonly noflush?: boolean;
  /** Name used in error messages and RuleInfo (e.g. a file name); default "<restore>". */
  readonly source?: string;
}

const CONNTRACK_MATCHES: ReadonlySet<string> = new Set(['conntrack', 'state', 'connmark']);
const CONNTRACK_TARGETS: ReadonlySet<string> = new Set(['CONNMARK', 'REDIRECT', 'DNAT', 'SNAT', 'MASQUERADE']);

function ruleNeedsConntrack(spec: RuleSpec): boolean {
  if (spec.matches.some((m) => CONNTRACK_MATCHES.has(m.module))) return true;
  const t = spec.target;
  if (!t) return false;
  if (CONNTRACK_TARGETS.has(t.name)) return true;
  // CT --notrack returns before xt_ct_tg_check takes conntrack; CT --zone takes it.
  return t.name === 'CT' && !t.render().includes('--notrack');
}

export class Netfilter {
  private tables = new Map<TableName, TableState>();
  private compiled = new Map<TableName, CompiledTable>();
  /** Tables a restore has named: iptables-save prints only those. */
  private loaded = new Set<TableName>();
  private readonly ipsets: IpSets | undefined;
  /** needsConntrack(), computed on first use after each restore. */
  private ctNeeded: boolean | undefined;

  constructor(
    readonly family: Family,
    opts: { readonly ipsets?: IpSets } = {},
  ) {
    this.ipsets = opts.ipsets;
    for (const t of ALL_TABLES) {
      const e = EMPTY.get(t) as CachedTable;
      this.tables.set(t, e.state);
      this.compiled.set(t, e.compiled);
    }
  }

  /**
   * iptables-restore semantics (see parse-restore.ts). All-or-nothing for the whole text: on
   * RestoreError nothing changes.
   */
  restore(text: string, opts: RestoreOptions = {}): void {
    const noflush = opts.noflush ?? false;
    const source = opts.source ?? '<restore>';
    const useCache = !noflush && cacheable(text);
    const hit = useCache ? cachedRestore(this.family, source, text) : undefined;
    if (hit) {
      for (const [k, v] of hit) {
        this.tables.set(k, v.state);
        this.compiled.set(k, v.compiled);
        this.loaded.add(k);
      }
      this.ctNeeded = undefined;
      return;
    }
    // Tables are never edited in place (restore-cache.ts relies on it): work on copies. Without
    // noflush a named table is rebuilt from empty, so only noflush needs real copies.
    const work = new Map<TableName, TableState>();
    for (const [k, v] of this.tables) work.set(k, noflush ? cloneTable(v) : v);
    applyRestore(text, work, { family: this.family, ipsets: this.ipsets, noflush, source });
    // Success: swap in and recompile the tables the text named (the others are unchanged).
    const named = new Map<TableName, CachedTable>();
    for (const line of text.split('\n')) {
      const m = /^\s*\*\s*(\S+)/.exec(line);
      if (!m) continue;
      const t = m[1] as TableName;
      const state = work.get(t) as TableState;
      named.set(t, { state, compiled: compileTable(state) });
    }
    this.tables = work;
    this.ctNeeded = undefined;
    for (const [k, v] of named) {
      this.compiled.set(k, v.compiled);
      this.loaded.add(k);
    }
    if (useCache) rememberRestore(this.family, source, text, named);
  }

  /** iptables-save text for one table, or every table a restore has named (fixed order). */
  save(table?: TableName): string {
    if (table) return saveTable(this.must(table));
    return ALL_TABLES.filter((t) => this.loaded.has(t))
      .map((t) => saveTable(this.must(t)))
      .join('');
  }

  /** Run `table`'s built-in chain for `hook`. trace=false skips RuleStep records (faster). */
  runTable(table: TableName, hook: Hook, ctx: EvalContext, opts: { readonly trace?: boolean } = {}): TableRun {
    if (ctx.hook !== hook) throw new Error(`runTable(${table}, ${hook}): ctx.hook is ${ctx.hook}; they must agree`);
    return runCompiled(this.compiledTable(table), ctx, opts.trace ?? true);
  }

  /**
   * Does any loaded rule need conntrack? Linux registers a namespace's conntrack hooks for a
   * family only when a rule asks for them at load time (nf_ct_netns_get, from the checkentry of
   * xt_conntrack, xt_state, xt_connmark, CONNMARK, CT with a zone, and the NAT targets); until
   * then, and again once no such rule is left, that family's packets are not tracked. Checked on
   * the real kernel (6.18, iptables-nft): a nat table whose rules do no NAT, MARK, TPROXY, CT
   * --notrack and -m owner leave loopback TCP untracked; REDIRECT, CT --zone, -m connmark,
   * CONNMARK and -m state track it; a v6-only rule tracks v6 connections only.
   */
  needsConntrack(): boolean {
    if (this.ctNeeded === undefined) {
      this.ctNeeded = false;
      for (const t of this.tables.values())
        for (const c of t.chains.values())
          for (const r of c.rules) if (ruleNeedsConntrack(r.spec)) this.ctNeeded = true;
    }
    return this.ctNeeded;
  }

  /** No rules anywhere and all policies ACCEPT: the datapath may skip this table entirely. */
  isEmpty(table: TableName): boolean {
    return this.compiledTable(table).empty;
  }

  /** The built-in chain for `hook` has rules or a DROP policy (false also when the table has no such hook). */
  hasRules(table: TableName, hook: Hook): boolean {
    const c = this.compiledTable(table).chains.get(hook);
    return c !== undefined && c.builtin !== undefined && (c.rules.length > 0 || c.policy !== 'ACCEPT');
  }

  rules(table?: TableName): RuleInfo[] {
    const out: RuleInfo[] = [];
    for (const t of ALL_TABLES) {
      if (table && t !== table) continue;
      for (const c of this.compiledTable(t).chains.values()) {
        for (const r of c.rules) {
          out.push({
            id: `${t}/${c.name}/${r.position}`,
            table: t,
            chain: c.name,
            position: r.position,
            line: r.line,
            source: r.source,
            text: r.text,
          });
        }
      }
    }
    return out;
  }

  /**
   * Full iptables-save text (all loaded tables) with one rule removed or replaced — the input
   * for mutation tests. Restore it into a fresh Netfilter; it may fail to load (e.g. a removed
   * jump leaves nothing broken, but a replacement may be invalid) and that is the caller's to judge.
   */
  saveWithEdit(edit: RuleEdit): string {
    const t = this.must(edit.table);
    const c = t.chains.get(edit.chain);
    if (!c || edit.position < 1 || edit.position > c.rules.length) {
      throw new Error(`saveWithEdit: no rule ${edit.table}/${edit.chain}/${edit.position}`);
    }
    const target = `-A ${edit.chain} ${(c.rules[edit.position - 1] as { spec: { text: string } }).spec.text}`;
    const out: string[] = [];
    for (const tn of ALL_TABLES.filter((x) => this.loaded.has(x) || x === edit.table)) {
      const text = saveTable(this.must(tn));
      if (tn !== edit.table) {
        out.push(text);
        continue;
      }
      // Find the edited rule by counting occurrences within its chain, so duplicates are safe.
      let seen = 0;
      const lines = text.split('\n').flatMap((l) => {
        if (l.startsWith(`-A ${edit.chain} `)) {
          seen++;
          if (seen === edit.position) {
            if (l !== target) throw new Error('saveWithEdit: internal mismatch');
            return edit.replacement === undefined ? [] : [`-A ${edit.chain} ${edit.replacement}`];
          }
        }
        return [l];
      });
      out.push(lines.join('\n'));
    }
    return out.join('');
  }

  /** A copy with the same rules, sharing the ipset registry. */
  clone(): Netfilter {
    const n = new Netfilter(this.family, this.ipsets ? { ipsets: this.ipsets } : {});
    for (const [k, v] of this.tables) n.tables.set(k, cloneTable(v));
    for (const [k, v] of this.compiled) n.compiled.set(k, v);
    for (const t of this.loaded) n.loaded.add(t);
    n.ctNeeded = this.ctNeeded;
    return n;
  }

  policy(table: TableName, chain: Hook): 'ACCEPT' | 'DROP' | undefined {
    const c = this.must(table).chains.get(chain);
    return c?.builtin ? c.policy : undefined;
  }

  private must(table: TableName): TableState {
    const t = this.tables.get(table);
    if (!t) throw new Error(`unknown table "${String(table)}" (tables: ${ALL_TABLES.join(', ')})`);
    return t;
  }

  private compiledTable(table: TableName): CompiledTable {
    const t = this.compiled.get(table);
    if (!t) throw new Error(`unknown table "${String(table)}" (tables: ${ALL_TABLES.join(', ')})`);
    return t;
  }
}

/** The state a fresh namespace starts with, per table; shared (never edited in place). */
const EMPTY: ReadonlyMap<TableName, CachedTable> = new Map(
  ALL_TABLES.map((t) => {
    const state = emptyTable(t);
    return [t, { state, compiled: compileTable(state) }] as const;
  }),
);

export { RestoreError };
