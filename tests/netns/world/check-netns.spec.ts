/**
 * The main job on the real kernel, with a small budget (issue 8: the matrix also runs on the
 * netns world in CI): one property × threat × profile cell through `ambient-lab check --world
 * netns`, and in the containers project `--world containers` (tests/netns/world/fixture.ts).
 */
import { test, expect } from '@playwright/test';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { containerNames } from '../../../e2e/containers/world.js';
import { listNetns } from '../../../e2e/netns/ip.js';
import { processRunStem } from '../../../e2e/netns/netns-run.js';
import { runCli } from '../../cli-run.js';
import { oneCellCheckArgs, skipUnlessSuiteWorldAvailable, suiteWorld } from './fixture.js';

skipUnlessSuiteWorldAvailable();
test.setTimeout(900_000); // generous: the suite must pass on a loaded machine (npm run test:netns:loaded)

test('check --world netns|containers runs a cell on the real kernel and agrees with the expected table', async () => {
  const world = suiteWorld();
  const out = fs.mkdtempSync(path.join(os.tmpdir(), 'al-check-netns-'));
  const r = await runCli([...oneCellCheckArgs(world, 2), '--out', out]);
  fs.rmSync(out, { recursive: true, force: true });
  const report = JSON.parse(r.stdout) as {
    world: string;
    cells: { status: string; runs: number; observed: string; expected: { verdict: string } }[];
  };
  expect(report.world).toBe(world);
  expect(report.cells).toHaveLength(1);
  const cell = report.cells[0]!;
  expect(cell.runs, r.stderr.slice(-2000)).toBeGreaterThanOrEqual(1);
  // strict × app-nonroot: the table expects outbound capture to hold; a bypass here would fail the run.
  expect(cell.expected.verdict).toBe('holds');
  expect(cell.observed).toBe('holds');
  expect(r.code, r.stderr.slice(-2000)).toBe(0);
  // Nothing of the check's worlds is left: their names start with the run stem of the check
  // process's pid (newRunPrefix); its worlds run in worker threads of that process.
  const ours = (name: string): boolean => name.replace(/^\//, '').startsWith(processRunStem(r.pid!));
  expect(r.pid).toBeDefined();
  expect((await listNetns()).filter(ours)).toEqual([]);
  if (world === 'containers') {
    const names = await containerNames();
    expect(names.filter(ours)).toEqual([]);
  }
});

test('check --world netns|containers with the attack catalog finds the NET_ADMIN flush bypass the table expects (World.appExec on the real kernel)', async () => {
  const out = fs.mkdtempSync(path.join(os.tmpdir(), 'al-check-netns-'));
  const r = await runCli([
    'check',
    '--world',
    suiteWorld(),
    '--runs',
    '1',
    '--seed',
    '5',
    '--threats',
    'app-net-admin',
    '--profiles',
    'strict',
    '--properties',
    'outbound-capture',
    // the catalog is what this tests; its one history stays short (the test above runs histories)
    '--max-commands',
    '1',
    '--workers',
    '1',
    '--out',
    out,
    '--no-save',
    '--json',
  ]);
  fs.rmSync(out, { recursive: true, force: true });
  const report = JSON.parse(r.stdout) as {
    cells: { status: string; observed: string; expected: { verdict: string } }[];
  };
  expect(report.cells).toHaveLength(1);
  const cell = report.cells[0]!;
  // A positive control: the bypass must be found (not 'not-evaluated' for a missing appExec).
  expect(cell.expected.verdict).toBe('bypass');
  expect(cell.status, r.stderr.slice(-2000)).toBe('bypass found');
  expect(cell.observed).toBe('bypass');
  expect(r.code, r.stderr.slice(-2000)).toBe(0);
});
