/**
 * Match semantics of ztunnel's `Authorization::matches` (istio/ztunnel src/rbac.rs), over the model in
 * policy.ts. Public API:
 *
 *   connectionFacts(req): ConnectionFacts          — what a match looks at, derived once
 *   matchingRule(policy, facts): L4Rule | undefined — the first rule that matches, if any
 *   matchMatches(match, facts): boolean
 */
import type { AuthzRequest } from './authorizer.js';
import { spiffeId } from '../../api/identity.js';
import { tryParseIpUnmapped, type IpAddress } from '../../api/ip/address.js';
import { prefixContains } from '../../api/ip/prefix.js';
import {
  isEmptyMatch,
  type Cidr,
  type Clause,
  type L4Policy,
  type L4Rule,
  type Match,
  type ServiceAccountMatch,
  type StringMatch,
} from './policy.js';

interface ConnectionFacts {
  /** The peer's SPIFFE URI, or '' without an identity (plaintext). */
  readonly id: string;
  /** The identity's namespace, or ''. */
  readonly ns: string;
  readonly sa: string;
  readonly hasIdentity: boolean;
  /** undefined when the request's address does not parse: then no IP block matches it. */
  readonly srcIp: IpAddress | undefined;
  readonly dstIp: IpAddress | undefined;
  readonly dstPort: number;
}

export function connectionFacts(req: AuthzRequest): ConnectionFacts {
  const id = req.srcIdentity;
  return {
    id: id ? spiffeId(id) : '',
    ns: id?.namespace ?? '',
    sa: id?.serviceAccount ?? '',
    hasIdentity: id !== undefined,
    srcIp: tryParseIpUnmapped(req.srcIp),
    dstIp: tryParseIpUnmapped(req.dstIp),
    dstPort: req.dstPort,
  };
}

function stringMatches(m: StringMatch, value: string): boolean {
  switch (m.kind) {
    case 'exact':
      return value === m.value;
    case 'prefix':
      return value.startsWith(m.value);
    case 'suffix':
      return value.endsWith(m.value);
    case 'presence':
      return value !== '';
  }
}

const SPIFFE = 'spiffe://';

/** Principals compare against the identity without its spiffe:// scheme; no identity never matches. */
function principalMatches(m: StringMatch, f: ConnectionFacts): boolean {
  if (!f.hasIdentity || !f.id.startsWith(SPIFFE)) return false;
  return stringMatches(m, f.id.slice(SPIFFE.length));
}

/** Exact namespace and SA of the identity; the trust domain is ignored; no identity never matches. */
function serviceAccountMatches(m: ServiceAccountMatch, f: ConnectionFacts): boolean {
  return f.hasIdentity && m.namespace === f.ns && m.serviceAccount === f.sa;
}

function ipMatches(c: Cidr, ip: IpAddress | undefined): boolean {
  return ip !== undefined && prefixContains(c.prefix, ip);
}

/** Positive list: empty or some entry matches. Negative list: no entry matches. */
function field<T>(pos: readonly T[], neg: readonly T[], test: (x: T) => boolean): boolean {
  if (pos.length > 0 && !pos.some(test)) return false;
  if (neg.length > 0 && neg.some(test)) return false;
  return true;
}

function matchMatches(m: Match, f: ConnectionFacts): boolean {
  return (
    field(m.destinationIps, m.notDestinationIps, (c) => ipMatches(c, f.dstIp)) &&
    field(m.sourceIps, m.notSourceIps, (c) => ipMatches(c, f.srcIp)) &&
    field(m.destinationPorts, m.notDestinationPorts, (p) => p === f.dstPort) &&
    field(m.serviceAccounts, m.notServiceAccounts, (s) => serviceAccountMatches(s, f)) &&
    field(m.principals, m.notPrincipals, (s) => principalMatches(s, f)) &&
    field(m.namespaces, m.notNamespaces, (s) => stringMatches(s, f.ns))
  );
}

/** [] matches; otherwise some non-empty Match must match (all-empty Matches are skipped). */
function clauseMatches(c: Clause, f: ConnectionFacts): boolean {
  if (c.length === 0) return true;
  return c.some((m) => !isEmptyMatch(m) && matchMatches(m, f));
}

function ruleMatches(r: L4Rule, f: ConnectionFacts): boolean {
  return r.clauses.every((c) => clauseMatches(c, f));
}

/** Zero rules never match; otherwise the first matching rule. */
export function matchingRule(p: L4Policy, f: ConnectionFacts): L4Rule | undefined {
  return p.rules.find((r) => ruleMatches(r, f));
}
