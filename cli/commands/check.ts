/**
 * `ambient-lab check`: the security matrix. For every property × threat × profile, random
 * cluster histories (fast-check model-based commands) and the attack catalog search for a way
 * around the node proxy; the result is compared with the expected table and the command exits
 * 1 when they differ in either direction. Counterexamples are shrunk and saved as replayable
 * JSON files; `--replay FILE` re-runs one. See docs/check.md.
 */
import { availableParallelism } from 'node:os';
import type { Command } from 'commander';
import type { CliCommand } from '../command.js';
import { runCheck, type CheckReport, type Progress } from '../../scenarios/model/check.js';
import { loadCounterexample, renderCounterexample } from '../../scenarios/model/counterexample.js';
import { FAILING, parseShard, renderMatrix } from '../../scenarios/model/matrix.js';
import { replayCounterexample } from '../../scenarios/model/replay.js';
import { CHECK_WORLDS, loadFactory, type CheckWorldName } from '../../scenarios/model/worlds.js';

import { DEFAULT_MAX_COMMANDS, DEFAULT_NODES, DEFAULT_OUT, DEFAULT_RUNS } from '../../scenarios/model/defaults.js';

interface CheckCliOptions {
  world: string;
  runs?: string;
  seed?: string;
  profiles?: string;
  threats?: string;
  properties?: string;
  shard?: string;
  maxCommands?: string;
  workers?: string;
  out: string;
  save: boolean;
  attacks: boolean;
  replay?: string;
  json?: boolean;
  mutant?: string;
  ipv6: boolean;
}

/**
 * The kind world's defaults when the options are not given: a real cluster runs a history in
 * minutes, not milliseconds, so a small budget — one threat, one profile, every property, one
 * history per cell, short histories (the CI kind job runs exactly this). strict rather than
 * upstream: upstream's UDP bypass is easy for a random history to hit, and every bypass a history
 * finds is shrunk on the real cluster (minutes per run); strict's expected bypasses (the port
 * hijack) need a longer plan, which the attack catalog stages. Other worlds: the
 * full matrix and DEFAULT_RUNS (netns: give it a small --runs, docs/check.md).
 */
export const KIND_DEFAULTS = { runs: 6, maxCommands: 6, threats: ['app-nonroot'], profiles: ['strict'] } as const;

export interface BudgetChoice {
  readonly runs: number;
  readonly maxCommands: number;
  readonly threats?: readonly string[];
  readonly profiles?: readonly string[];
}

/** The budget and selection of a run from the options given (undefined: not given). */
export function checkBudget(world: CheckWorldName, given: { runs?: string; maxCommands?: string; threats?: string; profiles?: string; properties?: string; shard?: string }): BudgetChoice {
  const kind = world === 'kind';
  const narrowed = given.threats !== undefined || given.profiles !== undefined || given.properties !== undefined || given.shard !== undefined;
  const threats = list(given.threats) ?? (kind && !narrowed ? [...KIND_DEFAULTS.threats] : undefined);
  const profiles = list(given.profiles) ?? (kind && !narrowed ? [...KIND_DEFAULTS.profiles] : undefined);
  return {
    runs: given.runs !== undefined ? positiveInt('--runs', given.runs) : kind ? KIND_DEFAULTS.runs : DEFAULT_RUNS,
    maxCommands: given.maxCommands !== undefined ? positiveInt('--max-commands', given.maxCommands) : kind ? KIND_DEFAULTS.maxCommands : DEFAULT_MAX_COMMANDS,
    ...(threats ? { threats } : {}),
    ...(profiles ? { profiles } : {}),
  };
}

function list(text: string | undefined): string[] | undefined {
  return text === undefined ? undefined : text.split(',').map((s) => s.trim()).filter((s) => s !== '');
}

function positiveInt(name: string, text: string, min = 1): number {
  const n = Number(text);
  if (!Number.isInteger(n) || n < min) throw new Error(`${name} ${JSON.stringify(text)}: expected an integer >= ${min}`);
  return n;
}

