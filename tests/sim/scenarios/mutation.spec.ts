/**
 * Mutation testing through the World: every security-relevant in-pod rule mutant must make some
 * property report a new violation in the sim, or be a documented equivalent.
 */
import { test, expect } from '@playwright/test';
import { createSimWorld } from '../../../scenarios/worlds/sim-world.js';
import { runMutation, type MutatingWorldMaker } from '../../../scenarios/mutation/run-mutation.js';

const make: MutatingWorldMaker = (o, mutatePlan) => createSimWorld(o, { mutatePlan });

for (const profile of ['upstream', 'strict'] as const) {
  test(`${profile}: every security-relevant in-pod rule mutant is killed by the properties (or documented)`, async () => {
    test.setTimeout(900_000);
    const r = await runMutation(make, profile);
    console.log(r.outcomes.map((x) => `${x.status.padEnd(16)} ${x.mutant} — ${x.evidence}`).join('\n'));
    expect(r.outcomes.length).toBeGreaterThan(8);
    expect(r.survivors).toEqual([]);
  });
}
