/**
 * `ambient-lab check`: the security matrix. For every property × threat × profile, random
 * cluster histories (fast-check model-based commands) and the attack catalog search for a way
 * around the node proxy; the result is compared with the expected table and the command exits
 * 1 when they differ in either direction. Counterexamples are shrunk and saved as replayable
 * JSON files; `--replay FILE` re-runs one. See docs/check.md.
 */
import * as fs from 'node:fs';
import { availableParallelism } from 'node:os';
import { writeCheckHtml } from '../html/check-html.js';
import type { Command } from 'commander';
import type { CliCommand } from '../command.js';
import {
  EXIT_CODES_HELP,
  EXIT_DIFFERS,
  EXIT_HARNESS,
  EXIT_INTERRUPTED,
  EXIT_OK,
  HarnessError,
  UsageError,
  parseIntFlag,
  parseNameList,
} from '../errors.js';
import {
  CheckInterrupted,
  runCheck,
  type CellReport,
  type CheckReport,
  type Progress,
} from '../../scenarios/model/check.js';
import { defaultCatalog } from '../../scenarios/model/catalog.js';
import {
  counterexampleCell,
  CounterexampleFileError,
  loadCounterexample,
  renderCounterexample,
  type CounterexampleFile,
} from '../../scenarios/model/counterexample.js';
import {
  cellName,
  FAILING,
  parseShard,
  planCells,
  renderMatrix,
  type CellStatus,
  type MatrixSelection,
} from '../../scenarios/model/matrix.js';
import { replayCounterexample } from '../../scenarios/model/replay.js';
import { CHECK_WORLDS, loadFactory, mutantNames, type CheckWorldName } from '../../scenarios/model/worlds.js';
import { WORLD_MODULES, worldChoice } from '../../e2e/world-modules.js';
import { BACKENDS } from '../../impl/api/backend.js';
import type { Profile } from '../../scenarios/world.js';

import { DEFAULT_MAX_COMMANDS, DEFAULT_NODES, DEFAULT_OUT, DEFAULT_RUNS } from '../../scenarios/model/defaults.js';

