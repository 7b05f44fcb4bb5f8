/**
 * The L4 policy model the destination proxy enforces: ztunnel's `Authorization` (istio/ztunnel
 * proto/authorization.proto, src/rbac.rs), produced from AuthorizationPolicy objects by
 * translate.ts and evaluated by match.ts.
 *
 *   L4Policy { key "ns/name", scope, action ALLOW|DENY, rules, dryRun, origin }
 *   rules:   L4Rule[]   — the policy matches if ANY rule matches (zero rules: never matches)
 *   L4Rule   { clauses } — the rule matches if ALL clauses match (zero clauses: matches)
 *   Clause = Match[]     — matches if ANY non-empty Match matches; all-empty Matches are skipped,
 *                          so a clause of only empty Matches never matches; [] matches
 *   Match                — AND over six field types, each a positive and a negative list
 */
import type { IpPrefix } from '../../api/ip/prefix.js';

/** An IP block of a policy (translate.ts parseCidr). */
export interface Cidr {
  readonly prefix: IpPrefix;
  /** As written in the policy, for reasons and logs. */
  readonly text: string;
}

export type StringMatch =
  | { readonly kind: 'exact'; readonly value: string }
  | { readonly kind: 'prefix'; readonly value: string }
  | { readonly kind: 'suffix'; readonly value: string }
  /** "*": any non-empty value. */
  | { readonly kind: 'presence' };

export interface ServiceAccountMatch {
  readonly namespace: string;
  readonly serviceAccount: string;
}

export interface Match {
  readonly namespaces: readonly StringMatch[];
  readonly notNamespaces: readonly StringMatch[];
  readonly serviceAccounts: readonly ServiceAccountMatch[];
  readonly notServiceAccounts: readonly ServiceAccountMatch[];
  readonly principals: readonly StringMatch[];
  readonly notPrincipals: readonly StringMatch[];
  readonly sourceIps: readonly Cidr[];
  readonly notSourceIps: readonly Cidr[];
  readonly destinationIps: readonly Cidr[];
  readonly notDestinationIps: readonly Cidr[];
  readonly destinationPorts: readonly number[];
  readonly notDestinationPorts: readonly number[];
}

export type Clause = readonly Match[];

export interface L4Rule {
  /** Index of the AuthorizationPolicy rule this came from (spec.rules[i]), for reasons. */
  readonly index: number;
  readonly clauses: readonly Clause[];
}

/**
 * Where a policy applies (the Scope istiod's translation for ztunnel assigns):
 * - global: no selector, in the root namespace → every workload in the mesh;
 * - namespace: no selector, elsewhere → every workload in that namespace;
 * - selector: matchLabels ⊆ the workload's labels, for workloads in the policy's namespace, or
 *   in every namespace when the policy lives in the root namespace (Istio's root-namespace rule).
 *   An empty matchLabels selects every workload of those namespaces.
 */
export type PolicyScope =
  | { readonly kind: 'global' }
  | { readonly kind: 'namespace' }
  | { readonly kind: 'selector'; readonly matchLabels: Readonly<Record<string, string>> };

export type PolicyAction = 'ALLOW' | 'DENY';

/**
 * - policy: translated from a valid AuthorizationPolicy;
 * - invalid: the object failed validation and stands in its fail-closed form (translate.ts);
 * - static-strict: the PeerAuthentication STRICT stand-in (peer-authentication.ts).
 */
type PolicyOrigin = 'policy' | 'invalid' | 'static-strict';

export interface L4Policy {
  readonly namespace: string;
  readonly name: string;
  /** "namespace/name". */
  readonly key: string;
  readonly scope: PolicyScope;
  readonly action: PolicyAction;
  readonly rules: readonly L4Rule[];
  /** istio.io/dry-run: evaluated and reported, never enforced. */
  readonly dryRun: boolean;
  readonly origin: PolicyOrigin;
}

export const EMPTY_MATCH: Match = Object.freeze({
  namespaces: [],
  notNamespaces: [],
  serviceAccounts: [],
  notServiceAccounts: [],
  principals: [],
  notPrincipals: [],
  sourceIps: [],
  notSourceIps: [],
  destinationIps: [],
  notDestinationIps: [],
  destinationPorts: [],
  notDestinationPorts: [],
});

export function match(fields: Partial<Match>): Match {
  return { ...EMPTY_MATCH, ...fields };
}

export function isEmptyMatch(m: Match): boolean {
  return (Object.keys(EMPTY_MATCH) as (keyof Match)[]).every((k) => m[k].length === 0);
}

export function policyKey(namespace: string, name: string): string {
  return `${namespace}/${name}`;
}
