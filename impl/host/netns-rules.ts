/**
 * The NetnsRules port: how the node agent installs, removes and inspects in-pod redirection in a
 * pod's network namespace. Types only; the real adapter is impl/linux/netns-rules.ts, the sim
 * adapter parses the same restore text into sim/kernel.
 *
 * A plan is what the rule builder renders: iptables-restore text per family (the artifact under
 * test, passed to the kernel tools as is) plus the policy-routing pieces that restore text cannot
 * express (`ip rule` with a fwmark, `local` routes in a private table).
 *
 * Contract of the restore text (checked by every adapter before anything changes):
 * - one or more `*<table>` blocks, each closed by `COMMIT`; tables raw, mangle, nat, filter,
 *   security;
 * - every user chain the text uses is declared `:<NAME> - [0:0]`; these are the plan's **own
 *   chains**. Built-in chains are never declared (their policies are not the plan's to set);
 * - rules on built-in chains (`-A PREROUTING ...`, `-I OUTPUT 1 ...`) are **hooks** and must jump
 *   (`-j`) to an own chain; all other rules are `-A` into own chains.
 *
 * Semantics every adapter provides:
 * - **Idempotent apply**: after apply(plan) the own chains hold exactly the plan's rules, each
 *   hook exists exactly once (earlier copies of hooks into own chains are replaced, so apply
 *   twice = apply once, and apply after an older plan with the same chain names = replace), every
 *   rule and route of the plan is present once. Rules outside the own chains are left alone.
 * - **Idempotent remove**: remove(plan) deletes the hooks into the plan's own chains, the own
 *   chains, the plan's ip rules and routes; whatever is already absent is fine.
 * - **All or nothing**: a plan that violates the contract or that the kernel rejects leaves the
 *   namespace as it was and rejects with an error naming the netns, the command and its stderr.
 *   (In the Linux adapter, each table's commit is atomic in the kernel; across tables and
 *   families the adapter restores a snapshot on failure, so a concurrent observer may briefly
 *   see a partial state but never keeps one.)
 * - **Order**: apply installs routes and ip rules before iptables, remove takes iptables away
 *   first, so redirected packets never miss their return route.
 * - **Exclusive apply** (mode `exclusive`, the strict profile): every table the plan uses is
 *   replaced whole, one restore per family without `--noflush`: built-in chains hold only the
 *   plan's hooks in the plan's order with policy ACCEPT, and no user chain but the plan's own
 *   remains. Tables the plan does not use are not touched. All or nothing as above.
 */
import type { NetnsId } from '../api/ids.js';
import type { Mark } from '../api/marks.js';
import type { NftTableRef } from '../api/nft-tables.js';

export type IpFamily = 'ipv4' | 'ipv6';

/** iptables-restore / ip6tables-restore input, following the contract above. */
export type RestoreText = string;

/** `ip [-6] rule add fwmark <value>/<mask> lookup <table> pref <priority>`. */
export interface PolicyRule {
  readonly family: IpFamily;
  /** Rule priority (`pref`), 1..32765 in practice; upstream uses 32764. */
  readonly priority: number;
  readonly fwmark: Mark;
  /** Routing table id (numeric; not 0, 253 default, 254 main or 255 local). */
  readonly table: number;
}

/** `ip [-6] route add local <dst> dev <dev> table <table>`: deliver matching packets locally. */
export interface LocalRoute {
  readonly family: IpFamily;
  readonly type: 'local';
  /** CIDR of the family, e.g. `0.0.0.0/0` or `::/0`. */
  readonly dst: string;
  readonly dev: string;
  readonly table: number;
}

/**
 * The nftables backend's part of a plan: one `nft -f` document (applied as one transaction) and
 * the tables it writes. Each table is flushed and refilled by the document, so apply twice = apply
 * once; remove deletes the tables. In mode `exclusive` the document replaces the namespace's whole
 * nftables ruleset (iptables-nft's tables included: they share the hooks).
 */
interface NftPlan {
  readonly text: string;
  readonly tables: readonly NftTableRef[];
}

export interface RedirectionPlan {
  /** Restore text per family; an absent family is not touched. */
  readonly iptables: { readonly ipv4?: RestoreText; readonly ipv6?: RestoreText };
  /** The nftables backend's rules (then `iptables` is empty); applied after routes and ip rules. */
  readonly nftables?: NftPlan;
  readonly rules: readonly PolicyRule[];
  readonly routes: readonly LocalRoute[];
}

/** What a namespace holds now, in the vocabulary of plans. */
export interface AppliedState {
  /**
   * `iptables-save` / `ip6tables-save` output with comment lines dropped and counters zeroed, so
   * equal configurations give equal text. Empty when the family has no tables.
   */
  readonly iptables: { readonly ipv4: string; readonly ipv6: string };
  /** Every fwmark rule that looks up a numeric table, both families, in priority order. */
  readonly rules: readonly PolicyRule[];
  /** Every `local` route outside the kernel's own tables (local, main, default), both families. */
  readonly routes: readonly LocalRoute[];
  /**
   * Every nftables table but iptables-nft's own (those are in `iptables`), by `<family> <name>`,
   * in the adapter's canonical listing of the table (Linux: its objects from `nft -j -s list
   * ruleset` without handles; the sim: its model's listing): two reads of an unchanged table are
   * equal, a changed table reads differently. Absent when the adapter does not read nftables (the
   * iptables backend); a plan with `nftables` needs an adapter that does.
   */
  readonly nftables?: Readonly<Record<string, string>>;
}

/**
 * `merge` (default): rules outside the plan's own chains and hooks are left alone (upstream).
 * `exclusive`: the plan's tables are replaced whole (strict: anything else there is foreign).
 */
export type ApplyMode = 'merge' | 'exclusive';

export interface NetnsRules {
  apply(netns: NetnsId, plan: RedirectionPlan, mode?: ApplyMode): Promise<void>;
  remove(netns: NetnsId, plan: RedirectionPlan): Promise<void>;
  read(netns: NetnsId): Promise<AppliedState>;
  /**
   * Whether IPv6 is disabled on the namespace's loopback (`net.ipv6.conf.lo.disable_ipv6` is 1
   * there): the kernel then refuses the v6 `local` route of the return path ("IPv6 is disabled on
   * nexthop device"), so the plan must leave it out. Rejects when the setting cannot be read
   * (e.g. a kernel without IPv6), never guesses.
   */
  loopbackIpv6Disabled(netns: NetnsId): Promise<boolean>;
}
