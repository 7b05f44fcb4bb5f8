/**
 * The packet path of the HTML reports (cli/html/packet-path.ts): the steps read back from a
 * trace's text (what a saved counterexample keeps) are the steps of the trace events themselves,
 * for every attempt of a real lab; lines of another shape become notes; the diagram has one
 * lane per namespace and one row per step.
 */
import { test, expect } from '@playwright/test';
import { readFileSync } from 'node:fs';
import { pathOfEvents, pathOfText, renderPath } from '../../../cli/html/packet-path.js';
import { renderTrace } from '../../../sim/kernel/trace.js';
import { parseLab } from '../../../sim/lab/lab-file.js';
import { runLab } from '../../../sim/lab/run-lab.js';

const LAB = 'fixtures/labs/inpod.yaml';

test('text and events give the same steps for every attempt of the in-pod lab, and every kind the lab produces is recognised', () => {
  const run = runLab(parseLab(readFileSync(LAB, 'utf8'), LAB), LAB);
  const kinds = new Set<string>();
  for (const r of run.results) {
    const fromEvents = pathOfEvents(r.trace);
    expect(pathOfText(renderTrace(r.trace)), r.name).toEqual(fromEvents);
    for (const s of fromEvents) kinds.add(s.kind);
  }
  // the lab exercises tables with rules, NAT, marks, conntrack, routing, device crossings, delivery and a drop
  expect([...kinds].sort()).toEqual(
    ['conntrack', 'deliver', 'drop', 'mark', 'nat', 'packet', 'route', 'table', 'xmit'].sort(),
  );
  const table = run.results.flatMap((r) => pathOfEvents(r.trace)).find((s) => s.kind === 'table' && s.rules.length > 1);
  expect(table?.rules[0]).toMatchObject({ where: expect.stringMatching(/^\S+ (policy|#\d+)/) });
});

test('lines of another shape are notes across every lane; a NAT rewrite is told from the nat table', () => {
  const steps = pathOfText(
    [
      '--- handshake 1: a -> b',
      '[ns1] PREROUTING nat: NAT redirect',
      '      PREROUTING #1 (line 4): -A PREROUTING -p tcp -j REDIRECT --to-ports 15001  => REDIRECT 15001',
      '[ns1] PREROUTING nat: destination 10.0.0.2:80 -> 10.0.0.1:15001',
      '[ns1] xmit eth0 -> [ns2] veth0',
      '[ns2] DROPPED: no route',
      'probe: SYN sent',
    ].join('\n'),
  );
  expect(steps.map((s) => [s.kind, s.ns])).toEqual([
    ['note', undefined],
    ['table', 'ns1'],
    ['nat', 'ns1'],
    ['xmit', 'ns1'],
    ['drop', 'ns2'],
    ['note', undefined],
  ]);
  expect(steps[1]!.rules).toEqual([
    {
      where: 'PREROUTING #1 (line 4)',
      text: '-A PREROUTING -p tcp -j REDIRECT --to-ports 15001',
      effect: 'REDIRECT 15001',
    },
  ]);
  expect(steps[3]!.toNs).toBe('ns2');
  const html = renderPath(steps);
  expect(html.match(/class="lane-head"/g)).toHaveLength(2);
  expect(html.match(/data-step="/g)).toHaveLength(6);
  expect(html).toContain('class="step k-drop c-drop"');
  expect(html).toContain('class="step k-table c-nat"');
  // values are escaped, never markup
  expect(renderPath(pathOfText('[a<b] route: <script>x</script>'))).not.toContain('<script>');
});

test('nft chains in a trace: text and events give the same steps, each nft chain with its rules, coloured by what it did', () => {
  const lab = 'fixtures/labs/inpod-nft.yaml';
  const run = runLab(parseLab(readFileSync(lab, 'utf8'), lab), lab);
  const kinds = new Set<string>();
  for (const r of run.results) {
    const fromEvents = pathOfEvents(r.trace);
    expect(pathOfText(renderTrace(r.trace)), r.name).toEqual(fromEvents);
    for (const s of fromEvents) kinds.add(s.kind);
  }
  expect(kinds.has('nft')).toBe(true);
  expect(kinds.has('table')).toBe(false); // the lab has no iptables rules
  const out = pathOfEvents(run.results.find((r) => r.name === 'app-a-to-pod-b')!.trace);
  const nat = out.find((s) => s.kind === 'nft' && s.text.startsWith('OUTPUT nft inet istio-ambient-nat output'));
  expect(nat?.rules.at(-1)).toMatchObject({ where: 'istio-output #6 (line 18)', effect: 'redirect to :15001' });
  const html = renderPath([nat!]);
  expect(html).toContain('c-nat');
  expect(html).toContain('effect-nat');
});
