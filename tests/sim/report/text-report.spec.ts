/**
 * The text report of `check` (cli/commands/check.ts renderReport): each expected bypass gets its
 * reason on one line; a counterexample is printed whole (with its packet trace) only for a cell
 * that differs from the expected table, or with --verbose; the others get one line with their
 * replay command. The report comes from a real run: a strict rule mutant that lets inbound
 * traffic past the proxy (an unexpected bypass with a shrunk counterexample).
 */
import { test, expect } from '@playwright/test';
import { spawnSync } from 'node:child_process';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { renderReport } from '../../../cli/commands/check.js';
import type { CheckReport } from '../../../scenarios/model/check.js';

const CLI = path.resolve('bin/ambient-lab.js');
const MUTANT = 'ipv4 remove mangle/prert/tproxy-inbound';
let report: CheckReport;
let dir: string;

test.beforeAll(() => {
  dir = fs.mkdtempSync(path.join(os.tmpdir(), 'al-report-'));
  const r = spawnSync(
    process.execPath,
    [
      CLI,
      'check',
      '--seed',
      '3',
      '--properties',
      'inbound-capture',
      '--threats',
      'app-nonroot',
      '--profiles',
      'strict',
    ].concat(['--runs', '20', '--mutant', MUTANT, '--workers', '1', '--out', dir, '--json']),
    { encoding: 'utf8', timeout: 120_000 },
  );
  expect(r.status, r.stderr).toBe(1);
  report = JSON.parse(r.stdout) as CheckReport;
});

test.afterAll(() => fs.rmSync(dir, { recursive: true, force: true }));

test('a cell that differs gets its counterexample whole, packet trace included', () => {
  const [cell] = report.cells;
  expect(cell?.status).toBe('unexpected bypass');
  expect(report.counterexamples).toHaveLength(1);
  const text = renderReport(report);
  expect(text).toContain('Counterexamples (1, shrunk, of the cells that differ):');
  expect(text).toContain('   packet trace:');
  expect(text).toContain(`replay: ambient-lab check --replay ${cell!.counterexampleFile}`);
  expect(text).not.toContain('Expected bypasses');
});

test('an expected bypass: its reason on one line, its counterexample as one line with the replay command; --verbose prints it whole', () => {
  const [cell] = report.cells;
  const why = 'first line of the reason;\n  second line, indented\n(third)';
  const expected: CheckReport = {
    ...report,
    ok: true,
    totals: { ...report.totals, mismatches: 0 },
    cells: [
      {
        ...cell!,
        status: 'bypass found',
        expected: { verdict: 'bypass', why, classes: ['B1', 'finding-x'] },
      },
    ],
  };
  const text = renderReport(expected);
  expect(text).toContain('Expected bypasses (1), why each is one (scenarios/expected/table.ts):');
  expect(text).toContain(
    '  inbound-capture × app-nonroot × strict [B1, finding-x]: first line of the reason; second line, indented (third)',
  );
  expect(text).not.toContain('packet trace:');
  expect(text).toContain('Counterexamples of expected bypasses (1; --verbose prints them whole):');
  expect(text).toMatch(
    new RegExp(
      `  inbound-capture × app-nonroot × strict: app .* without its node proxy  \\(ambient-lab check --replay ${cell!.counterexampleFile!.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')}\\)`,
    ),
  );
  const verbose = renderReport(expected, { verbose: true });
  expect(verbose).toContain('Counterexamples (1, shrunk):');
  expect(verbose).toContain('   packet trace:');
});
