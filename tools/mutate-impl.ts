/**
 * `npm run mutate:impl`: does `check` alone catch each implementation mutant?
 *
 * For the unmutated tree and then each mutant of scenarios/mutation/impl-mutants.ts (one at a
 * time), it makes a private copy of dist/ with the mutant applied and runs
 * `node <copy>/dist/cli/main.js check --json --no-save --runs R --seed S` there. A mutant is
 * killed when some cell fails the check (unexpected bypass, expected bypass not found, error)
 * that does not fail on the unmutated tree with the same seed; the cells are its report.
 *
 *   npm run mutate:impl -- [--runs 1200] [--seed 1] [--mutants a,b] [--workers N] [--json FILE] [--check-args "..."]
 *
 * Exit 0 when every mutant was killed, 1 when one survived, 2 on a usage error, 3 when a run
 * failed (the check crashed or printed no report). Not part of `npm test`: it takes minutes.
 */
import { spawn } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import { dirname, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { IMPL_MUTANTS, prepareMutantTree, type ImplMutant } from '../scenarios/mutation/impl-mutants.js';

interface Args {
  runs: number;
  seed: number;
  mutants: readonly ImplMutant[];
  workers: number | undefined;
  json: string | undefined;
  checkArgs: readonly string[];
}

interface CellLine {
  readonly property: string;
  readonly threat: string;
  readonly profile: string;
  readonly status: string;
  readonly violation?: string;
  readonly error?: string;
}

interface MutantResult {
  readonly mutant: string;
  readonly area: string;
  readonly doc: string;
  readonly verdict: 'killed' | 'survived' | 'run failed';
  /** "property × threat × profile: status" of every cell that caught it. */
  readonly cells: readonly string[];
  readonly detail?: string;
  readonly seconds: number;
}

const FAILING = new Set(['unexpected bypass', 'bypass not found', 'no expectation', 'error']);

function usage(msg: string): never {
  process.stderr.write(
    `mutate:impl: ${msg}\nusage: npm run mutate:impl -- [--runs N] [--seed N] [--mutants a,b] [--workers N] [--json FILE] [--check-args "..."]\nmutants: ${IMPL_MUTANTS.map((m) => m.name).join(', ')}\n`,
  );
  process.exit(2);
}

function parseArgs(argv: readonly string[]): Args {
  const a: Args = { runs: 1200, seed: 1, mutants: IMPL_MUTANTS, workers: undefined, json: undefined, checkArgs: [] };
  for (let i = 0; i < argv.length; i++) {
    const flag = argv[i];
    const val = argv[i + 1];
    const num = (): number => {
      const n = Number(val);
      if (val === undefined || !Number.isInteger(n) || n < 0)
        usage(`${flag} needs a non-negative integer, got ${JSON.stringify(val)}`);
      i++;
      return n;
    };
    switch (flag) {
      case '--runs':
        a.runs = num();
        break;
      case '--seed':
        a.seed = num();
        break;
      case '--workers':
        a.workers = num();
        break;
      case '--json':
        if (val === undefined) usage('--json needs a file');
        a.json = val;
        i++;
        break;
      case '--check-args':
        if (val === undefined) usage('--check-args needs a string');
        a.checkArgs = val.split(/\s+/).filter(Boolean);
        i++;
        break;
      case '--mutants': {
        if (val === undefined) usage('--mutants needs a comma-separated list');
        const names = val.split(',').filter(Boolean);
        const unknown = names.filter((n) => !IMPL_MUTANTS.some((m) => m.name === n));
        if (unknown.length > 0) usage(`unknown mutant(s): ${unknown.join(', ')}`);
        a.mutants = IMPL_MUTANTS.filter((m) => names.includes(m.name));
        i++;
        break;
      }
      default:
        usage(`unknown argument ${JSON.stringify(flag)}`);
    }
  }
  return a;
}

/** Run check in a tree; the cells it reports (throws with the reason when there is no report). */
function runCheck(cli: string, cwd: string, args: Args): Promise<CellLine[]> {
  const argv = [
    cli,
    'check',
    '--json',
    '--no-save',
    '--runs',
    String(args.runs),
    '--seed',
    String(args.seed),
    ...(args.workers !== undefined ? ['--workers', String(args.workers)] : []),
    ...args.checkArgs,
  ];
  return new Promise((resolvePromise, reject) => {
    const child = spawn(process.execPath, argv, { cwd, stdio: ['ignore', 'pipe', 'pipe'] });
    const out: Buffer[] = [];
    const err: Buffer[] = [];
    child.stdout.on('data', (b: Buffer) => out.push(b));
    child.stderr.on('data', (b: Buffer) => err.push(b));
    child.on('error', reject);
    child.on('close', (code) => {
      const text = Buffer.concat(out).toString('utf8');
      try {
        const report = JSON.parse(text) as { cells?: CellLine[] };
        if (!Array.isArray(report.cells)) throw new Error('the report has no cells');
        resolvePromise(report.cells);
      } catch (e) {
        const tail = Buffer.concat(err).toString('utf8').split('\n').slice(-8).join('\n');
        reject(
          new Error(
            `check in ${cwd} exited ${code} without a JSON report (${(e as Error).message}); its stderr ended:\n${tail}`,
          ),
        );
      }
    });
  });
}

const cellName = (c: CellLine): string => `${c.property} × ${c.threat} × ${c.profile}`;

async function main(): Promise<void> {
  const args = parseArgs(process.argv.slice(2));
  const repoRoot = resolve(dirname(fileURLToPath(import.meta.url)), '..', '..');
  const say = (s: string): void => {
    process.stderr.write(`${s}\n`);
  };
  say(
    `mutate:impl: ${args.mutants.length} mutant(s), check --runs ${args.runs} --seed ${args.seed}${args.checkArgs.length ? ` ${args.checkArgs.join(' ')}` : ''}`,
  );
  const base = prepareMutantTree(repoRoot, undefined);
  let baseline: CellLine[];
  try {
    baseline = await runCheck(base.cli, base.root, args);
  } finally {
    base.remove();
  }
  const baseFailing = new Set(baseline.filter((c) => FAILING.has(c.status)).map(cellName));
  if (baseFailing.size > 0)
    say(
      `baseline (unmutated) already fails ${baseFailing.size} cell(s), not counted for any mutant: ${[...baseFailing].join('; ')}`,
    );
  const results: MutantResult[] = [];
  let runFailed = false;
  for (const m of args.mutants) {
    const started = process.hrtime.bigint();
    const tree = prepareMutantTree(repoRoot, m);
    let r: MutantResult;
    try {
      const cells = await runCheck(tree.cli, tree.root, args);
      const caught = cells.filter((c) => FAILING.has(c.status) && !baseFailing.has(cellName(c)));
      r = {
        mutant: m.name,
        area: m.area,
        doc: m.doc,
        verdict: caught.length > 0 ? 'killed' : 'survived',
        cells: caught.map(
          (c) =>
            `${cellName(c)}: ${c.status}${c.violation ? ` — ${c.violation}` : c.error ? ` — ${c.error.split('\n')[0]}` : ''}`,
        ),
        seconds: Number(process.hrtime.bigint() - started) / 1e9,
      };
    } catch (e) {
      runFailed = true;
      r = {
        mutant: m.name,
        area: m.area,
        doc: m.doc,
        verdict: 'run failed',
        cells: [],
        detail: (e as Error).message,
        seconds: Number(process.hrtime.bigint() - started) / 1e9,
      };
    } finally {
      tree.remove();
    }
    results.push(r);
    say(
      `${r.verdict.padEnd(9)} ${m.name} (${r.seconds.toFixed(0)} s)${r.cells.length ? `: ${r.cells.length} cell(s), e.g. ${r.cells[0]}` : r.detail ? `: ${r.detail}` : ''}`,
    );
  }
  const killed = results.filter((r) => r.verdict === 'killed').length;
  const lines = [
    `mutate:impl — check --runs ${args.runs} --seed ${args.seed}: ${killed} of ${results.length} mutants killed`,
    '',
  ];
  for (const r of results) {
    lines.push(`${r.verdict.toUpperCase()}  ${r.mutant}  (${r.area}: ${r.doc})`);
    for (const c of r.cells) lines.push(`    ${c}`);
    if (r.detail) lines.push(`    ${r.detail}`);
  }
  process.stdout.write(`${lines.join('\n')}\n`);
  if (args.json)
    writeFileSync(
      args.json,
      JSON.stringify({ runs: args.runs, seed: args.seed, baselineFailing: [...baseFailing], results }, null, 2) + '\n',
    );
  process.exit(runFailed ? 3 : killed === results.length ? 0 : 1);
}

if (process.argv[1] && resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  main().catch((e: unknown) => {
    process.stderr.write(`mutate:impl: ${(e as Error).stack ?? String(e)}\n`);
    process.exit(3);
  });
}
