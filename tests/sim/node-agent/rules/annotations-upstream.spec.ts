/**
 * The upstream profile's reading of the rule-shaping pod annotations (impl/api/annotations.ts):
 * what istio-cni's getPodLevelTrafficOverrides and CheckBooleanAnnotation read (their test names,
 * istio/istio cni/pkg/nodeagent/net_test.go, are in the titles), and our one extra step: an
 * interface name that is not safe in rule text is ignored, never rendered.
 */
import { test, expect } from '@playwright/test';
import {
  BYPASS_INBOUND_CAPTURE,
  DNS_CAPTURE,
  REROUTE_VIRTUAL_INTERFACES,
  interfaceNameProblem,
  parseGoBool,
  parsePodRedirectionAnnotations,
  parsePodRedirectionAnnotationsUpstream,
  upstreamPodOverrides,
} from '../../../../impl/api/annotations.js';
import { buildInpodPlan, inpodCommonOptions } from '../../../../impl/node-agent/rule-builder.js';

const GLOBALS = { ipv6: true, dnsCapture: true };

function upstreamPlan(annotations: Record<string, string>): string {
  const opts = inpodCommonOptions(parsePodRedirectionAnnotationsUpstream(annotations).annotations, GLOBALS);
  const p = buildInpodPlan({ ...opts, profile: 'upstream' });
  return `${p.iptables.ipv4 ?? ''}${p.iptables.ipv6 ?? ''}`;
}

// upstream's overrideTests table, value for value (VirtualInterfaces [] there is "none" here).
const OVERRIDE_TESTS: [
  string,
  Record<string, string>,
  { ingressMode: boolean; dnsCapture: boolean | undefined; virtualInterfaces: string[] },
][] = [
  ['pod dns override', { [DNS_CAPTURE]: 'true' }, { ingressMode: false, dnsCapture: true, virtualInterfaces: [] }],
  ['no pod dns set', {}, { ingressMode: false, dnsCapture: undefined, virtualInterfaces: [] }],
  ['pod dns disabled', { [DNS_CAPTURE]: 'false' }, { ingressMode: false, dnsCapture: false, virtualInterfaces: [] }],
  [
    'pod dns disabled, ingress mode enabled, two virt interfaces',
    { [DNS_CAPTURE]: 'true', [BYPASS_INBOUND_CAPTURE]: 'true', [REROUTE_VIRTUAL_INTERFACES]: 'en0ps1, en1ps1' },
    { ingressMode: true, dnsCapture: true, virtualInterfaces: ['en0ps1', 'en1ps1'] },
  ],
  [
    'various manglings',
    {
      [DNS_CAPTURE]: 'tweedledum',
      [BYPASS_INBOUND_CAPTURE]: 'tweedledee',
      [REROUTE_VIRTUAL_INTERFACES]: 'asd^&&*$&*(#$&*(#&$*())),   ',
    },
    { ingressMode: false, dnsCapture: undefined, virtualInterfaces: ['asd^&&*$&*(#$&*(#&$*()))'] },
  ],
];

for (const [name, annotations, want] of OVERRIDE_TESTS) {
  test(`TestGetPodLevelOverrides: ${name}`, () => {
    expect(upstreamPodOverrides(annotations)).toEqual(want);
  });
}

test('TestGetPodLevelOverrides "various manglings": the mangled name upstream keeps is ignored here, named in the report, and in no rule text', () => {
  const r = parsePodRedirectionAnnotationsUpstream(OVERRIDE_TESTS[4]![1]);
  expect(r.annotations).toEqual({ bypassInboundCapture: false, dnsCapture: undefined, virtualInterfaces: [] });
  expect(r.ignored.map((i) => i.annotation).sort()).toEqual(
    [BYPASS_INBOUND_CAPTURE, DNS_CAPTURE, REROUTE_VIRTUAL_INTERFACES].sort(),
  );
  expect(r.ignored.find((i) => i.annotation === REROUTE_VIRTUAL_INTERFACES)!.shown).toBe('"asd^&&*$&*(#$&*(#&$*()))"');
  const text = upstreamPlan(OVERRIDE_TESTS[4]![1]);
  expect(text).not.toContain('asd');
  expect(text).toContain('--to-ports 15006'); // not ingress mode: "tweedledee" is not a boolean
  expect(text).toContain('--to-ports 15053'); // DNS: the global setting
});

test('CheckBooleanAnnotation: strconv.ParseBool forms are booleans, anything else is ignored (the default applies)', () => {
  for (const v of ['1', 't', 'T', 'TRUE', 'true', 'True']) expect(parseGoBool(v), v).toBe(true);
  for (const v of ['0', 'f', 'F', 'FALSE', 'false', 'False']) expect(parseGoBool(v), v).toBe(false);
  for (const v of ['', ' true', 'true ', 'yes', 'on', 'tRUE', 'ｔrue', 'true\n', '2'])
    expect(parseGoBool(v), JSON.stringify(v)).toBeUndefined();
  expect(upstreamPodOverrides({ [BYPASS_INBOUND_CAPTURE]: 'True', [DNS_CAPTURE]: '0' })).toMatchObject({
    ingressMode: true,
    dnsCapture: false,
  });
  expect(upstreamPodOverrides({ [BYPASS_INBOUND_CAPTURE]: 'yes', [DNS_CAPTURE]: 'off' })).toMatchObject({
    ingressMode: false,
    dnsCapture: undefined,
  });
});

