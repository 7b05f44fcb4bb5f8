/**
 * Pure iptables restore-text code (no I/O), shared by the Linux NetnsRules adapter
 * (impl/linux/netns-rules.ts), the sim's adapter and the node agent's drift check: check a
 * plan's restore text against the port's contract (impl/host/netns-rules.ts), read
 * iptables-save output, and compose the `iptables-restore --noflush` transactions that make
 * apply and remove idempotent.
 *
 * Why a composed transaction: `--noflush` keeps everything that is not ours, and declaring an own
 * chain (`:NAME - [0:0]`) creates or flushes it, so own chains converge by themselves. Hooks on
 * built-in chains would pile up on every apply, so the transaction first deletes (`-D`, with the
 * exact text iptables-save printed) every existing hook into an own chain, then adds the plan's.
 * Kernel commits are per table; a failing transaction is undone by restoring the saved tables.
 */

import { memoByText } from './memo-by-text.js';

export const TABLES = ['raw', 'mangle', 'nat', 'filter', 'security'] as const;
export type Table = (typeof TABLES)[number];

/** Built-in chains per table (kernel valid-hook masks). */
export const BUILTIN_CHAINS: Readonly<Record<Table, readonly string[]>> = {
  raw: ['PREROUTING', 'OUTPUT'],
  mangle: ['PREROUTING', 'INPUT', 'FORWARD', 'OUTPUT', 'POSTROUTING'],
  nat: ['PREROUTING', 'INPUT', 'OUTPUT', 'POSTROUTING'],
  filter: ['INPUT', 'FORWARD', 'OUTPUT'],
  security: ['INPUT', 'FORWARD', 'OUTPUT'],
};

/** One table block of a plan's restore text, checked. */
export interface PlanTable {
  readonly table: Table;
  readonly ownChains: readonly string[];
  /** `-A`/`-I` lines as written, in order (hooks and own-chain rules). */
  readonly lines: readonly string[];
}

/** The restore text violates the port's contract; `line` is 1-based in the plan text. */
export class PlanTextError extends Error {
  constructor(
    readonly line: number,
    readonly detail: string,
  ) {
    super(`line ${line}: ${detail}`);
  }
}

const CHAIN_NAME = /^[A-Za-z0-9_.-]{1,28}$/;

function isTable(s: string): s is Table {
  return (TABLES as readonly string[]).includes(s);
}

/** The chain a rule line appends/inserts into, and its jump/goto target if any. */
function ruleShape(line: string): { op: string; chain: string; target: string | undefined } {
  const tok = line.trim().split(/\s+/);
  const op = tok[0] ?? '';
  const chain = tok[1] ?? '';
  let target: string | undefined;
  for (let i = 2; i < tok.length - 1; i++) {
    if (tok[i] === '-j' || tok[i] === '--jump' || tok[i] === '-g' || tok[i] === '--goto') target = tok[i + 1];
  }
  return { op, chain, target };
}

/** A plan's restore text checked against the port's contract, as its table blocks (memoized). */
export const parsePlanText: (text: string) => readonly PlanTable[] = memoByText(parsePlanTextOnce);

