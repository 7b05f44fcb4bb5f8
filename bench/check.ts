/**
 * bench:check — (1) the default `ambient-lab check` on this machine: model-based cases
 * (histories), wall time, cases per second, CPU time and how the histories got their worlds,
 * against the goal (<= 60 s for >= 10,000 cases);
 * (2) histories per second in the sim and in the netns world on the same cell, seed and budget
 * (the ratio), when the netns world can run here (root, iproute2, iptables).
 *
 *   npm run bench:check                 (BENCH_CHECK_RUNS=N: another budget; BENCH_CHECK_NETNS_RUNS=N: the netns budget;
 *                                        BENCH_CHECK_RATIO=0 skips part 2)
 */
import { availableParallelism, cpus, loadavg } from 'node:os';
import { runCheck } from '../scenarios/model/check.js';
import { FAILING } from '../scenarios/model/matrix.js';
import { DEFAULT_MAX_COMMANDS, DEFAULT_NODES, DEFAULT_RUNS } from '../scenarios/model/defaults.js';
import { runCell } from '../scenarios/model/run-cell.js';
import { defaultCatalog } from '../scenarios/model/catalog.js';
import { loadFactory, type CheckWorldName } from '../scenarios/model/worlds.js';
import { worldChoice } from '../e2e/world-modules.js';

const GOAL_SECONDS = 60;
const GOAL_HISTORIES = 10_000;

async function defaultCheck(): Promise<void> {
  const workers = availableParallelism();
  // BENCH_CHECK_RUNS measures another budget with the default command's settings (e.g. to size the default).
  const runs = Number(process.env['BENCH_CHECK_RUNS'] ?? DEFAULT_RUNS);
  const load = loadavg()[0] ?? 0;
  const r = await runCheck({
    world: { world: 'sim' },
    settings: { nodes: DEFAULT_NODES, ipv6: true, dnsCapture: false, maxCommands: DEFAULT_MAX_COMMANDS },
    runs,
    seed: 1,
    selection: {},
    workers,
    outDir: undefined,
    attacks: true,
  });
  const t = r.totals;
  const cores = cpus().length;
  console.log(
    `default check (sim, ${workers} workers on ${cores} CPUs, load average ${load.toFixed(1)} at start; budget ${runs} histories + ${t.attackRuns} attack-catalog runs, ${t.cells} cells):`,
  );
  console.log(
    `  cases (histories)   ${t.histories}          (goal >= ${GOAL_HISTORIES}: ${t.histories >= GOAL_HISTORIES ? 'met' : `NOT met, ${((t.histories / GOAL_HISTORIES) * 100).toFixed(0)}%`})`,
  );
  console.log(
    `  wall time           ${t.seconds.toFixed(1)} s        (goal <= ${GOAL_SECONDS} s: ${t.seconds <= GOAL_SECONDS ? 'met' : 'NOT met'})`,
  );
  console.log(
    `  cases/s             ${t.historiesPerSecond.toFixed(1)}  (wall, incl. attack-catalog time; ${GOAL_HISTORIES} would take ~${(GOAL_HISTORIES / t.historiesPerSecond).toFixed(0)} s)`,
  );
  // On a shared machine wall time measures the neighbours too; CPU time / cores is what an idle machine would take.
  console.log(
    `  CPU time            ${t.cpuSeconds.toFixed(1)} s        (/ ${cores} cores = ~${(t.cpuSeconds / cores).toFixed(1)} s on an idle machine; ${(t.histories / (t.cpuSeconds / cores)).toFixed(0)} cases/s)`,
  );
  console.log(
    `  worlds              ${t.worlds.fresh} fresh, ${t.worlds.reused} reused after a verified reset, ${t.worlds.rejected} resets rejected; ${t.worlds.shrinking} shrinking runs`,
  );
  console.log(`  matches the table   ${r.ok ? 'yes' : `no (${t.mismatches} cells differ)`}`);
  for (const c of r.cells.filter((x) => FAILING.has(x.status)))
    console.log(
      `    ${c.property} × ${c.threat} × ${c.profile}: ${c.status}${c.violation ? ` — ${c.violation}` : ''}${c.error ? ` — ${c.error}` : ''}`,
    );
}

async function cellRate(
  world: CheckWorldName,
  runs: number,
): Promise<{ perSecond: number; runs: number; seconds: number }> {
  const c = defaultCatalog();
  const property = c.properties.find((p) => p.name === 'liveness');
  const threat = c.threats.find((t) => t.id === 'app-nonroot');
  if (!property || !threat) throw new Error('catalog lacks liveness or app-nonroot');
  const factory = await loadFactory(worldChoice(world));
  const t0 = performance.now();
  const r = await runCell(
    { property, threat, profile: 'strict' },
    { factory, runs, seed: 7, maxCommands: 6, nodes: 2, ipv6: false, dnsCapture: false },
  );
  if (r.status === 'error') throw new Error(`${world}: ${r.error}`);
  const seconds = (performance.now() - t0) / 1000;
  return { perSecond: r.runs / seconds, runs: r.runs, seconds };
}

async function ratio(): Promise<void> {
  const netnsRuns = Number(process.env['BENCH_CHECK_NETNS_RUNS'] ?? 3);
  console.log(`\nsim vs netns, same cell (liveness × app-nonroot × strict), seed 7, <= 6 commands, one thread:`);
  const sim = await cellRate('sim', 50);
  console.log(`  sim     ${sim.perSecond.toFixed(2)} histories/s (${sim.runs} in ${sim.seconds.toFixed(1)} s)`);
  let netns: Awaited<ReturnType<typeof cellRate>>;
  try {
    netns = await cellRate('netns', netnsRuns);
  } catch (e) {
    console.log(`  netns   not measured: ${e instanceof Error ? e.message : String(e)}`);
    return;
  }
  console.log(`  netns   ${netns.perSecond.toFixed(3)} histories/s (${netns.runs} in ${netns.seconds.toFixed(1)} s)`);
  console.log(`  ratio   sim is ${(sim.perSecond / netns.perSecond).toFixed(0)}x the netns world`);
}

await defaultCheck();
if (process.env['BENCH_CHECK_RATIO'] !== '0') await ratio();
