/**
 * Run the built CLI (`bin/ambient-lab.js ARGS`) as a user would, in a child process, and collect
 * what it printed. For the tests that drive whole commands (check --world netns|kind, up/down).
 */
import { spawn } from 'node:child_process';
import * as path from 'node:path';

export const REPO = path.resolve(import.meta.dirname, '..');

export interface CliRun {
  /** Exit code; null when a signal ended it (e.g. the timeout). */
  readonly code: number | null;
  readonly stdout: string;
  readonly stderr: string;
  /** The child's pid: a real-kernel world it made carries it in its run prefix (e2e/netns/netns-run.ts). */
  readonly pid: number | undefined;
}

export function runCli(
  args: readonly string[],
  opts: { env?: Readonly<Record<string, string>>; timeoutMs?: number } = {},
): Promise<CliRun> {
  return runScript(path.join(REPO, 'bin', 'ambient-lab.js'), args, opts);
}

/** Run one of the repository's node entry points (e.g. dist/cli/soak-main.js) the same way. */
export function runScript(
  script: string,
  args: readonly string[],
  opts: { env?: Readonly<Record<string, string>>; timeoutMs?: number } = {},
): Promise<CliRun> {
  return new Promise((resolve, reject) => {
    const c = spawn(process.execPath, [script, ...args], {
      cwd: REPO,
      ...(opts.env ? { env: { ...process.env, ...opts.env } } : {}),
      ...(opts.timeoutMs ? { timeout: opts.timeoutMs } : {}),
    });
    let stdout = '';
    let stderr = '';
    c.stdout.on('data', (d) => (stdout += d));
    c.stderr.on('data', (d) => (stderr += d));
    c.on('error', reject);
    c.on('close', (code) => resolve({ code, stdout, stderr, pid: c.pid }));
  });
}
