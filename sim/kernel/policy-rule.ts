/**
 * Policy routing rules (`ip rule`): evaluated in priority order, each selects packets (fwmark
 * with mask, source/destination prefix, input/output interface) and names a table to look up or
 * a terminal action. The kernel installs `0: lookup local`, `32766: lookup main` and
 * `32767: lookup default` in every new namespace, for each family.
 */
import { type Family, type IpAddress } from '../../impl/api/ip/address.js';
import { formatPrefix, prefixContains, type IpPrefix } from '../../impl/api/ip/prefix.js';
import { TABLE_DEFAULT, TABLE_LOCAL, TABLE_MAIN, tableName } from './route.js';

type RuleAction = 'lookup' | 'blackhole' | 'unreachable' | 'prohibit';

export interface PolicyRule {
  readonly family: Family;
  readonly priority: number;
  readonly fwmark: { readonly value: number; readonly mask: number } | undefined;
  readonly from: IpPrefix | undefined;
  readonly to: IpPrefix | undefined;
  readonly iif: string | undefined;
  readonly oif: string | undefined;
  readonly action: RuleAction;
  readonly table: number;
}

export interface RuleQuery {
  readonly family: Family;
  readonly src: IpAddress | undefined;
  readonly dst: IpAddress;
  readonly mark: number;
  readonly iif: string | undefined;
  readonly oif: string | undefined;
}

function defaultRules(family: Family): PolicyRule[] {
  const base = {
    family,
    fwmark: undefined,
    from: undefined,
    to: undefined,
    iif: undefined,
    oif: undefined,
    action: 'lookup' as const,
  };
  return [
    { ...base, priority: 0, table: TABLE_LOCAL },
    { ...base, priority: 32766, table: TABLE_MAIN },
    { ...base, priority: 32767, table: TABLE_DEFAULT },
  ];
}

/** Rule objects are immutable, so every namespace starts from the same ones. */
const DEFAULT_RULES: readonly PolicyRule[] = Object.freeze([...defaultRules(4), ...defaultRules(6)]);

export function ruleMatches(r: PolicyRule, q: RuleQuery): boolean {
  if (r.family !== q.family) return false;
  if (r.fwmark && (q.mark & r.fwmark.mask) >>> 0 !== r.fwmark.value) return false;
  if (r.from && (!q.src || !prefixContains(r.from, q.src))) return false;
  if (r.to && !prefixContains(r.to, q.dst)) return false;
  // iif "lo" also matches locally generated packets, as in the kernel (fib rules use lo for them).
  if (r.iif !== undefined && r.iif !== (q.iif ?? 'lo')) return false;
  if (r.oif !== undefined && r.oif !== q.oif) return false;
  return true;
}

export function formatRule(r: PolicyRule): string {
  const parts = [`${r.priority}:`];
  parts.push('from', r.from ? formatPrefix(r.from) : 'all');
  if (r.to) parts.push('to', formatPrefix(r.to));
  if (r.fwmark) parts.push('fwmark', `0x${r.fwmark.value.toString(16)}/0x${r.fwmark.mask.toString(16)}`);
  if (r.iif) parts.push('iif', r.iif);
  if (r.oif) parts.push('oif', r.oif);
  parts.push(r.action === 'lookup' ? `lookup ${tableName(r.table)}` : r.action);
  return parts.join(' ');
}

/** Rules kept sorted by priority; equal priorities keep insertion order (as the kernel lists them). */
export class PolicyRules {
  private rules: PolicyRule[] = [...DEFAULT_RULES];
  /** list() per family, rebuilt after a change: fibLookup asks on every packet. */
  private byFamily: Record<Family, PolicyRule[]> | undefined;

  add(rule: PolicyRule): void {
    const same = this.rules.find(
      (r) => r.family === rule.family && r.priority === rule.priority && formatRule(r) === formatRule(rule),
    );
    if (same) throw new Error(`ip rule exists: ${formatRule(same)} (RTNETLINK answers: File exists)`);
    let i = this.rules.findIndex((r) => r.priority > rule.priority);
    if (i < 0) i = this.rules.length;
    this.rules.splice(i, 0, rule);
    this.byFamily = undefined;
  }

  /**
   * The priority the kernel gives a rule added without one (fib_default_rule_pref): the second
   * rule of the family's list, minus one — 32765 under the default rules, then 32764, ... — or 0
   * when that rule's priority is 0 (checked on Linux 6.18).
   */
  defaultPriority(family: Family): number {
    const second = this.list(family)[1];
    return second !== undefined && second.priority > 0 ? second.priority - 1 : 0;
  }

  remove(pred: (r: PolicyRule) => boolean): number {
    const before = this.rules.length;
    this.rules = this.rules.filter((r) => !pred(r));
    this.byFamily = undefined;
    return before - this.rules.length;
  }

  /** The rules of one family in evaluation order (a shared view: do not edit). */
  list(family: Family): readonly PolicyRule[] {
    this.byFamily ??= { 4: this.rules.filter((r) => r.family === 4), 6: this.rules.filter((r) => r.family === 6) };
    return this.byFamily[family];
  }
}
