/**
 * The exit-code contract of `ambient-lab` (cli/errors.ts, docs/check.md "Exit codes"): 0
 * matches, 1 differs, 2 usage error, 3 harness error. Usage errors are caught before any work:
 * the message names the flag, the value and what is accepted, nothing is printed on stdout and
 * no progress line appears (no cell started).
 */
import { test, expect } from '@playwright/test';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { runCli, type CliRun } from '../../cli-run.js';
import { checkExitCode, planCheck, type CheckCliOptions } from '../../../cli/commands/check.js';
import { UsageError } from '../../../cli/errors.js';
import { findJsonSyntaxError } from '../../../scenarios/model/json-error.js';
import { parseCounterexample, CounterexampleFileError } from '../../../scenarios/model/counterexample.js';

const DEFAULTS: CheckCliOptions = {
  world: 'sim',
  out: '.ambient-lab/counterexamples',
  save: true,
  attacks: true,
  ipv6: true,
};

async function usage(opts: Partial<CheckCliOptions>): Promise<string> {
  try {
    await planCheck({ ...DEFAULTS, ...opts });
  } catch (e) {
    if (e instanceof UsageError) return e.message;
    throw e;
  }
  throw new Error(`planCheck accepted ${JSON.stringify(opts)}`);
}

test('check validates every option before work: the error names flag, value and accepted values', async () => {
  expect(await usage({ threats: 'app-nonroot,app-martian' })).toMatch(
    /^--threats "app-nonroot,app-martian": unknown "app-martian"; accepted: app-nonroot, app-root, .*outside$/,
  );
  expect(await usage({ threats: ' , ' })).toMatch(/^--threats " , ": empty list; accepted: app-nonroot/);
  expect(await usage({ threats: 'outside,' })).toMatch(/^--threats "outside,": unknown ""/);
  expect(await usage({ profiles: 'lenient' })).toMatch(
    /^--profiles "lenient": unknown "lenient"; accepted: upstream, strict$/,
  );
  expect(await usage({ properties: 'capture' })).toMatch(
    /^--properties "capture": unknown "capture"; accepted: outbound-capture, inbound-capture, authorization, identity, convergence, fail-closed, liveness$/,
  );
  expect(await usage({ world: 'moon' })).toBe('--world "moon": unknown world; accepted: sim, netns, containers, kind');
  for (const [flag, key, value, accepted] of [
    ['--runs', 'runs', '1e3', '>= 1'],
    ['--runs', 'runs', '0', '>= 1'],
    ['--runs', 'runs', '', '>= 1'],
    ['--seed', 'seed', '-1', '>= 0'],
    ['--seed', 'seed', '0x10', '>= 0'],
    ['--workers', 'workers', '1.5', 'in 0..256'],
    ['--max-commands', 'maxCommands', '0', 'in 1..1000'],
  ] as const) {
    expect(await usage({ [key]: value })).toBe(
      `${flag} ${JSON.stringify(value)}: expected a decimal integer ${accepted}`,
    );
  }
  expect(await usage({ shard: '3/2' })).toMatch(/^--shard "3\/2": expected i\/n with 1 <= i <= n/);
  expect(await usage({ shard: 'a/b' })).toMatch(/^--shard "a\/b": expected i\/n/);
  expect(await usage({ shard: '8/8', threats: 'outside', profiles: 'strict' })).toMatch(
    /^--shard 8\/8: the selection has 7 cells and this shard gets none/,
  );
  expect(await usage({ mutant: 'ipv4 remove nothing', profiles: 'strict' })).toMatch(
    /^--mutant "ipv4 remove nothing": no such mutant for profile strict; accepted: "ipv4 remove /,
  );
  expect(await usage({ mutant: 'ipv4 remove nat/out/redirect-outbound', world: 'netns' })).toMatch(
    /^--mutant .* with --world netns: mutants run on the sim world only/,
  );
  expect(await usage({ replay: 'x.json', runs: '5', threats: 'outside' })).toMatch(
    /^--replay x\.json with --runs, --threats: a replay takes its cell, seed and settings from the file/,
  );
  expect(await usage({ replay: '/nonexistent/cx.json' })).toMatch(
    /^--replay \/nonexistent\/cx\.json: cannot read counterexample \(ENOENT: no such file\)/,
  );
  // A valid selection passes and keeps what was asked.
  const ok = await planCheck({ ...DEFAULTS, threats: 'outside,app-root', profiles: 'strict', runs: '7', seed: '0' });
  expect(ok).toMatchObject({
    kind: 'run',
    runs: 7,
    seed: 0,
    selection: { threats: ['outside', 'app-root'], profiles: ['strict'] },
  });
});