function parsePlanTextOnce(text: string): readonly PlanTable[] {
  const out: PlanTable[] = [];
  const seenTables = new Set<string>();
  let cur: { table: Table; ownChains: string[]; lines: string[]; start: number } | undefined;
  const lines = text.split('\n');
  lines.forEach((raw, i) => {
    const n = i + 1;
    const line = raw.trim();
    if (line === '' || line.startsWith('#')) return;
    if (line.startsWith('*')) {
      if (cur)
        throw new PlanTextError(
          n,
          `table *${line.slice(1)} starts before *${cur.table} (line ${cur.start}) was closed with COMMIT`,
        );
      const t = line.slice(1);
      if (!isTable(t)) throw new PlanTextError(n, `unknown table *${t}; expected one of ${TABLES.join(', ')}`);
      if (seenTables.has(t))
        throw new PlanTextError(n, `table *${t} appears twice; put all its chains and rules in one block`);
      seenTables.add(t);
      cur = { table: t, ownChains: [], lines: [], start: n };
      return;
    }
    if (!cur)
      throw new PlanTextError(n, `${JSON.stringify(line)} is outside a table block; start one with *nat, *mangle, ...`);
    if (line === 'COMMIT') {
      out.push({ table: cur.table, ownChains: cur.ownChains, lines: cur.lines });
      cur = undefined;
      return;
    }
    if (line.startsWith(':')) {
      const [name, policy] = line.slice(1).split(/\s+/);
      if (!name || !CHAIN_NAME.test(name)) throw new PlanTextError(n, `invalid chain name in ${JSON.stringify(line)}`);
      if (BUILTIN_CHAINS[cur.table].includes(name)) {
        throw new PlanTextError(
          n,
          `built-in chain ${name} is declared; a plan may not set built-in policies, only hook into them with -A/-I ${name} -j <own chain>`,
        );
      }
      if (policy !== '-')
        throw new PlanTextError(n, `user chain ${name} must be declared with policy '-' (":${name} - [0:0]")`);
      if (cur.ownChains.includes(name)) throw new PlanTextError(n, `chain ${name} declared twice in *${cur.table}`);
      cur.ownChains.push(name);
      return;
    }
    const { op, chain, target } = ruleShape(line);
    if (op !== '-A' && op !== '-I') {
      throw new PlanTextError(
        n,
        `only -A and -I rule lines are allowed in a plan (got ${JSON.stringify(op)}); deletions and flushes are the adapter's job`,
      );
    }
    if (BUILTIN_CHAINS[cur.table].includes(chain)) {
      if (!target || !cur.ownChains.includes(target)) {
        throw new PlanTextError(
          n,
          `rule on built-in chain ${chain} must jump to a chain this plan declares (got ${target ? `-j ${target}` : 'no -j'}); declare it with :NAME - [0:0] before use`,
        );
      }
    } else if (!cur.ownChains.includes(chain)) {
      throw new PlanTextError(n, `chain ${chain} is neither built-in in *${cur.table} nor declared by this plan`);
    }
    cur.lines.push(line);
  });
  if (cur) throw new PlanTextError(lines.length, `table *${cur.table} (line ${cur.start}) is not closed with COMMIT`);
  return out;
}

/** One table of iptables-save output. */
export interface SavedTable {
  readonly table: string;
  readonly chains: readonly string[];
  readonly rules: readonly string[];
  /** The table's section as printed (without comments), for restoring it verbatim. */
  readonly text: string;
}

/** iptables-save output as its tables, by name (memoized). */
export const parseSave: (text: string) => ReadonlyMap<string, SavedTable> = memoByText(parseSaveOnce);

function parseSaveOnce(text: string): ReadonlyMap<string, SavedTable> {
  const tables = new Map<string, SavedTable>();
  let cur: { table: string; chains: string[]; rules: string[]; text: string[] } | undefined;
  for (const raw of text.split('\n')) {
    const line = raw.trim();
    if (line === '' || line.startsWith('#')) continue;
    if (line.startsWith('*')) {
      cur = { table: line.slice(1), chains: [], rules: [], text: [line] };
      continue;
    }
    if (!cur) continue;
    cur.text.push(line);
    if (line === 'COMMIT') {
      tables.set(cur.table, {
        table: cur.table,
        chains: cur.chains,
        rules: cur.rules,
        text: cur.text.join('\n') + '\n',
      });
      cur = undefined;
    } else if (line.startsWith(':')) {
      cur.chains.push(line.slice(1).split(/\s+/)[0] ?? '');
    } else if (line.startsWith('-A ')) {
      cur.rules.push(line);
    }
  }
  return tables;
}

/**
 * Drop comment lines, zero counters and omit empty tables (built-in chains only, all ACCEPT, no
 * rules: they behave exactly like an absent table, and iptables cannot delete a table), so equal
 * configurations print equally.
 */
export const normaliseSave: (text: string) => string = memoByText(normaliseSaveOnce);

function normaliseSaveOnce(text: string): string {
  const zeroed = text
    .split('\n')
    .filter((l) => !l.startsWith('#'))
    .map((l) => l.replace(/\[\d+:\d+\]/g, '[0:0]'))
    .join('\n');
  return [...parseSave(zeroed).values()]
    .filter((t) => {
      const builtins: readonly string[] = isTable(t.table) ? BUILTIN_CHAINS[t.table] : [];
      const allAccept = t.text
        .split('\n')
        .filter((l) => l.startsWith(':'))
        .every((l) => / ACCEPT /.test(l));
      return t.rules.length > 0 || !allAccept || t.chains.some((c) => !builtins.includes(c));
    })
    .map((t) => t.text)
    .join('');
}

