/**
 * The CI workflows (.github/workflows/, their only copy): ci.yaml on every push, long.yaml
 * nightly. They parse, every Playwright project they run exists in playwright.config.ts, every
 * project is run by some job (directly or through an `npm run` script that names it), the long
 * runs are split by Playwright's own --shard, and the kind job asks for the kind world (KIND=1)
 * and removes leftover al- clusters even when the tests fail.
 */
import { test, expect } from '@playwright/test';
import { existsSync, readFileSync } from 'node:fs';
import * as path from 'node:path';
import { fileURLToPath } from 'node:url';
import { parse } from 'yaml';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../../..');

interface Step {
  readonly run?: string;
  readonly if?: string;
  readonly name?: string;
}
interface Workflow {
  readonly jobs: Record<string, { readonly steps: readonly Step[]; readonly env?: Record<string, string> }>;
}

const workflow = parse(readFileSync(path.join(ROOT, '.github/workflows/ci.yaml'), 'utf8')) as Workflow;
const long = parse(readFileSync(path.join(ROOT, '.github/workflows/long.yaml'), 'utf8')) as Workflow;
const scripts = (
  JSON.parse(readFileSync(path.join(ROOT, 'package.json'), 'utf8')) as { scripts: Record<string, string> }
).scripts;
const projects = [
  ...readFileSync(path.join(ROOT, 'playwright.config.ts'), 'utf8').matchAll(/name: '([a-z-]+)',\s+testDir:/g),
].map((m) => m[1]!);

function runs(job: string, wf: Workflow = workflow): string[] {
  return (wf.jobs[job]?.steps ?? []).flatMap((s) => (s.run ? [s.run] : []));
}

/** A step's command with each `npm run <script>` it calls followed by that script's text. */
function expanded(run: string): string {
  const called = [...run.matchAll(/npm run ([a-z:-]+)/g)].map((m) => scripts[m[1]!] ?? '');
  return [run, ...called].join('\n');
}

test('one copy: the workflow lives under .github/workflows only', () => {
  expect(existsSync(path.join(ROOT, 'ci/github-workflow.yaml'))).toBe(false);
  expect(Object.keys(workflow.jobs).sort()).toEqual(['browser', 'containers', 'kind', 'netns', 'sim', 'static']);
});

test('every Playwright project is run by a job, and every --project a job names exists', () => {
  expect(projects.length).toBeGreaterThan(0);
  const named = [workflow, long].flatMap((wf) =>
    Object.keys(wf.jobs).flatMap((j) =>
      runs(j, wf).flatMap((r) => [...expanded(r).matchAll(/--project=([a-z-]+)/g)].map((m) => m[1]!)),
    ),
  );
  for (const p of named) expect(projects, `--project=${p}`).toContain(p);
  for (const p of projects) expect(named, `project ${p}`).toContain(p);
});

test('the kind job asks for the kind world and always deletes leftover al- clusters', () => {
  expect(runs('kind').some((r) => /\bKIND=1\b.*--project=kind/.test(r))).toBe(true);
  const cleanup = workflow.jobs['kind']!.steps.find((s) => s.run?.includes('kind delete cluster'));
  expect(cleanup?.if).toBe('always()');
  expect(cleanup?.run).toMatch(/\^al-/);
});

test('the long runs: the long project through npm run test:long, split across machines by --shard', () => {
  expect(scripts['test:long']).toMatch(/AMBIENT_LAB_LONG=1 playwright test --project=long/);
  const step = runs('long', long).find((r) => r.includes('npm run test:long'));
  expect(step).toMatch(/--shard=\$\{\{ matrix\.shard \}\}/);
  // Shards must list the same soak seeds: a base seed fixed for the whole run, not each machine's clock.
  expect(long.jobs['long']!.env?.['SOAK_BASE_SEED']).toMatch(/^\$\{\{ github\.run_number \}\}\d*$/);
});
