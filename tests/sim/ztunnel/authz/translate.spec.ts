/** AuthorizationPolicy → L4 translation: scopes, structure, L7 handling, strict validation. */
import { test, expect } from '@playwright/test';
import { translatePolicy, type Translation } from '../../../../impl/ztunnel/authz/translate.js';
import type { L4Policy } from '../../../../impl/ztunnel/authz/policy.js';
import { ROOT, ap } from './helpers.js';

function accepted(t: Translation): { policy: L4Policy; warnings: readonly string[] } {
  if (t.outcome !== 'accepted') throw new Error(`expected accepted, got ${JSON.stringify(t)}`);
  return t;
}

function invalid(t: Translation): { policy: L4Policy; errors: readonly string[] } {
  if (t.outcome !== 'invalid') throw new Error(`expected invalid, got ${JSON.stringify(t)}`);
  return t;
}

test.describe('scope and action', () => {
  test('no selector: namespace scope; in the root namespace: global', () => {
    expect(accepted(translatePolicy(ap('app', 'p', {}), ROOT)).policy.scope).toEqual({ kind: 'namespace' });
    expect(accepted(translatePolicy(ap(ROOT, 'p', {}), ROOT)).policy.scope).toEqual({ kind: 'global' });
  });

  test('a selector (even an empty one) is selector scope, also in the root namespace', () => {
    expect(
      accepted(translatePolicy(ap('app', 'p', { selector: { matchLabels: { a: 'b' } } }), ROOT)).policy.scope,
    ).toEqual({ kind: 'selector', matchLabels: { a: 'b' } });
    expect(accepted(translatePolicy(ap(ROOT, 'p', { selector: {} }), ROOT)).policy.scope).toEqual({
      kind: 'selector',
      matchLabels: {},
    });
  });

  test('action defaults to ALLOW; DENY is DENY', () => {
    expect(accepted(translatePolicy(ap('app', 'p', {}))).policy.action).toBe('ALLOW');
    expect(accepted(translatePolicy(ap('app', 'p', { action: 'DENY' }))).policy.action).toBe('DENY');
  });

  test('AUDIT and CUSTOM are dropped with a reason', () => {
    for (const action of ['AUDIT', 'CUSTOM']) {
      const t = translatePolicy(ap('app', 'p', { action, rules: [{}] }));
      expect(t).toEqual({ outcome: 'ignored', key: 'app/p', reason: `ztunnel does not support the ${action} action` });
    }
  });

  test('targetRef and targetRefs policies are left to waypoints', () => {
    expect(
      translatePolicy(ap('app', 'p', { targetRef: { kind: 'Gateway', group: 'gateway.networking.k8s.io', name: 'w' } }))
        .outcome,
    ).toBe('ignored');
    expect(
      translatePolicy(
        ap('app', 'p', { targetRefs: [{ kind: 'Service', group: '', name: 's' }], action: 'DENY', rules: [{}] }),
      ).outcome,
    ).toBe('ignored');
    // an empty targetRefs list is no targetRef
    expect(translatePolicy(ap('app', 'p', { targetRefs: [] })).outcome).toBe('accepted');
  });

  test('dry-run annotation', () => {
    expect(accepted(translatePolicy(ap('app', 'p', {}, { 'istio.io/dry-run': 'true' }))).policy.dryRun).toBe(true);
    expect(accepted(translatePolicy(ap('app', 'p', {}, { 'istio.io/dry-run': 'false' }))).policy.dryRun).toBe(false);
  });
});

