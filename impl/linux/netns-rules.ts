/**
 * Real adapter of the NetnsRules port (impl/host/netns-rules.ts): iptables-restore,
 * ip6tables-restore and iproute2, each run as `nsenter --net=<NetnsId path> <tool>`, so the
 * adapter works with /run/netns/NAME and /proc/PID/ns/net handles alike and never needs the
 * namespace to have a name.
 *
 * Decisions (see the port for the contract):
 * - iptables: one composed `--noflush` transaction per family (impl/api/netns-rules-restore.ts),
 *   or in mode `exclusive` one full restore of the plan's tables per family, checked first with `--test` for both families, so a text the tools reject changes nothing;
 *   a kernel-side rejection after that is undone by restoring the saved tables.
 * - ip rule / ip route: added only when not already present exactly; EEXIST from `ip rule add` is
 *   "already there" (as upstream), from `ip route add` only when a re-read shows exactly the plan's
 *   route (a concurrent apply added it; else the table holds another route: an error); remove deletes only what read() shows, and ENOENT/ESRCH from a
 *   concurrent remover are "already gone".
 * - nftables (the nftables backend, when constructed with an `nft` adapter): the plan's document
 *   is one `nft -f` transaction after routes and ip rules (prefixed by `flush ruleset` in mode
 *   `exclusive`); if the kernel rejects it, the routing added is undone and nothing else changed.
 *   read() lists every table but iptables-nft's; remove deletes the plan's tables first.
 */
import { nsenterRun, nsenterText, type NsenterResult } from './nsenter.js';
import type { NetnsId } from '../api/ids.js';
import { mark, formatMark } from '../api/marks.js';
import { iptablesTools, type IptablesTools } from './iptables-backend.js';
import { isIptablesTable, isOwnTable } from '../api/nft-tables.js';
import type { LinuxNftRules } from './nft-rules.js';
import type {
  AppliedState,
  ApplyMode,
  IpFamily,
  LocalRoute,
  NetnsRules,
  PolicyRule,
  RedirectionPlan,
} from '../host/netns-rules.js';
import {
  applyTransaction,
  exclusiveTransaction,
  normaliseSave,
  parsePlanText,
  parseSave,
  PlanTextError,
  removeTransaction,
  rollbackText,
  TABLES,
  type PlanTable,
  type SavedTable,
} from '../api/netns-rules-restore.js';

/** A failure while applying, removing or reading rules in one namespace. */
export class NetnsRulesError extends Error {
  constructor(
    readonly netns: string,
    readonly operation: Operation,
    readonly command: string,
    readonly stderr: string,
    hint: string,
  ) {
    super(`${operation} in netns ${netns}: ${command} failed: ${stderr.trim() || '(no stderr)'}. ${hint}`);
  }
}

type Operation = 'apply' | 'remove' | 'read';

/** Per-namespace sysctl (read through the namespace: /proc/sys/net follows the reader's netns). */
const LO_DISABLE_IPV6 = '/proc/sys/net/ipv6/conf/lo/disable_ipv6';

interface LinuxNetnsRulesOptions {
  /** Per-command timeout (default 30 s). */
  readonly timeoutMs?: number;
  /** The iptables variant's save/restore tools (iptables-backend.ts); default the unsuffixed system tools. */
  readonly iptables?: IptablesTools;
  /** The nftables backend: apply plans' `nftables` and read the namespace's nftables tables. */
  readonly nftables?: LinuxNftRules;
}

const FAMILIES: readonly IpFamily[] = ['ipv4', 'ipv6'];
const TOOLS: Readonly<Record<IpFamily, { ipFlag: string; any: string; host: number }>> = {
  ipv4: { ipFlag: '-4', any: '0.0.0.0/0', host: 32 },
  ipv6: { ipFlag: '-6', any: '::/0', host: 128 },
};
const RESERVED_TABLES = new Set([0, 253, 254, 255]);
const DEV_NAME = /^[A-Za-z0-9_.@:-]{1,15}$/;

function sameRule(a: PolicyRule, b: PolicyRule): boolean {
  return (
    a.family === b.family &&
    a.priority === b.priority &&
    a.table === b.table &&
    a.fwmark.value === b.fwmark.value &&
    a.fwmark.mask === b.fwmark.mask
  );
}

