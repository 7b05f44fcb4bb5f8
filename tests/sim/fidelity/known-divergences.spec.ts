/**
 * The known divergences' `explains` checks, on the labs that found them (no kernel needed: the
 * kernel's side is the recorded outcome). ipv6-neighbour-discovery-not-simulated must see a DROP
 * that ND traverses in a user chain reached from a built-in one, not only in the built-ins.
 */
import { readFileSync } from 'node:fs';
import { test, expect } from '@playwright/test';
import { parseLab } from '../../../sim/lab/lab-file.js';
import { runLab } from '../../../sim/lab/run-lab.js';
import { explainKnown } from '../../../scenarios/fidelity/known-divergences.js';

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
