/**
 * Probe processes: one long-running probe-program per (namespace, owner), spoken to over its
 * stdin/stdout (probe-protocol.ts). Processes are tracked by pid and stopped by pid only.
 *
 * The probe runs from the compiled tree (dist/e2e/netns/probe-program.js): `npm run build` makes
 * it. Under the Playwright TS loader this module maps itself onto that file.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { existsSync, statSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { createInterface } from 'node:readline';
import { setprivArgs } from './processes.js';
import type { ProbeEvent, ProbeReply, ProbeRequest } from './probe-protocol.js';

export interface ProbeOwner {
  readonly uid: number;
  readonly gid: number;
  /** Upper-case capability names without CAP_ (lab-file vocabulary), e.g. ['NET_ADMIN']. */
  readonly caps: readonly string[];
}

/** The owner of configuration probes: root with every capability. */
export const ROOT_ADMIN = 'root-admin' as const;

function ownerKey(o: ProbeOwner | typeof ROOT_ADMIN): string {
  return o === ROOT_ADMIN ? ROOT_ADMIN : `${o.uid}:${o.gid}:${[...o.caps].sort().join(',')}`;
}

/** Path of the compiled probe program; throws with what to do when it is missing or stale. */
function probeProgramPath(): string {
  const here = fileURLToPath(import.meta.url);
  const dir = dirname(here);
  if (here.endsWith('.js')) return join(dir, 'probe-program.js');
  const root = resolve(dir, '..', '..');
  const built = join(root, 'dist', 'e2e', 'netns', 'probe-program.js');
  const src = join(dir, 'probe-program.ts');
  if (!existsSync(built))
    throw new Error(`the probe program is not built (${built} missing): run \`npm run build\` first`);
  if (existsSync(src) && statSync(src).mtimeMs > statSync(built).mtimeMs + 1000) {
    throw new Error(`the built probe program ${built} is older than ${src}: run \`npm run build\` first`);
  }
  return built;
}

/** Every event every probe of a pool reported, in arrival order, with waiting. */
class ProbeEvents {
  private readonly queue: ProbeEvent[] = [];
  private readonly waiters = new Set<() => void>();

  push(e: ProbeEvent): void {
    this.queue.push(e);
    for (const w of [...this.waiters]) w();
  }

  /** Forget everything seen so far. */
  drain(): ProbeEvent[] {
    return this.queue.splice(0);
  }

  /** Resolve with the first queued event matching `pred` (removing it), or undefined after `ms`. */
  take<T extends ProbeEvent>(pred: (e: ProbeEvent) => e is T, ms: number): Promise<T | undefined> {
    return new Promise((resolve) => {
      const check = (): boolean => {
        const i = this.queue.findIndex(pred);
        if (i < 0) return false;
        const [e] = this.queue.splice(i, 1);
        done();
        resolve(e as T);
        return true;
      };
      const timer = setTimeout(() => {
        done();
        resolve(undefined);
      }, ms);
      const done = (): void => {
        clearTimeout(timer);
        this.waiters.delete(onPush);
      };
      const onPush = (): void => {
        check();
      };
      if (!check()) this.waiters.add(onPush);
    });
  }
}

export class ProbeError extends Error {
  constructor(
    readonly code: string,
    message: string,
  ) {
    super(message);
  }
}

/** One probe process. */
export class Probe {
  private nextId = 1;
  private readonly pending = new Map<number, { resolve: (v: unknown) => void; reject: (e: Error) => void }>();
  private stderr = '';
  private exitedInfo: string | undefined;
  readonly exited: Promise<void>;
  private readyResolve: (() => void) | undefined;
  readonly ready: Promise<void>;

  private constructor(
    readonly netns: string,
    readonly owner: ProbeOwner | typeof ROOT_ADMIN,
    private readonly child: ChildProcess,
    events: ProbeEvents,
  ) {
    this.ready = new Promise((r) => {
      this.readyResolve = r;
    });
    child.on('error', (e) => {
      this.stderr += `spawn error: ${e.message}\n`;
    });
    child.stderr?.setEncoding('utf8').on('data', (d: string) => {
      this.stderr = (this.stderr + d).slice(-4000);
    });
    const rl = createInterface({ input: child.stdout! });
    rl.on('line', (line) => {
      let msg: ProbeReply | ProbeEvent;
      try {
        msg = JSON.parse(line) as ProbeReply | ProbeEvent;
      } catch {
        this.stderr += `unparsable stdout line: ${line}\n`;
        return;
      }
      if ('id' in msg) {
        const p = this.pending.get(msg.id);
        if (!p) return;
        this.pending.delete(msg.id);
        if (msg.ok) p.resolve(msg.value);
        else p.reject(new ProbeError(msg.code, `probe ${this.describe()}: ${msg.message}`));
      } else if (msg.ev === 'tag' && msg.listener === '' && msg.tag === 'ready') {
        this.readyResolve?.();
      } else events.push(msg);
    });
    this.exited = new Promise((resolve) => {
      child.on('exit', (code, signal) => {
        this.exitedInfo = `exited (code ${code}, signal ${signal})`;
        const err = new Error(`probe ${this.describe()} ${this.exitedInfo}; stderr: ${this.stderr.trim() || '(none)'}`);
        for (const p of this.pending.values()) p.reject(err);
        this.pending.clear();
        resolve();
      });
    });
    void this.exited.then(() => this.readyResolve?.());
  }

