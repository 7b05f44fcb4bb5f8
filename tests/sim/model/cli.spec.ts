/**
 * `ambient-lab check` end to end (the built CLI: run `npm run build` first, as `npm run test:sim`
 * does): exit 0 and complete JSON when reality matches the expected table; exit 1 with a saved,
 * replayable counterexample when it does not (positive control: a broken rule set); shards
 * partition the matrix.
 */
import { test, expect } from '@playwright/test';
import { spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import * as path from 'node:path';
import { fileURLToPath } from 'node:url';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../../..');
const bin = path.join(root, 'bin', 'ambient-lab.js');

function cli(args: string[]): { code: number | null; stdout: string; stderr: string } {
  const r = spawnSync(process.execPath, [bin, ...args], { cwd: root, encoding: 'utf8', timeout: 90_000 });
  return { code: r.status, stdout: r.stdout, stderr: r.stderr };
}

interface JsonCell {
  property: string;
  threat: string;
  profile: string;
  backend: string;
  status: string;
  observed: string;
  runs: number;
  expected?: { verdict: string };
  counterexampleFile?: string;
}
interface JsonReport {
  format: string;
  ok: boolean;
  seed: number;
  cells: JsonCell[];
  counterexamples: Array<{ seed: number; path: string; commands: string[]; violation: { message: string } }>;
  totals: { histories: number; cells: number; mismatches: number };
}

test.beforeAll(() => {
  if (!existsSync(path.join(root, 'dist', 'cli', 'main.js')))
    throw new Error('dist/ is missing: run `npm run build` before these tests');
});

const SMALL = [
  '--world',
  'sim',
  '--threats',
  'app-nonroot',
  '--profiles',
  'strict',
  '--properties',
  'outbound-capture,liveness',
  '--seed',
  '5',
  '--workers',
  '1',
  '--no-attacks',
];

test('check exits 0 with a complete JSON report when reality matches the expected table', () => {
  const r = cli(['check', ...SMALL, '--runs', '6', '--json', '--no-save']);
  expect(r.code, r.stderr).toBe(0);
  const j = JSON.parse(r.stdout) as JsonReport;
  expect(j.format).toBe('ambient-lab/check@1');
  expect(j.ok).toBe(true);
  expect(j.seed).toBe(5);
  expect(j.cells.map((c) => `${c.property}/${c.threat}/${c.profile}`).sort()).toEqual([
    'liveness/app-nonroot/strict',
    'outbound-capture/app-nonroot/strict',
  ]);
  for (const c of j.cells) {
    expect(c.status).toBe('holds');
    expect(c.expected?.verdict).toBe('holds');
    expect(c.runs).toBe(3);
  }
  expect(j.totals).toMatchObject({ histories: 6, cells: 2, mismatches: 0 });
});

test('check exits 1 on a broken rule set, saves the counterexample, and --replay reproduces it', () => {
  const out = mkdtempSync(path.join(tmpdir(), 'al-check-'));
  try {
    const r = cli([
      'check',
      ...SMALL,
      '--runs',
      '40',
      '--json',
      '--out',
      out,
      '--mutant',
      'ipv4 remove nat/out/redirect-outbound',
    ]);
    expect(r.code, r.stderr).toBe(1);
    const j = JSON.parse(r.stdout) as JsonReport;
    expect(j.ok).toBe(false);
    const bad = j.cells.find((c) => c.property === 'outbound-capture');
    expect(bad?.status).toBe('unexpected bypass');
    expect(j.counterexamples).toHaveLength(1);
    const file = bad?.counterexampleFile ?? '';
    expect(existsSync(file)).toBe(true);
    const text = cli(['check', '--replay', file]);
    expect(text.code, text.stderr).toBe(0);
    expect(text.stdout).toContain(
      `REPRODUCED: outbound-capture × app-nonroot × strict: ${j.counterexamples[0]?.violation.message}`,
    );
    expect(text.stdout).toContain('packet trace:');
  } finally {
    rmSync(out, { recursive: true, force: true });
  }
});

test('shards partition the matrix cells', () => {
  const args = [
    'check',
    '--threats',
    'app-nonroot,outside',
    '--profiles',
    'upstream,strict',
    '--properties',
    'convergence',
    '--runs',
    '4',
    '--seed',
    '1',
    '--workers',
    '1',
    '--no-attacks',
    '--json',
    '--no-save',
  ];
  const cells = (shard: string) =>
    (JSON.parse(cli([...args, '--shard', shard]).stdout) as JsonReport).cells.map((c) => `${c.threat}/${c.profile}`);
  const a = cells('1/2');
  const b = cells('2/2');
  expect(a).toHaveLength(2);
  expect(b).toHaveLength(2);
  expect([...a, ...b].sort()).toEqual([
    'app-nonroot/strict',
    'app-nonroot/upstream',
    'outside/strict',
    'outside/upstream',
  ]);
  expect(cli([...args, '--shard', '3/2']).stderr).toContain('--shard "3/2": expected i/n');
});

test('positive control through the nftables backend: a strict mutant written by the nft translator is found, saved with its backend, and replays on it; upstream × nftables refuses mutants (exit 2)', () => {
  const out = mkdtempSync(path.join(tmpdir(), 'al-check-nft-'));
  try {
    const r = cli([
      'check',
      ...SMALL,
      '--backends',
      'nftables',
      '--runs',
      '40',
      '--json',
      '--out',
      out,
      '--mutant',
      'ipv4 remove nat/out/redirect-outbound',
    ]);
    expect(r.code, r.stderr).toBe(1);
    const j = JSON.parse(r.stdout) as JsonReport;
    const bad = j.cells.find((c) => c.property === 'outbound-capture');
    expect(bad).toMatchObject({ backend: 'nftables', status: 'unexpected bypass' });
    const file = bad?.counterexampleFile ?? '';
    expect(file).toMatch(/--strict-nftables--\d+\.json$/);
    const saved = JSON.parse(readFileSync(file, 'utf8')) as { settings: { backend?: string } };
    expect(saved.settings.backend).toBe('nftables');
    const text = cli(['check', '--replay', file]);
    expect(text.code, text.stderr).toBe(0);
    expect(text.stdout).toContain('REPRODUCED: outbound-capture × app-nonroot × strict/nftables: ');
  } finally {
    rmSync(out, { recursive: true, force: true });
  }
  const refused = cli([
    'check',
    '--profiles',
    'upstream',
    '--backends',
    'nftables',
    '--mutant',
    'ipv4 remove nat/out/redirect-outbound',
  ]);
  expect(refused.code).toBe(2);
  expect(refused.stderr).toContain("mutants reach upstream's nftables document only through its iptables form");
  const badBackend = cli(['check', '--backends', 'ebpf']);
  expect(badBackend.code).toBe(2);
  expect(badBackend.stderr).toMatch(/--backends.*ebpf/);
});
