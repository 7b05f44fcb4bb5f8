/** The `ambient-lab` executable as a user meets it. */
import { test, expect } from '@playwright/test';
import { spawnSync } from 'node:child_process';
import * as fs from 'node:fs';
import * as path from 'node:path';

const repo = path.resolve(import.meta.dirname, '..', '..', '..');
const bin = path.join(repo, 'bin', 'ambient-lab.js');

function cli(...args: string[]): { status: number | null; stdout: string; stderr: string } {
  const r = spawnSync(process.execPath, [bin, ...args], { cwd: repo, encoding: 'utf8' });
  return { status: r.status, stdout: r.stdout, stderr: r.stderr };
}

test('--version prints the package version', () => {
  const pkg = JSON.parse(fs.readFileSync(path.join(repo, 'package.json'), 'utf8')) as { version: string };
  const r = cli('--version');
  expect(r.status).toBe(0);
  expect(r.stdout.trim()).toBe(pkg.version);
});

test('--help describes the tool and every registered command', async () => {
  const r = cli('--help');
  expect(r.status).toBe(0);
  expect(r.stdout).toContain('Usage: ambient-lab');
  expect(r.stdout).toContain('node proxy');
  const { commands } = await import('../../../cli/commands/index.js');
  for (const c of commands) expect(r.stdout).toContain(c.name);
});

test('an unknown option fails with a pointer to --help', () => {
  const r = cli('--no-such-option');
  expect(r.status).not.toBe(0);
  expect(r.stderr).toContain('--help');
});
