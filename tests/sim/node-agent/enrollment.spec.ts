/**
 * Enrollment decisions, table-driven: pod vs namespace label precedence with the upstream default
 * selectors, each hard exclusion, terminal phases, and custom selectors with every operator.
 */
import { test, expect } from '@playwright/test';
import { decideEnrollment, type PodFacts } from '../../../impl/api/enrollment.js';
import { DEFAULT_ENROLLMENT_CONFIG, validateEnrollmentConfig } from '../../../impl/api/enrollment-config.js';
import { SelectorError, selectorMatches } from '../../../impl/api/label-selector.js';

const M = 'istio.io/dataplane-mode';
const pod = (over: Partial<PodFacts> = {}): PodFacts => ({
  name: 'web-1',
  namespace: 'shop',
  labels: {},
  annotations: {},
  hostNetwork: false,
  phase: 'Running',
  ...over,
});

const table: ReadonlyArray<[string, PodFacts, Record<string, string> | undefined, boolean]> = [
  ['no labels anywhere: not enrolled', pod(), {}, false],
  ['namespace ambient: enrolled', pod(), { [M]: 'ambient' }, true],
  ['namespace ambient, pod none: pod opts out', pod({ labels: { [M]: 'none' } }), { [M]: 'ambient' }, false],
  ['pod ambient in an unlabelled namespace: pod opts in', pod({ labels: { [M]: 'ambient' } }), {}, true],
  [
    'pod ambient in a namespace labelled none: pod label still wins',
    pod({ labels: { [M]: 'ambient' } }),
    { [M]: 'none' },
    true,
  ],
  [
    'namespace ambient, pod with another value: enrolled (NotIn none)',
    pod({ labels: { [M]: 'sidecar' } }),
    { [M]: 'ambient' },
    true,
  ],
  ['namespace with another value: not enrolled', pod(), { [M]: 'Ambient' }, false],
  ['hostNetwork pod in an ambient namespace: never', pod({ hostNetwork: true }), { [M]: 'ambient' }, false],
  ['hostNetwork pod labelled ambient: never', pod({ hostNetwork: true, labels: { [M]: 'ambient' } }), {}, false],
  ['sidecar-injected pod: never', pod({ annotations: { 'sidecar.istio.io/status': '{}' } }), { [M]: 'ambient' }, false],
  [
    'excluded namespace kube-system, pod labelled ambient: never',
    pod({ namespace: 'kube-system', labels: { [M]: 'ambient' } }),
    { [M]: 'ambient' },
    false,
  ],
  [
    'the node agent own pod: never',
    pod({ namespace: 'istio-system', name: 'istio-cni-node-abcde', labels: { [M]: 'ambient' } }),
    { [M]: 'ambient' },
    false,
  ],
  ['the proxy own pod: never', pod({ namespace: 'istio-system', name: 'ztunnel-xyz' }), { [M]: 'ambient' }, false],
  [
    'a user pod in the system namespace with an own-looking name elsewhere: enrolled',
    pod({ namespace: 'shop', name: 'ztunnel-lookalike' }),
    { [M]: 'ambient' },
    true,
  ],
  ['a Succeeded (Job) pod: removed', pod({ phase: 'Succeeded' }), { [M]: 'ambient' }, false],
  ['a Failed pod: removed', pod({ phase: 'Failed' }), { [M]: 'ambient' }, false],
  ['a Pending pod in an ambient namespace: enrolled', pod({ phase: 'Pending' }), { [M]: 'ambient' }, true],
];

for (const [name, p, ns, expected] of table) {
  test(`enrollment: ${name}`, () => {
    const d = decideEnrollment(p, ns, DEFAULT_ENROLLMENT_CONFIG);
    expect(d.enroll, d.reason).toBe(expected);
    expect(d.reason.length).toBeGreaterThan(0);
  });
}

test('hard exclusions are reported as hard, selector misses are not', () => {
  const hard = decideEnrollment(pod({ hostNetwork: true }), {}, DEFAULT_ENROLLMENT_CONFIG);
  const soft = decideEnrollment(pod(), {}, DEFAULT_ENROLLMENT_CONFIG);
  expect(hard).toMatchObject({ enroll: false, hard: true });
  expect(soft).toMatchObject({ enroll: false, hard: false });
});

test('label selector operators follow apimachinery: NotIn and DoesNotExist match an absent key', () => {
  expect(selectorMatches({ matchExpressions: [{ key: 'a', operator: 'NotIn', values: ['x'] }] }, {})).toBe(true);
  expect(selectorMatches({ matchExpressions: [{ key: 'a', operator: 'NotIn', values: ['x'] }] }, { a: 'x' })).toBe(
    false,
  );
  expect(selectorMatches({ matchExpressions: [{ key: 'a', operator: 'In', values: ['x'] }] }, {})).toBe(false);
  expect(selectorMatches({ matchExpressions: [{ key: 'a', operator: 'Exists' }] }, { a: '' })).toBe(true);
  expect(selectorMatches({ matchExpressions: [{ key: 'a', operator: 'DoesNotExist' }] }, { a: '' })).toBe(false);
  expect(selectorMatches({}, { a: 'b' })).toBe(true);
  expect(
    selectorMatches({ matchLabels: { a: 'b' }, matchExpressions: [{ key: 'c', operator: 'Exists' }] }, { a: 'b' }),
  ).toBe(false);
});

test('custom selectors are validated with the offending place named', () => {
  const bad = (selectors: unknown): string => {
    try {
      validateEnrollmentConfig({ ...DEFAULT_ENROLLMENT_CONFIG, selectors: selectors as never });
    } catch (e) {
      expect(e).toBeInstanceOf(SelectorError);
      return (e as Error).message;
    }
    throw new Error('expected a SelectorError');
  };
  expect(bad([{ podSelector: { matchLabels: { 'bad key!': 'x' } } }])).toContain('enablementSelectors[0].podSelector');
  expect(bad([{ podSelector: { matchExpressions: [{ key: 'a', operator: 'Near', values: ['x'] }] } }])).toContain(
    'unknown operator "Near"',
  );
  expect(bad([{ namespaceSelector: { matchExpressions: [{ key: 'a', operator: 'In' }] } }])).toContain(
    'needs a non-empty values list',
  );
  expect(bad([{}, { podSelector: { matchLabels: { a: 'value with space' } } }])).toContain('enablementSelectors[1]');
  expect(() => validateEnrollmentConfig(DEFAULT_ENROLLMENT_CONFIG)).not.toThrow();
});
