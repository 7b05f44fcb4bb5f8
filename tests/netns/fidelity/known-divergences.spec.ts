import { test, expect } from '@playwright/test';
import { netnsLabWorld } from '../../worlds.js';
import { runLab } from '../../../sim/lab/run-lab.js';
import { runLabOnKernel } from '../../../e2e/netns/lab-runner.js';
import { compareResults } from '../../../scenarios/fidelity/compare.js';
import { KNOWN_DIVERGENCES } from '../../../scenarios/fidelity/known-divergences.js';

const world = netnsLabWorld();
test.skip(!world.available, world.reason);

for (const k of KNOWN_DIVERGENCES) {
  test(`known divergence ${k.name} still exists as documented`, async () => {
    const lab = k.lab();
    const sim = runLab(lab, k.name, { trace: false }).results;
    const kernel = (await runLabOnKernel(lab)).results;
    const udp = new Set(lab.attempts.filter((a) => a.proto === 'udp').map((a) => a.name));
    const diffs = compareResults(sim, kernel, udp);
    expect(diffs).toEqual(k.expected);
    for (const d of diffs) expect(k.explains(lab, d, sim, kernel)).toBe(true);
  });
}
