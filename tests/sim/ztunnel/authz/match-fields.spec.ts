/**
 * Every match field and its not-variant (ztunnel's Authorization::matches), clause/rule nesting, L7 handling,
 * and the bypass-relevant upstream cases of ztunnel's tests/namespaced.rs re-derived. Each row is a single policy
 * evaluated against one request; `hit` says whether the policy must match.
 * The policies are DENY, so "matches" shows as a denial (and a non-match as the default allow).
 */
import { test, expect } from '@playwright/test';
import type { AuthzRequest } from '../../../../impl/ztunnel/authz/authorizer.js';
import { CLIENT, ap, authorizer, plaintext, req } from './helpers.js';

interface Row {
  readonly name: string;
  /** The rule of a DENY policy (one rule). */
  readonly rule: unknown;
  readonly request: AuthzRequest;
  readonly hit: boolean;
}

const src = (source: unknown) => ({ from: [{ source }] });
const op = (operation: unknown) => ({ to: [{ operation }] });
const when = (key: string, values?: string[], notValues?: string[]) => ({
  when: [{ key, ...(values ? { values } : {}), ...(notValues ? { notValues } : {}) }],
});
const otherTd = req({ srcIdentity: { ...CLIENT, trustDomain: 'clusterset.local' } });

const rows: Row[] = [
  // principals: compared without "spiffe://"; no identity never matches, not even "*"
  {
    name: 'principals exact',
    rule: src({ principals: ['cluster.local/ns/client/sa/client-sa'] }),
    request: req(),
    hit: true,
  },
  {
    name: 'principals exact, other SA',
    rule: src({ principals: ['cluster.local/ns/client/sa/other'] }),
    request: req(),
    hit: false,
  },
  {
    name: 'principals written with spiffe:// never match',
    rule: src({ principals: ['spiffe://cluster.local/ns/client/sa/client-sa'] }),
    request: req(),
    hit: false,
  },
  { name: 'principals prefix', rule: src({ principals: ['cluster.local/ns/client/*'] }), request: req(), hit: true },
  { name: 'principals suffix', rule: src({ principals: ['*/sa/client-sa'] }), request: req(), hit: true },
  { name: 'principals presence with identity', rule: src({ principals: ['*'] }), request: req(), hit: true },
  { name: 'principals presence without identity', rule: src({ principals: ['*'] }), request: plaintext(), hit: false },
  {
    name: 'principals include the trust domain',
    rule: src({ principals: ['cluster.local/ns/client/sa/client-sa'] }),
    request: otherTd,
    hit: false,
  },
  {
    name: 'notPrincipals excludes the named peer',
    rule: src({ notPrincipals: ['cluster.local/ns/client/sa/client-sa'] }),
    request: req(),
    hit: false,
  },
  {
    name: 'notPrincipals lets others through',
    rule: src({ notPrincipals: ['cluster.local/ns/x/sa/y'] }),
    request: req(),
    hit: true,
  },
  {
    name: 'notPrincipals ["*"] matches plaintext (the STRICT mechanism)',
    rule: src({ notPrincipals: ['*'] }),
    request: plaintext(),
    hit: true,
  },
  {
    name: 'notPrincipals ["*"] does not match a peer with identity',
    rule: src({ notPrincipals: ['*'] }),
    request: req(),
    hit: false,
  },
  // namespaces
  { name: 'namespaces exact', rule: src({ namespaces: ['client'] }), request: req(), hit: true },
  { name: 'namespaces prefix', rule: src({ namespaces: ['cli*'] }), request: req(), hit: true },
  { name: 'namespaces suffix miss', rule: src({ namespaces: ['*xyz'] }), request: req(), hit: false },
  { name: 'namespaces presence without identity', rule: src({ namespaces: ['*'] }), request: plaintext(), hit: false },
  {
    name: 'notNamespaces excludes the namespace',
    rule: src({ notNamespaces: ['client'] }),
    request: req(),
    hit: false,
  },
  {
    name: 'notNamespaces matches plaintext (namespace is "")',
    rule: src({ notNamespaces: ['client'] }),
    request: plaintext(),
    hit: true,
  },
  // serviceAccounts: exact ns+sa, trust domain ignored, bare name = policy namespace ("app")
  { name: 'serviceAccounts ns/sa', rule: src({ serviceAccounts: ['client/client-sa'] }), request: req(), hit: true },
  {
    name: 'serviceAccounts bare name means the policy namespace',
    rule: src({ serviceAccounts: ['client-sa'] }),
    request: req(),
    hit: false,
  },
  {
    name: 'serviceAccounts bare name matches in the policy namespace',
    rule: src({ serviceAccounts: ['client-sa'] }),
    request: req({ srcIdentity: { ...CLIENT, namespace: 'app' } }),
    hit: true,
  },
  {
    name: 'serviceAccounts ignore the trust domain',
    rule: src({ serviceAccounts: ['client/client-sa'] }),
    request: otherTd,
    hit: true,
  },
  {
    name: 'serviceAccounts without identity',
    rule: src({ serviceAccounts: ['client/client-sa'] }),
    request: plaintext(),
    hit: false,
  },
  {
    name: 'notServiceAccounts excludes',
    rule: src({ notServiceAccounts: ['client/client-sa'] }),
    request: req(),
    hit: false,
  },
  {
    name: 'notServiceAccounts matches plaintext',
    rule: src({ notServiceAccounts: ['client/client-sa'] }),
    request: plaintext(),
    hit: true,
  },
  // ipBlocks
  { name: 'ipBlocks CIDR contains source', rule: src({ ipBlocks: ['10.244.2.0/24'] }), request: req(), hit: true },
  { name: 'ipBlocks single address', rule: src({ ipBlocks: ['10.244.2.20'] }), request: req(), hit: true },
  { name: 'ipBlocks miss', rule: src({ ipBlocks: ['10.244.3.0/24'] }), request: req(), hit: false },
  {
    name: 'ipBlocks v4 block matches a v4-mapped v6 source',
    rule: src({ ipBlocks: ['10.244.2.0/24'] }),
    request: req({ srcIp: '::ffff:10.244.2.20' }),
    hit: true,
  },
  { name: 'ipBlocks v6', rule: src({ ipBlocks: ['fd00:1::/64'] }), request: req({ srcIp: 'fd00:1::5' }), hit: true },
  {
    name: 'ipBlocks v4 block never matches a v6 source',
    rule: src({ ipBlocks: ['0.0.0.0/0'] }),
    request: req({ srcIp: 'fd00:1::5' }),
    hit: false,
  },
  {
    name: 'ipBlocks with host bits set still means the block',
    rule: src({ ipBlocks: ['10.244.2.99/24'] }),
    request: req(),
    hit: true,
  },
  { name: 'notIpBlocks excludes', rule: src({ notIpBlocks: ['10.244.0.0/16'] }), request: req(), hit: false },
  { name: 'notIpBlocks lets others through', rule: src({ notIpBlocks: ['192.0.2.0/24'] }), request: req(), hit: true },
  // ports
  { name: 'ports hit', rule: op({ ports: ['8080'] }), request: req(), hit: true },
  { name: 'ports miss', rule: op({ ports: ['9090'] }), request: req(), hit: false },
  { name: 'notPorts excludes', rule: op({ notPorts: ['8080'] }), request: req(), hit: false },
  { name: 'notPorts lets others through', rule: op({ notPorts: ['9090'] }), request: req(), hit: true },
  // when
  { name: 'when source.ip', rule: when('source.ip', ['10.244.2.0/24']), request: req(), hit: true },
  {
    name: 'when source.ip notValues',
    rule: when('source.ip', undefined, ['10.244.2.0/24']),
    request: req(),
    hit: false,
  },
  { name: 'when destination.ip', rule: when('destination.ip', ['10.244.1.10']), request: req(), hit: true },
  { name: 'when destination.ip miss', rule: when('destination.ip', ['10.244.1.11']), request: req(), hit: false },
  {
    name: 'when destination.ip notValues',
    rule: when('destination.ip', undefined, ['10.244.1.0/24']),
    request: req(),
    hit: false,
  },
  { name: 'when destination.port', rule: when('destination.port', ['8080']), request: req(), hit: true },
  {
    name: 'when destination.port notValues',
    rule: when('destination.port', undefined, ['8080']),
    request: req(),
    hit: false,
  },
  { name: 'when source.namespace', rule: when('source.namespace', ['client']), request: req(), hit: true },
  {
    name: 'when source.namespace notValues',
    rule: when('source.namespace', undefined, ['client']),
    request: req(),
    hit: false,
  },
  {
    name: 'when source.principal',
    rule: when('source.principal', ['cluster.local/ns/client/sa/client-sa']),
    request: req(),
    hit: true,
  },
  {
    name: 'when source.principal notValues ["*"] on plaintext',
    rule: when('source.principal', undefined, ['*']),
    request: plaintext(),
    hit: true,
  },
  // nesting: entries of one from/to OR, clauses AND, positive+negative in one field AND
  {
    name: 'two from entries are ORed',
    rule: { from: [{ source: { namespaces: ['x'] } }, { source: { namespaces: ['client'] } }] },
    request: req(),
    hit: true,
  },
  {
    name: 'fields inside one source are ANDed',
    rule: src({ namespaces: ['client'], ipBlocks: ['192.0.2.0/24'] }),
    request: req(),
    hit: false,
  },
  {
    name: 'from and to are ANDed (to misses)',
    rule: { ...src({ namespaces: ['client'] }), ...op({ ports: ['9090'] }) },
    request: req(),
    hit: false,
  },
  {
    name: 'from and to are ANDed (both hit)',
    rule: { ...src({ namespaces: ['client'] }), ...op({ ports: ['8080'] }) },
    request: req(),
    hit: true,
  },
  {
    name: 'each when condition is its own clause (ANDed)',
    rule: {
      when: [
        { key: 'destination.port', values: ['8080'] },
        { key: 'source.namespace', values: ['x'] },
      ],
    },
    request: req(),
    hit: false,
  },
  {
    name: 'positive and negative in one field: both must hold',
    rule: src({ namespaces: ['cli*'], notNamespaces: ['client'] }),
    request: req(),
    hit: false,
  },
  // L7 in DENY: L4 parts kept; an L7-only part becomes an empty match and kills the rule
  {
    name: 'DENY: methods dropped, ports kept (more restrictive)',
    rule: op({ ports: ['8080'], methods: ['GET'] }),
    request: req(),
    hit: true,
  },
  {
    name: 'DENY: L7-only source is a no-op (istio/istio#61126)',
    rule: src({ notRequestPrincipals: ['*'] }),
    request: plaintext(),
    hit: false,
  },
  { name: 'DENY: L7-only operation is a no-op', rule: op({ paths: ['/admin'] }), request: req(), hit: false },
  {
    name: 'DENY: L7 when key is a no-op even next to L4 from',
    rule: { ...src({ namespaces: ['client'] }), ...when('request.headers[x]', ['1']) },
    request: req(),
    hit: false,
  },
  {
    name: 'DENY: L7-only entry ORed with an L4 entry: the L4 entry still matches',
    rule: { from: [{ source: { requestPrincipals: ['*'] } }, { source: { namespaces: ['client'] } }] },
    request: req(),
    hit: true,
  },
];

