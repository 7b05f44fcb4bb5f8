/**
 * `npm run check:soak -- --seeds N` (or `--seed-list a,b,c`): the default `ambient-lab check`,
 * run once per seed, one seed after another, each as its own process exactly as a user runs it
 * (`ambient-lab check --seed S --json`). A verdict that flips with the seed is worth nothing, so
 * the soak prints every cell of every seed that differs from the expected table, with the
 * command that re-runs just that cell and the saved counterexample's `--replay` path, then one
 * summary line. Exit codes follow the CLI contract (cli/errors.ts): 0 every seed matched, 1 some
 * seed differed, 2 usage error (nothing ran), 3 a harness error (an ERROR cell, a check that
 * crashed or printed no report).
 */
import { spawn } from 'node:child_process';
import { randomInt } from 'node:crypto';
import { existsSync } from 'node:fs';
import * as path from 'node:path';
import { fileURLToPath } from 'node:url';
import { Command, CommanderError } from 'commander';
import { EXIT_DIFFERS, EXIT_HARNESS, EXIT_OK, EXIT_USAGE, UsageError, parseIntFlag } from './errors.js';
import { planCheck, type CheckCliOptions } from './commands/check.js';
import type { CheckReport, CellReport } from '../scenarios/model/check.js';
import { CHECK_REPORT_FORMAT } from '../scenarios/model/check.js';
import { cellName } from '../scenarios/model/matrix.js';
import { FAILING } from '../scenarios/model/matrix.js';
import { DEFAULT_OUT } from '../scenarios/model/defaults.js';

export interface SoakOptions {
  /** The seeds, in the order they run. */
  readonly seeds: readonly number[];
  /** Whether the seeds were drawn at random (--seeds) or given (--seed-list). */
  readonly random: boolean;
  /** `check` options passed through unchanged to every run (budget, selection, world). */
  readonly checkArgs: readonly string[];
  /** The subset of checkArgs a single cell's re-run needs besides its cell and budget. */
  readonly replayArgs: readonly string[];
}

/** The `check` options the soak passes through: [commander flags, key, takes a value]. */
const PASS_THROUGH: ReadonlyArray<readonly [string, keyof CheckCliOptions, string]> = [
  ['--runs <n>', 'runs', "total model-based histories per seed (default: the default check's budget)"],
  ['--max-commands <n>', 'maxCommands', 'longest history, in commands'],
  ['--workers <n>', 'workers', 'worker threads of each check (default: one per CPU)'],
  ['--threats <list>', 'threats', 'threat models, comma-separated (default: all)'],
  ['--profiles <list>', 'profiles', 'rule profiles, comma-separated (default: both)'],
  ['--backends <list>', 'backends', "the agent's rules backends, comma-separated (default: iptables)"],
  ['--properties <list>', 'properties', 'properties, comma-separated (default: all)'],
  ['--world <world>', 'world', 'sim (default), netns or kind'],
  ['--mutant <name>', 'mutant', 'positive control: every agent applies this rule-builder mutant (sim only)'],
  ['--out <dir>', 'out', `where counterexample files are saved (default ${DEFAULT_OUT})`],
];
/** Passed-through switches: [flag, key]. */
const SWITCHES: ReadonlyArray<readonly [string, keyof CheckCliOptions]> = [
  ['--no-attacks', 'attacks'],
  ['--no-ipv6', 'ipv6'],
];
/** What a single cell's re-run must repeat (the selection and --runs are the cell's own). */
const REPLAY_KEYS: ReadonlySet<keyof CheckCliOptions> = new Set([
  'maxCommands',
  'world',
  'mutant',
  'attacks',
  'ipv6',
  'out',
]);

function longFlag(flags: string): string {
  return flags.split(' ')[0]!;
}

