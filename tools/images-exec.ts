/**
 * Process helpers of the image builders (tools/images-base.ts, tools/images.ts): commands run
 * without a shell, each failure naming the command, and the input hash the image tags are made of.
 */
import { execFile, spawn } from 'node:child_process';
import { createHash } from 'node:crypto';

interface RunResult {
  readonly code: number;
  readonly stdout: string;
  readonly stderr: string;
}

export function run(
  cmd: string,
  args: readonly string[],
  opts: { cwd?: string; env?: NodeJS.ProcessEnv } = {},
): Promise<RunResult> {
  return new Promise((resolve) => {
    execFile(cmd, [...args], { ...opts, maxBuffer: 64 * 1024 * 1024 }, (err, stdout, stderr) => {
      // err.code is the exit code, or a string such as ENOENT when the command did not start
      const code = err ? (typeof err.code === 'number' ? err.code : -1) : 0;
      resolve({ code, stdout: String(stdout), stderr: String(stderr) || (err && code === -1 ? err.message : '') });
    });
  });
}

export async function mustRun(
  cmd: string,
  args: readonly string[],
  what: string,
  opts: { cwd?: string } = {},
): Promise<string> {
  const r = await run(cmd, args, opts);
  if (r.code !== 0)
    throw new Error(
      `${what}: \`${cmd} ${args.join(' ')}\` exited ${r.code}: ${(r.stderr || r.stdout).trim().slice(-2000)}`,
    );
  return r.stdout;
}

/** `a | b` without a shell: a's stdout into b's stdin; rejects naming the command that failed. */
export function pipe(a: readonly string[], b: readonly string[], what: string): Promise<string> {
  return new Promise((resolve, reject) => {
    const pa = spawn(a[0]!, a.slice(1), { stdio: ['ignore', 'pipe', 'pipe'] });
    const pb = spawn(b[0]!, b.slice(1), { stdio: ['pipe', 'pipe', 'pipe'] });
    pa.stdout.pipe(pb.stdin);
    let errA = '';
    let errB = '';
    let out = '';
    pa.stderr.on('data', (d: Buffer) => (errA += d.toString()));
    pb.stderr.on('data', (d: Buffer) => (errB += d.toString()));
    pb.stdout.on('data', (d: Buffer) => (out += d.toString()));
    let codeA: number | null | undefined;
    let codeB: number | null | undefined;
    const done = (): void => {
      if (codeA === undefined || codeB === undefined) return;
      if (codeA !== 0) reject(new Error(`${what}: \`${a.join(' ')}\` exited ${codeA}: ${errA.trim()}`));
      else if (codeB !== 0) reject(new Error(`${what}: \`${b.join(' ')}\` exited ${codeB}: ${errB.trim()}`));
      else resolve(out.trim());
    };
    pa.on('error', reject);
    pb.on('error', reject);
    pa.on('close', (c) => {
      codeA = c;
      done();
    });
    pb.on('close', (c) => {
      codeB = c;
      done();
    });
  });
}

/** sha256 over labelled parts, order-sensitive; 16 hex digits are plenty for a local tag. */
export function hashInputs(parts: ReadonlyArray<readonly [string, string | Buffer]>): string {
  const h = createHash('sha256');
  for (const [label, value] of parts) {
    h.update(`${label}\0${Buffer.byteLength(value)}\0`);
    h.update(value);
  }
  return h.digest('hex').slice(0, 16);
}

export async function imageExists(tag: string): Promise<boolean> {
  return (await run('docker', ['image', 'inspect', '--format', '{{.Id}}', tag])).code === 0;
}
