/**
 * The CI workflow (.github/workflows/ci.yaml, its only copy): it parses, every Playwright project
 * it runs exists in playwright.config.ts, every project is run by some job, and the kind job asks
 * for the kind world (KIND=1) and removes leftover al- clusters even when the tests fail.
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
  readonly jobs: Record<string, { readonly steps: readonly Step[] }>;
}

const workflow = parse(readFileSync(path.join(ROOT, '.github/workflows/ci.yaml'), 'utf8')) as Workflow;
const projects = [
  ...readFileSync(path.join(ROOT, 'playwright.config.ts'), 'utf8').matchAll(/name: '([a-z-]+)',\s+testDir:/g),
].map((m) => m[1]!);

function runs(job: string): string[] {
  return (workflow.jobs[job]?.steps ?? []).flatMap((s) => (s.run ? [s.run] : []));
}

test('one copy: the workflow lives under .github/workflows only', () => {
  expect(existsSync(path.join(ROOT, 'ci/github-workflow.yaml'))).toBe(false);
  expect(Object.keys(workflow.jobs).sort()).toEqual(['browser', 'containers', 'kind', 'netns', 'sim', 'static']);
});

test('every Playwright project is run by a job, and every --project a job names exists', () => {
  expect(projects.length).toBeGreaterThan(0);
  const named = Object.keys(workflow.jobs).flatMap((j) =>
    runs(j).flatMap((r) => [...r.matchAll(/--project=([a-z-]+)/g)].map((m) => m[1]!)),
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