test('a counterexample file that cannot be replayed is named with its problem and position', () => {
  const bad = (text: string): string => {
    try {
      parseCounterexample('cx.json', text);
    } catch (e) {
      if (e instanceof CounterexampleFileError) return e.message;
      throw e;
    }
    throw new Error('accepted');
  };
  expect(bad('{\n  "format": "ambient-lab/counterexample@1",\n  "seed": 1,,\n}')).toBe(
    'cx.json: not valid JSON (line 3, column 13: unexpected ",", expected a double-quoted property name); a counterexample file is the JSON `ambient-lab check` saves',
  );
  expect(bad('[1,]')).toMatch(/^cx\.json: not valid JSON \(line 1, column 4: unexpected "\]", expected a JSON value\)/);
  expect(bad('')).toMatch(/^cx\.json: not valid JSON \(line 1, column 1: unexpected end of input/);
  expect(bad('[]')).toMatch(/^cx\.json: not a counterexample file: the JSON is an array/);
  expect(bad('{"format": "ambient-lab/check@1"}')).toMatch(
    /^cx\.json: not a counterexample file: "format" is "ambient-lab\/check@1", expected "ambient-lab\/counterexample@1"/,
  );
  const good = {
    format: 'ambient-lab/counterexample@1',
    property: 'liveness',
    threat: 'outside',
    profile: 'strict',
    world: 'sim',
    seed: 3,
    path: '0:1',
    settings: { nodes: 2, ipv6: true, dnsCapture: false, maxCommands: 12 },
    violation: { property: 'liveness', message: 'm', evidence: {} },
    commands: [],
  };
  expect(parseCounterexample('cx.json', JSON.stringify(good)).seed).toBe(3);
  const { seed: _seed, ...noSeed } = good;
  expect(bad(JSON.stringify(noSeed))).toBe('cx.json: counterexample lacks "seed"; it cannot be replayed');
  expect(bad(JSON.stringify({ ...good, settings: { ...good.settings, ipv6: 'yes' } }))).toBe(
    'cx.json: counterexample field "settings.ipv6" is "yes", expected true or false; it cannot be replayed',
  );
  expect(bad(JSON.stringify({ ...good, profile: 'lenient' }))).toMatch(
    /field "profile" is "lenient", expected "upstream" or "strict"/,
  );
  expect(bad(JSON.stringify({ ...good, replayPath: 7 }))).toMatch(/field "replayPath" is 7, expected a string/);
});

test('the JSON position finder agrees with JSON.parse on what is valid', () => {
  for (const ok of ['0', '-1.5e+3', '"a\\u00e9\\n"', '{"a":[1,{"b":null}],"c":true}', ' [ ] ']) {
    expect(() => JSON.parse(ok) as unknown).not.toThrow();
    expect(findJsonSyntaxError(ok)).toBeUndefined();
  }
  for (const [bad, line, column] of [
    ['01', 1, 2],
    ['{"a":1}x', 1, 8],
    ['"\\x"', 1, 3],
    ['{\n"a" 1}', 2, 5],
    ['[1,\n\n  tru]', 3, 6],
    ['"a\tb"', 1, 3],
  ] as const) {
    expect(() => JSON.parse(bad) as unknown).toThrow();
    expect(findJsonSyntaxError(bad), bad).toMatchObject({ line, column });
  }
});

test('an ERROR cell outranks a difference: exit 3, then 1, then 0', () => {
  const cell = (status: string): { status: string } => ({ status });
  expect(checkExitCode({ ok: true, cells: [cell('holds'), cell('bypass found')] } as never)).toBe(0);
  expect(checkExitCode({ ok: false, cells: [cell('holds'), cell('unexpected bypass')] } as never)).toBe(1);
  expect(checkExitCode({ ok: false, cells: [cell('bypass not found'), cell('error')] } as never)).toBe(3);
});

function expectUsage(r: CliRun, ...parts: readonly (string | RegExp)[]): void {
  expect(r.code, r.stderr).toBe(2);
  expect(r.stdout).toBe('');
  expect(r.stderr).not.toMatch(/check: \d+%|histories/);
  for (const p of parts) {
    if (typeof p === 'string') expect(r.stderr).toContain(p);
    else expect(r.stderr).toMatch(p);
  }
}

test('every subcommand exits 2 on a usage error, before any work', async () => {
  // Several real CLI processes: on a 2-core machine shared with other jobs they can take minutes (a safety net, not a time assertion).
  test.setTimeout(600_000);
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'al-contract-'));
  try {
    const notJson = path.join(dir, 'broken.json');
    fs.writeFileSync(notJson, '{\n  "format": "ambient-lab/counterexample@1",\n  "seed": 1,\n');
    const out = path.join(dir, 'cx');
    const [
      unknownFlag,
      badThreat,
      badMutant,
      badWorld,
      badShard,
      missing,
      malformed,
      unknownCmd,
      trace,
      only,
      up,
      status,
      exec,
      down,
    ] = await Promise.all([
      runCli(['check', '--threads', '2']),
      runCli(['check', '--threats', 'app-martian', '--out', out]),
      runCli(['check', '--mutant', 'no such mutant', '--profiles', 'strict', '--out', out]),
      runCli(['check', '--world', 'moon']),
      runCli(['check', '--shard', '0/4']),
      runCli(['check', '--replay', path.join(dir, 'nope.json')]),
      runCli(['check', '--replay', notJson]),
      runCli(['chekc']),
      runCli(['trace']),
      runCli(['trace', 'fixtures/labs/inpod.yaml', '--only', 'nope']),
      runCli(['up', '--nodes', 'two']),
      runCli(['status', '--name', '../etc']),
      runCli(['exec', 'Bad_Pod', '--', 'true']),
      runCli(['down', '--name', 'UPPER']),
    ]);
    expectUsage(
      unknownFlag,
      "unknown option '--threads'",
      /accepted options of `ambient-lab check`: --world, --runs, .*--threats/,
    );
    expectUsage(badThreat, '--threats "app-martian": unknown "app-martian"; accepted: app-nonroot');
    expectUsage(badMutant, '--mutant "no such mutant": no such mutant for profile strict; accepted: "ipv4 remove');
    expect(fs.existsSync(out), 'no counterexample directory: nothing ran').toBe(false);
    expectUsage(badWorld, '--world "moon": unknown world; accepted: sim, netns, containers, kind');
    expectUsage(badShard, '--shard "0/4": expected i/n with 1 <= i <= n');
    expectUsage(missing, `--replay ${path.join(dir, 'nope.json')}: cannot read counterexample (ENOENT: no such file)`);
    expectUsage(
      malformed,
      `--replay ${notJson}: not valid JSON (line 4, column 1: unexpected end of input, expected a double-quoted property name)`,
    );
    expectUsage(unknownCmd, "unknown command 'chekc'");
    expectUsage(trace, "missing required argument 'labfile'");
    expectUsage(only, '--only "nope": no attempt of that name in fixtures/labs/inpod.yaml; accepted: app-a-to-pod-b, ');
    expectUsage(up, '--nodes "two": expected a decimal integer in 1..16');
    expectUsage(status, '--name "../etc": invalid lab name; accepted: [a-z0-9]');
    expectUsage(exec, 'pod "Bad_Pod": expected NAMESPACE/NAME or NAME');
    expectUsage(down, '--name "UPPER": invalid lab name');
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
});

test('a world that cannot start is a harness error (exit 3), said once; --help documents the codes', async () => {
  // Several real CLI processes: on a 2-core machine shared with other jobs they can take minutes (a safety net, not a time assertion).
  test.setTimeout(600_000);
  const env: Record<string, string> = { KIND: '' };
  const [kind, help, checkHelp] = await Promise.all([
    runCli(['check', '--world', 'kind'], { env }),
    runCli(['--help']),
    runCli(['check', '--help']),
  ]);
  expect(kind.code, kind.stderr).toBe(3);
  expect(kind.stderr).toMatch(/^ambient-lab: harness error: the kind world cannot run here: /);
  expect(kind.stdout).toBe('');
  for (const h of [help, checkHelp]) {
    expect(h.code).toBe(0);
    expect(h.stdout).toMatch(/Exit codes:\n {2}0 {2}matches.*\n.*\n.*\n {2}2 {2}usage error.*\n {2}3 {2}harness error/);
  }
});
