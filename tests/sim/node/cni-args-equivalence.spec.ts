/**
 * impl/api/cni.ts: parseCniArgs, formatCniArgs and CNI_PATH parsing were rewritten as scans (they
 * run on every plugin call of every pod). They must accept and reject exactly what the former
 * split/map/regex definitions did, with the same results and messages: checked here against
 * those definitions on edge cases and on seeded random texts over the characters that matter.
 */
import { test, expect } from '@playwright/test';
import { CniError, formatCniArgs, parseCniArgs, parseCniEnv } from '../../../impl/api/cni.js';
import { SeededRandom } from '../../../sim/time/seeded-random.js';

/** The former parseCniArgs (split on ";", then each pair at its first "="). */
function referenceParse(text: string): Array<[string, string]> {
  if (text === '') return [];
  return text.split(';').map((kv) => {
    const i = kv.indexOf('=');
    if (i <= 0)
      throw new CniError(
        4,
        `CNI_ARGS: invalid pair ${JSON.stringify(kv)}`,
        'expected KEY=VALUE pairs separated by ";"',
      );
    return [kv.slice(0, i), kv.slice(i + 1)];
  });
}

/** The former formatCniArgs. */
function referenceFormat(args: ReadonlyArray<readonly [string, string]>): string {
  for (const [k, v] of args) {
    if (k === '' || /[=;]/.test(k) || v.includes(';'))
      throw new Error(
        `CNI_ARGS: cannot encode ${JSON.stringify(k)}=${JSON.stringify(v)} (no "=" or ";" in keys, no ";" in values)`,
      );
  }
  return args.map(([k, v]) => `${k}=${v}`).join(';');
}

type Outcome = { ok: unknown } | { error: string; code?: number; details?: string };

function outcome(f: () => unknown): Outcome {
  try {
    return { ok: f() };
  } catch (e) {
    return e instanceof CniError ? { error: e.msg, code: e.code, details: e.details } : { error: (e as Error).message };
  }
}

const EDGE_TEXTS = [
  '',
  ';',
  '=',
  '==',
  'a',
  'a=',
  '=a',
  'a=b',
  'a=b;',
  ';a=b',
  'a=b;;c=d',
  'a=b=c',
  'a=b;c',
  'a=;b=',
  'K8S_POD_NAME=x;IgnoreUnknown=1',
  'a==b;c=d=e',
];

function randomText(r: SeededRandom): string {
  const alphabet = 'ab=;=;x';
  let s = '';
  const n = r.int(0, 9);
  for (let i = 0; i < n; i++) s += alphabet[r.int(0, alphabet.length - 1)];
  return s;
}

test('parseCniArgs accepts and rejects what the split-based definition did, with the same pairs and messages', () => {
  const r = new SeededRandom(20261129);
  const texts = [...EDGE_TEXTS];
  for (let i = 0; i < 3000; i++) texts.push(randomText(r));
  let accepted = 0;
  for (const t of texts) {
    const want = outcome(() => referenceParse(t));
    expect(
      outcome(() => parseCniArgs(t)),
      `CNI_ARGS ${JSON.stringify(t)}`,
    ).toEqual(want);
    if ('ok' in want) accepted++;
  }
  // Both verdicts occur often enough for the comparison to mean something.
  expect(accepted).toBeGreaterThan(100);
  expect(texts.length - accepted).toBeGreaterThan(100);
});

test('formatCniArgs encodes and refuses what the regex-based definition did', () => {
  const r = new SeededRandom(7);
  const cases: Array<Array<[string, string]>> = [
    [],
    [['a', 'b']],
    [['', 'b']],
    [['a=', 'b']],
    [['a;', 'b']],
    [['a', 'b;']],
    [['a', 'b=c']],
    [['a', '']],
    [
      ['a', 'b'],
      ['c', 'd'],
    ],
    [
      ['a', 'b'],
      ['c;', 'd'],
    ],
  ];
  for (let i = 0; i < 2000; i++) {
    const pairs: Array<[string, string]> = [];
    for (let j = r.int(0, 3); j > 0; j--) pairs.push([randomText(r).slice(0, 3), randomText(r).slice(0, 3)]);
    cases.push(pairs);
  }
  let refused = 0;
  for (const c of cases) {
    const want = outcome(() => referenceFormat(c));
    expect(
      outcome(() => formatCniArgs(c)),
      JSON.stringify(c),
    ).toEqual(want);
    if (!('ok' in want)) refused++;
    else expect(parseCniArgs(want.ok as string)).toEqual(c); // what is encoded decodes to the pairs
  }
  expect(refused).toBeGreaterThan(50);
});

test('CNI_PATH splits on ":" dropping empty entries, as before', () => {
  const base = { CNI_COMMAND: 'DEL', CNI_CONTAINERID: 'c1', CNI_IFNAME: 'eth0' };
  for (const p of ['/opt/cni/bin', '/opt/cni/bin:/usr/lib/cni', ':/a::/b:', 'x']) {
    expect(parseCniEnv({ ...base, CNI_PATH: p }).path).toEqual(p.split(':').filter((x) => x !== ''));
  }
  // An empty CNI_PATH is missing for DEL (refused before it is split).
  expect(outcome(() => parseCniEnv({ ...base, CNI_PATH: '' }))).toMatchObject({ code: 4 });
  expect(parseCniEnv({ CNI_COMMAND: 'VERSION' }).path).toEqual([]);
});
