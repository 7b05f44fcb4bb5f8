/**
 * Long-running processes inside a network namespace, as a given uid/gid with a given capability
 * set. `ip netns exec` and `setpriv` both exec in place, so the pid Node gets from spawn() is the
 * pid of the program itself; that pid is the only handle used to stop it (docs/design.md, 'Real-kernel
 * safety': end only processes you started, by their pid).
 */
import { spawn, type ChildProcess } from 'node:child_process';

export interface SpawnOptions {
  /** Run as this uid (default: stay root). */
  readonly uid?: number;
  /** Run with this gid (default: the uid when a uid is given). */
  readonly gid?: number;
  /** Supplementary groups (default: none — cleared whenever a uid or gid is given). */
  readonly groups?: readonly number[];
  /**
   * Capabilities the program keeps, lower-case without `cap_` (e.g. `['net_admin']`); they become
   * inheritable, ambient and the whole bounding set. Default: all of root's when no uid is given,
   * none when a uid is given. `[]` drops every capability, also for root.
   */
  readonly caps?: readonly string[];
  /** Extra environment for the program (merged over this process's environment). */
  readonly env?: Readonly<Record<string, string>>;
}

interface ProcessExit {
  readonly code: number | null;
  readonly signal: NodeJS.Signals | null;
}

const CAP_NAME = /^[a-z_]{2,32}$/;

/** The argv prefix that drops to `opts`' identity, or `[]` when nothing needs dropping. */
export function setprivArgs(opts: SpawnOptions): string[] {
  if (opts.uid === undefined && opts.gid === undefined && opts.groups === undefined && opts.caps === undefined)
    return [];
  const args = ['setpriv'];
  if (opts.uid !== undefined || opts.gid !== undefined || opts.groups !== undefined) {
    const uid = opts.uid ?? 0;
    const gid = opts.gid ?? uid;
    const groups = opts.groups ?? [];
    for (const [what, v] of [['uid', uid], ['gid', gid], ...groups.map((g) => ['group', g] as const)] as const) {
      if (!Number.isInteger(v) || v < 0 || v > 0xfffffffe)
        throw new Error(`invalid ${what} ${v}: expected an integer in 0..4294967294`);
    }
    args.push(
      `--reuid=${uid}`,
      `--regid=${gid}`,
      groups.length > 0 ? `--groups=${groups.join(',')}` : '--clear-groups',
    );
  }
  const caps = opts.caps ?? (opts.uid !== undefined && opts.uid !== 0 ? [] : undefined);
  if (caps !== undefined) {
    for (const c of caps) {
      if (!CAP_NAME.test(c))
        throw new Error(
          `invalid capability name ${JSON.stringify(c)}: expected e.g. 'net_admin' (lower case, no cap_ prefix)`,
        );
    }
    const set = ['-all', ...caps.map((c) => `+${c}`)].join(',');
    // Ambient caps survive the exec of a non-root program; the bounding set caps what root keeps.
    args.push(`--inh-caps=${set}`, `--bounding-set=${set}`);
    if (caps.length > 0) args.push(`--ambient-caps=${set}`);
  }
  return args;
}

/** One program running inside a namespace. */
export class NetnsProcess {
  private out = '';
  private err = '';
  private exitInfo: ProcessExit | undefined;
  readonly exited: Promise<ProcessExit>;
  private readonly waiters = new Set<() => void>();

  constructor(
    readonly netns: string,
    readonly argv: readonly string[],
    private readonly child: ChildProcess,
  ) {
    // Without a listener a spawn failure (e.g. ENOENT) would crash the test process.
    child.on('error', (e) => {
      this.err += `spawn error: ${e.message}\n`;
    });
    if (child.pid === undefined)
      throw new Error(`could not start ${argv.join(' ')} in netns ${netns}: is iproute2 installed?`);
    child.stdout?.setEncoding('utf8').on('data', (d: string) => {
      this.out += d;
      this.wake();
    });
    child.stderr?.setEncoding('utf8').on('data', (d: string) => {
      this.err += d;
      this.wake();
    });
    this.exited = new Promise((resolve) => {
      child.on('exit', (code, signal) => {
        this.exitInfo = { code, signal };
        this.wake();
        resolve(this.exitInfo);
      });
    });
  }