export interface CheckCliOptions {
  world: string;
  runs?: string;
  seed?: string;
  profiles?: string;
  backends?: string;
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
  verbose?: boolean;
  html?: string;
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

interface BudgetChoice {
  readonly runs: number;
  readonly maxCommands: number;
  readonly threats?: readonly string[];
  readonly profiles?: readonly string[];
}

/** The names `--threats`, `--profiles` and `--properties` accept. */
export function acceptedNames(): {
  readonly threats: readonly string[];
  readonly profiles: readonly Profile[];
  readonly properties: readonly string[];
} {
  const c = defaultCatalog();
  return { threats: c.threats.map((t) => t.id), profiles: c.profiles, properties: c.properties.map((p) => p.name) };
}

/**
 * The budget and selection of a run from the options given (undefined: not given). Every value
 * is checked here, before any work: a bad one is a UsageError naming the flag, the value and
 * what is accepted.
 */
export function checkBudget(
  world: CheckWorldName,
  given: {
    runs?: string;
    maxCommands?: string;
    threats?: string;
    profiles?: string;
    properties?: string;
    shard?: string;
  },
): BudgetChoice {
  const kind = world === 'kind';
  const names = acceptedNames();
  const narrowed =
    given.threats !== undefined ||
    given.profiles !== undefined ||
    given.properties !== undefined ||
    given.shard !== undefined;
  const threats =
    given.threats !== undefined
      ? parseNameList('--threats', given.threats, names.threats)
      : kind && !narrowed
        ? [...KIND_DEFAULTS.threats]
        : undefined;
  const profiles =
    given.profiles !== undefined
      ? parseNameList('--profiles', given.profiles, names.profiles)
      : kind && !narrowed
        ? [...KIND_DEFAULTS.profiles]
        : undefined;
  return {
    runs: given.runs !== undefined ? parseIntFlag('--runs', given.runs, 1) : kind ? KIND_DEFAULTS.runs : DEFAULT_RUNS,
    maxCommands:
      given.maxCommands !== undefined
        ? parseIntFlag('--max-commands', given.maxCommands, 1, 1000)
        : kind
          ? KIND_DEFAULTS.maxCommands
          : DEFAULT_MAX_COMMANDS,
    ...(threats ? { threats } : {}),
    ...(profiles ? { profiles } : {}),
  };
}

/** A validated `check` run: everything the run needs, nothing left to parse. */
interface CheckRunPlan {
  readonly kind: 'run';
  readonly world: CheckWorldName;
  readonly mutant?: string;
  readonly runs: number;
  readonly maxCommands: number;
  /** Undefined: a random seed, drawn (and printed) when the run starts. */
  readonly seed?: number;
  readonly selection: MatrixSelection;
  readonly workers?: number;
  readonly outDir: string | undefined;
  readonly attacks: boolean;
  readonly ipv6: boolean;
  readonly json: boolean;
  /** Print every counterexample whole, not only those of cells that differ. */
  readonly verbose: boolean;
  /** Write the HTML explorer (index.html) into this directory. */
  readonly htmlDir: string | undefined;
}

/** A validated `check --replay FILE`. */
interface CheckReplayPlan {
  readonly kind: 'replay';
  readonly file: string;
  readonly counterexample: CounterexampleFile;
  readonly world?: 'sim' | 'netns' | 'containers';
  readonly mutant?: string;
  readonly json: boolean;
}

/** The defaults commander fills in (so a caller without commander can tell a choice from a default). */
const CHECK_OPTION_DEFAULTS: Partial<CheckCliOptions> = {
  world: 'sim',
  out: DEFAULT_OUT,
  save: true,
  attacks: true,
  ipv6: true,
};

/** Options that choose or size a run; a replay takes all of them from its file. */
const RUN_ONLY_OPTIONS: ReadonlyArray<readonly [keyof CheckCliOptions, string]> = [
  ['runs', '--runs'],
  ['seed', '--seed'],
  ['profiles', '--profiles'],
  ['backends', '--backends'],
  ['threats', '--threats'],
  ['properties', '--properties'],
  ['shard', '--shard'],
  ['maxCommands', '--max-commands'],
  ['workers', '--workers'],
  ['out', '--out'],
  ['save', '--no-save'],
  ['attacks', '--no-attacks'],
  ['ipv6', '--no-ipv6'],
  ['verbose', '--verbose'],
  ['html', '--html'],
];

/** `--html DIR`: a directory (made when missing), never an existing file. */
function htmlDirOf(dir: string | undefined): string | undefined {
  if (dir === undefined) return undefined;
  if (dir === '') throw new UsageError('--html needs a directory to write index.html into');
  let st: fs.Stats | undefined;
  try {
    st = fs.statSync(dir);
  } catch {
    st = undefined;
  }
  if (st !== undefined && !st.isDirectory())
    throw new UsageError(
      `--html ${JSON.stringify(dir)}: exists and is not a directory; give a directory for index.html`,
    );
  return dir;
}

/**
 * Validate every option of `check` (and the replay file) before anything runs. `given(key)`
 * says whether the user typed the option (commander's option value source), so defaults are
 * not mistaken for choices. Throws UsageError.
 */
export async function planCheck(
  opts: CheckCliOptions,
  given: (key: keyof CheckCliOptions) => boolean = (k) => opts[k] !== undefined && opts[k] !== CHECK_OPTION_DEFAULTS[k],
): Promise<CheckRunPlan | CheckReplayPlan> {
  if (!CHECK_WORLDS.includes(opts.world as CheckWorldName))
    throw new UsageError(`--world ${JSON.stringify(opts.world)}: unknown world; accepted: ${CHECK_WORLDS.join(', ')}`);
  const world = opts.world as CheckWorldName;
  if (opts.mutant !== undefined && world !== 'sim') {
    throw new UsageError(
      `--mutant ${JSON.stringify(opts.mutant)} with --world ${world}: mutants run on the sim world only (only its agents have the plan hook); drop --world or --mutant`,
    );
  }
  const json = opts.json === true;
  if (opts.replay !== undefined) {
    const ignored = RUN_ONLY_OPTIONS.filter(([k]) => given(k)).map(([, flag]) => flag);
    if (ignored.length > 0) {
      throw new UsageError(
        `--replay ${opts.replay} with ${ignored.join(', ')}: a replay takes its cell, seed and settings from the file; accepted with --replay: --world sim|netns|containers, --mutant, --json`,
      );
    }
    if (world === 'kind')
      throw new UsageError(
        '--replay with --world kind: a counterexample replays from its seed in one world, and kind shares one cluster; use --world sim or netns',
      );
    let f: CounterexampleFile;
    try {
      f = loadCounterexample(opts.replay);
    } catch (e) {
      if (e instanceof CounterexampleFileError) throw new UsageError(`--replay ${e.message}`, { cause: e });
      throw e;
    }
    const names = acceptedNames();
    if (!names.properties.includes(f.property))
      throw new UsageError(
        `--replay ${opts.replay}: the counterexample names property ${JSON.stringify(f.property)}, which this build does not know; known: ${names.properties.join(', ')}`,
      );
    if (!names.threats.includes(f.threat))
      throw new UsageError(
        `--replay ${opts.replay}: the counterexample names threat ${JSON.stringify(f.threat)}, which this build does not know; known: ${names.threats.join(', ')}`,
      );
    const mutant = opts.mutant ?? f.mutant;
    if (mutant !== undefined)
      await checkMutant(
        mutant,
        [f.profile],
        f.settings.ipv6,
        opts.mutant !== undefined ? '--mutant' : `--replay ${opts.replay}: its mutant`,
        [f.settings.backend ?? 'iptables'],
      );
    return {
      kind: 'replay',
      file: opts.replay,
      counterexample: f,
      ...(world !== 'sim' || given('world') ? { world } : {}),
      ...(opts.mutant !== undefined ? { mutant: opts.mutant } : {}),
      json,
    };
  }
  const budget = checkBudget(world, opts);
  const names = acceptedNames();
  const properties =
    opts.properties !== undefined ? parseNameList('--properties', opts.properties, names.properties) : undefined;
  const backends = opts.backends !== undefined ? parseNameList('--backends', opts.backends, BACKENDS) : undefined;
  let shard: MatrixSelection['shard'];
  if (opts.shard !== undefined) {
    try {
      shard = parseShard(opts.shard);
    } catch (e) {
      throw new UsageError((e as Error).message, { cause: e });
    }
  }
  const selection: MatrixSelection = {
    ...(budget.profiles ? { profiles: budget.profiles } : {}),
    ...(budget.threats ? { threats: budget.threats } : {}),
    ...(properties ? { properties } : {}),
    ...(backends ? { backends } : {}),
    ...(shard ? { shard } : {}),
  };
  const cells = planCells(defaultCatalog(), selection);
  if (cells.length === 0) {
    throw new UsageError(
      `--shard ${opts.shard ?? ''}: the selection has ${planCells(defaultCatalog(), { ...selection, shard: undefined }).length} cells and this shard gets none; use fewer shards`,
    );
  }
  const seed = opts.seed !== undefined ? parseIntFlag('--seed', opts.seed, 0) : undefined;
  const workers = opts.workers !== undefined ? parseIntFlag('--workers', opts.workers, 0, 256) : undefined;
  const ipv6 = opts.ipv6;
  // budget.profiles holds only names parseNameList accepted, i.e. profiles.
  if (opts.mutant !== undefined)
    await checkMutant(
      opts.mutant,
      (budget.profiles as readonly Profile[] | undefined) ?? names.profiles,
      ipv6,
      '--mutant',
      backends ?? ['iptables'],
    );
  return {
    kind: 'run',
    world,
    ...(opts.mutant !== undefined ? { mutant: opts.mutant } : {}),
    runs: budget.runs,
    maxCommands: budget.maxCommands,
    ...(seed !== undefined ? { seed } : {}),
    selection,
    ...(workers !== undefined ? { workers } : {}),
    outDir: opts.save ? opts.out : undefined,
    attacks: opts.attacks,
    ipv6,
    json,
    verbose: opts.verbose === true,
    htmlDir: htmlDirOf(opts.html),
  };
}

/** A mutant must exist for every profile the run uses, or those cells would only report errors. */
async function checkMutant(
  name: string,
  profiles: readonly Profile[],
  ipv6: boolean,
  what: string,
  backends: readonly string[] = ['iptables'],
): Promise<void> {
  // Mutants are edits of the IR; upstream's nftables document is istio-cni's own words, not the IR's.
  if (profiles.includes('upstream') && backends.includes('nftables'))
    throw new UsageError(
      `${what} ${JSON.stringify(name)}: mutants reach upstream's nftables document only through its iptables form (the document is istio-cni's own words); use --profiles strict or --backends iptables`,
    );
  for (const profile of profiles) {
    const known = await mutantNames(profile, ipv6);
    if (!known.includes(name)) {
      throw new UsageError(
        `${what} ${JSON.stringify(name)}: no such mutant for profile ${profile}${ipv6 ? '' : ' (single-stack)'}; accepted: ${known.map((n) => JSON.stringify(n)).join(', ')}`,
      );
    }
  }
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
        process.stderr.write(
          `\r[${'#'.repeat(fill)}${'.'.repeat(width - fill)}] ${String(Math.floor(frac * 100)).padStart(3)}%  ${p.doneRuns}/${p.totalRuns} histories  ${p.doneTasks}/${p.totalTasks} tasks `,
        );
        return;
      }
      const decile = Math.floor(frac * 10);
      if (decile > lastDecile) {
        lastDecile = decile;
        process.stderr.write(
          `check: ${decile * 10}% (${p.doneRuns}/${p.totalRuns} histories, ${p.doneTasks}/${p.totalTasks} tasks)\n`,
        );
      }
    },
    done(): void {
      if (tty) process.stderr.write('\n');
    },
  };
}