function sameRoute(a: LocalRoute, b: LocalRoute): boolean {
  return a.family === b.family && a.dst === b.dst && a.dev === b.dev && a.table === b.table;
}

/** `ip` prints `default` and bare host addresses; plans use CIDR. */
function routeDst(family: IpFamily, dst: string): string {
  if (dst === 'default') return TOOLS[family].any;
  return dst.includes('/') ? dst : `${dst}/${TOOLS[family].host}`;
}

function ruleArgs(r: PolicyRule): string[] {
  return [
    TOOLS[r.family].ipFlag,
    'rule',
    '%OP%',
    'fwmark',
    formatMark(r.fwmark),
    'lookup',
    String(r.table),
    'pref',
    String(r.priority),
  ];
}

function routeArgs(r: LocalRoute): string[] {
  return [TOOLS[r.family].ipFlag, 'route', '%OP%', 'local', r.dst, 'dev', r.dev, 'table', String(r.table)];
}

function withOp(args: readonly string[], op: string): string[] {
  return args.map((a) => (a === '%OP%' ? op : a));
}

export class LinuxNetnsRules implements NetnsRules {
  private readonly timeoutMs: number;
  private readonly ipt: IptablesTools;
  private readonly nft: LinuxNftRules | undefined;

  constructor(opts: LinuxNetnsRulesOptions = {}) {
    this.timeoutMs = opts.timeoutMs ?? 30_000;
    this.ipt = opts.iptables ?? iptablesTools('system');
    this.nft = opts.nftables;
  }

  async apply(netns: NetnsId, plan: RedirectionPlan, mode: ApplyMode = 'merge'): Promise<void> {
    const parsed = this.check(netns, 'apply', plan);
    // Exclusive: one full restore per family replaces the plan's tables whole (atomic per table).
    const flush = mode === 'exclusive' ? [] : ['--noflush'];
    // Dry run of both families first: what the tools reject must not half-apply.
    const saved = new Map<IpFamily, ReadonlyMap<string, SavedTable>>();
    const txs = new Map<IpFamily, string>();
    for (const [family, tables] of parsed) {
      const s = parseSave(await this.must(netns, 'apply', [this.ipt[family].save]));
      saved.set(family, s);
      const tx = mode === 'exclusive' ? exclusiveTransaction(tables, s) : applyTransaction(tables, s);
      txs.set(family, tx);
      await this.must(
        netns,
        'apply',
        [this.ipt[family].restore, ...flush, '--test', '-w'],
        tx,
        "The plan's restore text was rejected in a dry run; nothing was changed. Fix the rule text (the line is quoted above).",
      );
    }

    const before = await this.read(netns);
    const addedRoutes: LocalRoute[] = [];
    const addedRules: PolicyRule[] = [];
    const undoRouting = async (): Promise<void> => {
      for (const r of addedRules) await this.run(netns, ['ip', ...withOp(ruleArgs(r), 'del')]);
      for (const r of addedRoutes) await this.run(netns, ['ip', ...withOp(routeArgs(r), 'del')]);
    };
    try {
      for (const r of plan.routes) {
        if (before.routes.some((x) => sameRoute(x, r))) continue;
        const argv = ['ip', ...withOp(routeArgs(r), 'add')];
        const res = await this.run(netns, argv);
        if (res.ok) addedRoutes.push(r);
        // EEXIST after `before` said absent: another apply to this netns added it meanwhile (a
        // retried ADD racing the first). Exactly this route is the plan's: not ours to undo.
        else if (!(/File exists/.test(res.stderr) && (await this.read(netns)).routes.some((x) => sameRoute(x, r))))
          throw this.error(
            netns,
            'apply',
            argv,
            res.stderr,
            `Table ${r.table} may already hold a different route for ${r.dst}; the namespace was left as it was.`,
          );
      }
      for (const r of plan.rules) {
        if (before.rules.some((x) => sameRule(x, r))) continue;
        const res = await this.run(netns, ['ip', ...withOp(ruleArgs(r), 'add')]);
        if (res.ok) addedRules.push(r);
        else if (!/File exists/.test(res.stderr)) {
          throw this.error(
            netns,
            'apply',
            ['ip', ...withOp(ruleArgs(r), 'add')],
            res.stderr,
            'The namespace was left as it was.',
          );
        }
      }
    } catch (e) {
      await undoRouting();
      throw e;
    }

    const done: IpFamily[] = [];
    for (const family of parsed.keys()) {
      const argv = [this.ipt[family].restore, ...flush, '-w'];
      const tx = txs.get(family) ?? '';
      const res = await this.run(netns, argv, tx);
      if (!res.ok) {
        const rollback = await this.rollback(netns, [...done, family], parsed, saved, mode === 'exclusive');
        await undoRouting();
        throw this.error(
          netns,
          'apply',
          argv,
          `${res.stderr}${quoteLine(res.stderr, tx)}`,
          `The kernel rejected the transaction; the namespace was restored to its previous state${rollback}.`,
        );
      }
      done.push(family);
    }
    if (!plan.nftables && mode === 'exclusive' && this.nft) {
      // Strict on the iptables backend owns the nftables ruleset too: a foreign table's base
      // chains share the hooks with iptables' (iptables-nft's own tables and ours stay).
      const foreign = (await this.nft.tables(netns)).filter((t) => !isIptablesTable(t) && !isOwnTable(t));
      if (foreign.length > 0) await this.nft.remove(netns, foreign);
    }
    if (plan.nftables) {
      const nft = this.nftFor(netns, 'apply');
      const text = mode === 'exclusive' ? `flush ruleset\n${plan.nftables.text}` : plan.nftables.text;
      try {
        await nft.apply(netns, text, plan.nftables.tables);
      } catch (e) {
        const rollback = await this.rollback(netns, done, parsed, saved);
        await undoRouting();
        throw new NetnsRulesError(
          netns,
          'apply',
          'nft -f -',
          (e as Error).message,
          `The routing this apply added was removed${rollback}; nft commits a document whole, so its tables are as they were.`,
        );
      }
    }
  }

