/**
 * The decision procedure (ztunnel's assert_rbac), one row per step and scope rule, table-driven.
 * Every row names what it checks; expectations are the documented upstream outcomes.
 */
import { test, expect } from '@playwright/test';
import type { AuthzRequest } from '../../../../impl/ztunnel/authz/authorizer.js';
import { NOT_SYNCED_REASON, PolicyAuthorizer } from '../../../../impl/ztunnel/authz/engine.js';
import type { PeerAuthenticationModes } from '../../../../impl/ztunnel/authz/peer-authentication.js';
import { PolicyStore } from '../../../../impl/ztunnel/authz/policy-store.js';
import type { AuthorizationPolicy } from '../../../../impl/host/kube.js';
import { ROOT, ap, authorizer, plaintext, req } from './helpers.js';

interface Row {
  readonly name: string;
  readonly policies: AuthorizationPolicy[];
  readonly request?: AuthzRequest;
  readonly pa?: PeerAuthenticationModes;
  readonly allow: boolean;
  readonly reason?: RegExp;
  readonly dryRun?: { policy: string; wouldAllow: boolean }[];
}

const fromClient = { rules: [{ from: [{ source: { namespaces: ['client'] } }] }] };
const fromOther = { rules: [{ from: [{ source: { namespaces: ['other'] } }] }] };
const DRY = { 'istio.io/dry-run': 'true' };

