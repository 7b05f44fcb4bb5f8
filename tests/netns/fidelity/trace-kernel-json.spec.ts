/**
 * `trace --kernel --json` on the real kernel: the sim+kernel report validates against the
 * published schema (docs/schemas/trace-report.schema.json), and a difference exits 1.
 */
import { test, expect } from '@playwright/test';
import * as path from 'node:path';
import { REPO, runCli } from '../../cli-run.js';
import { schemaErrors } from '../../schemas.js';

test('trace --kernel --json reports sim and kernel results in the published shape, and exits 1 on a difference', async () => {
  const r = await runCli(['trace', path.join(REPO, 'fixtures', 'labs', 'inpod.yaml'), '--kernel', '--json'], {
    timeoutMs: 150_000,
  });
  // The example lab has one documented divergence (scenarios/fidelity/known-divergences.ts), so the kernel differs.
  expect(r.code, r.stderr).toBe(1);
  const doc = JSON.parse(r.stdout) as {
    format: string;
    world: string;
    differences: { attempt: string; field: string }[];
    kernelAttempts: unknown[];
  };
  expect(doc).toMatchObject({ format: 'ambient-lab/trace@1', world: 'sim+kernel' });
  expect(doc.differences).toEqual([
    { attempt: 'proxy-upstream', field: 'originalDst', sim: '10.244.1.6:8080', kernel: '(ENOENT)' },
  ]);
  expect(schemaErrors('trace-report', doc)).toBeUndefined();
});
