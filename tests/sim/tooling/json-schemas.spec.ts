/**
 * The published JSON Schemas (docs/schemas/) describe what the real commands print: `check
 * --json` (passing and failing runs, with counterexamples), `check --replay --json` and `trace
 * --json` are run as a user would (built CLI, child process) and their stdout is validated. The
 * positive controls break real outputs in the ways a drifting report would, and each must fail.
 */
import { test, expect } from '@playwright/test';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { REPO, runCli } from '../../cli-run.js';
import { readSchema, schemaErrors, SCHEMAS, type SchemaName } from '../../schemas.js';
import { CHECK_REPORT_FORMAT } from '../../../scenarios/model/check.js';
import { COUNTEREXAMPLE_FORMAT } from '../../../scenarios/model/counterexample.js';
import { acceptedNames, REPLAY_REPORT_FORMAT } from '../../../cli/commands/check.js';
import { TRACE_REPORT_FORMAT } from '../../../cli/commands/trace.js';

function expectValid(n: SchemaName, doc: unknown): void {
  const errors = schemaErrors(n, doc);
  expect(errors, `${n}: ${errors ?? ''}`).toBeUndefined();
}

function expectInvalid(n: SchemaName, doc: unknown, why: string): void {
  expect(schemaErrors(n, doc), `${n} accepted a broken document: ${why}`).toBeDefined();
}

const clone = <T>(x: T): T => JSON.parse(JSON.stringify(x)) as T;

test("the schemas are draft 2020-12, tagged with the formats the code writes, and name the catalog's cells", () => {
  for (const n of SCHEMAS) expect(readSchema(n)['$schema']).toBe('https://json-schema.org/draft/2020-12/schema');
  const constOf = (n: SchemaName): unknown =>
    (readSchema(n)['properties'] as Record<string, { const?: unknown }>)['format']?.const;
  expect(constOf('check-report')).toBe(CHECK_REPORT_FORMAT);
  expect(constOf('counterexample')).toBe(COUNTEREXAMPLE_FORMAT);
  expect(constOf('replay-report')).toBe(REPLAY_REPORT_FORMAT);
  expect(constOf('trace-report')).toBe(TRACE_REPORT_FORMAT);
  // A new threat or property must be published too (the schema's enums are the public list).
  const defs = readSchema('check-report')['$defs'] as Record<string, { enum: string[] }>;
  const names = acceptedNames();
  expect(defs['threat']!.enum).toEqual(names.threats);
  expect(defs['property']!.enum).toEqual(names.properties);
  expect(defs['profile']!.enum).toEqual(names.profiles);
});

const CELL = ['--world', 'sim', '--threats', 'app-nonroot', '--profiles', 'strict', '--seed', '5', '--workers', '1'];

test('check --json: a matching run, a differing run with a counterexample, and its replay all validate', async () => {
  // Several real CLI processes: on a 2-core machine shared with other jobs they can take minutes (a safety net, not a time assertion).
  test.setTimeout(600_000);
  const out = fs.mkdtempSync(path.join(os.tmpdir(), 'al-schema-'));
  try {
    // With the attack catalog, so catalog findings and skips are in the report too.
    const pass = await runCli([
      'check',
      ...CELL,
      '--properties',
      'outbound-capture,liveness',
      '--runs',
      '4',
      '--json',
      '--no-save',
    ]);
    expect(pass.code, pass.stderr).toBe(0);
    const passDoc = JSON.parse(pass.stdout) as { ok: boolean; cells: unknown[] };
    expect(passDoc.ok).toBe(true);
    expectValid('check-report', passDoc);

    const fail = await runCli([
      'check',
      ...CELL,
      '--properties',
      'outbound-capture',
      '--no-attacks',
      '--runs',
      '20',
      '--json',
      '--out',
      out,
      '--mutant',
      'ipv4 remove nat/out/redirect-outbound',
    ]);
    expect(fail.code, fail.stderr).toBe(1);
    const failDoc = JSON.parse(fail.stdout) as {
      ok: boolean;
      counterexamples: unknown[];
      cells: { counterexampleFile?: string }[];
    };
    expect(failDoc.ok).toBe(false);
    expect(failDoc.counterexamples).toHaveLength(1);
    expectValid('check-report', failDoc);
    const file = failDoc.cells[0]?.counterexampleFile ?? '';
    expectValid('counterexample', JSON.parse(fs.readFileSync(file, 'utf8')));

    const replay = await runCli(['check', '--replay', file, '--json']);
    expect(replay.code, replay.stderr).toBe(0);
    const replayDoc = JSON.parse(replay.stdout) as { same: boolean; replayed?: unknown };
    expect(replayDoc.same).toBe(true);
    expect(replayDoc.replayed).toBeDefined();
    expectValid('replay-report', replayDoc);

    // Positive controls on the real outputs: each drift below must be rejected.
    type Doc = Record<string, unknown> & {
      cells: Record<string, unknown>[];
      totals: Record<string, unknown>;
      counterexamples: Record<string, unknown>[];
    };
    const base = failDoc as unknown as Doc;
    const broken: Array<[string, (d: Doc) => void]> = [
      [
        'no format tag',
        (d) => {
          delete d['format'];
        },
      ],
      [
        'another format tag',
        (d) => {
          d['format'] = 'ambient-lab/check@2';
        },
      ],
      [
        'a field the schema does not publish',
        (d) => {
          d['extra'] = 1;
        },
      ],
      [
        'a cell with an unknown status',
        (d) => {
          d.cells[0]!['status'] = 'maybe';
        },
      ],
      [
        'a bypass judged as holds',
        (d) => {
          d.cells[0]!['status'] = 'holds';
        },
      ],
      [
        'an error cell without its error',
        (d) => {
          d.cells[0]!['status'] = 'error';
          d.cells[0]!['observed'] = 'error';
        },
      ],
      [
        'ok with mismatches',
        (d) => {
          d['ok'] = true;
        },
      ],
      [
        'a negative history count',
        (d) => {
          d.totals['histories'] = -1;
        },
      ],
      [
        'an unknown threat',
        (d) => {
          d.cells[0]!['threat'] = 'app-martian';
        },
      ],
      [
        'a counterexample without its seed',
        (d) => {
          delete d.counterexamples[0]!['seed'];
        },
      ],
      [
        'a counterexample whose attempt keeps its trace',
        (d) => {
          (d.counterexamples[0]!['attempt'] as { result: Record<string, unknown> }).result['trace'] = 'x';
        },
      ],
    ];
    expect(base.counterexamples[0]!['attempt'], "the mutant's counterexample has a violating attempt").toBeDefined();
    for (const [why, breakIt] of broken) {
      const d = clone(base);
      breakIt(d);
      expectInvalid('check-report', d, why);
    }
    const r = clone(replayDoc) as Record<string, unknown>;
    r['error'] = 'world crashed';
    r['same'] = true;
    expectInvalid('replay-report', r, 'an errored replay that claims the same violation');
  } finally {
    fs.rmSync(out, { recursive: true, force: true });
  }
});

