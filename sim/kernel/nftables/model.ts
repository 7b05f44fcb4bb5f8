/**
 * The state an `nft -f` document builds in one network namespace, and the contract between the
 * parser, the evaluator and the datapath: families, hooks, chain types, tables of chains and
 * sets, and compiled rules (a list of operations run in order, as the kernel runs a rule's
 * expressions: a match that fails or a statement that breaks ends the rule, NFT_BREAK).
 */
import type { IpAddress } from '../../../impl/api/ip/address.js';
import type { EvalContext, Hook, NatAction } from '../netfilter/types.js';
import type { NftSetState } from './sets.js';

export type NftFamily = 'ip' | 'ip6' | 'inet';
export const NFT_FAMILIES: readonly NftFamily[] = ['ip', 'ip6', 'inet'];

export type NftHook = 'prerouting' | 'input' | 'forward' | 'output' | 'postrouting';
export const NFT_HOOKS: readonly NftHook[] = ['prerouting', 'input', 'forward', 'output', 'postrouting'];

/** The datapath's hook names (netfilter/types.ts) for nft's. */
export const HOOK_NAME: Readonly<Record<NftHook, Hook>> = {
  prerouting: 'PREROUTING',
  input: 'INPUT',
  forward: 'FORWARD',
  output: 'OUTPUT',
  postrouting: 'POSTROUTING',
};

export type NftChainType = 'filter' | 'nat' | 'route';

/**
 * Hooks each chain type may attach to in the ip, ip6 and inet families (the kernel's
 * nft_chain_type hook_mask; `route` is output-only, `nat` has no forward hook). Checked on
 * the real kernel: `type nat hook forward` and `type route hook prerouting` fail with EOPNOTSUPP.
 */
export const CHAIN_TYPE_HOOKS: Readonly<Record<NftChainType, readonly NftHook[]>> = {
  filter: NFT_HOOKS,
  nat: ['prerouting', 'input', 'output', 'postrouting'],
  route: ['output'],
};

/**
 * The standard priority names nft accepts for ip, ip6 and inet chains (nft(8) "PRIORITY"):
 * dstnat only at prerouting and srcnat only at postrouting (checked: `type nat hook output
 * priority dstnat` is "invalid priority expression value in this context").
 */
export const PRIORITY_NAMES: Readonly<Record<string, number>> = {
  raw: -300,
  mangle: -150,
  dstnat: -100,
  filter: 0,
  security: 50,
  srcnat: 100,
};

/** The hook a priority name is limited to, when it is. */
export const PRIORITY_NAME_HOOK: Readonly<Record<string, NftHook>> = { dstnat: 'prerouting', srcnat: 'postrouting' };

/** What the rules of an nft chain may read and do beyond an iptables table (the tproxy statement). */
export interface NftEvalContext extends EvalContext {
  /**
   * nft_tproxy: find a transparent socket for the packet (an established one for its 4-tuple,
   * else a listener on `addr` or the ingress device's address, at `port`) and assign it; false
   * when there is none (the rule breaks and the chain goes on, unlike iptables' TPROXY, which drops).
   */
  tproxyAssign(addr: IpAddress | undefined, port: number): boolean;
}

export type NftVerdict =
  | { readonly k: 'accept' }
  | { readonly k: 'drop' }
  | { readonly k: 'reject'; readonly with: string }
  | { readonly k: 'return' }
  | { readonly k: 'continue' }
  | { readonly k: 'jump'; readonly chain: string }
  | { readonly k: 'goto'; readonly chain: string }
  /** NAT statements end the chain with NF_ACCEPT once the binding is made (nft_nat_eval, nft_redir_eval). */
  | { readonly k: 'nat'; readonly action: NatAction; readonly family: 4 | 6 | undefined };

/** A match: false ends the rule. `t` is the table the rule runs in (its named sets). */
type NftPred = (ctx: NftEvalContext, t: NftTableState) => boolean;
/** A statement: false breaks the rule (e.g. `meta mark set ct mark` without a conntrack entry). */
type NftAction = (ctx: NftEvalContext, t: NftTableState) => boolean;

export type NftOp = { readonly k: 'match'; readonly pred: NftPred } | { readonly k: 'stmt'; readonly apply: NftAction };

/** A constraint a rule puts on the base chains that reach it, checked at commit (nft's validate). */
export interface ChainConstraint {
  /** Allowed hooks; the statement or expression named in `what`. */
  readonly hooks?: readonly NftHook[];
  /** Required chain type. */
  readonly type?: NftChainType;
  readonly what: string;
}

export interface NftRule {
  readonly ops: readonly NftOp[];
  readonly verdict: NftVerdict | undefined;
  /** The rule as written (words joined by single spaces), for traces. */
  readonly text: string;
  /** The rule in the listing's canonical words. */
  readonly listing: string;
  /** Effect for traces when the whole rule ran: its verdict or last statement. */
  readonly effect: string;
  readonly line: number;
  readonly source: string;
  /** nf_ct_netns_get at rule init: ct expressions (but notrack), ct statements, NAT statements. */
  readonly needsConntrack: boolean;
  readonly constraints: readonly ChainConstraint[];
}

export interface NftBase {
  readonly type: NftChainType;
  readonly hook: NftHook;
  readonly priority: number;
  readonly policy: 'accept' | 'drop';
}

export interface NftChainState {
  readonly name: string;
  readonly base: NftBase | undefined;
  /** Replaced, never edited in place, so a table can be copied by copying the chain objects. */
  rules: readonly NftRule[];
  /** Line the chain was declared on (for commit errors). */
  readonly line: number;
  /**
   * When the chain was made, counted per namespace: among base chains of equal priority the one
   * registered last runs first (nf_hook_entries_grow inserts a new hook before equal ones).
   */
  readonly reg: number;
}

export interface NftTableState {
  readonly family: NftFamily;
  readonly name: string;
  readonly chains: Map<string, NftChainState>;
  readonly sets: Map<string, NftSetState>;
}

export function tableKey(family: NftFamily, name: string): string {
  return `${family} ${name}`;
}