/** A progress bar on a TTY, a line per 10% otherwise (CI logs). */
function progressPrinter(): { update(p: Progress): void; done(): void } {
  const tty = process.stderr.isTTY === true;
  let lastDecile = -1;
  let lastDraw = 0;
  return {
    update(p: Progress): void {
      const frac = p.totalRuns === 0 ? 1 : p.doneRuns / p.totalRuns;
      if (tty) {
        const now = performance.now();
        if (now - lastDraw < 100 && p.doneTasks < p.totalTasks) return;
        lastDraw = now;
        const width = 30;
        const fill = Math.round(frac * width);
        process.stderr.write(`\r[${'#'.repeat(fill)}${'.'.repeat(width - fill)}] ${String(Math.floor(frac * 100)).padStart(3)}%  ${p.doneRuns}/${p.totalRuns} histories  ${p.doneTasks}/${p.totalTasks} tasks `);
        return;
      }
      const decile = Math.floor(frac * 10);
      if (decile > lastDecile) {
        lastDecile = decile;
        process.stderr.write(`check: ${decile * 10}% (${p.doneRuns}/${p.totalRuns} histories, ${p.doneTasks}/${p.totalTasks} tasks)\n`);
      }
    },
    done(): void {
      if (tty) process.stderr.write('\n');
    },
  };
}

export function renderReport(r: CheckReport): string {
  const lines: string[] = [];
  lines.push(`ambient-lab check — world ${r.world}${r.mutant ? ` (positive control: mutant ${r.mutant})` : ''}, seed ${r.seed}${r.shard ? `, shard ${r.shard.index}/${r.shard.count}` : ''}`);
  lines.push(`${r.totals.histories} model-based histories (budget ${r.budget.runs}, ${r.budget.runsPerCell} per cell, <= ${r.budget.maxCommands} commands each)`
    + `${r.budget.attacks ? ` + ${r.totals.attackRuns} attack-catalog runs` : ''} over ${r.totals.cells} cells in ${r.totals.seconds.toFixed(1)} s`
    + ` (${r.totals.historiesPerSecond.toFixed(0)} histories/s, ${r.totals.cpuSeconds.toFixed(1)} s of CPU)`);
  const w = r.totals.worlds;
  if (w.fresh + w.reused > 0) {
    lines.push(`worlds: ${w.fresh} fresh, ${w.reused} reused after a verified reset (${w.rejected} resets rejected by the digest); ${w.shrinking} shrinking runs (not counted as histories)`);
  }
  lines.push('');
  lines.push(renderMatrix(r.cells));
  const notRun = r.cells.filter((c) => c.skipped !== undefined);
  if (notRun.length > 0) {
    lines.push('', `Cells this world could not stage (${notRun.length}; not run, shown as n/e, never as holding):`);
    for (const c of notRun) lines.push(`  ${c.property} × ${c.threat} × ${c.profile}: ${c.skipped ?? ''}`);
  }
  if (r.worldGaps && r.worldGaps.length > 0) {
    lines.push('', `World features this run did not stage (${r.worldGaps.length}):`);
    for (const g of r.worldGaps) lines.push(`  ${g}`);
  }
  if (r.catalogSkipped.length > 0) {
    lines.push('', `Attack-catalog phases this world could not stage (${r.catalogSkipped.length}; their cells were judged without them):`);
    for (const s of r.catalogSkipped) lines.push(`  ${s}`);
  }
  const bad = r.cells.filter((c) => FAILING.has(c.status));
  if (bad.length > 0) {
    lines.push('', `DIFFERS FROM THE EXPECTED TABLE (${bad.length} cells):`);
    for (const c of bad) {
      lines.push(`  ${c.property} × ${c.threat} × ${c.profile}: ${c.status} — expected ${c.expected?.verdict ?? 'nothing (no table cell)'}${c.expected?.why ? ` (${c.expected.why})` : ''}`);
      if (c.violation) lines.push(`    found: ${c.violation}${c.foundBy ? ` [by ${c.foundBy.join(' + ')}]` : ''}`);
      if (c.error) lines.push(`    error: ${c.error}`);
      if (c.counterexampleFile) lines.push(`    replay: ambient-lab check --replay ${c.counterexampleFile}`);
    }
  }
  const found = r.counterexamples;
  if (found.length > 0) {
    lines.push('', `Counterexamples (${found.length}, shrunk):`);
    for (const f of found) {
      const cell = r.cells.find((c) => c.property === f.property && c.threat === f.threat && c.profile === f.profile);
      lines.push(renderCounterexample(f, cell?.counterexampleFile));
      lines.push('');
    }
  }
  lines.push(r.ok ? 'OK: every cell matches the expected table (scenarios/expected/table.ts).' : `FAIL: ${r.totals.mismatches} cells differ from the expected table (scenarios/expected/table.ts).`);
  return lines.join('\n');
}