test('trace --json --no-packets leaves the packet traces out, and still validates', async () => {
  const lab = path.join(REPO, 'fixtures', 'labs', 'inpod.yaml');
  const full = JSON.parse((await runCli(['trace', lab, '--json'])).stdout) as { attempts: Record<string, unknown>[] };
  const r = await runCli(['trace', lab, '--json', '--no-packets']);
  expect(r.code, r.stderr).toBe(0);
  const doc = JSON.parse(r.stdout) as { attempts: Record<string, unknown>[] };
  expect(doc.attempts.map((a) => 'trace' in a)).toEqual(doc.attempts.map(() => false));
  // Everything else is as with the traces.
  expect(doc.attempts).toEqual(full.attempts.map(({ trace, ...rest }) => (void trace, rest)));
  expectValid('trace-report', doc);
});

test('trace --json carries its format tag and validates; broken copies do not', async () => {
  const lab = path.join(REPO, 'fixtures', 'labs', 'inpod.yaml');
  const r = await runCli(['trace', lab, '--json']);
  expect(r.code, r.stderr).toBe(0);
  const doc = JSON.parse(r.stdout) as {
    format: string;
    world: string;
    attempts: Array<{ trace: Array<Record<string, unknown>> } & Record<string, unknown>>;
  };
  expect(doc.format).toBe(TRACE_REPORT_FORMAT);
  expect(doc.world).toBe('sim');
  expect(doc.attempts.length).toBeGreaterThan(3);
  // Every trace event kind the example produces is covered by the schema's oneOf.
  expect(new Set(doc.attempts.flatMap((a) => a.trace.map((e) => e['kind']))).size).toBeGreaterThan(4);
  expectValid('trace-report', doc);

  const broken: Array<[string, (d: typeof doc & Record<string, unknown>) => void]> = [
    [
      'no format tag',
      (d) => {
        delete (d as Record<string, unknown>)['format'];
      },
    ],
    [
      'an attempt without its outcome',
      (d) => {
        delete d.attempts[0]!['outcome'];
      },
    ],
    [
      'a trace event of an unknown kind',
      (d) => {
        d.attempts[0]!.trace.push({ kind: 'teleport', ns: 'a' });
      },
    ],
    [
      'a table event without its steps',
      (d) => {
        const e = d.attempts.flatMap((a) => a.trace).find((x) => x['kind'] === 'table');
        if (!e) throw new Error('the example lab traced no netfilter table');
        delete e['steps'];
      },
    ],
    [
      'no listeners',
      (d) => {
        delete (d as Record<string, unknown>)['listeners'];
      },
    ],
    [
      'a listener expecting what no lab file can say',
      (d) => {
        ((d as Record<string, unknown>)['listeners'] as Record<string, unknown>[])[0]!['expected'] = 'ENOENT';
      },
    ],
    [
      'kernel results without world sim+kernel',
      (d) => {
        (d as Record<string, unknown>)['kernelAttempts'] = [];
      },
    ],
    [
      'sim+kernel without its differences',
      (d) => {
        (d as Record<string, unknown>)['world'] = 'sim+kernel';
        (d as Record<string, unknown>)['kernelAttempts'] = [];
      },
    ],
  ];
  for (const [why, breakIt] of broken) {
    const d = clone(doc) as typeof doc & Record<string, unknown>;
    breakIt(d);
    expectInvalid('trace-report', d, why);
  }
});
