/**
 * iptables-restore / ip6tables-restore text applied to a working copy of the tables.
 *
 * Atomicity: the caller passes copies; any error throws a RestoreError and the caller discards
 * the copies, so NOTHING changes — for the whole text, not only the failing table. (Real
 * iptables-restore commits table by table, so tables committed before the error stay applied;
 * we choose all-or-nothing because a partially applied ruleset is never what a test wants.)
 *
 * Without noflush, a table named by `*table` is reset (rules flushed, user chains deleted,
 * policies ACCEPT) and rebuilt; with noflush it is amended, and `:CHAIN` of an existing user
 * chain flushes that chain, as iptables-restore --noflush does.
 */
import { RestoreError, RuleSyntaxError } from './errors.js';
import { splitWords } from './lexer.js';
import { parseRuleSpec } from './parse-rule.js';
import type { RuleSpec } from './rule.js';
import { checkTable, emptyTable, TableCheckError, type ChainState, type Policy, type TableState } from './ruleset.js';
import { TABLE_HOOKS, type TableName } from './types.js';
import type { Family } from '../../../impl/api/ip/address.js';
import type { IpSets } from './ipset.js';
import { cachedRule, rememberRule, ruleKey } from './restore-cache.js';

const TABLES: readonly TableName[] = ['raw', 'mangle', 'nat', 'filter', 'security'];
const ALL_HOOKS = new Set<string>(['PREROUTING', 'INPUT', 'FORWARD', 'OUTPUT', 'POSTROUTING']);

const COMMANDS: Record<string, string> = {
  '-A': '-A',
  '--append': '-A',
  '-I': '-I',
  '--insert': '-I',
  '-D': '-D',
  '--delete': '-D',
  '-R': '-R',
  '--replace': '-R',
  '-N': '-N',
  '--new-chain': '-N',
  '-X': '-X',
  '--delete-chain': '-X',
  '-F': '-F',
  '--flush': '-F',
  '-P': '-P',
  '--policy': '-P',
};

interface RestoreEnv {
  readonly family: Family;
  readonly ipsets: IpSets | undefined;
  readonly noflush: boolean;
  readonly source: string;
}

function checkChainName(name: string): void {
  if (name.length === 0 || name.length > 28 || name.startsWith('-') || name === '!' || /\s/.test(name)) {
    throw new RuleSyntaxError(`"${name}" is not a valid chain name (1..28 characters, not starting with "-")`);
  }
  if (ALL_HOOKS.has(name)) throw new RuleSyntaxError(`"${name}" is a built-in chain name and cannot be a user chain`);
  if (
    ['ACCEPT', 'DROP', 'RETURN', 'REJECT', 'QUEUE'].includes(name) ||
    (/^[A-Z]+$/.test(name) &&
      ['MARK', 'CONNMARK', 'REDIRECT', 'TPROXY', 'DNAT', 'SNAT', 'MASQUERADE', 'CT', 'NOTRACK', 'LOG'].includes(name))
  ) {
    throw new RuleSyntaxError(`"${name}" is a target name and cannot be a chain name`);
  }
}

function parsePolicy(text: string | undefined, chain: string): Policy {
  if (text === 'ACCEPT' || text === 'DROP') return text;
  throw new RuleSyntaxError(
    `policy "${text ?? ''}" for chain ${chain} is not valid (built-in chain policies are ACCEPT or DROP)`,
  );
}

function parsePosition(text: string, what: string): number {
  if (!/^[1-9][0-9]*$/.test(text)) throw new RuleSyntaxError(`${what}: "${text}" is not a rule number (1-based)`);
  return Number(text);
}

