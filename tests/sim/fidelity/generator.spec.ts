import { readFileSync } from 'node:fs';
import fc from 'fast-check';
import { test, expect } from '@playwright/test';
import { parseLab } from '../../../sim/lab/lab-file.js';
import { runLab } from '../../../sim/lab/run-lab.js';
import { caseArb, renderCase, withConntrackOn } from '../../../scenarios/fidelity/generator.js';
import { labToYaml } from '../../../scenarios/fidelity/lab-yaml.js';
import { compareResults } from '../../../scenarios/fidelity/compare.js';

test('generated cases are valid labs the sim accepts, and survive a YAML round trip', () => {
  const specs = fc.sample(caseArb(), { numRuns: 300, seed: 42 });
  let withNat = 0;
  let withTproxy = 0;
  let untrackedServer = 0;
  for (const [i, spec] of specs.entries()) {
    const lab = renderCase(spec, 10000 + i * 4);
    const back = parseLab(labToYaml(lab), `case-${i}.yaml`);
    expect(back.attempts.map((a) => a.name)).toEqual(lab.attempts.map((a) => a.name));
    const a = runLab(lab, 'a', { trace: false }).results;
    const b = runLab(back, 'b', { trace: false }).results;
    expect(compareResults(a, b)).toEqual([]);
    const text = lab.namespaces.map((n) => `${n.iptables}${n.ip6tables}`).join('');
    if (/REDIRECT|DNAT|SNAT|MASQUERADE/.test(text)) withNat++;
    if (/TPROXY/.test(text)) withTproxy++;
    // The server namespace with no rule that needs conntrack: the kernel tracks nothing there.
    const server = lab.namespaces.find((n) => n.name === 'server')!;
    if (
      !/\*nat|conntrack|state|CONNMARK|connmark|-j CT|TPROXY|socket/.test(
        `${server.iptables ?? ''}${server.ip6tables ?? ''}`,
      )
    )
      untrackedServer++;
  }
  // The generator is biased toward mesh rules: a good share of cases redirect or TPROXY.
  expect(withNat).toBeGreaterThan(100);
  expect(withTproxy).toBeGreaterThan(30);
  // ... and some leave a namespace untracked (conntrack is switched on only where needed).
  expect(untrackedServer).toBeGreaterThan(20);
});

test('withConntrackOn adds a verdict-neutral conntrack rule to an existing filter table or a new one', () => {
  expect(withConntrackOn(undefined)).toBe(
    '*filter\n:CT_ON - [0:0]\n-A OUTPUT -m conntrack --ctstate NEW -j CT_ON\nCOMMIT\n',
  );
  expect(withConntrackOn('*filter\n-A INPUT -j DROP\nCOMMIT\n')).toBe(
    '*filter\n:CT_ON - [0:0]\n-A OUTPUT -m conntrack --ctstate NEW -j CT_ON\n-A INPUT -j DROP\nCOMMIT\n',
  );
});

test('fixed divergence stays fixed: connecting to an IPv4 secondary address of the own namespace uses the primary as source', () => {
  const lab = parseLab(readFileSync('fixtures/fidelity/secondary-address-source-seed-8.yaml', 'utf8'), 'seed-8');
  const r = runLab(lab, 'seed-8', { trace: false }).results.find((x) => x.name === 'a0-server-tcp-server2-app');
  expect(r?.outcome).toBe('established');
  expect(r?.sourceSeen?.split(':')[0]).toBe('10.244.2.2');
});
