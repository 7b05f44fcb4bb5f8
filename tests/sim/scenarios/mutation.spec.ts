/**
 * Mutation testing through the World: every security-relevant in-pod rule mutant must make some
 * property report a new violation in the sim, or be a documented equivalent.
 */
import { test, expect } from '@playwright/test';
import { createSimWorld } from '../../../scenarios/worlds/sim-world.js';
import { runMutation, type MutatingWorldMaker } from '../../../scenarios/mutation/run-mutation.js';

const make: MutatingWorldMaker = (o, mutatePlan) => createSimWorld(o, { mutatePlan });

for (const profile of ['upstream', 'strict'] as const) {
  // fixme (known, reported): upstream still has survivors the attack set does not reach (no DNS,
  // own-IP, loopback or kubelet-probe actions yet: probe-accept, probe-reply-accept, dns-udp/tcp,
  // loopback-own-ip, redirect-outbound dst), and one mutant in the full run overflows the stack
  // in sim/kernel/sockets-adapter.ts (a redirect loop, not yet identified).
  test.fixme(`${profile}: every security-relevant in-pod rule mutant is killed by the properties (or documented)`, async () => {
    test.setTimeout(900_000);
    const r = await runMutation(make, profile);
    console.log(r.outcomes.map((x) => `${x.status.padEnd(16)} ${x.mutant} — ${x.evidence}`).join('\n'));
    expect(r.outcomes.length).toBeGreaterThan(8);
    expect(r.survivors).toEqual([]);
  });
}
