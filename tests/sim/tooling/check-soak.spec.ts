/**
 * `npm run check:soak` (cli/soak.ts): argument handling, the report and exit code over faked
 * check runs (matching, differing, ERROR, crashed), and the real thing on a tiny budget — a
 * matching soak, and a positive control (a broken rule set) whose printed re-run command and
 * replay path reproduce the difference.
 */
import { test, expect } from '@playwright/test';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { CommanderError } from 'commander';
import { REPO, runCli, runScript, type CliRun } from '../../cli-run.js';
import {
  parseSoakArgs,
  rerunCommand,
  runSoak,
  shellWords,
  type CheckProcessResult,
  type SoakOptions,
} from '../../../cli/soak.js';
import { UsageError } from '../../../cli/errors.js';
import type { CellReport, CheckReport } from '../../../scenarios/model/check.js';

async function usage(argv: readonly string[]): Promise<string> {
  try {
    // Commander's own message is in the error; keep the test log clean.
    await parseSoakArgs(argv, undefined, () => undefined);
  } catch (e) {
    if (e instanceof UsageError) return e.message;
    if (e instanceof CommanderError) return e.message;
    throw e;
  }
  throw new Error(`accepted ${argv.join(' ')}`);
}

test('soak arguments: exactly one seed source, seeds validated, check options passed through and validated as check does', async () => {
  let next = 0;
  const draws = [7, 7, 9, 11];
  const o = await parseSoakArgs(
    [
      '--seeds',
      '3',
      '--runs',
      '20',
      '--threats',
      'outside',
      '--no-attacks',
      '--mutant',
      'ipv4 remove nat/out/redirect-outbound',
      '--profiles',
      'strict',
    ],
    () => draws[next++]!,
  );
  expect(o.seeds, 'distinct seeds: the repeated draw is skipped').toEqual([7, 9, 11]);
  expect(o.random).toBe(true);
  expect(o.checkArgs).toEqual([
    '--runs',
    '20',
    '--threats',
    'outside',
    '--profiles',
    'strict',
    '--mutant',
    'ipv4 remove nat/out/redirect-outbound',
    '--no-attacks',
  ]);
  // A cell's re-run repeats the settings, not the selection or the total budget (it gets its own).
  expect(o.replayArgs).toEqual(['--mutant', 'ipv4 remove nat/out/redirect-outbound', '--no-attacks']);
  expect(await parseSoakArgs(['--seed-list', '3, 0,2032192008'])).toMatchObject({
    seeds: [3, 0, 2032192008],
    random: false,
    checkArgs: [],
  });

  expect(await usage([])).toMatch(/^no seeds: give exactly one of --seeds N .* or --seed-list a,b,c/);
  expect(await usage(['--seeds', '2', '--seed-list', '1'])).toMatch(/^--seeds with --seed-list: give exactly one/);
  expect(await usage(['--seeds', '0'])).toBe('--seeds "0": expected a decimal integer in 1..10000');
  expect(await usage(['--seed-list', '1,,2'])).toBe(
    '--seed-list "1,,2": "" is not a seed; accepted: decimal integers >= 0, comma-separated',
  );
  expect(await usage(['--seed-list', '1,-2'])).toMatch(/"-2" is not a seed/);
  expect(await usage(['--seeds', '1', '--threats', 'app-martian'])).toMatch(
    /^--threats "app-martian": unknown "app-martian"; accepted: app-nonroot/,
  );
  expect(await usage(['--seeds', '1', '--runs', 'many'])).toBe('--runs "many": expected a decimal integer >= 1');
  // Options that would change what a seed means are the soak's own business, not passed through.
  for (const flag of ['--seed', '--shard', '--json', '--replay'])
    expect(await usage(['--seeds', '1', flag, '1'])).toContain(`unknown option '${flag}'`);
});

const cell = (c: Partial<CellReport> & Pick<CellReport, 'property' | 'threat' | 'profile' | 'status'>): CellReport =>
  ({
    observed: c.status === 'error' ? 'error' : c.status === 'unexpected bypass' ? 'bypass' : 'holds',
    runs: 3,
    expected: { verdict: 'holds', why: 'w' },
    ...c,
  }) as CellReport;

