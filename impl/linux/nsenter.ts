/**
 * One command inside a network namespace: `nsenter --net=<NetnsId path> <argv>`, the way the
 * Linux adapters that act on pod namespaces (netns-rules.ts, pod-flows.ts) run their tools. The
 * result carries the exit status instead of throwing, so each adapter words its own error.
 */
import { execFile } from 'node:child_process';
import type { NetnsId } from '../api/ids.js';

export interface NsenterResult {
  readonly ok: boolean;
  readonly stdout: string;
  /** The tool's stderr, or when it printed none, why it failed (spawn error, timeout). */
  readonly stderr: string;
  readonly code: number | null;
}

export function nsenterRun(
  netns: NetnsId,
  argv: readonly string[],
  opts: { readonly timeoutMs: number; readonly input?: string },
): Promise<NsenterResult> {
  return new Promise((resolve) => {
    const child = execFile(
      'nsenter',
      [`--net=${netns}`, ...argv],
      { timeout: opts.timeoutMs, maxBuffer: 64 * 1024 * 1024 },
      (err, stdout, stderr) => {
        const code = err ? (typeof err.code === 'number' ? err.code : null) : 0;
        const why = err && stderr.length === 0 ? err.message : '';
        resolve({ ok: !err, stdout: String(stdout), stderr: String(stderr) + why, code });
      },
    );
    // EPIPE when the tool exits before reading stdin is reported through the exit status.
    child.stdin?.on('error', () => undefined);
    child.stdin?.end(opts.input ?? '');
  });
}

/** How an error names the command: `nsenter --net=<path> <argv>` in backquotes. */
export function nsenterText(netns: NetnsId | string, argv: readonly string[]): string {
  return `\`nsenter --net=${netns} ${argv.join(' ')}\``;
}