  /** The nft adapter, or an error: a plan with nftables needs the nftables backend. */
  private nftFor(netns: string, op: Operation): LinuxNftRules {
    if (this.nft) return this.nft;
    throw new NetnsRulesError(
      netns,
      op,
      'plan validation',
      'the plan has nftables rules but this adapter was made for the iptables backend',
      'Construct LinuxNetnsRules with an nftables adapter (the agent does with --backend nftables).',
    );
  }

  async remove(netns: NetnsId, plan: RedirectionPlan): Promise<void> {
    const parsed = this.check(netns, 'remove', plan);
    if (plan.nftables) await this.nftFor(netns, 'remove').remove(netns, plan.nftables.tables);
    const saved = new Map<IpFamily, ReadonlyMap<string, SavedTable>>();
    const done: IpFamily[] = [];
    for (const [family, tables] of parsed) {
      const s = parseSave(await this.must(netns, 'remove', [this.ipt[family].save]));
      saved.set(family, s);
      const tx = removeTransaction(tables, s);
      if (tx === undefined) continue; // nothing of ours in this family
      const argv = [this.ipt[family].restore, '--noflush', '-w'];
      const res = await this.run(netns, argv, tx);
      if (!res.ok) {
        const rollback = await this.rollback(netns, [...done, family], parsed, saved);
        throw this.error(
          netns,
          'remove',
          argv,
          `${res.stderr}${quoteLine(res.stderr, tx)}`,
          `Something else may reference the plan's chains; the namespace was restored to its previous state${rollback}.`,
        );
      }
      done.push(family);
    }
    // Delete only what is there; an errno race with another remover still counts as gone.
    const now = await this.read(netns);
    const gone = /No such file or directory|No such process/;
    for (const r of plan.rules.filter((x) => now.rules.some((y) => sameRule(x, y)))) {
      const argv = ['ip', ...withOp(ruleArgs(r), 'del')];
      const res = await this.run(netns, argv);
      if (!res.ok && !gone.test(res.stderr))
        throw this.error(netns, 'remove', argv, res.stderr, 'The iptables part was already removed.');
    }
    for (const r of plan.routes.filter((x) => now.routes.some((y) => sameRoute(x, y)))) {
      const argv = ['ip', ...withOp(routeArgs(r), 'del')];
      const res = await this.run(netns, argv);
      if (!res.ok && !gone.test(res.stderr))
        throw this.error(netns, 'remove', argv, res.stderr, 'The iptables part and the ip rules were already removed.');
    }
  }

