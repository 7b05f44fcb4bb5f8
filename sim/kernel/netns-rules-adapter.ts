/**
 * The NetnsRules port (impl/host/netns-rules.ts) over the simulated kernel, so the node agent
 * applies redirection in the sim exactly as on Linux: the same plan checks and the same
 * `--noflush` transactions (impl/api/netns-rules-restore.ts) go into the sim's netfilter, and
 * ip rules / local routes are added only when absent (EEXIST is "already there", as upstream).
 * A NetnsId here is the sim namespace name. Restores are atomic in the sim, so no rollback.
 *
 * The nftables backend (constructed with `nftables: true`): a plan's `nft -f` document goes into
 * the namespace's nftables model in one transaction after routes and ip rules; under `exclusive`
 * it replaces the whole ruleset, and — as on a host whose iptables is iptables-nft, where
 * iptables' tables are part of that ruleset — every iptables table is emptied too. read() lists
 * every nftables table. Under strict on the iptables backend (made with `nftables: true` too),
 * an exclusive apply deletes every nftables table that is not ours.
 */
import type { NetnsId } from '../../impl/api/ids.js';
import type {
  AppliedState,
  ApplyMode,
  IpFamily,
  LocalRoute,
  NetnsRules,
  PolicyRule,
  RedirectionPlan,
} from '../../impl/host/netns-rules.js';
import {
  applyTransaction,
  exclusiveTransaction,
  normaliseSave,
  parsePlanText,
  parseSave,
  removeTransaction,
} from '../../impl/api/netns-rules-restore.js';
import { formatPrefix, parsePrefix } from '../../impl/api/ip/prefix.js';
import { isOwnTable, tableKey } from '../../impl/api/nft-tables.js';
import { TABLE_DEFAULT, TABLE_LOCAL, TABLE_MAIN } from './route.js';
import type { SimKernel } from './kernel.js';
import { simNetnsName } from './netns.js';

const fam = (f: IpFamily): 4 | 6 => (f === 'ipv4' ? 4 : 6);
/** Every iptables table, empty: what remains of iptables-nft's tables after `nft flush ruleset`. */
const EMPTY_IPTABLES = '*raw\nCOMMIT\n*mangle\nCOMMIT\n*nat\nCOMMIT\n*filter\nCOMMIT\n*security\nCOMMIT\n';

export class SimNetnsRules implements NetnsRules {
  /** Calls that failed with an injected fault; tests read it. */
  failNext: { op: 'apply' | 'remove'; message: string } | undefined;

  private readonly nftables: boolean;

  constructor(
    private readonly kernel: SimKernel,
    opts: { readonly nftables?: boolean } = {},
  ) {
    this.nftables = opts.nftables ?? false;
  }

  private ns(netns: NetnsId): string {
    const name = simNetnsName(netns);
    if (!this.kernel.hasNetns(name))
      throw new Error(`netns rules: network namespace ${netns} does not exist (pod gone or not yet created)`);
    return name;
  }

  private injected(op: 'apply' | 'remove'): void {
    if (this.failNext?.op === op) {
      const m = this.failNext.message;
      this.failNext = undefined;
      throw new Error(m);
    }
  }

  async apply(netns: NetnsId, plan: RedirectionPlan, mode: ApplyMode = 'merge'): Promise<void> {
    const name = this.ns(netns);
    this.injected('apply');
    const parsed = {
      ipv4: plan.iptables.ipv4 !== undefined ? parsePlanText(plan.iptables.ipv4) : undefined,
      ipv6: plan.iptables.ipv6 !== undefined ? parsePlanText(plan.iptables.ipv6) : undefined,
    };
    const n = this.kernel.netns(name);
    const added: LocalRoute[] = [];
    try {
      for (const r of plan.routes) {
        if (this.hasRoute(name, r)) continue;
        this.kernel.addRoute(name, { dst: r.dst, type: 'local', dev: r.dev, table: r.table });
        added.push(r);
      }
    } catch (e) {
      // As the Linux adapter: a route the kernel refuses (e.g. IPv6 disabled on lo) leaves the namespace as it was.
      this.removeRoutes(name, added);
      throw e;
    }
    for (const r of plan.rules) {
      if (!this.hasRule(name, r))
        this.kernel.addRule(name, {
          family: fam(r.family),
          priority: r.priority,
          fwmark: r.fwmark.value,
          mask: r.fwmark.mask,
          table: r.table,
        });
    }
    for (const f of ['ipv4', 'ipv6'] as const) {
      const p = parsed[f];
      if (!p) continue;
      const nf = n.netfilter[fam(f)];
      const exclusive = mode === 'exclusive';
      nf.restore(
        exclusive ? exclusiveTransaction(p, parseSave(nf.save())) : applyTransaction(p, parseSave(nf.save())),
        {
          noflush: !exclusive,
          source: `netns rules apply (${f}) in ${name}`,
        },
      );
    }
    if (!plan.nftables && mode === 'exclusive' && this.nftables) {
      // Strict on the iptables backend owns the nftables ruleset too (see the Linux adapter).
      const foreign = n.nftables.tables().filter((t) => !isOwnTable(t));
      if (foreign.length > 0)
        n.nftables.apply(foreign.map((t) => `delete table ${tableKey(t)}\n`).join(''), {
          source: `netns rules apply (exclusive: foreign nftables) in ${name}`,
        });
    }
    if (plan.nftables) {
      this.mustNftables(name, 'apply');
      const exclusive = mode === 'exclusive';
      n.nftables.apply(exclusive ? `flush ruleset\n${plan.nftables.text}` : plan.nftables.text, {
        source: `netns rules apply (nftables) in ${name}`,
      });
      // iptables-nft: `flush ruleset` takes iptables' tables with it.
      if (exclusive)
        for (const f of [4, 6] as const) n.netfilter[f].restore(EMPTY_IPTABLES, { source: 'flush ruleset' });
    }
  }

