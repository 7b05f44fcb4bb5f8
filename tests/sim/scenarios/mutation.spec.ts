/**
 * Mutation testing through the World: every security-relevant in-pod rule mutant of the upstream
 * and strict plans must make some property report a change (a new violation, or an expected one
 * gone) in the sim, or be a documented equivalent (KNOWN_SURVIVORS, with its reason), or be a
 * listed harness gap (KNOWN_UNOBSERVABLE). Every security-relevant rule has at least one mutant.
 */
import { test, expect } from '@playwright/test';
import { createSimWorld } from '../../../scenarios/worlds/sim-world.js';
import {
  KNOWN_UNOBSERVABLE,
  runMutation,
  topologyInpodOptions,
  type MutatingWorldMaker,
} from '../../../scenarios/mutation/run-mutation.js';
import { planMutants } from '../../../scenarios/mutation/plan-mutation.js';
import { buildInpodRules } from '../../../impl/node-agent/rule-builder.js';

const make: MutatingWorldMaker = (o, mutatePlan) => createSimWorld(o, { mutatePlan });

test.describe.configure({ mode: 'parallel' });

for (const profile of ['upstream', 'strict'] as const) {
  test(`${profile}: every security-relevant in-pod rule mutant is killed by the properties and attacks (or documented)`, async () => {
    test.setTimeout(300_000);
    const r = await runMutation(make, profile);
    console.log(r.outcomes.map((x) => `${x.status.padEnd(16)} ${x.mutant} — ${x.evidence}`).join('\n'));
    expect(r.outcomes.length).toBeGreaterThan(20);
    expect(r.survivors).toEqual([]);
    // The harness gaps are exactly the listed ones (a new unobservable mutant is a survivor).
    expect(r.unobservable.map((m) => `${profile} ${m}`).sort()).toEqual(
      Object.keys(KNOWN_UNOBSERVABLE)
        .filter((k) => k.startsWith(`${profile} `))
        .sort(),
    );
    // Most mutants are killed outright; documentation is the exception.
    expect(r.outcomes.filter((x) => x.status === 'killed').length).toBeGreaterThan(r.outcomes.length / 2);
  });
}

test('every security-relevant rule of both plans has at least one mutant', () => {
  for (const profile of ['upstream', 'strict'] as const) {
    const o = topologyInpodOptions(profile, false);
    const ir = buildInpodRules(o);
    const mutated = new Set(planMutants(o).map((m) => `${m.family} ${m.ruleId}`));
    for (const family of ['ipv4', 'ipv6'] as const) {
      for (const rule of ir.iptables[family]?.rules ?? []) {
        if (rule.security !== undefined)
          expect(mutated.has(`${family} ${rule.id}`), `${profile} ${family} ${rule.id}`).toBe(true);
      }
    }
  }
});
