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
