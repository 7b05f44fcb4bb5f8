/**
 * The known divergences' `explains` checks, on the labs that found them (no kernel needed: the
 * kernel's side is the recorded outcome). ipv6-neighbour-discovery-not-simulated must see a DROP
 * that ND traverses in a user chain reached from a built-in one, not only in the built-ins.
 */
import { readFileSync } from 'node:fs';
import { test, expect } from '@playwright/test';
import { parseLab } from '../../../sim/lab/lab-file.js';
import { runLab } from '../../../sim/lab/run-lab.js';
import {
  classifyDifferences,
  explainKnown,
  formatKnownDifferences,
  KNOWN_DIVERGENCES,
} from '../../../scenarios/fidelity/known-divergences.js';

const FILE = 'fixtures/fidelity/v6-nd-user-chain-seed-20260101.yaml';

test('a DROP in a user chain jumped from INPUT is an ND divergence; the same rule in a chain nothing reaches is not', () => {
  const text = readFileSync(FILE, 'utf8');
  const check = (yaml: string): string | undefined => {
    const lab = parseLab(yaml, FILE);
    const sim = runLab(lab, 'nd', { trace: false }).results;
    const a = sim.find((r) => r.name === 'a0-client-tcp-server-out')!;
    expect(a.outcome).toBe('refused');
    // Linux: the router never resolves the server's address (its solicitations are dropped): timeout.
    const kernel = sim.map((r) => ({ ...r, outcome: 'timeout', acceptedBy: undefined }));
    return explainKnown(lab, { attempt: a.name, field: 'outcome', sim: 'refused', kernel: 'timeout' }, sim, kernel);
  };
  expect(check(text)).toBe('ipv6-neighbour-discovery-not-simulated');
  // Unhooked: U_INPUT is no longer jumped to, so nothing ND meets drops it — not explained.
  const unhooked = text.replace(/^(\s*)-A INPUT -j U_INPUT\n/m, '');
  expect(unhooked).not.toBe(text);
  expect(check(unhooked.replace(/^(\s*)-A INPUT -p tcp .*-j DROP\n/m, ''))).toBeUndefined();
});

test('classifyDifferences names the divergence of each difference it explains and keeps the rest unexplained; docs list every divergence', () => {
  const lab = parseLab(readFileSync(FILE, 'utf8'), FILE);
  const sim = runLab(lab, 'nd', { trace: false }).results;
  // a0 timed out on "Linux" (ND); a1 was established there, seeing another source: nothing explains that.
  const kernel = sim.map((r) =>
    r.name === 'a0-client-tcp-server-out'
      ? { ...r, outcome: 'timeout', acceptedBy: undefined }
      : { ...r, outcome: 'established', sourceSeen: 'x' },
  );
  const nd = { attempt: 'a0-client-tcp-server-out', field: 'outcome' as const, sim: 'refused', kernel: 'timeout' };
  const odd = { attempt: 'a1-client-tcp-server-app', field: 'sourceSeen' as const, sim: undefined, kernel: 'x' };
  const r = classifyDifferences(lab, [nd, odd], sim, kernel);
  expect(r.differences).toEqual([{ ...nd, known: 'ipv6-neighbour-discovery-not-simulated' }, odd]);
  expect(r.unexplained).toEqual([odd]);
  expect(formatKnownDifferences(r.differences)).toContain(
    'ipv6-neighbour-discovery-not-simulated: a0-client-tcp-server-out outcome: sim refused / kernel timeout',
  );
  const docs = readFileSync('docs/lab-file.md', 'utf8');
  for (const k of KNOWN_DIVERGENCES) expect(docs, k.name).toContain(`| \`${k.name}\` |`);
});

test('nftables: a drop ND can meet (policy drop, or drop/reject not limited to TCP/UDP, in a non-nat ip6/inet chain not at forward) is an ND divergence, in block and command form', () => {
  const lab = (nft: string) =>
    parseLab(
      `
version: 1
namespaces:
  - name: client
    routes: [{ dst: default, family: 6, via: "fd00:1::1" }]
  - name: router
    forwarding: { ipv6: true }
    nftables: |
${nft
  .split('\n')
  .map((l) => `      ${l}`)
  .join('\n')}
  - name: server
    routes: [{ dst: default, family: 6, via: "fd00:2::1" }]
veths:
  - a: { netns: client, name: eth0, addresses: ["fd00:1::2/64"] }
    b: { netns: router, name: eth-c, addresses: ["fd00:1::1/64"] }
  - a: { netns: server, name: eth0, addresses: ["fd00:2::2/64"] }
    b: { netns: router, name: eth-s, addresses: ["fd00:2::1/64"] }
attempts:
  - { name: through, netns: client, address: "fd00:2::2", port: 18080, uid: 1000 }
`,
      'nd-nft',
    );
  const explained = (nft: string): string | undefined => {
    const l = lab(nft);
    const sim = runLab(l, 'nd', { trace: false }).results;
    const kernel = sim.map((r) => ({ ...r, outcome: 'timeout' as const, acceptedBy: undefined }));
    return explainKnown(
      l,
      { attempt: 'through', field: 'outcome', sim: sim[0]!.outcome, kernel: 'timeout' },
      sim,
      kernel,
    );
  };
  const ND = 'ipv6-neighbour-discovery-not-simulated';
  expect(
    explained('add table inet t\nadd chain inet t o { type filter hook output priority -150 ; policy drop ; }'),
  ).toBe(ND);
  expect(
    explained(
      'table ip6 t {\n  chain i {\n    type filter hook input priority 0; policy accept;\n    ct state invalid,untracked drop\n  }\n}',
    ),
  ).toBe(ND);
  expect(
    explained(
      'table inet t {\n  chain i {\n    type filter hook input priority 0; policy accept;\n    th dport != 1 reject\n  }\n}',
    ),
  ).toBe(ND);
  // limited to TCP, in an ip table, at forward, or in a nat chain: ND never meets it
  expect(
    explained(
      'table inet t {\n  chain i {\n    type filter hook input priority 0; policy accept;\n    meta l4proto tcp drop\n  }\n}',
    ),
  ).toBeUndefined();
  expect(
    explained('table ip t {\n  chain i {\n    type filter hook input priority 0; policy drop;\n  }\n}'),
  ).toBeUndefined();
  expect(
    explained(
      'table inet t {\n  chain f {\n    type filter hook forward priority 0; policy accept;\n    tcp dport 18080 accept\n    ip6 daddr fd00:9::1 drop\n  }\n}',
    ),
  ).toBeUndefined();
  expect(
    explained(
      'table inet t {\n  chain n {\n    type nat hook output priority -100; policy accept;\n    ip6 daddr fd00:9::1 drop\n  }\n}',
    ),
  ).toBeUndefined();
});
