/**
 * `check` stopped by a signal while its real-kernel worlds exist (Ctrl-C in a terminal, a CI
 * timeout's SIGTERM): it ends its worker threads, removes everything its worlds made — found by
 * the run stem that carries its pid — lists what it removed, and exits 143 without a verdict.
 * Runs on the netns world (netns project) and the container world (containers project).
 */
import { test, expect } from '@playwright/test';
import { spawn } from 'node:child_process';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { containerNames } from '../../../e2e/containers/world.js';
import { listNetns } from '../../../e2e/netns/ip.js';
import { processRunStem } from '../../../e2e/netns/netns-run.js';
import { REPO } from '../../cli-run.js';
import { oneCellCheckArgs, skipUnlessSuiteWorldAvailable, suiteWorld } from './fixture.js';

skipUnlessSuiteWorldAvailable();
test.setTimeout(600_000);

const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

test('SIGTERM during check --world netns|containers: every namespace, process, container and run dir of its worlds is removed; exit 143', async () => {
  const world = suiteWorld();
  const child = spawn(
    process.execPath,
    [path.join(REPO, 'bin', 'ambient-lab.js'), ...oneCellCheckArgs(world, 4), '--no-save'],
    { cwd: REPO },
  );
  let stderr = '';
  let stdout = '';
  child.stderr.on('data', (d) => (stderr += d));
  child.stdout.on('data', (d) => (stdout += d));
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) =>
    child.on('close', (code, signal) => resolve({ code, signal })),
  );
  const stem = processRunStem(child.pid!);
  const ours = (name: string): boolean => name.replace(/^\//, '').startsWith(stem);

  // Interrupt once its world exists and has started to fill (namespaces of the run appear).
  let seen: string[] = [];
  for (let t = 0; seen.length < 3; t += 250) {
    if (t > 240_000 || child.exitCode !== null)
      throw new Error(`check made no world in time (exit ${child.exitCode}); stderr: ${stderr.slice(-2000)}`);
    seen = (await listNetns()).filter(ours);
    await sleep(250);
  }
  await sleep(2000);
  child.kill('SIGTERM');
  const { code } = await exited;

  expect(code, stderr.slice(-3000)).toBe(143);
  expect(stdout, 'an interrupted check prints no report').toBe('');
  expect(stderr).toContain('check interrupted (SIGTERM)');
  // A positive control for the clean-up: it did have something to remove, and said so.
  expect(stderr).toMatch(/network namespace al-/);
  expect((await listNetns()).filter(ours)).toEqual([]);
  const root = world === 'containers' ? '/run/ambient-lab/container-worlds' : '/run/ambient-lab/worlds';
  expect(fs.existsSync(root) ? fs.readdirSync(root).filter(ours) : []).toEqual([]);
  if (world === 'containers') {
    const names = await containerNames();
    expect(names.filter(ours)).toEqual([]);
  }
});