/** Saved hooks of `t` that jump into one of `own`, as `-D` lines. */
function hookDeletions(t: Table, own: readonly string[], saved: SavedTable | undefined): string[] {
  if (!saved) return [];
  return saved.rules
    .filter((r) => {
      const { chain, target } = ruleShape(r);
      return BUILTIN_CHAINS[t].includes(chain) && target !== undefined && own.includes(target);
    })
    .map((r) => `-D ${r.slice(3)}`);
}

/** The `--noflush` transaction that makes the namespace hold exactly `plan` in its own chains. */
export function applyTransaction(plan: readonly PlanTable[], saved: ReadonlyMap<string, SavedTable>): string {
  const parts: string[] = [];
  for (const t of plan) {
    parts.push(`*${t.table}`);
    for (const c of t.ownChains) parts.push(`:${c} - [0:0]`);
    parts.push(...hookDeletions(t.table, t.ownChains, saved.get(t.table)));
    parts.push(...t.lines);
    parts.push('COMMIT');
  }
  return parts.join('\n') + '\n';
}

/**
 * Full restore input (no --noflush) that makes each table of `plan` hold exactly the plan: every
 * built-in chain declared ACCEPT (an undeclared one would keep its policy), the own chains, the
 * plan's lines. Restoring a table this way drops every other rule and user chain in it.
 */
export function exclusiveTransaction(plan: readonly PlanTable[], saved?: ReadonlyMap<string, SavedTable>): string {
  const parts: string[] = [];
  for (const t of plan) {
    parts.push(`*${t.table}`);
    for (const c of BUILTIN_CHAINS[t.table]) parts.push(`:${c} ACCEPT [0:0]`);
    for (const c of t.ownChains) parts.push(`:${c} - [0:0]`);
    parts.push(...t.lines);
    parts.push('COMMIT');
  }
  // The tables the plan does not use are emptied too when they hold anything (exclusive owns the
  // whole ruleset: e.g. a raw NOTRACK would keep every connection from nat's redirect).
  for (const [name, s] of saved ?? new Map<string, SavedTable>()) {
    if (!isTable(name) || plan.some((t) => t.table === name) || !holdsAnything(name, s)) continue;
    parts.push(`*${name}`, ...BUILTIN_CHAINS[name].map((c) => `:${c} ACCEPT [0:0]`), 'COMMIT');
  }
  return parts.join('\n') + '\n';
}

/** A saved table with a rule, a user chain or a built-in policy other than ACCEPT. */
export function holdsAnything(table: Table, s: SavedTable): boolean {
  if (s.rules.length > 0) return true;
  return s.text
    .split('\n')
    .filter((l) => l.startsWith(':'))
    .some((decl) => {
      const [chain = '', policy = ''] = decl.slice(1).split(/\s+/);
      return !BUILTIN_CHAINS[table].includes(chain) || policy !== 'ACCEPT';
    });
}

/** The `--noflush` transaction removing the plan's hooks and own chains; undefined if none exist. */
export function removeTransaction(
  plan: readonly PlanTable[],
  saved: ReadonlyMap<string, SavedTable>,
): string | undefined {
  const parts: string[] = [];
  for (const t of plan) {
    const s = saved.get(t.table);
    const present = t.ownChains.filter((c) => s?.chains.includes(c));
    if (present.length === 0) continue;
    parts.push(`*${t.table}`);
    parts.push(...hookDeletions(t.table, present, s));
    // Flush all before deleting any: own chains may jump to each other.
    for (const c of present) parts.push(`-F ${c}`);
    for (const c of present) parts.push(`-X ${c}`);
    parts.push('COMMIT');
  }
  return parts.length > 0 ? parts.join('\n') + '\n' : undefined;
}

/**
 * Full-table restore input (no --noflush) that puts `tables` back as saved; a table that did not
 * exist is restored empty, which is what it was in effect.
 */
export function rollbackText(tables: readonly string[], saved: ReadonlyMap<string, SavedTable>): string {
  return tables.map((t) => saved.get(t)?.text ?? `*${t}\nCOMMIT\n`).join('');
}