function soakProgram(writeErr: (text: string) => void): Command {
  const p = new Command('check:soak')
    .configureOutput({ writeErr })
    .description(
      'run the default `ambient-lab check` once per seed, one after another, and print every cell that differs from the expected table with its replay command',
    )
    .option('--seeds <n>', 'this many random seeds (each printed before it runs)')
    .option('--seed-list <a,b,c>', 're-run these seeds')
    .exitOverride()
    .showHelpAfterError('(run with --help for usage)')
    .allowExcessArguments(false)
    .addHelpText(
      'after',
      '\nExit codes: 0 every seed matched the expected table, 1 a seed differed, 2 usage error (nothing ran), 3 harness error (an ERROR cell, a check that crashed).',
    );
  for (const [flags, , help] of PASS_THROUGH) p.option(flags, help);
  p.option('--no-attacks', 'skip the attack catalog');
  p.option('--no-ipv6', 'single-stack worlds');
  return p;
}

/**
 * Parse and validate the soak's arguments; the passed-through `check` options are validated by
 * the check's own planCheck, so a bad --threats stops the soak before its first seed. Throws
 * UsageError (or CommanderError for an unknown flag).
 */
export async function parseSoakArgs(
  argv: readonly string[],
  draw: () => number = () => randomInt(0, 0x7fffffff),
  writeErr: (text: string) => void = (t) => process.stderr.write(t),
): Promise<SoakOptions> {
  const p = soakProgram(writeErr);
  p.parse([...argv], { from: 'user' });
  const o = p.opts<Record<string, string | boolean | undefined>>();
  const given = (k: string): boolean => p.getOptionValueSource(k) === 'cli';
  if (given('seeds') === given('seedList')) {
    throw new UsageError(
      `${given('seeds') ? '--seeds with --seed-list' : 'no seeds'}: give exactly one of --seeds N (random seeds) or --seed-list a,b,c (these seeds)`,
    );
  }
  let seeds: number[];
  if (given('seeds')) {
    const n = parseIntFlag('--seeds', String(o['seeds']), 1, 10_000);
    const drawn = new Set<number>();
    // Distinct seeds: a repeated seed would only repeat a run.
    while (drawn.size < n) drawn.add(draw());
    seeds = [...drawn];
  } else {
    const text = String(o['seedList']);
    const parts = text.split(',').map((s) => s.trim());
    seeds = parts.map((s) => {
      try {
        return parseIntFlag('--seed-list', s, 0);
      } catch {
        throw new UsageError(
          `--seed-list ${JSON.stringify(text)}: ${JSON.stringify(s)} is not a seed; accepted: decimal integers >= 0, comma-separated`,
        );
      }
    });
  }
  const checkArgs: string[] = [];
  const replayArgs: string[] = [];
  const checkOpts: Record<string, unknown> = { world: 'sim', out: DEFAULT_OUT, save: true, attacks: true, ipv6: true };
  const givenKeys = new Set<keyof CheckCliOptions>();
  for (const [flags, key] of PASS_THROUGH) {
    if (!given(key)) continue;
    const v = String(o[key]);
    checkArgs.push(longFlag(flags), v);
    if (REPLAY_KEYS.has(key)) replayArgs.push(longFlag(flags), v);
    checkOpts[key] = v;
    givenKeys.add(key);
  }
  for (const [flag, key] of SWITCHES) {
    if (!given(key)) continue;
    checkArgs.push(flag);
    replayArgs.push(flag);
    checkOpts[key] = false;
    givenKeys.add(key);
  }
  // The same validation as `check` itself, before the first seed runs.
  await planCheck(checkOpts as unknown as CheckCliOptions, (k) => givenKeys.has(k));
  return { seeds, random: given('seeds'), checkArgs, replayArgs };
}

/** What one `check` process gave back. */
export interface CheckProcessResult {
  /** Exit code; null when a signal ended it. */
  readonly code: number | null;
  readonly stdout: string;
}

type CheckRunner = (args: readonly string[]) => Promise<CheckProcessResult>;