test.describe('match fields (DENY policy)', () => {
  for (const row of rows) {
    test(row.name, () => {
      const { authz } = authorizer([ap('app', 'p', { action: 'DENY', rules: [row.rule] })]);
      const d = authz.evaluate(row.request);
      expect(d.allow, d.reason).toBe(!row.hit);
    });
  }
});

test.describe('L7 in ALLOW', () => {
  test('a rule with an L7 field is dropped; the policy left with zero rules denies everything', () => {
    const { authz, store } = authorizer([
      ap('app', 'a', { rules: [{ ...src({ namespaces: ['client'] }), ...op({ methods: ['GET'] }) }] }),
    ]);
    expect(authz.evaluate(req()).allow).toBe(false);
    const t = store.translation('app/a');
    expect(t?.outcome).toBe('accepted');
    if (t?.outcome === 'accepted') expect(t.warnings.join()).toMatch(/rules\[0\] dropped.*methods/);
  });

  test('only the L7 rule is dropped; an L4 rule of the same policy still allows', () => {
    const { authz } = authorizer([
      ap('app', 'a', { rules: [{ ...op({ paths: ['/x'] }) }, src({ namespaces: ['client'] })] }),
    ]);
    const d = authz.evaluate(req());
    expect(d.allow).toBe(true);
    expect(d.reason).toMatch(/app\/a rules\[1\]/);
    expect(authz.evaluate(req({ srcIdentity: { ...CLIENT, namespace: 'x' } })).allow).toBe(false);
  });

  test('an L7 when key drops the rule', () => {
    const { authz } = authorizer([
      ap('app', 'a', { rules: [{ ...src({ namespaces: ['client'] }), ...when('request.auth.claims[iss]', ['x']) }] }),
    ]);
    expect(authz.evaluate(req()).allow).toBe(false);
  });

  test('remoteIpBlocks and requestPrincipals are L7', () => {
    for (const source of [
      { remoteIpBlocks: ['10.0.0.0/8'] },
      { requestPrincipals: ['*'] },
      { notRemoteIpBlocks: ['1.2.3.4'] },
    ]) {
      const { authz } = authorizer([ap('app', 'a', { rules: [src({ ...source, namespaces: ['client'] })] })]);
      expect(authz.evaluate(req()).allow).toBe(false);
    }
  });
});