function report(seed: number, cells: CellReport[]): CheckReport {
  const mismatches = cells.filter((c) => c.status !== 'holds').length;
  return {
    format: 'ambient-lab/check@1',
    world: 'sim',
    seed,
    budget: { runs: 240, runsPerCell: 2, maxCommands: 12, attacks: true },
    settings: { nodes: 2, ipv6: true, dnsCapture: false, maxCommands: 12 },
    cells,
    counterexamples: [],
    catalogSkipped: [],
    totals: {
      cells: cells.length,
      histories: 6,
      attackRuns: 0,
      seconds: 1,
      historiesPerSecond: 6,
      mismatches,
      cpuSeconds: 1,
      worlds: { fresh: 1, reused: 0, rejected: 0, shrinking: 0 },
    },
    ok: mismatches === 0,
  } as CheckReport;
}

test('the soak report: every differing cell with its re-run and replay commands, a summary, and the exit code', async () => {
  const holds = cell({ property: 'liveness', threat: 'outside', profile: 'strict', status: 'holds' });
  const bypass = cell({
    property: 'convergence',
    threat: 'outside',
    profile: 'strict',
    status: 'unexpected bypass',
    violation: 'ambient-a/p0 should be enrolled',
    foundBy: ['model'],
    counterexampleFile: '.ambient-lab/counterexamples/convergence--outside--strict--99.json',
  });
  const error = cell({
    property: 'authorization',
    threat: 'host-root',
    profile: 'upstream',
    status: 'error',
    error: 'world crashed (seed 4)',
  });
  const byseed: Record<number, CheckProcessResult> = {
    1: { code: 0, stdout: JSON.stringify(report(1, [holds])) },
    2: { code: 1, stdout: JSON.stringify(report(2, [holds, bypass])) },
    3: { code: 3, stdout: JSON.stringify(report(3, [error])) },
    4: { code: null, stdout: '{"format": "ambient-lab/ch' },
  };
  const ran: string[][] = [];
  const run = async (seeds: number[]): Promise<{ lines: string[]; exitCode: number }> => {
    const lines: string[] = [];
    const o: SoakOptions = {
      seeds,
      random: false,
      checkArgs: ['--runs', '240', '--mutant', 'a b'],
      replayArgs: ['--mutant', 'a b'],
    };
    const r = await runSoak(
      o,
      async (args) => {
        ran.push([...args]);
        // Each seed is announced before its check starts.
        expect(lines.at(-1)).toMatch(
          new RegExp(
            `^soak: seed ${args[1]} \\(\\d+/${seeds.length}\\): ambient-lab check --seed ${args[1]} --runs 240 --mutant 'a b'$`,
          ),
        );
        return byseed[Number(args[1])]!;
      },
      (l) => lines.push(l),
    );
    return { lines, exitCode: r.exitCode };
  };

  const pass = await run([1]);
  expect(pass.exitCode).toBe(0);
  expect(pass.lines.at(-1)).toMatch(
    /^soak: PASS: 1 seed\(s\) in \d+ s: 1 matched, 0 differed, 0 harness error\(s\); 0 differing cell\(s\)$/,
  );
  expect(ran[0]).toEqual(['--seed', '1', '--json', '--runs', '240', '--mutant', 'a b']);

  const differs = await run([1, 2]);
  expect(differs.exitCode).toBe(1);
  const text = differs.lines.join('\n');
  expect(text).toContain('soak: seed 2: 1 cell(s) differ from the expected table');
  expect(text).toContain(
    '  convergence × outside × strict: unexpected bypass — expected holds\n    found: ambient-a/p0 should be enrolled [by model]',
  );
  expect(text).toContain(
    "    re-run: ambient-lab check --seed 2 --properties convergence --threats outside --profiles strict --runs 2 --mutant 'a b'",
  );
  expect(text).toContain(
    '    replay: ambient-lab check --replay .ambient-lab/counterexamples/convergence--outside--strict--99.json',
  );
  expect(text).not.toContain('liveness × outside');
  expect(differs.lines.at(-1)).toMatch(
    /^soak: FAIL: 2 seed\(s\) in \d+ s: 1 matched, 1 differed \(2\), 0 harness error\(s\); 1 differing cell\(s\)$/,
  );

  const broken = await run([2, 3, 4, 1]);
  expect(broken.exitCode, 'a harness error outranks a difference').toBe(3);
  const all = broken.lines.join('\n');
  expect(all).toContain(
    '  authorization × host-root × upstream: error — expected holds\n    error: world crashed (seed 4)\n    re-run: ambient-lab check --seed 3 --properties authorization',
  );
  expect(all).toContain(
    "soak: seed 4: HARNESS ERROR: check was killed by a signal without a report on stdout (re-run: ambient-lab check --seed 4 --runs 240 --mutant 'a b')",
  );
  expect(broken.lines.at(-1)).toMatch(
    /^soak: FAIL: 4 seed\(s\) in \d+ s: 1 matched, 1 differed \(2\), 2 harness error\(s\) \(3, 4\); 2 differing cell\(s\)$/,
  );
});