  private mustNftables(ns: string, op: string): void {
    if (!this.nftables)
      throw new Error(
        `netns rules ${op} in ${ns}: the plan has nftables rules but this adapter was made for the iptables backend`,
      );
  }

  async remove(netns: NetnsId, plan: RedirectionPlan): Promise<void> {
    const name = this.ns(netns);
    this.injected('remove');
    const n = this.kernel.netns(name);
    if (plan.nftables) {
      this.mustNftables(name, 'remove');
      const doomed = plan.nftables.tables.filter((t) => n.nftables.hasTable(t.family, t.name));
      if (doomed.length > 0)
        n.nftables.apply(doomed.map((t) => `delete table ${tableKey(t)}\n`).join(''), {
          source: `netns rules remove (nftables) in ${name}`,
        });
    }
    for (const f of ['ipv4', 'ipv6'] as const) {
      const text = plan.iptables[f];
      if (text === undefined) continue;
      const nf = n.netfilter[fam(f)];
      const txn = removeTransaction(parsePlanText(text), parseSave(nf.save()));
      if (txn) nf.restore(txn, { noflush: true, source: `netns rules remove (${f}) in ${name}` });
    }
    for (const r of plan.rules) {
      n.rules.remove(
        (x) =>
          x.family === fam(r.family) &&
          x.priority === r.priority &&
          x.table === r.table &&
          x.fwmark?.value === r.fwmark.value &&
          x.fwmark?.mask === r.fwmark.mask,
      );
    }
    this.removeRoutes(name, plan.routes);
  }

  private removeRoutes(ns: string, routes: readonly LocalRoute[]): void {
    const n = this.kernel.netns(ns);
    for (const r of routes) {
      const dst = parsePrefix(r.dst);
      n.routes.remove(
        (x) =>
          x.type === 'local' &&
          x.table === r.table &&
          x.dev === r.dev &&
          x.dst.len === dst.len &&
          x.dst.addr.value === dst.addr.value &&
          x.family === dst.addr.family,
      );
    }
  }

  async read(netns: NetnsId): Promise<AppliedState> {
    const name = this.ns(netns);
    const n = this.kernel.netns(name);
    const rules: PolicyRule[] = [];
    for (const f of [4, 6] as const) {
      for (const r of n.rules.list(f)) {
        if (!r.fwmark || r.action !== 'lookup' || [TABLE_LOCAL, TABLE_MAIN, TABLE_DEFAULT].includes(r.table)) continue;
        rules.push({
          family: f === 4 ? 'ipv4' : 'ipv6',
          priority: r.priority,
          fwmark: { value: r.fwmark.value, mask: r.fwmark.mask } as PolicyRule['fwmark'],
          table: r.table,
        });
      }
    }
    const routes: LocalRoute[] = n.routes
      .all()
      .filter((r) => r.type === 'local' && ![TABLE_LOCAL, TABLE_MAIN, TABLE_DEFAULT].includes(r.table) && r.dev)
      .map((r) => ({
        family: r.family === 4 ? 'ipv4' : 'ipv6',
        type: 'local',
        dst: formatPrefix(r.dst),
        dev: r.dev!,
        table: r.table,
      }));
    const iptables = { ipv4: normaliseSave(n.netfilter[4].save()), ipv6: normaliseSave(n.netfilter[6].save()) };
    if (!this.nftables) return { iptables, rules, routes };
    const nftables: Record<string, string> = {};
    for (const t of n.nftables.tables()) nftables[tableKey(t)] = n.nftables.list(t.family, t.name);
    return { iptables, rules, routes, nftables };
  }

  async loopbackIpv6Disabled(netns: NetnsId): Promise<boolean> {
    return this.kernel.netns(this.ns(netns)).link('lo').ipv6Disabled === true;
  }

  private hasRoute(ns: string, r: LocalRoute): boolean {
    const dst = parsePrefix(r.dst);
    return this.kernel
      .netns(ns)
      .routes.all()
      .some(
        (x) =>
          x.type === 'local' &&
          x.table === r.table &&
          x.dev === r.dev &&
          x.dst.len === dst.len &&
          x.dst.addr.value === dst.addr.value &&
          x.family === dst.addr.family,
      );
  }

  private hasRule(ns: string, r: PolicyRule): boolean {
    return this.kernel
      .netns(ns)
      .rules.list(fam(r.family))
      .some(
        (x) =>
          x.priority === r.priority &&
          x.table === r.table &&
          x.fwmark?.value === r.fwmark.value &&
          x.fwmark?.mask === r.fwmark.mask,
      );
  }
}