test.describe("upstream bypass-relevant cases, re-derived (ztunnel's namespaced tests and late rejection)", () => {
  const waypoint = { trustDomain: 'cluster.local', namespace: 'app', serviceAccount: 'waypoint' };

  test('test_policy: an ALLOW that requires the waypoint principal rejects a direct HBONE client with a valid mesh identity', () => {
    const { authz } = authorizer([
      ap('app', 'deny-bypass', { rules: [src({ principals: ['cluster.local/ns/app/sa/waypoint'] })] }),
    ]);
    expect(authz.evaluate(req()).allow).toBe(false);
    expect(authz.evaluate(req({ srcIdentity: waypoint })).allow).toBe(true);
    expect(authz.evaluate(plaintext()).allow).toBe(false);
  });

  test('rbac_empty_policy: a clause made only of empty matches never matches', () => {
    const { authz } = authorizer([
      ap('app', 'a', { rules: [src({ requestPrincipals: ['*'] })] }),
      ap('app', 'd', { action: 'DENY', rules: [op({ hosts: ['x'] })] }),
    ]);
    // the ALLOW's only rule is dropped (L7) → default-deny; the DENY's clause is empty → no-op
    const d = authz.evaluate(req());
    expect(d.allow).toBe(false);
    expect(d.reason).toMatch(/none allowed/);
  });

  test('trust domain mismatch: a principal policy does not admit clusterset.local, serviceAccounts does', () => {
    const byPrincipal = authorizer([
      ap('app', 'a', { rules: [src({ principals: ['cluster.local/ns/client/sa/client-sa'] })] }),
    ]).authz;
    const bySa = authorizer([ap('app', 'a', { rules: [src({ serviceAccounts: ['client/client-sa'] })] })]).authz;
    expect(byPrincipal.evaluate(otherTd).allow).toBe(false);
    expect(bySa.evaluate(otherTd).allow).toBe(true);
  });

  test('late rejection: a policy change bumps the generation, notifies, and the live connection re-checks to deny', () => {
    const { authz, store } = authorizer([]);
    const live = req();
    expect(authz.evaluate(live).allow).toBe(true);
    const gen = authz.generation;
    let notified = 0;
    authz.onChange(() => {
      notified++;
    });
    store.upsert(ap('app', 'd', { action: 'DENY', rules: [src({ namespaces: ['client'] })] }));
    expect(notified).toBe(1);
    expect(authz.generation).toBeGreaterThan(gen);
    expect(authz.evaluate(live).allow).toBe(false);
    store.remove('app', 'd');
    expect(notified).toBe(2);
    expect(authz.evaluate(live).allow).toBe(true);
  });

  test('a scope change from namespace to selector replaces the old scope (ztunnel PR #1247)', () => {
    const { authz, store } = authorizer([ap('app', 'd', { action: 'DENY', rules: [{}] })]);
    expect(authz.evaluate(req({ dst: { labels: { app: 'other' } } })).allow).toBe(false);
    store.upsert(ap('app', 'd', { action: 'DENY', selector: { matchLabels: { app: 'server' } }, rules: [{}] }));
    expect(authz.evaluate(req({ dst: { labels: { app: 'other' } } })).allow).toBe(true);
    expect(authz.evaluate(req()).allow).toBe(false);
  });

  test('a PeerAuthentication change notifies and re-checks', () => {
    const { authz } = authorizer([]);
    let notified = 0;
    authz.onChange(() => {
      notified++;
    });
    expect(authz.evaluate(plaintext()).allow).toBe(true);
    authz.setPeerAuthentication({ mesh: 'STRICT' });
    expect(notified).toBe(1);
    expect(authz.evaluate(plaintext()).allow).toBe(false);
  });
});
