/**
 * The long simulator-vs-kernel differential runs, as slices the test runner can shard across CI
 * machines (`npm run test:long -- --shard=i/n`): the iptables-only run and the nftables run, each
 * FIDELITY_LONG_RUNS cases (default 20,000) cut into FIDELITY_LONG_SLICES tests (default 10).
 * Slice k of a run with base seed S and L lanes draws its cases from seeds S+kL .. S+kL+L-1, so
 * every slice is the same wherever it runs and a counterexample replays from its seed alone
 * (`npm run fidelity -- --seed N --lanes 1 --runs M`, plus `--nftables` for that run).
 *
 * Not part of `npm test` (the project exists only with AMBIENT_LAB_LONG=1, which `npm run
 * test:long` sets): the whole of it takes about 45 minutes on one 2-core machine. A slice fails on
 * any difference that no documented known divergence explains; its shrunk counterexample is
 * printed and attached as a lab file (move it to fixtures/fidelity/open/ and follow the README
 * there). `npm run fidelity` stays the one-machine form of the same run.
 */
import { writeFileSync } from 'node:fs';
import { test, expect } from '@playwright/test';
import { netnsLabWorld } from '../worlds.js';
import { withKernelLanes } from '../../e2e/netns/lab-runner-lanes.js';
import { reportSummary, runDifferential } from '../../scenarios/fidelity/differential.js';
import { fixedTopology } from '../../scenarios/fidelity/topology.js';
import { formatDifferences } from '../../scenarios/fidelity/compare.js';
import { alive, namespacesWithPrefix } from '../netns/fidelity/fixture.js';
import { positiveInt } from './env.js';

const world = netnsLabWorld();
test.skip(!world.available, world.reason);
// Every slice is its own group, so `--shard` splits slices, not files.
test.describe.configure({ mode: 'parallel' });

const RUNS = positiveInt('FIDELITY_LONG_RUNS', 20_000);
const SLICES = positiveInt('FIDELITY_LONG_SLICES', 10);
const LANES = positiveInt('FIDELITY_LONG_LANES', 4);
if (RUNS < SLICES) throw new Error(`FIDELITY_LONG_RUNS (${RUNS}) is smaller than FIDELITY_LONG_SLICES (${SLICES})`);

/** The two long runs and their base seeds (the last documented passing seeds, README). */
const RUN_KINDS = [
  { name: 'iptables', nftables: false, seed: positiveInt('FIDELITY_LONG_SEED', 20261240) },
  { name: 'nftables', nftables: true, seed: positiveInt('FIDELITY_LONG_NFT_SEED', 20261260) },
] as const;

for (const kind of RUN_KINDS) {
  for (let k = 0; k < SLICES; k++) {
    // The last slice takes the remainder, so the slices add up to RUNS exactly.
    const runs = k < SLICES - 1 ? Math.floor(RUNS / SLICES) : RUNS - Math.floor(RUNS / SLICES) * (SLICES - 1);
    const seed = kind.seed + k * LANES;
    test(`${kind.name} long run, slice ${k + 1}/${SLICES}: ${runs} cases, seeds ${seed}..${seed + LANES - 1}, no unexplained difference`, async () => {
      const testInfo = test.info();
      test.setTimeout(3_600_000);
      const prefix = `al-fl${process.pid.toString(36)}${k.toString(36)}-`;
      const t0 = Date.now();
      let pids: number[] = [];
      const report = await withKernelLanes(
        LANES,
        fixedTopology(),
        async (lanes) => {
          const r = await runDifferential({ runs, seed, lanes, nftables: kind.nftables });
          pids = (await Promise.all(lanes.map((l) => l.lab.pids()))).flat();
          return r;
        },
        { prefix },
      );
      console.log(
        `[fidelity-long] ${kind.name} slice ${k + 1}/${SLICES}: ${report.cases} cases in ${((Date.now() - t0) / 1000).toFixed(0)} s; ${reportSummary(report)}`,
      );
      const shown: string[] = [];
      for (const c of report.counterexamples) {
        const file = testInfo.outputPath(`${kind.nftables ? 'nft-' : ''}seed-${c.seed}.yaml`);
        writeFileSync(file, c.yaml);
        await testInfo.attach(`counterexample seed ${c.seed}`, { path: file, contentType: 'text/yaml' });
        shown.push(
          `lane ${c.lane}, seed ${c.seed} (lab file ${file}):\n${formatDifferences(c.verdict.differences, c.verdict.sim ?? [], c.verdict.kernel ?? [])}\n${c.yaml}`,
        );
      }
      expect(shown, 'differences no documented known divergence explains').toEqual([]);
      // A run that stopped early (every lane at a counterexample) would have failed above; this
      // one ran every case it was given.
      expect(report.cases).toBeGreaterThanOrEqual(runs);
      expect(await namespacesWithPrefix(prefix)).toEqual([]);
      expect(pids.filter(alive)).toEqual([]);
    });
  }
}