  get pid(): number {
    // Checked in the constructor.
    return this.child.pid as number;
  }

  get stdout(): string {
    return this.out;
  }

  get stderr(): string {
    return this.err;
  }

  get running(): boolean {
    return this.exitInfo === undefined;
  }

  private wake(): void {
    for (const w of [...this.waiters]) w();
  }

  /** Resolve with the stdout so far once it matches `pattern`; reject on exit or timeout. */
  waitForOutput(pattern: RegExp | string, timeoutMs = 10_000): Promise<string> {
    const matches = (): boolean => (typeof pattern === 'string' ? this.out.includes(pattern) : pattern.test(this.out));
    return new Promise((resolve, reject) => {
      const check = (): void => {
        if (matches()) {
          done();
          resolve(this.out);
          return;
        }
        if (this.exitInfo) {
          done();
          reject(
            new Error(
              `${this.describe()} exited (code ${this.exitInfo.code}, signal ${this.exitInfo.signal}) before printing ${String(pattern)}; stdout: ${JSON.stringify(this.out)}; stderr: ${JSON.stringify(this.err)}`,
            ),
          );
        }
      };
      const timer = setTimeout(() => {
        done();
        reject(
          new Error(
            `${this.describe()} did not print ${String(pattern)} within ${timeoutMs} ms; stdout: ${JSON.stringify(this.out)}; stderr: ${JSON.stringify(this.err)}`,
          ),
        );
      }, timeoutMs);
      timer.unref();
      const done = (): void => {
        clearTimeout(timer);
        this.waiters.delete(check);
      };
      this.waiters.add(check);
      check();
    });
  }

  /** Stop the program by its pid: `signal` first, SIGKILL after `graceMs`. */
  async stop(signal: NodeJS.Signals = 'SIGTERM', graceMs = 2_000): Promise<ProcessExit> {
    if (this.exitInfo) return this.exitInfo;
    this.signal(signal);
    const timer = setTimeout(() => this.signal('SIGKILL'), graceMs);
    timer.unref();
    try {
      return await this.exited;
    } finally {
      clearTimeout(timer);
    }
  }

  private signal(sig: NodeJS.Signals): void {
    if (this.exitInfo) return;
    try {
      process.kill(this.pid, sig);
    } catch (e) {
      // ESRCH: it ended between the check and the kill; the exit event follows.
      if ((e as NodeJS.ErrnoException).code !== 'ESRCH') throw e;
    }
  }

  describe(): string {
    return `pid ${this.pid} (${this.argv.join(' ')}) in netns ${this.netns}`;
  }
}

/** Every process a run started, so dispose() can stop exactly those. */
export class NetnsProcesses {
  private readonly live = new Set<NetnsProcess>();

  spawn(netns: string, argv: readonly string[], opts: SpawnOptions = {}): NetnsProcess {
    if (argv.length === 0) throw new Error(`spawn in netns ${netns}: empty argv`);
    const full = ['netns', 'exec', netns, ...setprivArgs(opts), ...argv];
    const child = spawn('ip', full, {
      stdio: ['ignore', 'pipe', 'pipe'],
      env: opts.env ? { ...process.env, ...opts.env } : process.env,
    });
    const p = new NetnsProcess(netns, argv, child);
    this.live.add(p);
    void p.exited.then(() => this.live.delete(p));
    return p;
  }

  /** Processes still running, optionally only those in one namespace. */
  running(netns?: string): NetnsProcess[] {
    return [...this.live].filter((p) => p.running && (netns === undefined || p.netns === netns));
  }

  /** Stop every tracked process (optionally of one namespace) by pid and wait for each to exit. */
  async stopAll(netns?: string): Promise<void> {
    await Promise.all(this.running(netns).map((p) => p.stop()));
  }
}
