/**
 * `npm run fidelity -- [--runs N] [--seed N] [--lanes N] [--save DIR] [--nftables]`: the long
 * differential run, simulator vs the real kernel (root). Prints the seed first, progress while it
 * runs, and every shrunk counterexample; saves them as lab files (default fixtures/fidelity/) so
 * the regression test replays them. Exit code 1 when a counterexample was found. `--nftables`:
 * every case also carries nft documents (generator.ts, caseArb({ nftables: true })).
 */
import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { reportSummary, runDifferential } from '../../scenarios/fidelity/differential.js';
import { fixedTopology } from '../../scenarios/fidelity/topology.js';
import { formatDifferences } from '../../scenarios/fidelity/compare.js';
import { withKernelLanes } from './lab-runner-lanes.js';

function arg(name: string, dflt: number): number {
  const i = process.argv.indexOf(`--${name}`);
  if (i < 0) return dflt;
  const v = Number(process.argv[i + 1]);
  if (!Number.isInteger(v)) throw new Error(`--${name} needs an integer, got ${JSON.stringify(process.argv[i + 1])}`);
  return v;
}

async function main(): Promise<void> {
  if (process.getuid?.() !== 0)
    throw new Error(
      'the fidelity run needs root (it builds network namespaces and loads iptables rules): run it as root',
    );
  const runs = arg('runs', 1000);
  const seed = arg('seed', Date.now() % 2 ** 31);
  const lanes = arg('lanes', 2);
  const nftables = process.argv.includes('--nftables');
  const si = process.argv.indexOf('--save');
  const saveDir = si >= 0 ? (process.argv[si + 1] ?? 'fixtures/fidelity') : 'fixtures/fidelity';
  console.log(
    `fidelity: ${runs} ${nftables ? 'nftables-bearing ' : ''}cases, seed ${seed} (lanes use seed+0..${lanes - 1}), ${lanes} lanes`,
  );
  const t0 = Date.now();
  let done = 0;
  const report = await withKernelLanes(lanes, fixedTopology(), (ls) =>
    runDifferential({
      runs,
      seed,
      lanes: ls,
      nftables,
      onCase: () => {
        done++;
        if (done % 100 === 0) console.log(`  ${done} cases, ${((Date.now() - t0) / 1000).toFixed(0)} s`);
      },
    }),
  );
  console.log(
    `fidelity: ${report.cases} cases in ${((Date.now() - t0) / 1000).toFixed(1)} s; ${reportSummary(report)}`,
  );
  if (report.counterexamples.length === 0) {
    console.log('fidelity: no differences');
    return;
  }
  mkdirSync(saveDir, { recursive: true });
  for (const c of report.counterexamples) {
    const file = join(saveDir, `${nftables ? 'nft-' : ''}seed-${c.seed}.yaml`);
    writeFileSync(file, c.yaml);
    console.log(`\ncounterexample (lane ${c.lane}, seed ${c.seed}) saved to ${file}`);
    console.log(formatDifferences(c.verdict.differences, c.verdict.sim ?? [], c.verdict.kernel ?? []));
  }
  process.exitCode = 1;
}

main().catch((e: unknown) => {
  console.error(`fidelity: ${e instanceof Error ? e.message : String(e)}`);
  process.exitCode = 2;
});