/** bin/ambient-lab.js: two levels above this module in dist/cli/, one above it in cli/ (tests run the sources). */
const BIN = ((): string => {
  const here = path.dirname(fileURLToPath(import.meta.url));
  const candidates = [
    path.resolve(here, '..', '..', 'bin', 'ambient-lab.js'),
    path.resolve(here, '..', 'bin', 'ambient-lab.js'),
  ];
  return candidates.find((c) => existsSync(c)) ?? candidates[0]!;
})();

/** Runs `ambient-lab check ARGS` as its own process; its progress goes to this process's stderr. */
export const runCheckProcess: CheckRunner = (args) =>
  new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [BIN, 'check', ...args], { stdio: ['ignore', 'pipe', 'inherit'] });
    let stdout = '';
    child.stdout.setEncoding('utf8');
    child.stdout.on('data', (d: string) => (stdout += d));
    child.on('error', (e) => reject(new Error(`could not start ${BIN} check: ${e.message}`, { cause: e })));
    child.on('close', (code) => resolve({ code, stdout }));
  });

/** One differing cell of one seed, with how to re-run it. */
interface SoakFinding {
  readonly seed: number;
  readonly cell: CellReport;
  /** Re-runs just this cell with the seed's per-cell budget. */
  readonly rerun: string;
  /** `ambient-lab check --replay FILE` for the saved counterexample, when one was saved. */
  readonly replay?: string;
}

interface SoakResult {
  readonly exitCode: number;
  readonly findings: readonly SoakFinding[];
  /** Seeds whose check differed from the table (exit 1, no ERROR cell). */
  readonly differed: readonly number[];
  /** Seeds whose check gave no trustworthy answer, with why. */
  readonly harnessErrors: ReadonlyArray<{ readonly seed: number; readonly why: string }>;
}

/** The command that re-runs one cell of a seed: same cell seed, same per-cell budget. */
export function rerunCommand(
  seed: number,
  cell: Pick<CellReport, 'property' | 'threat' | 'profile' | 'backend'>,
  runsPerCell: number,
  replayArgs: readonly string[],
): string {
  return shellWords([
    'ambient-lab',
    'check',
    '--seed',
    String(seed),
    '--properties',
    cell.property,
    '--threats',
    cell.threat,
    '--profiles',
    cell.profile,
    // a report without a backend (written before the axis) is iptables
    ...(cell.backend === 'nftables' ? ['--backends', cell.backend] : []),
    '--runs',
    String(runsPerCell),
    ...replayArgs,
  ]);
}