  /** Start a probe in `netns` as `owner`; resolves once it is ready for requests. */
  static async start(netns: string, owner: ProbeOwner | typeof ROOT_ADMIN, events: ProbeEvents): Promise<Probe> {
    const priv =
      owner === ROOT_ADMIN
        ? []
        : setprivArgs({ uid: owner.uid, gid: owner.gid, caps: owner.caps.map((c) => c.toLowerCase()) });
    const argv = ['netns', 'exec', netns, ...priv, process.execPath, probeProgramPath()];
    const child = spawn('ip', argv, { stdio: ['pipe', 'pipe', 'pipe'] });
    if (child.pid === undefined) throw new Error(`could not start the probe in netns ${netns}: is iproute2 installed?`);
    const p = new Probe(netns, owner, child, events);
    await p.ready;
    if (p.exitedInfo)
      throw new Error(
        `probe ${p.describe()} ${p.exitedInfo} before it was ready; stderr: ${p.stderr.trim() || '(none)'}`,
      );
    return p;
  }

  get pid(): number {
    return this.child.pid as number;
  }

  get running(): boolean {
    return this.exitedInfo === undefined;
  }

  describe(): string {
    return `pid ${this.child.pid} in netns ${this.netns} as ${ownerKey(this.owner)}`;
  }

  request(req: ProbeRequest): Promise<unknown> {
    if (this.exitedInfo)
      return Promise.reject(
        new Error(`probe ${this.describe()} ${this.exitedInfo}; stderr: ${this.stderr.trim() || '(none)'}`),
      );
    const id = this.nextId++;
    return new Promise((resolve, reject) => {
      this.pending.set(id, { resolve, reject });
      this.child.stdin!.write(JSON.stringify({ id, ...req }) + '\n');
    });
  }

  /** Stop by closing stdin; SIGKILL by pid after `graceMs`. */
  async stop(graceMs = 2_000): Promise<void> {
    if (this.exitedInfo) return;
    this.child.stdin?.end();
    const timer = setTimeout(() => {
      try {
        process.kill(this.pid, 'SIGKILL');
      } catch (e) {
        if ((e as NodeJS.ErrnoException).code !== 'ESRCH') throw e;
      }
    }, graceMs);
    try {
      await this.exited;
    } finally {
      clearTimeout(timer);
    }
  }
}

/** The probes of one run, one per (namespace, owner), started on first use. */
export class ProbePool {
  readonly events = new ProbeEvents();
  private readonly probes = new Map<string, Promise<Probe>>();
  private closed = false;

  get(netns: string, owner: ProbeOwner | typeof ROOT_ADMIN): Promise<Probe> {
    if (this.closed) return Promise.reject(new Error('probe pool is closed'));
    const key = `${netns}|${ownerKey(owner)}`;
    let p = this.probes.get(key);
    if (!p) {
      p = Probe.start(netns, owner, this.events);
      this.probes.set(key, p);
    }
    return p;
  }

  async all(): Promise<Probe[]> {
    const out: Probe[] = [];
    for (const p of this.probes.values()) {
      try {
        out.push(await p);
      } catch {
        // a probe that failed to start has exited already
      }
    }
    return out;
  }

  /** Pids of the probes still running. */
  async pids(): Promise<number[]> {
    return (await this.all()).filter((p) => p.running).map((p) => p.pid);
  }

  /** Ask every probe in `netns` (or all) to close its listeners. */
  async closeListeners(netns?: string): Promise<void> {
    await Promise.all(
      (await this.all())
        .filter((p) => p.running && (netns === undefined || p.netns === netns))
        .map((p) => p.request({ op: 'close-all' })),
    );
  }

  /** Stop the probes running in `netns` (its pod is going away: their listeners go with it). */
  async stopIn(netns: string): Promise<void> {
    for (const [key, p] of [...this.probes]) {
      if (!key.startsWith(`${netns}|`)) continue;
      this.probes.delete(key);
      await p.then(
        (x) => x.stop(),
        () => undefined,
      );
    }
  }

  async stopAll(): Promise<void> {
    this.closed = true;
    await Promise.all((await this.all()).map((p) => p.stop()));
    this.probes.clear();
  }
}