  async read(netns: NetnsId): Promise<AppliedState> {
    const save = async (f: IpFamily): Promise<string> =>
      normaliseSave(await this.must(netns, 'read', [this.ipt[f].save]));
    const rules: PolicyRule[] = [];
    const routes: LocalRoute[] = [];
    for (const family of FAMILIES) {
      const flag = TOOLS[family].ipFlag;
      for (const r of parseJson(netns, await this.must(netns, 'read', ['ip', '-j', flag, 'rule', 'show']))) {
        const table = Number(r['table']);
        if (typeof r['fwmark'] !== 'string' || !Number.isInteger(table)) continue;
        const mask = typeof r['fwmask'] === 'string' ? Number(r['fwmask']) : 0xffffffff;
        rules.push({ family, priority: Number(r['priority']), fwmark: mark(Number(r['fwmark']), mask), table });
      }
      for (const r of parseJson(
        netns,
        await this.must(netns, 'read', ['ip', '-j', flag, 'route', 'show', 'table', 'all', 'type', 'local']),
      )) {
        const table = Number(r['table']);
        if (!Number.isInteger(table) || RESERVED_TABLES.has(table)) continue;
        routes.push({ family, type: 'local', dst: routeDst(family, String(r['dst'])), dev: String(r['dev']), table });
      }
    }
    const iptables = { ipv4: await save('ipv4'), ipv6: await save('ipv6') };
    if (!this.nft) return { iptables, rules, routes };
    const nftables: Record<string, string> = {};
    for (const [key, text] of await this.nft.listAll(netns)) {
      const [family = '', name = ''] = key.split(' ');
      if (!isIptablesTable({ family, name })) nftables[key] = text;
    }
    return { iptables, rules, routes, nftables };
  }

  async loopbackIpv6Disabled(netns: NetnsId): Promise<boolean> {
    const argv = ['cat', LO_DISABLE_IPV6];
    const res = await this.run(netns, argv);
    if (!res.ok) {
      throw this.error(
        netns,
        'read',
        argv,
        res.stderr,
        'Without this setting the agent cannot tell whether the v6 return route can exist; a kernel without IPv6 needs IPv6 capture off.',
      );
    }
    const v = res.stdout.trim();
    if (v !== '0' && v !== '1')
      throw this.error(netns, 'read', argv, `unexpected value ${JSON.stringify(v)}`, 'Expected 0 or 1.');
    return v === '1';
  }

  /** Validate the whole plan without I/O; returns the parsed restore text per family present. */
  private check(netns: string, op: 'apply' | 'remove', plan: RedirectionPlan): Map<IpFamily, readonly PlanTable[]> {
    const bad = (what: string): NetnsRulesError =>
      new NetnsRulesError(
        netns,
        op,
        'plan validation',
        what,
        'Nothing was changed; fix the plan (the rule builder renders it).',
      );
    const parsed = new Map<IpFamily, readonly PlanTable[]>();
    for (const family of FAMILIES) {
      const text = plan.iptables[family];
      if (text === undefined) continue;
      try {
        parsed.set(family, parsePlanText(text));
      } catch (e) {
        if (e instanceof PlanTextError) throw bad(`${family} restore text, ${e.message}`);
        throw e;
      }
    }
    for (const r of plan.rules) {
      if (!FAMILIES.includes(r.family)) throw bad(`ip rule has unknown family ${String(r.family)}`);
      if (!Number.isInteger(r.priority) || r.priority < 1 || r.priority > 0xfffffffe)
        throw bad(`ip rule priority ${r.priority} is not in 1..4294967294`);
      if (!Number.isInteger(r.table) || r.table < 1 || r.table > 0xffffffff || RESERVED_TABLES.has(r.table)) {
        throw bad(
          `ip rule table ${r.table} is not a private table (1..2^32-1 except 253 default, 254 main, 255 local)`,
        );
      }
    }
    for (const r of plan.routes) {
      if (!FAMILIES.includes(r.family)) throw bad(`route has unknown family ${String(r.family)}`);
      if (r.type !== 'local') throw bad(`route type ${String(r.type)} is not supported; only 'local'`);
      const v6 = r.dst.includes(':');
      if (v6 !== (r.family === 'ipv6') || !/^[0-9a-fA-F.:]+\/\d{1,3}$/.test(r.dst))
        throw bad(`route destination ${JSON.stringify(r.dst)} is not an ${r.family} CIDR`);
      if (!DEV_NAME.test(r.dev)) throw bad(`route device ${JSON.stringify(r.dev)} is not an interface name`);
      if (!Number.isInteger(r.table) || r.table < 1 || r.table > 0xffffffff || RESERVED_TABLES.has(r.table)) {
        throw bad(`route table ${r.table} is not a private table (1..2^32-1 except 253, 254, 255)`);
      }
    }
    return parsed;
  }

