/**
 * `trace --kernel --json` on the real kernel: the sim+kernel report validates against the
 * published schema (docs/schemas/trace-report.schema.json), a lab where both agree exits 0, and
 * a difference a known divergence explains is reported with its name and exits 0 (an unexplained
 * one exits 1: classifyDifferences, tests/sim/fidelity/known-divergences.spec.ts — no lab makes the
 * model differ from Linux outside the known divergences, by construction).
 */
import { test, expect } from '@playwright/test';
import * as path from 'node:path';
import { REPO, runCli } from '../../cli-run.js';
import { schemaErrors } from '../../schemas.js';

interface Report {
  format: string;
  world: string;
  differences: { attempt: string; field: string; known?: string }[];
  kernelAttempts: unknown[];
}

test('trace --kernel --json reports sim and kernel results in the published shape; a known divergence is named, not a failure', async () => {
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
  expect(r.code, r.stderr).toBe(0);
  const doc = JSON.parse(r.stdout) as Report;
  expect(doc).toMatchObject({ format: 'ambient-lab/trace@1', world: 'sim+kernel' });
  expect(doc.differences).toEqual([
    {
      attempt: 'a0-server-tcp-server-app',
      field: 'outcome',
      sim: 'refused',
      kernel: 'timeout',
      known: 'reject-tcp-reset-rst-not-simulated',
    },
  ]);
  expect(schemaErrors('trace-report', doc)).toBeUndefined();
  // The text says which divergence explains it.
  const text = await runCli(['trace', lab, '--kernel', '--no-packets'], { timeoutMs: 150_000 });
  expect(text.code, text.stderr).toBe(0);
  expect(text.stdout).toContain('no differences between the simulation and the real kernel');
  expect(text.stdout).toContain(
    'reject-tcp-reset-rst-not-simulated: a0-server-tcp-server-app outcome: sim refused / kernel timeout',
  );
});