test('re-run commands survive the shell', () => {
  expect(shellWords(['a', "it's", 'x y', '--flag=1,2'])).toBe(`a 'it'\\''s' 'x y' --flag=1,2`);
  expect(
    rerunCommand(
      9,
      { property: 'liveness', threat: 'app-net-raw-6.1', profile: 'strict', backend: 'iptables' },
      110,
      [],
    ),
  ).toBe('ambient-lab check --seed 9 --properties liveness --threats app-net-raw-6.1 --profiles strict --runs 110');
  // a cell of the nftables backend re-runs on it
  expect(
    rerunCommand(9, { property: 'liveness', threat: 'host-root', profile: 'upstream', backend: 'nftables' }, 3, []),
  ).toBe(
    'ambient-lab check --seed 9 --properties liveness --threats host-root --profiles upstream --backends nftables --runs 3',
  );
});

function soak(args: readonly string[]): Promise<CliRun> {
  return runScript(path.join(REPO, 'dist', 'cli', 'soak-main.js'), args);
}

/** Split a printed command back into arguments (the inverse of shellWords). */
function words(cmd: string): string[] {
  return [...cmd.matchAll(/'((?:[^']|'\\'')*)'|(\S+)/g)].map((m) =>
    m[1] !== undefined ? m[1].replace(/'\\''/g, "'") : m[2]!,
  );
}

test('the real soak on a tiny budget: matching seeds pass; a broken rule set fails with commands that reproduce it', async () => {
  // Several real CLI processes: on a 2-core machine shared with other jobs they can take minutes (a safety net, not a time assertion).
  test.setTimeout(600_000);
  const small = ['--threats', 'app-nonroot', '--profiles', 'strict', '--workers', '1', '--no-attacks'];
  const pass = await soak(['--seed-list', '5,6', '--runs', '4', '--properties', 'liveness', ...small]);
  expect(pass.code, pass.stdout + pass.stderr).toBe(0);
  expect(pass.stdout).toMatch(
    /soak: seed 5 \(1\/2\): ambient-lab check --seed 5 --runs 4 .*\nsoak: seed 5: matches the expected table .*\nsoak: seed 6 \(2\/2\)/,
  );
  expect(pass.stdout).toMatch(/soak: PASS: 2 seed\(s\) in \d+ s: 2 matched, 0 differed, 0 harness error\(s\)/);

  const out = fs.mkdtempSync(path.join(os.tmpdir(), 'al-soak-'));
  try {
    const fail = await soak([
      '--seed-list',
      '5',
      '--runs',
      '20',
      '--properties',
      'outbound-capture,liveness',
      '--out',
      out,
      '--mutant',
      'ipv4 remove nat/out/redirect-outbound',
      ...small,
    ]);
    expect(fail.code, fail.stdout + fail.stderr).toBe(1);
    expect(fail.stdout).toContain('  outbound-capture × app-nonroot × strict: unexpected bypass — expected holds');
    const rerun = /^ {4}re-run: (.*)$/m.exec(fail.stdout)?.[1] ?? '';
    const replay = /^ {4}replay: (.*)$/m.exec(fail.stdout)?.[1] ?? '';
    expect(rerun).toMatch(
      /^ambient-lab check --seed 5 --properties outbound-capture --threats app-nonroot --profiles strict --runs 10 /,
    );
    expect(replay).toMatch(
      new RegExp(`^ambient-lab check --replay ${out}/outbound-capture--app-nonroot--strict--\\d+\\.json$`),
    );
    expect(fail.stdout).toMatch(
      /soak: FAIL: 1 seed\(s\) in \d+ s: 0 matched, 1 differed \(5\), 0 harness error\(s\); 1 differing cell\(s\)/,
    );

    // The printed commands are the way back to the finding.
    const again = await runCli([...words(rerun).slice(1), '--json']);
    expect(again.code, again.stderr).toBe(1);
    const j = JSON.parse(again.stdout) as { cells: { property: string; status: string; violation?: string }[] };
    expect(j.cells).toHaveLength(1);
    expect(j.cells[0]).toMatchObject({ property: 'outbound-capture', status: 'unexpected bypass' });
    expect(fail.stdout).toContain(`    found: ${j.cells[0]!.violation}`);
    const replayed = await runCli(words(replay).slice(1));
    expect(replayed.code, replayed.stderr).toBe(0);
    expect(replayed.stdout).toContain('REPRODUCED: outbound-capture × app-nonroot × strict');
  } finally {
    fs.rmSync(out, { recursive: true, force: true });
  }
});