/** Words as a POSIX shell reads them back (single-quoted when they hold anything but safe characters). */
export function shellWords(words: readonly string[]): string {
  return words.map((s) => (/^[A-Za-z0-9_./:=,@-]+$/.test(s) ? s : `'${s.replace(/'/g, `'\\''`)}'`)).join(' ');
}

function parseReport(stdout: string): CheckReport | undefined {
  try {
    const r = JSON.parse(stdout) as Partial<CheckReport>;
    return r.format === CHECK_REPORT_FORMAT && Array.isArray(r.cells) ? (r as CheckReport) : undefined;
  } catch {
    return undefined;
  }
}

/** Run the soak: one check per seed, in order; `print` gets the report lines as they happen. */
export async function runSoak(o: SoakOptions, runner: CheckRunner, print: (line: string) => void): Promise<SoakResult> {
  const t0 = performance.now();
  const findings: SoakFinding[] = [];
  const differed: number[] = [];
  const harnessErrors: { seed: number; why: string }[] = [];
  print(
    `soak: ${o.seeds.length} ${o.random ? 'random ' : ''}seed(s), one check each${o.checkArgs.length ? ` with ${shellWords(o.checkArgs)}` : ' (the default check)'}`,
  );
  for (const [i, seed] of o.seeds.entries()) {
    const args = ['--seed', String(seed), '--json', ...o.checkArgs];
    print(
      `soak: seed ${seed} (${i + 1}/${o.seeds.length}): ambient-lab check ${shellWords(args.filter((a) => a !== '--json'))}`,
    );
    const r = await runner(args);
    const report = parseReport(r.stdout);
    if (!report) {
      const why = `check ${r.code === null ? 'was killed by a signal' : `exited ${r.code}`} without a report on stdout`;
      harnessErrors.push({ seed, why });
      print(
        `soak: seed ${seed}: HARNESS ERROR: ${why} (re-run: ${shellWords(['ambient-lab', 'check', '--seed', String(seed), ...o.checkArgs])})`,
      );
      continue;
    }
    const bad = report.cells.filter((c) => FAILING.has(c.status));
    const errors = bad.filter((c) => c.status === 'error');
    for (const cell of bad) {
      const f: SoakFinding = {
        seed,
        cell,
        rerun: rerunCommand(seed, cell, report.budget.runsPerCell, o.replayArgs),
        ...(cell.counterexampleFile ? { replay: `ambient-lab check --replay ${cell.counterexampleFile}` } : {}),
      };
      findings.push(f);
    }
    if (errors.length > 0 || r.code === EXIT_HARNESS)
      harnessErrors.push({ seed, why: `${errors.length} ERROR cell(s)` });
    else if (bad.length > 0 || r.code !== EXIT_OK) differed.push(seed);
    const head = `${report.totals.histories} histories over ${report.totals.cells} cells, ${report.totals.cpuSeconds.toFixed(0)} s of CPU`;
    if (bad.length === 0 && r.code === EXIT_OK) {
      print(`soak: seed ${seed}: matches the expected table (${head})`);
      continue;
    }
    print(
      `soak: seed ${seed}: ${bad.length} cell(s) differ from the expected table (${head}; check exited ${r.code ?? 'by a signal'})`,
    );
    for (const f of findings.filter((x) => x.seed === seed)) {
      const c = f.cell;
      print(`  ${cellName(c)}: ${c.status} — expected ${c.expected?.verdict ?? 'nothing (no table cell)'}`);
      if (c.violation) print(`    found: ${c.violation}${c.foundBy ? ` [by ${c.foundBy.join(' + ')}]` : ''}`);
      if (c.error) print(`    error: ${c.error}`);
      print(`    re-run: ${f.rerun}`);
      if (f.replay) print(`    replay: ${f.replay}`);
    }
  }
  const exitCode = harnessErrors.length > 0 ? EXIT_HARNESS : differed.length > 0 ? EXIT_DIFFERS : EXIT_OK;
  const seconds = (performance.now() - t0) / 1000;
  const matched = o.seeds.length - differed.length - harnessErrors.length;
  print(
    `soak: ${exitCode === EXIT_OK ? 'PASS' : 'FAIL'}: ${o.seeds.length} seed(s) in ${seconds.toFixed(0)} s: ${matched} matched, ${differed.length} differed` +
      `${differed.length ? ` (${differed.join(', ')})` : ''}, ${harnessErrors.length} harness error(s)${harnessErrors.length ? ` (${harnessErrors.map((h) => h.seed).join(', ')})` : ''}; ${findings.length} differing cell(s)`,
  );
  return { exitCode, findings, differed, harnessErrors };
}

/** The soak as a program: parse, run, exit code. */
export async function soakMain(
  argv: readonly string[],
  runner: CheckRunner = runCheckProcess,
  print: (line: string) => void = (l) => process.stdout.write(`${l}\n`),
): Promise<number> {
  let o: SoakOptions;
  try {
    o = await parseSoakArgs(argv);
  } catch (e) {
    if (e instanceof CommanderError) return e.exitCode === 0 ? EXIT_OK : EXIT_USAGE;
    if (e instanceof UsageError) {
      process.stderr.write(`check:soak: ${e.message}\n`);
      return EXIT_USAGE;
    }
    throw e;
  }
  return (await runSoak(o, runner, print)).exitCode;
}
