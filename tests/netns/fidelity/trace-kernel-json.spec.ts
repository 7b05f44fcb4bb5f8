/**
 * `trace --kernel --json` on the real kernel: the sim+kernel report validates against the
 * published schema (docs/schemas/trace-report.schema.json), a lab where both agree exits 0, and
 * a difference exits 1.
 */
import { test, expect } from '@playwright/test';
import * as path from 'node:path';
import { REPO, runCli } from '../../cli-run.js';
import { schemaErrors } from '../../schemas.js';

interface Report {
  format: string;
  world: string;
  differences: { attempt: string; field: string }[];
  kernelAttempts: unknown[];
}

test('trace --kernel --json reports sim and kernel results in the published shape, and exits 1 on a difference', async () => {
  // The example lab: sim and kernel agree (pod-b, without rules, tracks nothing on either).
  const same = await runCli(['trace', path.join(REPO, 'fixtures', 'labs', 'inpod.yaml'), '--kernel', '--json'], {
    timeoutMs: 150_000,
  });
  expect(same.code, same.stderr).toBe(0);
  const sameDoc = JSON.parse(same.stdout) as Report;
  expect(sameDoc).toMatchObject({ format: 'ambient-lab/trace@1', world: 'sim+kernel', differences: [] });
  expect(schemaErrors('trace-report', sameDoc)).toBeUndefined();

  // A lab showing a documented divergence (reject-tcp-reset-rst-not-simulated, known-divergences.ts).
  const lab = path.join(REPO, 'fixtures', 'fidelity', 'reject-rst-dropped-seed-20260103.yaml');
  const r = await runCli(['trace', lab, '--kernel', '--json'], { timeoutMs: 150_000 });
  expect(r.code, r.stderr).toBe(1);
  const doc = JSON.parse(r.stdout) as Report;
  expect(doc).toMatchObject({ format: 'ambient-lab/trace@1', world: 'sim+kernel' });
  expect(doc.differences).toEqual([
    { attempt: 'a0-server-tcp-server-app', field: 'outcome', sim: 'refused', kernel: 'timeout' },
  ]);
  expect(schemaErrors('trace-report', doc)).toBeUndefined();
});
