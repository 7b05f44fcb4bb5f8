/**
 * tools/upstream-golden.ts without root: every upstream golden file kept in
 * fixtures/upstream-golden/ is mapped to our configuration or listed as not expressible with a
 * reason (a new file fails here until it is one or the other); the golden format is read as
 * upstream writes it; the normalisation ignores only what has no behaviour; and the simulated
 * kernel agrees with the comparison (the real-kernel run is tests/netns/rules/upstream-golden.spec.ts).
 */
import * as fs from 'node:fs';
import * as path from 'node:path';
import { test, expect } from '@playwright/test';
import { SimKernel } from '../../../sim/kernel/kernel.js';
import {
  CASES,
  NOT_EXPRESSIBLE,
  differences,
  goldenDir,
  goldenFiles,
  normalise,
  ourRules,
  parseGolden,
  type GoldenCase,
} from '../../../tools/upstream-golden.js';

test('every golden file is mapped or listed as not expressible, exactly once; every mapped file exists', () => {
  const files = goldenFiles();
  expect(files.length).toBe(14);
  const named = [...CASES.map((c) => c.file), ...NOT_EXPRESSIBLE.map((n) => n.file)];
  expect([...named].sort()).toEqual(files);
  for (const n of NOT_EXPRESSIBLE) expect(n.reason.length, n.file).toBeGreaterThan(10);
});

test('the README and NOTICE name the same upstream commit', () => {
  const commit = (f: string): string | undefined =>
    /\b([0-9a-f]{40})\b/.exec(fs.readFileSync(path.join(goldenDir(), f), 'utf8'))?.[1];
  expect(commit('README.md')).toMatch(/^[0-9a-f]{40}$/);
  expect(commit('NOTICE')).toBe(commit('README.md'));
});

test('parseGolden: one rule set per family, -N as chain declarations, the recorded save commands dropped', () => {
  let sets = 0;
  for (const c of CASES) {
    const fams = parseGolden(c.file, fs.readFileSync(path.join(goldenDir(), c.file), 'utf8'));
    expect(fams.length, c.file).toBe(c.ipv6 ? 2 : 1);
    sets += fams.length;
    for (const t of fams) {
      expect(t).not.toMatch(/^-N |save$/m);
      expect(t).toMatch(/^:ISTIO_\w+ - \[0:0\]$/m);
    }
  }
  expect(sets).toBe(21);
  expect(CASES.filter((c) => c.kind === 'inpod').reduce((n, c) => n + (c.ipv6 ? 2 : 1), 0)).toBe(18);
  expect(() => parseGolden('x.golden', '* nat\n-F ISTIO_OUTPUT\nCOMMIT\n')).toThrow(/x\.golden:2: unexpected line/);
  expect(() => parseGolden('x.golden', '* nat\n-N A\n')).toThrow(/not committed/);
});

test('normalise: chain declaration order and counters do not matter; rule order within a chain does', () => {
  const a =
    '*nat\n:PREROUTING ACCEPT [5:300]\n:B - [0:0]\n:A - [0:0]\n-A PREROUTING -j A\n-A A -p tcp -j RETURN\n-A A -j ACCEPT\n-A B -j ACCEPT\nCOMMIT\n';
  const b =
    '# comment\n*nat\n:PREROUTING ACCEPT [0:0]\n:A - [0:0]\n:B - [0:0]\n-A PREROUTING -j A\n-A B -j ACCEPT\n-A A -p tcp -j RETURN\n-A A -j ACCEPT\nCOMMIT\n';
  expect(normalise(a)).toBe(normalise(b));
  const swapped = a.replace('-A A -p tcp -j RETURN\n-A A -j ACCEPT', '-A A -j ACCEPT\n-A A -p tcp -j RETURN');
  expect(differences(normalise(a), normalise(swapped))).toEqual([
    'the same lines in another order (rule order within a chain differs)',
  ]);
  expect(differences(normalise(a), normalise(a.replace('-p tcp ', '-p udp ')))).toEqual([
    'only upstream: -A A -p tcp -j RETURN',
    'only ours:     -A A -p udp -j RETURN',
  ]);
});

function simSave(family: 4 | 6, text: string, ipsets: string | undefined): string {
  const k = new SimKernel();
  k.addNetns('ns');
  if (ipsets !== undefined) k.ipsetRestore('ns', ipsets);
  k.iptablesRestore('ns', family, text);
  return normalise(k.iptablesSave('ns', family));
}

function compareInSim(c: GoldenCase): string[] {
  const theirs = parseGolden(c.file, fs.readFileSync(path.join(goldenDir(), c.file), 'utf8'));
  const ours = ourRules(c);
  return (['ipv4', 'ipv6'] as const).slice(0, theirs.length).flatMap((f, i) => {
    const mine = ours[f];
    if (mine === undefined) return [`${f}: no rules of ours`];
    return differences(
      simSave(f === 'ipv4' ? 4 : 6, theirs[i]!, ours.ipsets),
      simSave(f === 'ipv4' ? 4 : 6, mine, ours.ipsets),
    ).map((d) => `${f}: ${d}`);
  });
}

for (const c of CASES) {
  test(`sim kernel: ${c.file} (${c.upstream}) is identical to our upstream profile`, () => {
    expect(compareInSim(c)).toEqual([]);
  });
}

test('control: a mapping that gets the configuration wrong is caught (DNS off for default, IPv4 probe address changed)', () => {
  const def = CASES.find((c) => c.file === 'default.golden')!;
  expect(compareInSim({ ...def, dnsCapture: false }).length).toBeGreaterThan(0);
  expect(compareInSim({ ...def, probeSnat: { ...def.probeSnat, ipv4: '169.254.7.128' } })).toContain(
    'ipv4: only upstream: -A ISTIO_OUTPUT -d 169.254.7.127/32 -p tcp -m tcp -j ACCEPT',
  );
});
