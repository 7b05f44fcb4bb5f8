/**
 * PolicyAuthorizer: the Authorizer (authorizer.ts) over a PolicyStore, following ztunnel's
 * decision procedure (`assert_rbac`, istio/ztunnel src/state.rs) step by step:
 *
 *   0. (ours) the store has not synced yet → DENY: the proxy's own state is unknown, fail closed
 *   1. candidates: GLOBAL (root namespace, no selector), NAMESPACE (the destination's namespace,
 *      no selector), selector policies of the destination's namespace and of the root namespace
 *      whose matchLabels ⊆ the destination's labels, and the static STRICT policy when the
 *      destination's effective PeerAuthentication mode is STRICT. Scopes are unioned.
 *   2. (missing keys cannot occur: the store resolves what it indexes)
 *   3. partition into DENY/ALLOW × enforced/dry-run
 *   4. dry-run DENY policies that match → reported in `dryRun` (wouldAllow: false), not enforced
 *   5. any enforced DENY matches → deny "explicitly denied by: ns/name"
 *   6. dry-run ALLOW policies that match → reported (wouldAllow: true); when there is no enforced
 *      ALLOW, some dry-run ALLOW exists and none matched → each reported with wouldAllow: false
 *      ("dry-run: no allow policies match")
 *   7. no enforced ALLOW policy → allow (default)
 *   8. any enforced ALLOW matches → allow
 *   9. otherwise → deny "allow policies exist, but none allowed"
 *
 * Policies are evaluated in key order so the reason is deterministic (the outcome never depends
 * on order). Public API:
 *
 *   new PolicyAuthorizer({ store, log?, peerAuthentication? })
 *   evaluate(req): AuthzDecision; generation; onChange(listener)
 *   setPeerAuthentication(modes)  — bumps generation and notifies (live re-check)
 *   applicablePolicies(dst): L4Policy[]  — step 1, for status and tests
 */
import type { Logger } from '../../host/log.js';
import type { AuthzDecision, AuthzRequest, Authorizer, DestinationWorkload } from './authorizer.js';
import { connectionFacts, matchingRule } from './match.js';
import { isStrict, staticStrictPolicy, type PeerAuthenticationModes } from './peer-authentication.js';
import type { L4Policy, L4Rule } from './policy.js';
import type { PolicyStore } from './policy-store.js';

interface PolicyAuthorizerOptions {
  readonly store: PolicyStore;
  readonly log?: Logger;
  readonly peerAuthentication?: PeerAuthenticationModes;
}

export const NOT_SYNCED_REASON = 'authorization policies are not synced from the API yet: failing closed';

function labelsSelect(
  matchLabels: Readonly<Record<string, string>>,
  labels: Readonly<Record<string, string>>,
): boolean {
  return Object.entries(matchLabels).every(([k, v]) => labels[k] === v);
}

function describe(p: L4Policy, r: L4Rule): string {
  const what = p.origin === 'invalid' ? ' (invalid policy, enforced in its fail-closed form)' : '';
  const rule = r.index >= 0 ? ` rules[${r.index}]` : '';
  return `${p.key}${rule}${what}`;
}

export class PolicyAuthorizer implements Authorizer {
  private readonly store: PolicyStore;
  private readonly log: Logger | undefined;
  private modes: PeerAuthenticationModes;
  private ownGen = 0;
  private readonly listeners = new Set<() => void>();
  private readonly strictPolicy: L4Policy;

  constructor(opts: PolicyAuthorizerOptions) {
    this.store = opts.store;
    this.log = opts.log;
    this.modes = opts.peerAuthentication ?? {};
    this.strictPolicy = staticStrictPolicy(this.store.rootNamespace);
    this.store.onChange(() => this.notify());
  }

  get generation(): number {
    return this.store.generation + this.ownGen;
  }

  onChange(listener: () => void): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }

  setPeerAuthentication(modes: PeerAuthenticationModes): void {
    this.modes = modes;
    this.ownGen++;
    this.notify();
  }

  applicablePolicies(dst: DestinationWorkload): L4Policy[] {
    const root = this.store.rootNamespace;
    const out = this.store.candidates(dst.namespace).filter((p) => {
      switch (p.scope.kind) {
        case 'global':
          return p.namespace === root;
        case 'namespace':
          return p.namespace === dst.namespace;
        case 'selector':
          return (
            (p.namespace === dst.namespace || p.namespace === root) && labelsSelect(p.scope.matchLabels, dst.labels)
          );
      }
    });
    if (isStrict(this.modes, dst.namespace)) out.push(this.strictPolicy);
    return out.sort((a, b) => (a.key < b.key ? -1 : a.key > b.key ? 1 : 0));
  }

  evaluate(req: AuthzRequest): AuthzDecision {
    if (!this.store.synced) return { allow: false, reason: NOT_SYNCED_REASON, dryRun: [] };
    const facts = connectionFacts(req);
    const policies = this.applicablePolicies(req.dst);
    const dryRun: { policy: string; wouldAllow: boolean }[] = [];
    const denies = policies.filter((p) => p.action === 'DENY');
    const allows = policies.filter((p) => p.action === 'ALLOW');

    for (const p of denies.filter((x) => x.dryRun)) {
      const r = matchingRule(p, facts);
      if (r) dryRun.push({ policy: p.key, wouldAllow: false });
    }
    for (const p of denies.filter((x) => !x.dryRun)) {
      const r = matchingRule(p, facts);
      if (r) return this.done(req, { allow: false, reason: `explicitly denied by: ${describe(p, r)}`, dryRun });
    }

    const enforcedAllows = allows.filter((x) => !x.dryRun);
    const dryAllows = allows.filter((x) => x.dryRun);
    let dryAllowMatched = false;
    for (const p of dryAllows) {
      if (matchingRule(p, facts)) {
        dryAllowMatched = true;
        dryRun.push({ policy: p.key, wouldAllow: true });
      }
    }
    if (enforcedAllows.length === 0 && dryAllows.length > 0 && !dryAllowMatched) {
      for (const p of dryAllows) dryRun.push({ policy: p.key, wouldAllow: false });
    }

    if (enforcedAllows.length === 0)
      return this.done(req, { allow: true, reason: 'no ALLOW policy applies: allowed by default', dryRun });
    for (const p of enforcedAllows) {
      const r = matchingRule(p, facts);
      if (r) return this.done(req, { allow: true, reason: `allowed by: ${describe(p, r)}`, dryRun });
    }
    return this.done(req, {
      allow: false,
      reason: `allow policies exist, but none allowed (${enforcedAllows.map((p) => p.key).join(', ')})`,
      dryRun,
    });
  }

  private done(req: AuthzRequest, d: AuthzDecision): AuthzDecision {
    if (d.dryRun.length > 0 && this.log) {
      this.log.info('dry-run authorization policies evaluated (not enforced)', {
        dst: `${req.dst.namespace}/${req.dst.name}`,
        srcIp: req.srcIp,
        dstPort: req.dstPort,
        decision: d.allow,
        dryRun: d.dryRun,
      });
    }
    return d;
  }

  private notify(): void {
    for (const l of [...this.listeners]) l();
  }
}