/** The cells whose verdict is an expected bypass: found, or not evaluable here. */
const EXPECTED_BYPASS: ReadonlySet<CellStatus> = new Set<CellStatus>(['bypass found', 'not evaluated']);

/** Collapse a multi-line reason into one line. */
function oneLine(text: string): string {
  return text.replace(/\s+/g, ' ').trim();
}

/**
 * The text report. Each expected bypass gets its reason on one line; a counterexample is printed
 * whole (history, attempt, packet trace) only for a cell that differs from the expected table, or
 * for every cell with `verbose`; the others get one line with their replay command.
 */
export function renderReport(r: CheckReport, opts: { readonly verbose?: boolean } = {}): string {
  const lines: string[] = [];
  lines.push(
    `ambient-lab check — world ${r.world}${r.mutant ? ` (positive control: mutant ${r.mutant})` : ''}, seed ${r.seed}${r.shard ? `, shard ${r.shard.index}/${r.shard.count}` : ''}`,
  );
  lines.push(
    `${r.totals.histories} model-based histories (budget ${r.budget.runs}, ${r.budget.runsPerCell} per cell, <= ${r.budget.maxCommands} commands each)` +
      `${r.budget.attacks ? ` + ${r.totals.attackRuns} attack-catalog runs` : ''} over ${r.totals.cells} cells in ${r.totals.seconds.toFixed(1)} s` +
      ` (${r.totals.historiesPerSecond.toFixed(0)} histories/s, ${r.totals.cpuSeconds.toFixed(1)} s of CPU)`,
  );
  const w = r.totals.worlds;
  if (w.fresh + w.reused > 0) {
    lines.push(
      `worlds: ${w.fresh} fresh, ${w.reused} reused after a verified reset (${w.rejected} resets rejected by the digest); ${w.shrinking} shrinking runs (not counted as histories)`,
    );
  }
  lines.push('');
  lines.push(renderMatrix(r.cells));
  const notRun = r.cells.filter((c) => c.skipped !== undefined);
  if (notRun.length > 0) {
    lines.push('', `Cells this world could not stage (${notRun.length}; not run, shown as n/e, never as holding):`);
    for (const c of notRun) lines.push(`  ${cellName(c)}: ${c.skipped ?? ''}`);
  }
  if (r.worldGaps && r.worldGaps.length > 0) {
    lines.push('', `World features this run did not stage (${r.worldGaps.length}):`);
    for (const g of r.worldGaps) lines.push(`  ${g}`);
  }
  if (r.catalogSkipped.length > 0) {
    lines.push(
      '',
      `Attack-catalog phases this world could not stage (${r.catalogSkipped.length}; their cells were judged without them):`,
    );
    for (const s of r.catalogSkipped) lines.push(`  ${s}`);
  }
  const expectedBypasses = r.cells.filter((c) => EXPECTED_BYPASS.has(c.status));
  if (expectedBypasses.length > 0) {
    lines.push('', `Expected bypasses (${expectedBypasses.length}), why each is one (scenarios/expected/table.ts):`);
    for (const c of expectedBypasses) {
      const classes = c.expected?.classes?.length ? ` [${c.expected.classes.join(', ')}]` : '';
      const mark = c.status === 'not evaluated' ? ' (n/e here)' : '';
      lines.push(`  ${cellName(c)}${classes}${mark}: ${oneLine(c.expected?.why ?? '')}`);
    }
  }
  const bad = r.cells.filter((c) => FAILING.has(c.status));
  if (bad.length > 0) {
    lines.push('', `DIFFERS FROM THE EXPECTED TABLE (${bad.length} cells):`);
    for (const c of bad) {
      lines.push(
        `  ${cellName(c)}: ${c.status} — expected ${c.expected?.verdict ?? 'nothing (no table cell)'}${c.expected?.why ? ` (${c.expected.why})` : ''}`,
      );
      if (c.violation) lines.push(`    found: ${c.violation}${c.foundBy ? ` [by ${c.foundBy.join(' + ')}]` : ''}`);
      if (c.error) lines.push(`    error: ${c.error}`);
      if (c.counterexampleFile) lines.push(`    replay: ambient-lab check --replay ${c.counterexampleFile}`);
    }
  }
  const found = r.counterexamples;
  if (found.length > 0) {
    const cellOf = (f: CounterexampleFile): CellReport | undefined =>
      r.cells.find((c) => c.property === f.property && c.threat === f.threat && c.profile === f.profile);
    const whole = found.filter((f) => opts.verbose === true || FAILING.has(cellOf(f)?.status ?? 'error'));
    const brief = found.filter((f) => !whole.includes(f));
    if (whole.length > 0) {
      lines.push(
        '',
        `Counterexamples (${whole.length}, shrunk${opts.verbose === true ? '' : ', of the cells that differ'}):`,
      );
      for (const f of whole) {
        lines.push(renderCounterexample(f, cellOf(f)?.counterexampleFile));
        lines.push('');
      }
    }
    if (brief.length > 0) {
      lines.push('', `Counterexamples of expected bypasses (${brief.length}; --verbose prints them whole):`);
      for (const f of brief) {
        const file = cellOf(f)?.counterexampleFile;
        lines.push(
          `  ${counterexampleCell(f)}: ${oneLine(f.violation.message)}${file ? `  (ambient-lab check --replay ${file})` : ''}`,
        );
      }
      lines.push('');
    }
  }
  lines.push(
    r.ok
      ? 'OK: every cell matches the expected table (scenarios/expected/table.ts).'
      : `FAIL: ${r.totals.mismatches} cells differ from the expected table (scenarios/expected/table.ts).`,
  );
  return lines.join('\n');
}