const rows: Row[] = [
  // step 7: nothing applies → default allow
  { name: 'no policies: default allow', policies: [], allow: true, reason: /no ALLOW policy applies/ },
  // step 1: scopes
  {
    name: 'global (root ns, no selector) DENY applies to every namespace',
    policies: [ap(ROOT, 'g', { action: 'DENY', ...fromClient })],
    allow: false,
    reason: /explicitly denied by: istio-system\/g rules\[0\]/,
  },
  {
    name: 'namespace DENY applies in its namespace',
    policies: [ap('app', 'n', { action: 'DENY', ...fromClient })],
    allow: false,
    reason: /app\/n/,
  },
  {
    name: 'namespace DENY of another namespace does not apply',
    policies: [ap('elsewhere', 'n', { action: 'DENY', ...fromClient })],
    allow: true,
  },
  {
    name: 'selector DENY matching the labels applies',
    policies: [ap('app', 's', { action: 'DENY', selector: { matchLabels: { app: 'server' } }, ...fromClient })],
    allow: false,
  },
  {
    name: 'selector DENY not matching the labels does not apply',
    policies: [ap('app', 's', { action: 'DENY', selector: { matchLabels: { app: 'db' } }, ...fromClient })],
    allow: true,
  },
  {
    name: 'selector needs every label (subset rule)',
    policies: [
      ap('app', 's', { action: 'DENY', selector: { matchLabels: { app: 'server', tier: 'x' } }, ...fromClient }),
    ],
    allow: true,
  },
  {
    name: 'empty matchLabels selects every workload of the namespace',
    policies: [ap('app', 's', { action: 'DENY', selector: {}, ...fromClient })],
    allow: false,
  },
  {
    name: 'root-namespace selector policy applies across namespaces',
    policies: [ap(ROOT, 's', { action: 'DENY', selector: { matchLabels: { app: 'server' } }, ...fromClient })],
    allow: false,
  },
  {
    name: 'selector policy of another namespace does not apply',
    policies: [ap('elsewhere', 's', { action: 'DENY', selector: { matchLabels: { app: 'server' } }, ...fromClient })],
    allow: true,
  },
  {
    name: 'ALLOW of another namespace does not put this one in default-deny',
    policies: [ap('elsewhere', 'a', fromOther)],
    allow: true,
  },
  // step 5: DENY > ALLOW
  {
    name: 'DENY and ALLOW both match: DENY wins',
    policies: [ap('app', 'a', fromClient), ap('app', 'd', { action: 'DENY', ...fromClient })],
    allow: false,
    reason: /explicitly denied by: app\/d/,
  },
  {
    name: 'DENY not matching, no ALLOW: allow',
    policies: [ap('app', 'd', { action: 'DENY', ...fromOther })],
    allow: true,
  },
  // steps 8 and 9
  {
    name: 'ALLOW matches: allow, naming policy and rule',
    policies: [ap('app', 'a', { rules: [fromOther.rules[0], fromClient.rules[0]] })],
    allow: true,
    reason: /allowed by: app\/a rules\[1\]/,
  },
  {
    name: 'ALLOW exists, none matches: deny',
    policies: [ap('app', 'a', fromOther)],
    allow: false,
    reason: /allow policies exist, but none allowed \(app\/a\)/,
  },
  {
    name: 'scopes are unioned: namespace ALLOW misses, global ALLOW matches',
    policies: [ap('app', 'a', fromOther), ap(ROOT, 'g', fromClient)],
    allow: true,
    reason: /istio-system\/g/,
  },
  {
    name: 'scopes are unioned: selector DENY beats global ALLOW',
    policies: [
      ap(ROOT, 'g', fromClient),
      ap('app', 's', { action: 'DENY', selector: { matchLabels: { app: 'server' } }, rules: [{}] }),
    ],
    allow: false,
  },
  // zero rules / empty rules
  {
    name: 'ALLOW with zero rules (spec {}) denies everything',
    policies: [ap('app', 'deny-all', {})],
    allow: false,
    reason: /none allowed/,
  },
  { name: 'ALLOW with rules: [] denies everything', policies: [ap('app', 'deny-all', { rules: [] })], allow: false },
  { name: 'DENY with zero rules never matches', policies: [ap('app', 'd', { action: 'DENY' })], allow: true },
  {
    name: 'ALLOW rules: [{}] allows everything (a rule without clauses matches)',
    policies: [ap('app', 'allow-all', { rules: [{}] })],
    request: plaintext({ srcIp: '203.0.113.9' }),
    allow: true,
  },
  {
    name: 'DENY rules: [{}] denies everything',
    policies: [ap('app', 'd', { action: 'DENY', rules: [{}] })],
    allow: false,
  },
  // steps 4 and 6: dry-run
  {
    name: 'dry-run DENY that matches is reported, not enforced',
    policies: [ap('app', 'd', { action: 'DENY', ...fromClient }, DRY)],
    allow: true,
    dryRun: [{ policy: 'app/d', wouldAllow: false }],
  },
  {
    name: 'dry-run DENY that does not match is not reported',
    policies: [ap('app', 'd', { action: 'DENY', ...fromOther }, DRY)],
    allow: true,
    dryRun: [],
  },
  {
    name: 'dry-run ALLOW alone does not put the workload in default-deny; its miss is reported',
    policies: [ap('app', 'a', fromOther, DRY)],
    allow: true,
    dryRun: [{ policy: 'app/a', wouldAllow: false }],
  },
  {
    name: 'dry-run ALLOW match is reported while an enforced ALLOW denies',
    policies: [ap('app', 'a', fromOther), ap('app', 'dry', fromClient, DRY)],
    allow: false,
    dryRun: [{ policy: 'app/dry', wouldAllow: true }],
  },
  {
    name: 'enforced DENY decides before dry-run ALLOWs are evaluated',
    policies: [ap('app', 'd', { action: 'DENY', ...fromClient }), ap('app', 'dry', fromClient, DRY)],
    allow: false,
    dryRun: [],
  },
  {
    name: 'dry-run ALLOW misses are not reported when an enforced ALLOW exists',
    policies: [ap('app', 'a', fromClient), ap('app', 'dry', fromOther, DRY)],
    allow: true,
    dryRun: [],
  },
  // PeerAuthentication STRICT = static DENY without identity
  {
    name: 'mesh STRICT denies plaintext',
    policies: [],
    pa: { mesh: 'STRICT' },
    request: plaintext(),
    allow: false,
    reason: /explicitly denied by: istio-system\/istio_converted_static_strict/,
  },
  { name: 'mesh STRICT allows a peer with identity', policies: [], pa: { mesh: 'STRICT' }, allow: true },
  {
    name: 'namespace PERMISSIVE overrides mesh STRICT',
    policies: [],
    pa: { mesh: 'STRICT', namespaces: { app: 'PERMISSIVE' } },
    request: plaintext(),
    allow: true,
  },
  {
    name: 'namespace UNSET inherits mesh STRICT',
    policies: [],
    pa: { mesh: 'STRICT', namespaces: { app: 'UNSET' } },
    request: plaintext(),
    allow: false,
  },
  {
    name: 'namespace STRICT under PERMISSIVE mesh',
    policies: [],
    pa: { mesh: 'PERMISSIVE', namespaces: { app: 'STRICT' } },
    request: plaintext(),
    allow: false,
  },
  {
    name: 'STRICT of another namespace does not apply',
    policies: [],
    pa: { namespaces: { other: 'STRICT' } },
    request: plaintext(),
    allow: true,
  },
  {
    name: 'STRICT beats an ALLOW-all',
    policies: [ap('app', 'a', { rules: [{}] })],
    pa: { mesh: 'STRICT' },
    request: plaintext(),
    allow: false,
  },
  // invalid policies fail closed
  {
    name: 'invalid ALLOW stands in as allow-nothing',
    policies: [ap('app', 'a', { rules: [{ from: [{ source: { ipBlocks: ['garbage'] } }] }] })],
    allow: false,
    reason: /none allowed/,
  },
  {
    name: 'invalid DENY stands in as deny-all',
    policies: [ap('app', 'd', { action: 'DENY', rules: [{ from: [{ source: { ipBlocks: ['10.0.0.0/33'] } }] }] })],
    allow: false,
    reason: /app\/d \(invalid policy/,
  },
  {
    name: 'ignored policies (AUDIT, CUSTOM, targetRef) change nothing',
    policies: [
      ap('app', 'au', { action: 'AUDIT', rules: [{}] }),
      ap('app', 'cu', { action: 'CUSTOM', provider: { name: 'x' }, rules: [{}] }),
      ap('app', 'tr', { targetRef: { kind: 'Service', group: '', name: 's' }, rules: [] }),
    ],
    allow: true,
  },
];

test.describe('decision procedure', () => {
  for (const row of rows) {
    test(row.name, () => {
      const { authz } = authorizer(row.policies, row.pa);
      const d = authz.evaluate(row.request ?? req());
      expect(d.allow).toBe(row.allow);
      if (row.reason) expect(d.reason).toMatch(row.reason);
      if (row.dryRun) expect(d.dryRun).toEqual(row.dryRun);
    });
  }

  test('before the first sync every connection is denied (own state unknown: fail closed)', () => {
    const store = new PolicyStore({ rootNamespace: ROOT });
    const authz = new PolicyAuthorizer({ store });
    expect(authz.evaluate(req())).toEqual({ allow: false, reason: NOT_SYNCED_REASON, dryRun: [] });
    store.replaceAll([]);
    expect(authz.evaluate(req()).allow).toBe(false);
    store.markSynced();
    expect(authz.evaluate(req()).allow).toBe(true);
  });

  test('the root namespace is configurable', () => {
    const store = new PolicyStore({ rootNamespace: 'mesh-root' });
    store.replaceAll([
      ap('mesh-root', 'g', { action: 'DENY', rules: [{}] }),
      ap(ROOT, 'not-root', { action: 'DENY', rules: [{}] }),
    ]);
    store.markSynced();
    const authz = new PolicyAuthorizer({ store });
    expect(authz.evaluate(req()).reason).toMatch(/mesh-root\/g/);
    expect(authz.evaluate(req({ dst: { namespace: 'other' } })).reason).toMatch(/mesh-root\/g/);
    // istio-system is now an ordinary namespace: its policy applies only there
    expect(authz.applicablePolicies(req().dst).map((p) => p.key)).toEqual(['mesh-root/g']);
  });

  test('a workload in the root namespace gets global policies once', () => {
    const { authz } = authorizer([ap(ROOT, 'g', fromClient)]);
    expect(authz.applicablePolicies(req({ dst: { namespace: ROOT } }).dst).map((p) => p.key)).toEqual([
      'istio-system/g',
    ]);
  });
});
