/**
 * An `nft -f` document as the node agent writes it: tables (family inet for the upstream profile,
 * ip and ip6 for rules translated from the IR, ruleset-to-nft.ts), each with its base
 * chains (type, hook, priority), its own chains and its rules in order, rendered as the
 * command list knftables (sigs.k8s.io/knftables) makes of a transaction — `add table`, `flush
 * table`, `add chain` (base chains with `{ type T hook H priority P ; }`), `add rule` — so the
 * text can be compared line for line with upstream istio-cni's golden files. A table whose
 * chains hold no rule and are not jumped to is left out, as upstream leaves it out.
 * Rule text is built by the rule builders from validated values only (numbers, addresses,
 * interface names checked where they are read).
 */
import type { NftFamily, NftTableRef } from '../../api/nft-tables.js';

export type NftHook = 'prerouting' | 'input' | 'forward' | 'output' | 'postrouting';

interface NftBaseChain {
  readonly type: 'nat' | 'filter' | 'route';
  readonly hook: NftHook;
  readonly priority: number;
}

export interface NftChain {
  readonly name: string;
  /** A base chain's hook; absent for a regular chain (only reached by jump or goto). */
  readonly base?: NftBaseChain;
}

export interface NftRule {
  readonly chain: string;
  /** The rule's statements as nft reads them, e.g. `meta l4proto tcp counter accept`. */
  readonly text: string;
}

/** A named set of addresses (the host's probe sets); its elements change at run time, not here. */
interface NftSet {
  readonly name: string;
  readonly type: 'ipv4_addr' | 'ipv6_addr';
  /** Free text without quotes (checked). */
  readonly comment?: string;
}

/**
 * The tables a document writes (a table named twice, e.g. for sets and chains, once), leaving
 * out those renderNft leaves out (no set, no used chain): a plan names only tables that will exist.
 */
export function documentTables(doc: NftDocument): NftTableRef[] {
  const out: NftTableRef[] = [];
  for (const t of doc.tables) {
    if (usedChains(t).length === 0 && (t.sets ?? []).length === 0) continue;
    if (!out.some((x) => x.family === t.family && x.name === t.name)) out.push({ family: t.family, name: t.name });
  }
  return out;
}

export interface NftTable {
  readonly family: NftFamily;
  readonly name: string;
  /** Sets declared by this document (a document with sets flushes nothing: their elements stay). */
  readonly sets?: readonly NftSet[];
  /** Declared in this order (base chains first, as upstream). */
  readonly chains: readonly NftChain[];
  /** In evaluation order within each chain. */
  readonly rules: readonly NftRule[];
}

export interface NftDocument {
  readonly tables: readonly NftTable[];
}

/** Chains that hold a rule or are named by a `jump` (the others are not created). */
function usedChains(t: NftTable): NftChain[] {
  const jumped = new Set<string>();
  for (const r of t.rules) {
    const words = r.text.split(/\s+/);
    words.forEach((w, i) => {
      if ((w === 'jump' || w === 'goto') && words[i + 1] !== undefined) jumped.add(words[i + 1]!);
    });
  }
  return t.chains.filter((c) => jumped.has(c.name) || t.rules.some((r) => r.chain === c.name));
}

export function renderNft(doc: NftDocument): string {
  const out: string[] = [];
  for (const t of doc.tables) {
    const chains = usedChains(t);
    const sets = t.sets ?? [];
    if (chains.length === 0 && sets.length === 0) continue;
    if (chains.length > 0 && sets.length > 0)
      throw new Error(
        `nft table ${t.name}: declare sets and chains in separate documents (as upstream: a sets document never flushes its table, a rules document does)`,
      );
    const id = `${t.family} ${t.name}`;
    out.push(`add table ${id}`);
    for (const set of sets) {
      if (set.comment !== undefined && !/^[^"\\\n]{0,128}$/.test(set.comment))
        throw new Error(
          `nft set ${set.name}: comment ${JSON.stringify(set.comment)} has a quote, backslash or newline`,
        );
      out.push(
        `add set ${id} ${set.name} { type ${set.type} ;${set.comment !== undefined ? ` comment "${set.comment}" ;` : ''} }`,
      );
    }
    if (chains.length > 0) out.push(`flush table ${id}`);
    for (const c of chains)
      out.push(
        c.base
          ? `add chain ${id} ${c.name} { type ${c.base.type} hook ${c.base.hook} priority ${c.base.priority} ; }`
          : `add chain ${id} ${c.name}`,
      );
    for (const r of t.rules) out.push(`add rule ${id} ${r.chain} ${r.text}`);
  }
  return out.length === 0 ? '' : `${out.join('\n')}\n`;
}
