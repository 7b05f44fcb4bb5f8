/**
 * The parsed form of one rule and the interfaces its matches and targets implement. A rule is
 * parsed once (parse-rule.ts), rendered once to its normalised iptables-save text, and compiled
 * once into closures the evaluator calls per packet.
 */
import type { Family } from '../../../impl/api/ip/address.js';
import type { IpPrefix } from '../../../impl/api/ip/prefix.js';
import type { EvalContext, Hook, TableName, TableVerdict } from './types.js';
import type { IpSets } from './ipset.js';

export type Pred = (ctx: EvalContext) => boolean;

/** What a match/target parser may consult about the rule it sits in. */
export interface RuleContext {
  readonly family: Family;
  readonly table: TableName;
  readonly chain: string;
  /** Set when the rule is in a built-in chain: its hook. */
  readonly builtinHook: Hook | undefined;
  /** `-p` as given (number, 0 = all) and whether negated; read by port-using modules. */
  proto: { readonly num: number; readonly neg: boolean } | undefined;
  readonly ipsets: IpSets | undefined;
}

/** Reads the next word of the rule, failing with the option's name when there is none. */
export type Take = () => string;

export interface MatchInstance {
  readonly module: string;
  /** Hooks the kernel allows this match at (undefined = all). Checked at commit, through user chains. */
  readonly hooks: readonly Hook[] | undefined;
  /** Consume `opt` (and its arguments via take) if it belongs to this module; false if not ours. */
  parseOption(opt: string, neg: boolean, take: Take, rc: RuleContext): boolean;
  /** Check required options and cross-option constraints once the whole rule is read. */
  finish(rc: RuleContext): void;
  /** `-m NAME ...options` in iptables-save form. */
  render(): string;
  compile(): Pred;
}

export type CompiledTarget =
  | { readonly k: 'none' }
  | { readonly k: 'accept' }
  | { readonly k: 'drop' }
  | { readonly k: 'verdict'; readonly verdict: TableVerdict } // reject, nat, tproxy
  | { readonly k: 'return' }
  | { readonly k: 'jump'; readonly chain: string }
  | { readonly k: 'goto'; readonly chain: string }
  | { readonly k: 'continue'; readonly apply: (ctx: EvalContext) => void };

export interface TargetInstance {
  readonly name: string;
  readonly tables: readonly TableName[] | undefined;
  readonly hooks: readonly Hook[] | undefined;
  parseOption(opt: string, take: Take, rc: RuleContext): boolean;
  finish(rc: RuleContext): void;
  /** `-j NAME ...options` (or `-g CHAIN`). */
  render(): string;
  compile(): CompiledTarget;
}

export interface AddrSpec {
  readonly neg: boolean;
  readonly prefix: IpPrefix;
}

export interface IfaceSpec {
  readonly neg: boolean;
  readonly name: string;
}

export interface RuleSpec {
  readonly src: AddrSpec | undefined;
  readonly dst: AddrSpec | undefined;
  readonly inIface: IfaceSpec | undefined;
  readonly outIface: IfaceSpec | undefined;
  readonly proto: { readonly num: number; readonly neg: boolean } | undefined;
  readonly matches: readonly MatchInstance[];
  readonly target: TargetInstance | undefined;
  /** Normalised text without the leading `-A CHAIN`. */
  readonly text: string;
}