export function applyRestore(text: string, tables: Map<TableName, TableState>, env: RestoreEnv): void {
  const lines = text.split('\n');
  let cur: { table: TableState; line: number; declared: Set<string> } | undefined;

  for (let idx = 0; idx < lines.length; idx++) {
    const lineNo = idx + 1;
    const raw = lines[idx] as string;
    const line = raw.trim();
    const fail = (problem: string): never => {
      throw new RestoreError(lineNo, env.source, raw, problem);
    };
    try {
      if (line === '' || line.startsWith('#')) continue;
      if (line.startsWith('*')) {
        if (cur)
          fail(
            `table ${cur.table.name} (line ${cur.line}) is not finished: COMMIT expected before starting another table`,
          );
        const name = line.slice(1).trim() as TableName;
        if (!TABLES.includes(name)) fail(`unknown table "${line.slice(1).trim()}" (supported: ${TABLES.join(', ')})`);
        const prev = tables.get(name) ?? emptyTable(name);
        const table = env.noflush ? prev : emptyTable(name);
        tables.set(name, table);
        cur = { table, line: lineNo, declared: new Set() };
        continue;
      }
      if (line === 'COMMIT') {
        if (!cur) fail('COMMIT outside a table (expected a *table line first)');
        const c = cur as NonNullable<typeof cur>;
        try {
          checkTable(c.table);
        } catch (e) {
          if (e instanceof TableCheckError) {
            throw new RestoreError(
              e.line,
              env.source,
              lines[e.line - 1] ?? '',
              `${e.message} (detected at COMMIT on line ${lineNo})`,
            );
          }
          throw e;
        }
        cur = undefined;
        continue;
      }
      if (!cur) fail('rule or chain line outside a table (expected a *table line first)');
      const table = (cur as NonNullable<typeof cur>).table;
      const declared = (cur as NonNullable<typeof cur>).declared;
      if (line.startsWith(':')) {
        const words = splitWords(line.slice(1));
        const [name, policy, counters, ...rest] = words;
        if (!name || !policy || rest.length > 0) fail('chain declaration must be ":CHAIN POLICY [packets:bytes]"');
        if (counters !== undefined && !/^\[[0-9]+:[0-9]+\]$/.test(counters))
          fail(`bad counters "${counters}" (expected [packets:bytes])`);
        const n = name as string;
        if (declared.has(n)) fail(`chain ${n} is declared twice in this table block`);
        declared.add(n);
        const existing = table.chains.get(n);
        if (existing?.builtin) {
          if (policy !== '-') existing.policy = parsePolicy(policy, n);
        } else {
          if (ALL_HOOKS.has(n))
            fail(
              `chain ${n} is not a built-in chain of table ${table.name} (its built-in chains: ${TABLE_HOOKS[table.name].join(', ')})`,
            );
          if (policy !== '-') fail(`user chain ${n} cannot have a policy ("${policy}"); write ":${n} - [0:0]"`);
          checkChainName(n);
          if (existing)
            existing.rules = []; // noflush: redeclaring flushes it
          else table.chains.set(n, { name: n, builtin: undefined, policy: 'ACCEPT', rules: [] });
        }
        continue;
      }
      const words = splitWords(line);
      const cmd = COMMANDS[words[0] ?? ''];
      if (!cmd) {
        if (words[0] === '-t' || words[0] === '--table')
          fail('-t is not allowed inside restore input (use *table blocks)');
        fail(
          `unknown command "${words[0] ?? ''}" (supported: -A, -I, -D, -R, -N, -X, -F, -P, :CHAIN declarations, COMMIT, # comments)`,
        );
      }
      applyCommand(cmd as string, words.slice(1), table, env, lineNo);
    } catch (e) {
      if (e instanceof RuleSyntaxError) throw new RestoreError(lineNo, env.source, raw, e.message);
      throw e;
    }
  }
  if (cur) {
    throw new RestoreError(
      cur.line,
      env.source,
      lines[cur.line - 1] ?? '',
      `table ${cur.table.name} started here has no COMMIT line (iptables-restore: "COMMIT expected")`,
    );
  }
}

function getChain(table: TableState, name: string | undefined, cmd: string): ChainState {
  if (!name) throw new RuleSyntaxError(`${cmd} needs a chain name`);
  const c = table.chains.get(name);
  if (!c)
    throw new RuleSyntaxError(
      `${cmd} ${name}: chain "${name}" does not exist in table ${table.name} (declare it with :${name} - [0:0] or -N)`,
    );
  return c;
}

function parseSpecs(
  words: readonly string[],
  table: TableState,
  chain: ChainState,
  env: RestoreEnv,
): readonly RuleSpec[] {
  const hasUserChain = (n: string): boolean => {
    const c = table.chains.get(n);
    return c !== undefined && c.builtin === undefined;
  };
  // Parsed rules are shared by content (restore-cache.ts); a failing parse throws and is not kept.
  const key = ruleKey({ family: env.family, table: table.name, chain: chain.name, words, hasUserChain });
  const hit = key === undefined ? undefined : cachedRule(key);
  if (hit) return hit;
  const specs = parseRuleSpec(words, {
    family: env.family,
    table: table.name,
    chain: chain.name,
    builtinHook: chain.builtin,
    ipsets: env.ipsets,
    hasUserChain,
  });
  if (key !== undefined) rememberRule(key, specs);
  return specs;
}

function referenced(table: TableState, name: string): boolean {
  for (const c of table.chains.values()) {
    for (const r of c.rules) {
      const t = r.spec.target?.compile();
      if (t && (t.k === 'jump' || t.k === 'goto') && t.chain === name) return true;
    }
  }
  return false;
}