  /** Restore the plan's tables of `families` from the snapshot; returns '' or a note on failure. */
  private async rollback(
    netns: NetnsId,
    families: readonly IpFamily[],
    parsed: Map<IpFamily, readonly PlanTable[]>,
    saved: Map<IpFamily, ReadonlyMap<string, SavedTable>>,
    /** An exclusive apply also emptied the tables the plan does not use: restore every saved table. */
    allTables = false,
  ): Promise<string> {
    const notes: string[] = [];
    for (const f of families) {
      const planned = (parsed.get(f) ?? []).map((t) => t.table);
      const tables = allTables
        ? [...new Set([...planned, ...[...(saved.get(f)?.keys() ?? [])].filter(isTableName)])]
        : planned;
      const res = await this.run(netns, [this.ipt[f].restore, '-w'], rollbackText(tables, saved.get(f) ?? new Map()));
      if (!res.ok) notes.push(`${this.ipt[f].restore} rollback failed too: ${res.stderr.trim()}`);
    }
    return notes.length > 0
      ? ` (EXCEPT: ${notes.join('; ')} — inspect with ${families.map((f) => this.ipt[f].save).join('/')})`
      : '';
  }

  private async must(
    netns: NetnsId,
    op: Operation,
    argv: readonly string[],
    input?: string,
    hint?: string,
  ): Promise<string> {
    const res = await this.run(netns, argv, input);
    if (!res.ok)
      throw this.error(
        netns,
        op,
        argv,
        res.stderr + (input !== undefined ? quoteLine(res.stderr, input) : ''),
        hint ?? 'Nothing was changed by this step.',
      );
    return res.stdout;
  }

  private error(netns: string, op: Operation, argv: readonly string[], stderr: string, hint: string): NetnsRulesError {
    return new NetnsRulesError(netns, op, nsenterText(netns, argv), stderr, hint);
  }

  private run(netns: NetnsId, argv: readonly string[], input?: string): Promise<NsenterResult> {
    return nsenterRun(netns, argv, { timeoutMs: this.timeoutMs, ...(input !== undefined ? { input } : {}) });
  }
}

function isTableName(t: string): t is PlanTable['table'] {
  return (TABLES as readonly string[]).includes(t);
}

/** iptables-restore names the failing line of its input; quote it, since it's our composed text. */
function quoteLine(stderr: string, input: string): string {
  const m = /(?:line:?\s+)(\d+)/i.exec(stderr);
  if (!m) return '';
  const line = input.split('\n')[Number(m[1]) - 1];
  return line === undefined ? '' : ` [input line ${m[1]}: ${JSON.stringify(line)}]`;
}

function parseJson(netns: string, text: string): Record<string, unknown>[] {
  try {
    const v: unknown = JSON.parse(text.trim() === '' ? '[]' : text);
    return Array.isArray(v) ? (v as Record<string, unknown>[]) : [];
  } catch {
    throw new NetnsRulesError(
      netns,
      'read',
      '`ip -j`',
      `unparsable JSON: ${text.slice(0, 200)}`,
      'Is iproute2 recent enough for -j (JSON) output?',
    );
  }
}
