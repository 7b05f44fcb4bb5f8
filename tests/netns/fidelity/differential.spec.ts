import { test, expect } from '@playwright/test';
import { netnsLabWorld } from '../../worlds.js';
import { withKernelLanes } from '../../../e2e/netns/lab-runner-lanes.js';
import { checkLab, runDifferential } from '../../../scenarios/fidelity/differential.js';
import { fixedTopology } from '../../../scenarios/fidelity/topology.js';
import { formatDifferences } from '../../../scenarios/fidelity/compare.js';
import { natPreroutingIgnored, redirectKeepsAddress } from '../../../scenarios/fidelity/wrong-models.js';
import { namespacesWithPrefix, alive } from './fixture.js';

const world = netnsLabWorld();
test.skip(!world.available, world.reason);

const SEED = Number(process.env['FIDELITY_SEED'] ?? 20260101);
const RUNS = Number(process.env['FIDELITY_RUNS'] ?? 1000);
const LANES = 4;

test('the simulated kernel agrees with Linux on >= 1000 generated cases (fixed seed)', async () => {
  test.setTimeout(900_000);
  console.log(
    `[fidelity] ${RUNS} cases, seed ${SEED} (lanes ${LANES}: seeds ${SEED}..${SEED + LANES - 1}); replay: FIDELITY_SEED=${SEED}`,
  );
  const prefix = `al-fid${process.pid.toString(36)}-`;
  let pids: number[] = [];
  const report = await withKernelLanes(
    LANES,
    fixedTopology(),
    async (lanes) => {
      const r = await runDifferential({ runs: RUNS, seed: SEED, lanes });
      pids = (await Promise.all(lanes.map((l) => l.lab.pids()))).flat();
      return r;
    },
    { prefix },
  );
  console.log(
    `[fidelity] ${report.cases} cases, ${report.knownHits} known-divergence hits ${JSON.stringify(report.knownByName)}, ${report.bothRejected} rejected by both`,
  );
  const shown = report.counterexamples.map(
    (c) =>
      `seed ${c.seed}:\n${formatDifferences(c.verdict.differences, c.verdict.sim ?? [], c.verdict.kernel ?? [])}\n${c.yaml}`,
  );
  expect(shown).toEqual([]);
  expect(report.cases).toBeGreaterThanOrEqual(RUNS);
  expect(await namespacesWithPrefix(prefix)).toEqual([]);
  expect(pids.length).toBeGreaterThan(0);
  expect(pids.filter(alive)).toEqual([]);
});

test('positive control: the property finds a counterexample against a model that ignores nat PREROUTING', async () => {
  test.setTimeout(300_000);
  const report = await withKernelLanes(1, fixedTopology(), (lanes) =>
    runDifferential({ runs: 300, seed: SEED, lanes, sim: { netfilterFactory: natPreroutingIgnored } }),
  );
  expect(report.counterexamples.length).toBe(1);
  const diffs = report.counterexamples[0]!.verdict.differences;
  expect(diffs.length).toBeGreaterThan(0);
  // The shrunk case still has a nat PREROUTING rule: that is what the wrong model misses.
  expect(report.counterexamples[0]!.yaml).toMatch(/\*nat[\s\S]*-A (PREROUTING|U_PREROUTING) /);
});

test('positive control: the property finds a counterexample against a model whose REDIRECT keeps the original address', async () => {
  test.setTimeout(300_000);
  const report = await withKernelLanes(1, fixedTopology(), (lanes) =>
    runDifferential({ runs: 300, seed: SEED, lanes, sim: { netfilterFactory: redirectKeepsAddress } }),
  );
  expect(report.counterexamples.length).toBe(1);
  const c = report.counterexamples[0]!;
  expect(c.verdict.differences.length).toBeGreaterThan(0);
  // The shrunk case still redirects, and the real model (no wrong factory) agrees with Linux on
  // it: the difference is the wrong REDIRECT, nothing else.
  expect(c.yaml).toMatch(/-j REDIRECT --to-ports/);
  const honest = await withKernelLanes(1, fixedTopology(), ([lane]) => checkLab(c.verdict.lab, lane!));
  expect(honest.differences).toEqual([]);
});
