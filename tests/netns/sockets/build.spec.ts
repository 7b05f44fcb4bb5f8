/**
 * The install-time build of the native addon (tools/build-native.mjs) names the missing build
 * tool and fails, instead of burying it in node-gyp output. Runs without root: it only spawns
 * the wrapper with a PATH that lacks the tools, in a scratch directory.
 */
import { test, expect } from '@playwright/test';
import { spawnSync } from 'node:child_process';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { repo } from './fixture.js';

const wrapper = path.join(repo, 'tools', 'build-native.mjs');

function runWrapper(binDir: string, extraEnv: Record<string, string> = {}): { status: number | null; stderr: string } {
  const env: Record<string, string> = { PATH: binDir, HOME: os.tmpdir(), ...extraEnv };
  const r = spawnSync(process.execPath, [wrapper], { cwd: binDir, env, encoding: 'utf8' });
  return { status: r.status, stderr: r.stderr };
}

function which(cmd: string): string | undefined {
  for (const dir of (process.env['PATH'] ?? '').split(':')) {
    const p = path.join(dir, cmd);
    if (fs.existsSync(p)) return fs.realpathSync(p);
  }
  return undefined;
}

test.skip(process.platform !== 'linux', 'the wrapper only builds on Linux');

test('with no build tools on PATH, the install fails and names python3, make and g++', () => {
  const bin = fs.mkdtempSync(path.join(os.tmpdir(), 'al-nobuild-'));
  try {
    const r = runWrapper(bin);
    expect(r.status).toBe(1);
    expect(r.stderr).toContain('cannot build the native socket addon: missing build tools: python3');
    expect(r.stderr).toContain('make');
    expect(r.stderr).toContain('g++ (a C++17 compiler');
    expect(r.stderr).toContain('apt-get install -y python3 make g++');
  } finally {
    fs.rmSync(bin, { recursive: true, force: true });
  }
});

test('with only the compiler missing, the message names only the compiler', () => {
  const make = which('make');
  const python = spawnSync('python3', ['-c', 'import sys; print(sys.executable)'], { encoding: 'utf8' }).stdout.trim();
  test.skip(!make || python === '', 'needs make and python3 on this machine to build the partial PATH');
  const bin = fs.mkdtempSync(path.join(os.tmpdir(), 'al-nobuild-'));
  try {
    fs.symlinkSync(make ?? '', path.join(bin, 'make'));
    fs.symlinkSync(python, path.join(bin, 'python3'));
    const r = runWrapper(bin);
    expect(r.status).toBe(1);
    expect(r.stderr).toContain('missing build tools: g++');
    expect(r.stderr).not.toContain('python3 (Python 3');
    expect(r.stderr).not.toMatch(/missing build tools:.*make/);
  } finally {
    fs.rmSync(bin, { recursive: true, force: true });
  }
});

test('AMBIENT_LAB_SKIP_NATIVE=1 skips the build with a message and succeeds', () => {
  const bin = fs.mkdtempSync(path.join(os.tmpdir(), 'al-nobuild-'));
  try {
    const r = runWrapper(bin, { AMBIENT_LAB_SKIP_NATIVE: '1' });
    expect(r.status).toBe(0);
    expect(r.stderr).toContain('skipped because AMBIENT_LAB_SKIP_NATIVE=1');
  } finally {
    fs.rmSync(bin, { recursive: true, force: true });
  }
});
