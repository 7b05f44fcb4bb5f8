/**
 * The main job on a kind cluster (issue 9: the same scenarios, the same properties): `ambient-lab
 * check --world kind` with its small default selection (app-nonroot × strict, every property),
 * a smaller history budget, and the attack catalog. One cluster for the whole run, deleted at the
 * end. The CI kind job (.github/workflows/ci.yaml, `--project=kind`) runs this.
 * Runs only with KIND=1, Docker and kind (tests/worlds.ts says why it is skipped otherwise).
 */
import { test, expect } from '@playwright/test';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { execa } from 'execa';
import { runCli } from '../cli-run.js';
import { kindWorld } from '../worlds.js';

const w = kindWorld();
test.skip(!w.available, w.reason);
// Image builds, the cluster, one history per cell and the catalog, on a CI runner.
test.setTimeout(50 * 60_000);

test('check --world kind runs the app-nonroot × strict cells on one kind cluster, agrees with the expected table, and deletes the cluster', async () => {
  const out = fs.mkdtempSync(path.join(os.tmpdir(), 'al-check-kind-'));
  const r = await runCli(['check', '--world', 'kind', '--runs', '3', '--seed', '9', '--out', out, '--json'], {
    env: { KIND: '1' },
  });
  fs.rmSync(out, { recursive: true, force: true });
  const tail = `${r.stderr.slice(-3000)}\n${r.stdout.slice(-3000)}`;
  const report = JSON.parse(r.stdout) as {
    world: string;
    ok: boolean;
    worldGaps: string[];
    settings: { ipv6: boolean };
    cells: { threat: string; profile: string; status: string; runs: number }[];
  };
  expect(report.world).toBe('kind');
  // check's default --ipv6: the run's cluster is dual-stack (fixtures/kind/cluster-dual.yaml)
  expect(report.settings.ipv6).toBe(true);
  expect(report.worldGaps.join('\n')).not.toMatch(/IPv6: not staged/);
  expect(report.cells.length).toBeGreaterThan(0);
  for (const c of report.cells) {
    expect(`${c.threat} × ${c.profile}`).toBe('app-nonroot × strict');
    expect(c.runs, tail).toBeGreaterThanOrEqual(1);
    // as the table says: holds where it expects holds, the port hijack found where it expects a bypass
    expect(['holds', 'bypass found'], `${JSON.stringify(c)}\n${tail}`).toContain(c.status);
  }
  expect(report.ok, tail).toBe(true);
  expect(r.code, tail).toBe(0);
  const { stdout: clusters } = await execa('kind', ['get', 'clusters']);
  expect(
    clusters.split('\n').filter((n) => n.startsWith('al-check-')),
    'the run deletes its cluster',
  ).toEqual([]);
});