/** Exit code of a check report: an ERROR cell outranks a difference (the run gave no answer there). */
export function checkExitCode(r: Pick<CheckReport, 'cells' | 'ok'>): number {
  if (r.cells.some((c) => c.status === 'error')) return EXIT_HARNESS;
  return r.ok ? EXIT_OK : EXIT_DIFFERS;
}

async function replay(p: CheckReplayPlan): Promise<number> {
  const f = p.counterexample;
  const out = await replayCounterexample(f, {
    modules: WORLD_MODULES,
    ...(p.world ? { world: p.world } : {}),
    ...(p.mutant !== undefined ? { mutant: p.mutant } : {}),
  });
  if (p.json) {
    process.stdout.write(JSON.stringify({ format: REPLAY_REPORT_FORMAT, file: p.file, ...out }, null, 2) + '\n');
  } else {
    if (out.replayed) process.stdout.write(renderCounterexample(out.replayed) + '\n\n');
    process.stdout.write(
      out.same
        ? `REPRODUCED: ${counterexampleCell(f)}: ${out.observed}\n`
        : out.error !== undefined
          ? `HARNESS ERROR: the replay of ${p.file} failed: ${out.error}\n`
          : `NOT REPRODUCED: expected "${out.original}", observed ${out.observed}\n`,
    );
  }
  return out.same ? EXIT_OK : out.error !== undefined ? EXIT_HARNESS : EXIT_DIFFERS;
}