test.describe('structure', () => {
  test('one L4 rule per policy rule: to clause, from clause, one clause per when', () => {
    const { policy } = accepted(
      translatePolicy(
        ap('app', 'p', {
          rules: [
            {
              to: [{ operation: { ports: ['80'] } }, { operation: { notPorts: ['81'] } }],
              from: [{ source: { namespaces: ['a'] } }],
              when: [
                { key: 'source.ip', values: ['10.0.0.0/8'] },
                { key: 'destination.port', notValues: ['9'] },
              ],
            },
          ],
        }),
      ),
    );
    expect(policy.rules).toHaveLength(1);
    const clauses = policy.rules[0]!.clauses;
    expect(clauses.map((c) => c.length)).toEqual([2, 1, 1, 1]);
    expect(clauses[0]![0]!.destinationPorts).toEqual([80]);
    expect(clauses[0]![1]!.notDestinationPorts).toEqual([81]);
    expect(clauses[2]![0]!.sourceIps.map((c) => c.text)).toEqual(['10.0.0.0/8']);
    expect(clauses[3]![0]!.notDestinationPorts).toEqual([9]);
  });

  test('empty from/to/when lists add no clause; an empty rule has none', () => {
    const { policy } = accepted(translatePolicy(ap('app', 'p', { rules: [{ from: [], to: [], when: [] }, {}] })));
    expect(policy.rules.map((r) => r.clauses.length)).toEqual([0, 0]);
  });

  test('string matches: "*" presence, "*x" suffix, "x*" prefix, else exact', () => {
    const { policy } = accepted(
      translatePolicy(ap('app', 'p', { rules: [{ from: [{ source: { principals: ['*', '*.x', 'y.*', 'z'] } }] }] })),
    );
    expect(policy.rules[0]!.clauses[0]![0]!.principals).toEqual([
      { kind: 'presence' },
      { kind: 'suffix', value: '.x' },
      { kind: 'prefix', value: 'y.' },
      { kind: 'exact', value: 'z' },
    ]);
  });

  test('serviceAccounts: bare names take the policy namespace', () => {
    const { policy } = accepted(
      translatePolicy(ap('app', 'p', { rules: [{ from: [{ source: { serviceAccounts: ['sa1', 'other/sa2'] } }] }] })),
    );
    expect(policy.rules[0]!.clauses[0]![0]!.serviceAccounts).toEqual([
      { namespace: 'app', serviceAccount: 'sa1' },
      { namespace: 'other', serviceAccount: 'sa2' },
    ]);
  });

  test('ALLOW: an L7 rule is dropped and named in a warning; DENY: kept with a warning', () => {
    const rules = [
      { to: [{ operation: { methods: ['GET'], ports: ['80'] } }] },
      { from: [{ source: { namespaces: ['a'] } }] },
    ];
    const allow = accepted(translatePolicy(ap('app', 'p', { rules })));
    expect(allow.policy.rules.map((r) => r.index)).toEqual([1]);
    expect(allow.warnings).toEqual([expect.stringMatching(/rules\[0\] dropped.*methods/)]);
    const deny = accepted(translatePolicy(ap('app', 'p', { action: 'DENY', rules })));
    expect(deny.policy.rules.map((r) => r.index)).toEqual([0, 1]);
    expect(deny.policy.rules[0]!.clauses[0]![0]!.destinationPorts).toEqual([80]);
    expect(deny.warnings).toEqual([expect.stringMatching(/enforced on its L4 conditions only/)]);
  });

  test('DENY whose part is L7-only warns that the rule never matches', () => {
    const deny = accepted(
      translatePolicy(
        ap('app', 'p', { action: 'DENY', rules: [{ from: [{ source: { notRequestPrincipals: ['*'] } }] }] }),
      ),
    );
    expect(deny.warnings.join()).toMatch(/never matches \(istio\/istio#61126\)/);
  });
});

test.describe('validation: malformed policies fail closed', () => {
  const bad: { name: string; spec: unknown; field: RegExp; annotations?: Record<string, string> }[] = [
    { name: 'unknown spec field', spec: { action: 'DENY', rulez: [] }, field: /spec\.rulez: unknown field/ },
    {
      name: 'unknown source field',
      spec: { rules: [{ from: [{ source: { namespace: ['a'] } }] }] },
      field: /source\.namespace: unknown field/,
    },
    { name: 'unknown rule field', spec: { rules: [{ form: [] }] }, field: /rules\[0\]\.form: unknown field/ },
    { name: 'unknown action', spec: { action: 'BLOCK' }, field: /spec\.action: "BLOCK"/ },
    { name: 'provider on ALLOW', spec: { provider: { name: 'x' } }, field: /spec\.provider/ },
    { name: 'rules not a list', spec: { rules: {} }, field: /spec\.rules: expected a list/ },
    { name: 'rule not an object', spec: { rules: ['x'] }, field: /spec\.rules\[0\]/ },
    {
      name: 'empty source',
      spec: { rules: [{ from: [{ source: {} }] }] },
      field: /from\[0\]\.source: must set at least one field/,
    },
    { name: 'missing source', spec: { rules: [{ from: [{}] }] }, field: /from\[0\]\.source: required/ },
    {
      name: 'empty operation',
      spec: { rules: [{ to: [{ operation: { ports: [] } }] }] },
      field: /to\[0\]\.operation: must set/,
    },
    {
      name: 'bad IP',
      spec: { rules: [{ from: [{ source: { ipBlocks: ['10.0.0.256'] } }] }] },
      field: /ipBlocks\[0\]: "10\.0\.0\.256" is not an IP/,
    },
    {
      name: 'bad prefix length',
      spec: { rules: [{ from: [{ source: { notIpBlocks: ['10.0.0.0/40'] } }] }] },
      field: /notIpBlocks\[0\]/,
    },
    {
      name: 'bad port',
      spec: { rules: [{ to: [{ operation: { ports: ['http'] } }] }] },
      field: /ports\[0\]: "http" is not a port/,
    },
    {
      name: 'port out of range',
      spec: { rules: [{ to: [{ operation: { notPorts: ['65536'] } }] }] },
      field: /notPorts\[0\]/,
    },
    {
      name: 'wildcard in the middle',
      spec: { rules: [{ from: [{ source: { principals: ['a*b'] } }] }] },
      field: /principals\[0\]: "a\*b"/,
    },
    {
      name: 'malformed service account',
      spec: { rules: [{ from: [{ source: { serviceAccounts: ['a/b/c'] } }] }] },
      field: /serviceAccounts\[0\]/,
    },
    {
      name: 'wildcard service account',
      spec: { rules: [{ from: [{ source: { serviceAccounts: ['ns/*'] } }] }] },
      field: /serviceAccounts\[0\]/,
    },
    {
      name: 'empty string value',
      spec: { rules: [{ from: [{ source: { namespaces: [''] } }] }] },
      field: /namespaces\[0\]: expected a non-empty string/,
    },
    {
      name: 'condition without values',
      spec: { rules: [{ when: [{ key: 'source.ip' }] }] },
      field: /when\[0\]: must set values or notValues/,
    },
    {
      name: 'condition without key',
      spec: { rules: [{ when: [{ values: ['x'] }] }] },
      field: /when\[0\]\.key: required/,
    },
    {
      name: 'bad when IP',
      spec: { rules: [{ when: [{ key: 'destination.ip', values: ['nope'] }] }] },
      field: /when\[0\]\.values\[0\]/,
    },
    {
      name: 'selector label value not a string',
      spec: { selector: { matchLabels: { a: 1 } } },
      field: /matchLabels\.a/,
    },
    {
      name: 'dry-run annotation not exactly true/false',
      spec: {},
      field: /istio\.io\/dry-run.*"yes"/,
      annotations: { 'istio.io/dry-run': 'yes' },
    },
  ];

  for (const b of bad) {
    test(b.name, () => {
      const t = invalid(translatePolicy(ap('app', 'p', b.spec, b.annotations)));
      expect(t.errors.join('\n')).toMatch(b.field);
      expect(t.policy.origin).toBe('invalid');
      // fail-closed form: an ALLOW allows nothing, anything else denies everything
      if (t.policy.action === 'ALLOW') expect(t.policy.rules).toEqual([]);
      else expect(t.policy.rules).toEqual([{ index: -1, clauses: [] }]);
    });
  }

  test('an invalid DENY keeps its scope; an unreadable selector widens to the namespace', () => {
    const sel = invalid(
      translatePolicy(
        ap('app', 'p', {
          action: 'DENY',
          selector: { matchLabels: { a: 'b' } },
          rules: [{ to: [{ operation: { ports: ['x'] } }] }],
        }),
      ),
    );
    expect(sel.policy.scope).toEqual({ kind: 'selector', matchLabels: { a: 'b' } });
    const unreadable = invalid(translatePolicy(ap('app', 'p', { action: 'DENY', selector: 'app=x' })));
    expect(unreadable.policy.scope).toEqual({ kind: 'namespace' });
  });

  test('a policy without a namespace fails closed mesh-wide', () => {
    const t = invalid(translatePolicy({ metadata: { name: 'p' }, spec: { action: 'DENY', rules: [{}] } }));
    expect(t.policy.scope).toEqual({ kind: 'global' });
    expect(t.errors.join()).toMatch(/metadata\.namespace: required/);
  });

  test('L7 values are not validated as L4 (upstream never parses them)', () => {
    expect(
      translatePolicy(
        ap('app', 'p', { action: 'DENY', rules: [{ to: [{ operation: { paths: ['/a*b*'], ports: ['80'] } }] }] }),
      ).outcome,
    ).toBe('accepted');
  });
});