test('the values strict refuses that upstream accepts: "True", "1", "en0ps1, en1ps1", "tun0," shape the upstream rules; strict still refuses each', () => {
  const cases: Record<string, string>[] = [
    { [BYPASS_INBOUND_CAPTURE]: 'True' },
    { [DNS_CAPTURE]: '1' },
    { [REROUTE_VIRTUAL_INTERFACES]: 'en0ps1, en1ps1' },
    { [REROUTE_VIRTUAL_INTERFACES]: 'tun0,' },
  ];
  for (const c of cases) {
    expect(() => parsePodRedirectionAnnotations(c), JSON.stringify(c)).toThrow(/invalid value/);
    expect(parsePodRedirectionAnnotationsUpstream(c).ignored, JSON.stringify(c)).toEqual([]);
  }
  expect(upstreamPlan(cases[0]!)).not.toContain('--to-ports 15006');
  expect(upstreamPlan({ [DNS_CAPTURE]: '1' })).toContain('--to-ports 15053');
  const two = upstreamPlan(cases[2]!);
  for (const i of ['en0ps1', 'en1ps1'])
    expect(two).toContain(`-A ISTIO_PRERT -i ${i} -p tcp -j REDIRECT --to-ports 15001`);
  expect(upstreamPlan(cases[3]!)).toContain('-A ISTIO_PRERT -i tun0 -p tcp -j RETURN');
});

test("interface lists: Go's TrimSpace (tabs, NBSP), empty items dropped, a repeated name is one name", () => {
  expect(upstreamPodOverrides({ [REROUTE_VIRTUAL_INTERFACES]: '\ttun0\u00a0,,  ,tun1\n' }).virtualInterfaces).toEqual([
    'tun0',
    'tun1',
  ]);
  // U+FEFF is not a space to Go (String.prototype.trim would drop it): the item keeps it, and is then unsafe.
  expect(upstreamPodOverrides({ [REROUTE_VIRTUAL_INTERFACES]: '\ufefftun0' }).virtualInterfaces).toEqual([
    '\ufefftun0',
  ]);
  expect(
    parsePodRedirectionAnnotationsUpstream({ [REROUTE_VIRTUAL_INTERFACES]: '\ufefftun0' }).annotations
      .virtualInterfaces,
  ).toEqual([]);
  expect(
    parsePodRedirectionAnnotationsUpstream({ [REROUTE_VIRTUAL_INTERFACES]: 'tun0,tun0, tun0' }).annotations
      .virtualInterfaces,
  ).toEqual(['tun0']);
  expect(
    parsePodRedirectionAnnotationsUpstream({ [REROUTE_VIRTUAL_INTERFACES]: '' }).annotations.virtualInterfaces,
  ).toEqual([]);
});

// The hostile values of annotations.spec.ts (strict) and more: under upstream none reaches rule text.
const HOSTILE = [
  'tun0\n-A ISTIO_OUTPUT -j ACCEPT',
  'tun0\r',
  'tun0 tun1',
  '--dport 1 -j ACCEPT',
  '-j',
  '!tun0',
  'tun+',
  'tün0',
  'tun\u20130',
  'tun\u00000',
  'abcdefghijklmnop',
  'x'.repeat(10_000),
  'a/b',
  'eth0:1',
  'tun0,-j ACCEPT',
  'tun0, "x"',
  '*nat',
];
for (const value of HOSTILE) {
  test(`upstream: ${JSON.stringify(value.slice(0, 30))} in ${REROUTE_VIRTUAL_INTERFACES} renders only safe interface names`, () => {
    const r = parsePodRedirectionAnnotationsUpstream({ [REROUTE_VIRTUAL_INTERFACES]: value });
    for (const i of r.annotations.virtualInterfaces) expect(interfaceNameProblem(i), i).toBeUndefined();
    expect(r.ignored.length, 'every unsafe item is reported').toBe(
      upstreamPodOverrides({ [REROUTE_VIRTUAL_INTERFACES]: value }).virtualInterfaces.length -
        r.annotations.virtualInterfaces.length,
    );
    const text = upstreamPlan({ [REROUTE_VIRTUAL_INTERFACES]: value });
    const named = [...text.matchAll(/ -i (\S+) /g)].map((m) => m[1]!);
    expect(
      named.every((n) => interfaceNameProblem(n) === undefined),
      named.join(','),
    ).toBe(true);
    // Every line is a comment, a table, a chain, a rule or COMMIT: nothing smuggled in.
    for (const line of text.split('\n').filter((l) => l !== ''))
      expect(line, JSON.stringify(line)).toMatch(/^(#|\*[a-z]+$|:[A-Z_]+ |-[AI] [A-Z_]+ |COMMIT$)/);
  });
}
