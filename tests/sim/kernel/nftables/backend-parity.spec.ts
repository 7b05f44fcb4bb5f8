/**
 * The agent's two backends in the simulator: for each profile, the in-pod lab
 * (fixtures/labs/inpod.yaml) with the pod's golden iptables rules (fixtures/golden/<profile>/
 * inpod-default.v4.rules, .v6.rules) and with its golden nftables document (inpod-default.nft)
 * gives every attempt the same result — the model runs both, so a translation that changed what a
 * rule does, or a model that read nft differently from iptables where Linux does not, shows here.
 * Every golden .nft file of both profiles is also a document the model takes.
 */
import { test, expect } from '@playwright/test';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { parseLab } from '../../../../sim/lab/lab-file.js';
import { runLab } from '../../../../sim/lab/run-lab.js';
import { NfTables } from '../../../../sim/kernel/nftables/nftables.js';
import { compareResults } from '../../../../scenarios/fidelity/compare.js';

const GOLDEN = path.resolve('fixtures/golden');
const base = fs.readFileSync('fixtures/labs/inpod.yaml', 'utf8');

/** The pod's part of the lab: from `    iptables: |` of pod-a to the next namespace. */
function withPodRules(rules: { iptables?: string; ip6tables?: string; nftables?: string }): string {
  const start = base.indexOf('    iptables: |\n      # Upstream istio-cni in-pod ruleset');
  const end = base.indexOf('  - name: pod-b');
  if (start < 0 || end < 0)
    throw new Error('inpod.yaml changed: the pod-a iptables block is not where this test looks');
  const block = (key: string, text: string | undefined): string =>
    text === undefined
      ? ''
      : `    ${key}: |\n${text
          .trimEnd()
          .split('\n')
          .map((l) => (l === '' ? '' : `      ${l}`))
          .join('\n')}\n`;
  const lab =
    base.slice(0, start) +
    block('iptables', rules.iptables) +
    block('ip6tables', rules.ip6tables) +
    block('nftables', rules.nftables) +
    base.slice(end);
  // strict's inbound is TPROXY: the proxy's inbound listener is transparent (both backends alike)
  return lab.replace(
    '{ name: proxy-inbound, netns: pod-a, port: 15006, uid: 1337, caps: [NET_ADMIN], mark: 0x539 }',
    '{ name: proxy-inbound, netns: pod-a, port: 15006, uid: 1337, caps: [NET_ADMIN], mark: 0x539, transparent: true }',
  );
}

for (const profile of ['upstream', 'strict'] as const) {
  test(`${profile}: every golden .nft document applies`, () => {
    const files = fs.readdirSync(path.join(GOLDEN, profile)).filter((f) => f.endsWith('.nft'));
    expect(files.length).toBeGreaterThan(3);
    for (const f of files) {
      const n = new NfTables();
      n.apply(fs.readFileSync(path.join(GOLDEN, profile, f), 'utf8'), { source: `${profile}/${f}` });
      expect(n.tables().length, f).toBeGreaterThan(0);
    }
  });

  test(`${profile}: the pod's golden iptables rules and its golden nftables document give the same results`, () => {
    const read = (f: string): string => fs.readFileSync(path.join(GOLDEN, profile, f), 'utf8');
    const ipt = withPodRules({ iptables: read('inpod-default.v4.rules'), ip6tables: read('inpod-default.v6.rules') });
    const nft = withPodRules({ nftables: read('inpod-default.nft') });
    const a = runLab(parseLab(ipt, `${profile}-iptables.yaml`), 'iptables', { trace: false }).results;
    const b = runLab(parseLab(nft, `${profile}-nft.yaml`), 'nft', { trace: false }).results;
    expect(b.map((r) => r.name)).toEqual(a.map((r) => r.name));
    expect(compareResults(a, b)).toEqual([]);
    // not vacuous: the app's outbound call is captured by the proxy in both
    expect(b.find((r) => r.name === 'app-a-to-pod-b')).toMatchObject({
      outcome: 'established',
      acceptedBy: 'proxy-outbound',
    });
    expect(b.find((r) => r.name === 'pod-b-to-app-a')).toMatchObject({
      outcome: 'established',
      acceptedBy: 'proxy-inbound',
    });
  });
}

test('positive control: a document without its outbound redirect gives other results', () => {
  const doc = fs.readFileSync(path.join(GOLDEN, 'upstream', 'inpod-default.nft'), 'utf8');
  const lost = doc
    .split('\n')
    .filter((l) => !l.includes('redirect to :15001'))
    .join('\n');
  expect(lost).not.toBe(doc);
  const ipt = withPodRules({
    iptables: fs.readFileSync(path.join(GOLDEN, 'upstream', 'inpod-default.v4.rules'), 'utf8'),
  });
  const a = runLab(parseLab(ipt, 'i.yaml'), 'i', { trace: false }).results;
  const b = runLab(parseLab(withPodRules({ nftables: lost }), 'n.yaml'), 'n', { trace: false }).results;
  expect(compareResults(a, b).length).toBeGreaterThan(0);
});