export const REPLAY_REPORT_FORMAT = 'ambient-lab/replay@1';

export const checkCommand: CliCommand = {
  name: 'check',
  register(program: Command): void {
    program
      .command('check')
      .description(
        'search every property × threat × profile for a way around the node proxy (random cluster histories + the attack catalog), compare with the expected table; exit 1 when they differ',
      )
      .option(
        '--world <world>',
        'sim (in-process simulator), netns (real kernel, root), containers (nodes and components as Docker containers, root) or kind (a kind cluster, KIND=1 and Docker; one cluster per run, small default budget)',
        'sim',
      )
      .option(
        '--runs <n>',
        `model-based histories in total, spread over the cells (default ${DEFAULT_RUNS}; kind: ${KIND_DEFAULTS.runs})`,
      )
      .option('--seed <n>', 'seed of the whole run (default: random, printed)')
      .option('--profiles <list>', 'rule profiles, comma-separated (upstream,strict)')
      .option(
        '--backends <list>',
        "the agent's rules backends, comma-separated (iptables,nftables; default iptables, as upstream): each is a column per profile",
      )
      .option(
        '--threats <list>',
        `threat models, comma-separated (see docs/check.md; kind without a selection: ${KIND_DEFAULTS.threats.join(',')} × ${KIND_DEFAULTS.profiles.join(',')})`,
      )
      .option('--properties <list>', 'properties, comma-separated')
      .option('--shard <i/n>', 'run only the i-th of n slices of the matrix cells (CI machines)')
      .option(
        '--max-commands <n>',
        `longest history, in commands (default ${DEFAULT_MAX_COMMANDS}; kind: ${KIND_DEFAULTS.maxCommands})`,
      )
      .option('--workers <n>', 'worker threads (default: one per CPU)')
      .option('--out <dir>', 'where counterexample files are saved', DEFAULT_OUT)
      .option('--no-save', 'do not save counterexample files')
      .option('--no-attacks', 'skip the deterministic attack catalog (random histories only)')
      .option('--no-ipv6', 'single-stack worlds')
      .option('--replay <file>', 're-run a saved counterexample and check it reaches the same violation')
      .option(
        '--mutant <name>',
        'positive control: every agent applies this rule-builder mutant (sim only; names in docs/check.md)',
      )
      .option('--json', 'print the full report as JSON on stdout')
      .option('--verbose', 'print every counterexample whole (default: only those of cells that differ)')
      .option(
        '--html <dir>',
        'also write a self-contained HTML report, DIR/index.html: the matrix, reasons, counterexamples and their packet paths',
      )
      .addHelpText('after', `\n${EXIT_CODES_HELP}`)
      .action(async (opts: CheckCliOptions, cmd: Command) => {
        const plan = await planCheck(opts, (k) => cmd.getOptionValueSource(k) === 'cli');
        if (plan.kind === 'replay') {
          process.exitCode = await replay(plan);
          return;
        }
        // A world that cannot run says why once and stops (exit 3), instead of an ERROR in every cell.
        if (plan.world !== 'sim') {
          try {
            await loadFactory(worldChoice(plan.world));
          } catch (e) {
            throw new HarnessError((e as Error).message, { cause: e });
          }
        }
        const seed = plan.seed ?? Math.floor(Math.random() * 0x7fffffff);
        const progress = progressPrinter();
        const interrupt = interruptOnSignals();
        let report: CheckReport;
        try {
          report = await runCheck({
            world: worldChoice(plan.world, plan.mutant !== undefined ? { mutant: plan.mutant } : {}),
            settings: { nodes: DEFAULT_NODES, ipv6: plan.ipv6, dnsCapture: false, maxCommands: plan.maxCommands },
            runs: plan.runs,
            seed,
            selection: plan.selection,
            workers: plan.workers ?? availableParallelism(),
            outDir: plan.outDir,
            attacks: plan.attacks,
            onProgress: (p) => progress.update(p),
            signal: interrupt.signal,
          });
        } catch (e) {
          if (!(e instanceof CheckInterrupted)) throw e;
          progress.done();
          process.stderr.write(
            `check: ${e.message}; removed what its worlds left: ${e.reaped.length === 0 ? 'nothing' : `\n  ${e.reaped.join('\n  ')}`}\n`,
          );
          // Worker threads and world handles may still hold the event loop: end now, with the signal's code.
          process.exit(EXIT_INTERRUPTED[e.reason as 'SIGINT' | 'SIGTERM'] ?? EXIT_HARNESS);
        } finally {
          interrupt.dispose();
        }
        progress.done();
        process.stdout.write(
          plan.json ? JSON.stringify(report, null, 2) + '\n' : renderReport(report, { verbose: plan.verbose }) + '\n',
        );
        if (plan.htmlDir !== undefined) {
          const file = writeCheckHtml(plan.htmlDir, report);
          process.stderr.write(`check: HTML report: ${file}\n`);
        }
        process.exitCode = checkExitCode(report);
      });
  },
};

/**
 * SIGINT or SIGTERM aborts the run (its worlds are reaped before the process ends: runCheck); a
 * second signal ends the process at once, saying what may be left.
 */
function interruptOnSignals(): { readonly signal: AbortSignal; dispose(): void } {
  const ac = new AbortController();
  const on = (sig: NodeJS.Signals): void => {
    if (ac.signal.aborted) {
      process.stderr.write(
        `check: ${sig} again: exiting without waiting; namespaces or containers named al-* may be left (ip netns list, docker ps -a)\n`,
      );
      process.exit(EXIT_INTERRUPTED[sig as 'SIGINT' | 'SIGTERM']);
    }
    process.stderr.write(`check: ${sig}: stopping the worlds and removing what they made (again to exit at once)\n`);
    ac.abort(sig);
  };
  process.on('SIGINT', on);
  process.on('SIGTERM', on);
  return {
    signal: ac.signal,
    dispose: () => {
      process.off('SIGINT', on);
      process.off('SIGTERM', on);
    },
  };
}