async function replay(file: string, opts: CheckCliOptions): Promise<void> {
  const f = loadCounterexample(file);
  const world = opts.world === 'sim' || opts.world === 'netns' ? opts.world : undefined;
  if (opts.world === 'kind') throw new Error('--replay runs on the sim or netns world (a counterexample replays from its seed in one world); drop --world kind');
  const out = await replayCounterexample(f, { ...(world ? { world } : {}), ...(opts.mutant !== undefined ? { mutant: opts.mutant } : {}) });
  if (opts.json) {
    process.stdout.write(JSON.stringify({ format: 'ambient-lab/replay@1', file, ...out }, null, 2) + '\n');
  } else {
    if (out.replayed) process.stdout.write(renderCounterexample(out.replayed) + '\n\n');
    process.stdout.write(out.same
      ? `REPRODUCED: ${f.property} × ${f.threat} × ${f.profile}: ${out.observed}\n`
      : `NOT REPRODUCED: expected "${out.original}", observed ${out.observed}\n`);
  }
  if (!out.same) process.exitCode = 1;
}

export const checkCommand: CliCommand = {
  name: 'check',
  register(program: Command): void {
    program
      .command('check')
      .description('search every property × threat × profile for a way around the node proxy (random cluster histories + the attack catalog), compare with the expected table; exit 1 when they differ')
      .option('--world <world>', 'sim (in-process simulator), netns (real kernel, root) or kind (a kind cluster, KIND=1 and Docker; one cluster per run, small default budget)', 'sim')
      .option('--runs <n>', `model-based histories in total, spread over the cells (default ${DEFAULT_RUNS}; kind: ${KIND_DEFAULTS.runs})`)
      .option('--seed <n>', 'seed of the whole run (default: random, printed)')
      .option('--profiles <list>', 'rule profiles, comma-separated (upstream,strict)')
      .option('--threats <list>', `threat models, comma-separated (see docs/check.md; kind without a selection: ${KIND_DEFAULTS.threats.join(',')} × ${KIND_DEFAULTS.profiles.join(',')})`)
      .option('--properties <list>', 'properties, comma-separated')
      .option('--shard <i/n>', 'run only the i-th of n slices of the matrix cells (CI machines)')
      .option('--max-commands <n>', `longest history, in commands (default ${DEFAULT_MAX_COMMANDS}; kind: ${KIND_DEFAULTS.maxCommands})`)
      .option('--workers <n>', 'worker threads (default: one per CPU)')
      .option('--out <dir>', 'where counterexample files are saved', DEFAULT_OUT)
      .option('--no-save', 'do not save counterexample files')
      .option('--no-attacks', 'skip the deterministic attack catalog (random histories only)')
      .option('--no-ipv6', 'single-stack worlds')
      .option('--replay <file>', 're-run a saved counterexample and check it reaches the same violation')
      .option('--mutant <name>', 'positive control: every agent applies this rule-builder mutant (sim only; names in docs/check.md)')
      .option('--json', 'print the full report as JSON on stdout')
      .action(async (opts: CheckCliOptions) => {
        if (!CHECK_WORLDS.includes(opts.world as CheckWorldName)) throw new Error(`--world ${JSON.stringify(opts.world)}: expected ${CHECK_WORLDS.join(', ')}`);
        const world = opts.world as CheckWorldName;
        if (opts.replay !== undefined) {
          await replay(opts.replay, opts);
          return;
        }
        const budget = checkBudget(world, opts);
        // A kind run that cannot run says why once and stops, instead of an error in every cell.
        if (world === 'kind') await loadFactory({ world });
        const seed = opts.seed !== undefined ? positiveInt('--seed', opts.seed, 0) : Math.floor(Math.random() * 0x7fffffff);
        const progress = progressPrinter();
        const report = await runCheck({
          world: { world, ...(opts.mutant !== undefined ? { mutant: opts.mutant } : {}) },
          settings: { nodes: DEFAULT_NODES, ipv6: opts.ipv6, dnsCapture: false, maxCommands: budget.maxCommands },
          runs: budget.runs,
          seed,
          selection: {
            ...(budget.profiles ? { profiles: budget.profiles } : {}),
            ...(budget.threats ? { threats: budget.threats } : {}),
            ...(list(opts.properties) ? { properties: list(opts.properties) } : {}),
            ...(opts.shard !== undefined ? { shard: parseShard(opts.shard) } : {}),
          },
          workers: opts.workers !== undefined ? positiveInt('--workers', opts.workers, 0) : availableParallelism(),
          outDir: opts.save ? opts.out : undefined,
          attacks: opts.attacks,
          onProgress: (p) => progress.update(p),
        });
        progress.done();
        process.stdout.write(opts.json ? JSON.stringify(report, null, 2) + '\n' : renderReport(report) + '\n');
        if (!report.ok) process.exitCode = 1;
      });
  },
};
