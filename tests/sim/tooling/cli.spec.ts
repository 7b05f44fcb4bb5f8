/** The `ambient-lab` executable as a user meets it. */
import { test, expect } from '@playwright/test';
import { spawnSync } from 'node:child_process';
import * as fs from 'node:fs';
import * as os from 'node:os';
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

test('--html: a path that cannot take the report is a usage error (exit 2) before any work; with --replay it is refused', () => {
  const file = path.join(fs.mkdtempSync(path.join(os.tmpdir(), 'al-html-')), 'not-a-dir');
  try {
    fs.writeFileSync(file, 'x');
    const check = cli('check', '--html', file, '--runs', '1');
    expect(check.status, check.stderr).toBe(2);
    expect(check.stderr).toContain(`--html "${file}": exists and is not a directory`);
    const replay = cli('check', '--replay', file, '--html', path.dirname(file));
    expect(replay.status, replay.stderr).toBe(2);
    expect(replay.stderr).toContain('with --html: a replay takes its cell');
    const trace = cli('trace', 'fixtures/labs/inpod.yaml', '--html', path.join(path.dirname(file), 'no', 'x.html'));
    expect(trace.status, trace.stderr).toBe(2);
    expect(trace.stderr).toContain('does not exist; create it first');
    const traceDir = cli('trace', 'fixtures/labs/inpod.yaml', '--html', path.dirname(file));
    expect(traceDir.status, traceDir.stderr).toBe(2);
    expect(traceDir.stderr).toContain('give the path of the HTML file to write, not a directory');
  } finally {
    fs.rmSync(path.dirname(file), { recursive: true, force: true });
  }
});

test('the cluster commands check every value before any work: a bad one exits 2 naming it, with no cluster and no root needed', () => {
  const cases: [string[], string][] = [
    [['pod', 'add', 'Bad_Name'], 'pod name "Bad_Name": not a Kubernetes name'],
    [['pod', 'add', 'web', '--caps', 'SYS_ADMIN'], 'capability "SYS_ADMIN": accepted: NET_ADMIN, NET_RAW'],
    [['pod', 'add', 'web', '--tcp-port', '70000'], '--tcp-port'],
    [['pod', 'add', 'web', '--uid', '-1'], '--uid'],
    [['pod', 'add', 'web', '--label', 'novalue'], 'expected KEY=VALUE to set or KEY- to remove'],
    [['label', 'pod', 'demo/a', 'k=bad value'], 'label k="bad value": a value is empty or 1-63'],
    [['label', 'node', 'x', 'k=v'], 'expected pod or namespace'],
    [['annotate', 'namespace', 'Shop', 'k=v'], 'namespace "Shop": not a Kubernetes name'],
    [['policy', 'delete', 'nonamespace'], 'expected NAMESPACE/NAME'],
    [['policy', 'apply', '/nonexistent/p.yaml'], 'cannot read policy file /nonexistent/p.yaml: ENOENT'],
    [['component', 'explode', 'agent', '--node', 'node-0'], 'action "explode": stop, start or restart'],
    [['component', 'stop', 'kubelet', '--node', 'node-0'], 'component "kubelet": agent or proxy'],
    [['node', 'halt', 'node-0'], 'expected reboot'],
    [['api', 'fault', 'maybe'], 'expected on or off'],
    [['api', 'fault', 'on', '--mode', 'slow'], 'mode "slow": unreachable or error'],
    [['logs', 'kubelet', '--node', 'node-0'], 'expected agent or proxy'],
    [['up', '--profile', 'lax'], 'unknown profile'],
  ];
  for (const [args, msg] of cases) {
    const r = cli(...args, '--name', 'no-such-lab');
    expect(r.status, `${args.join(' ')}: ${r.stderr}`).toBe(2);
    expect(r.stderr, args.join(' ')).toContain(msg);
  }
});
