/**
 * Thin, checked wrappers over iproute2 for the real-kernel world.
 *
 * Safety (docs/design.md, 'Real-kernel safety'): every command that changes links, addresses, routes or
 * rules runs with `ip -n <ns>` inside a namespace this run created; the only root-namespace
 * commands are `ip netns add/del/list` of our own prefixed names, which create nothing in the
 * root network namespace itself.
 */
import { execFile } from 'node:child_process';

export class CommandError extends Error {
  constructor(
    readonly argv: readonly string[],
    readonly code: number | null,
    readonly stderr: string,
  ) {
    super(`\`${argv.join(' ')}\` failed (exit ${code ?? 'signal'}): ${stderr.trim() || '(no stderr)'}`);
  }
}

export function run(argv: readonly string[], input?: string, timeoutMs = 30_000): Promise<string> {
  return runOutput(argv, input, timeoutMs).then((o) => o.stdout);
}

/** run(), with stderr too (some tools print their summary there, e.g. conntrack). */
export function runOutput(
  argv: readonly string[],
  input?: string,
  timeoutMs = 30_000,
): Promise<{ stdout: string; stderr: string }> {
  const [cmd, ...args] = argv;
  if (!cmd) throw new Error('run: empty argv');
  return new Promise((resolve, reject) => {
    const child = execFile(cmd, args, { timeout: timeoutMs, maxBuffer: 16 * 1024 * 1024 }, (err, stdout, stderr) => {
      if (err) {
        const code =
          typeof (err as NodeJS.ErrnoException & { code?: unknown }).code === 'number'
            ? (err as unknown as { code: number }).code
            : null;
        reject(new CommandError(argv, code, String(stderr) || err.message));
      } else resolve({ stdout: String(stdout), stderr: String(stderr) });
    });
    if (input !== undefined) child.stdin?.end(input);
  });
}

/** `ip -n <ns> ...`: an iproute2 command inside one of our namespaces. */
export function ipIn(ns: string, args: readonly string[]): Promise<string> {
  return run(['ip', '-n', ns, ...args]);
}

/** Run a program inside a namespace (`ip netns exec`). */
export function execIn(ns: string, argv: readonly string[], input?: string, timeoutMs?: number): Promise<string> {
  return run(['ip', 'netns', 'exec', ns, ...argv], input, timeoutMs);
}

export async function listNetns(): Promise<string[]> {
  const out = await run(['ip', 'netns', 'list']);
  return out
    .split('\n')
    .map((l) => l.trim().split(/\s+/)[0] ?? '')
    .filter((n) => n.length > 0);
}