function applyCommand(cmd: string, args: string[], table: TableState, env: RestoreEnv, line: number): void {
  const entries = (specs: readonly RuleSpec[]) => specs.map((spec) => ({ spec, line, source: env.source }));
  switch (cmd) {
    case '-A': {
      const chain = getChain(table, args[0], cmd);
      chain.rules.push(...entries(parseSpecs(args.slice(1), table, chain, env)));
      return;
    }
    case '-I': {
      const chain = getChain(table, args[0], cmd);
      let rest = args.slice(1);
      let pos = 1;
      if (rest[0] !== undefined && /^[0-9]+$/.test(rest[0])) {
        pos = parsePosition(rest[0], '-I');
        rest = rest.slice(1);
      }
      if (pos > chain.rules.length + 1)
        throw new RuleSyntaxError(
          `-I ${chain.name} ${pos}: chain has only ${chain.rules.length} rules (index too big)`,
        );
      chain.rules.splice(pos - 1, 0, ...entries(parseSpecs(rest, table, chain, env)));
      return;
    }
    case '-R': {
      const chain = getChain(table, args[0], cmd);
      const pos = parsePosition(args[1] ?? '', '-R');
      if (pos > chain.rules.length)
        throw new RuleSyntaxError(`-R ${chain.name} ${pos}: no such rule (chain has ${chain.rules.length})`);
      const specs = parseSpecs(args.slice(2), table, chain, env);
      if (specs.length !== 1)
        throw new RuleSyntaxError('-R: the replacement must be exactly one rule (no address lists)');
      chain.rules[pos - 1] = entries(specs)[0] as (typeof chain.rules)[number];
      return;
    }
    case '-D': {
      const chain = getChain(table, args[0], cmd);
      if (args.length === 2 && /^[0-9]+$/.test(args[1] as string)) {
        const pos = parsePosition(args[1] as string, '-D');
        if (pos > chain.rules.length)
          throw new RuleSyntaxError(`-D ${chain.name} ${pos}: no such rule (chain has ${chain.rules.length})`);
        chain.rules.splice(pos - 1, 1);
        return;
      }
      for (const spec of parseSpecs(args.slice(1), table, chain, env)) {
        const i = chain.rules.findIndex((r) => r.spec.text === spec.text);
        if (i < 0)
          throw new RuleSyntaxError(
            `-D ${chain.name}: no rule "${spec.text}" in that chain (bad rule: does a matching rule exist?)`,
          );
        chain.rules.splice(i, 1);
      }
      return;
    }
    case '-N': {
      if (args.length !== 1) throw new RuleSyntaxError('-N takes exactly one chain name');
      const name = args[0] as string;
      checkChainName(name);
      if (table.chains.has(name)) throw new RuleSyntaxError(`-N ${name}: chain already exists`);
      table.chains.set(name, { name, builtin: undefined, policy: 'ACCEPT', rules: [] });
      return;
    }
    case '-X': {
      if (args.length > 1) throw new RuleSyntaxError('-X takes at most one chain name');
      const victims =
        args.length === 1 ? [getChain(table, args[0], cmd)] : [...table.chains.values()].filter((c) => !c.builtin);
      for (const c of victims) {
        if (c.builtin) throw new RuleSyntaxError(`-X ${c.name}: cannot delete a built-in chain`);
        if (c.rules.length > 0) throw new RuleSyntaxError(`-X ${c.name}: chain is not empty (flush it with -F first)`);
      }
      for (const c of victims) table.chains.delete(c.name);
      for (const c of victims) {
        if (referenced(table, c.name)) {
          throw new RuleSyntaxError(`-X ${c.name}: chain is still referenced by a rule (delete the jump first)`);
        }
      }
      return;
    }
    case '-F': {
      if (args.length > 1) throw new RuleSyntaxError('-F takes at most one chain name');
      if (args.length === 1) getChain(table, args[0], cmd).rules = [];
      else for (const c of table.chains.values()) c.rules = [];
      return;
    }
    case '-P': {
      if (args.length !== 2) throw new RuleSyntaxError('-P needs CHAIN POLICY');
      const chain = getChain(table, args[0], cmd);
      if (!chain.builtin) throw new RuleSyntaxError(`-P ${chain.name}: only built-in chains have a policy`);
      chain.policy = parsePolicy(args[1], chain.name);
      return;
    }
    default:
      throw new RuleSyntaxError(`unsupported command ${cmd}`);
  }
}

export const ALL_TABLES = TABLES;
