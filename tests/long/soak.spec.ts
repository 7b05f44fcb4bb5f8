/**
 * The soak (`npm run check:soak`), as one test per seed the test runner can shard across CI
 * machines (`npm run test:long -- --shard=i/n`): the default `ambient-lab check` once per seed,
 * each in its own process exactly as a user runs it, and every cell must match the expected
 * table. A verdict that flips with the seed is worth nothing.
 *
 * SOAK_SEEDS tests (default 20) run seeds SOAK_BASE_SEED .. +SOAK_SEEDS-1. The base defaults to
 * today's UTC date (yyyymmdd00), so every shard of one nightly run lists the same seeds and each
 * night tries new ones; the workflow sets it from the run number, so a re-run repeats its seeds.
 * A failing seed prints each differing cell with the command that re-runs it, and its shrunk
 * counterexamples are saved in the test's output directory (uploaded by the workflow). Not part
 * of `npm test` (the `long` project exists only with AMBIENT_LAB_LONG=1).
 */
import { test, expect } from '@playwright/test';
import { runCheckProcess, runSoak } from '../../cli/soak.js';
import { EXIT_OK } from '../../cli/errors.js';
import { positiveInt } from './env.js';

// Every seed is its own group, so `--shard` splits seeds, not files.
test.describe.configure({ mode: 'parallel' });

const SEEDS = positiveInt('SOAK_SEEDS', 20);
const today = Number(new Date().toISOString().slice(0, 10).replace(/-/g, '')) * 100;
const BASE = positiveInt('SOAK_BASE_SEED', today);
if (BASE + SEEDS - 1 > 0x7fffffff)
  throw new Error(`SOAK_BASE_SEED=${BASE} with SOAK_SEEDS=${SEEDS}: seeds above 2^31-1 are not check seeds`);

for (let i = 0; i < SEEDS; i++) {
  const seed = BASE + i;
  test(`soak seed ${seed} (${i + 1}/${SEEDS}): the default check matches the expected table`, async () => {
    // A default check takes 1.5 to 7 minutes on a 2-core machine; a loaded one, longer.
    test.setTimeout(3_600_000);
    const out = test.info().outputPath('counterexamples');
    const lines: string[] = [];
    const r = await runSoak(
      { seeds: [seed], random: false, checkArgs: ['--out', out], replayArgs: ['--out', out] },
      runCheckProcess,
      (line) => {
        lines.push(line);
        console.log(line);
      },
    );
    expect(r.exitCode, lines.join('\n')).toBe(EXIT_OK);
  });
}
