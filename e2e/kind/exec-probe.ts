/**
 * A probe program (e2e/netns/probe-program.ts, protocol e2e/netns/probe-protocol.ts) run through
 * a command that puts it where the connection must start: `kubectl exec -i` into a pod's app
 * container (its uid, capabilities and netns), into the node's host-probe pod under setpriv, or
 * `docker run -i` on the kind network for "outside". The same program and protocol as the netns
 * world; only the launcher differs.
 *
 * The probe exits when its stdin closes, so stdin stays open until every reply is in (a
 * `kubectl exec` with a piped input file would cut an in-flight connect short).
 */
import { execa, type ResultPromise } from 'execa';
import { createInterface } from 'node:readline';
import type { ProbeEvent, ProbeReply, ProbeRequest } from '../netns/probe-protocol.js';

interface ExecProbeOptions {
  /** Environment for the launcher (PATH decides which kubectl/docker run). */
  readonly env?: NodeJS.ProcessEnv;
  /** Give up on the launcher after this long (exec set-up + the request). */
  readonly timeoutMs?: number;
}

/** A request the probe refused; `code` is its errno name (EADDRINUSE, EPERM, EEXEC, ...). */
export class ExecProbeError extends Error {
  constructor(
    readonly code: string,
    message: string,
  ) {
    super(message);
    this.name = 'ExecProbeError';
  }
}

type Launched = ResultPromise<{ stdin: 'pipe'; stdout: 'pipe'; stderr: 'pipe'; reject: false }>;

/** One probe process behind a launcher command; requests are answered in order of their ids. */
export class ExecProbe {
  private nextId = 1;
  private readonly pending = new Map<number, (r: ProbeReply) => void>();
  private stderr = '';
  private exited: string | undefined;
  private readonly ready: Promise<void>;
  /** What the probe's listeners saw (accepts, tags, datagrams), until drained. */
  private events: ProbeEvent[] = [];

  private constructor(
    private readonly argv: readonly string[],
    private readonly child: Launched,
  ) {
    let markReady: () => void = () => undefined;
    this.ready = new Promise((r) => {
      markReady = r;
    });
    child.stderr.setEncoding('utf8').on('data', (d: string) => {
      this.stderr = (this.stderr + d).slice(-4000);
    });
    createInterface({ input: child.stdout }).on('line', (line) => {
      let msg: ProbeReply | ProbeEvent;
      try {
        msg = JSON.parse(line) as ProbeReply | ProbeEvent;
      } catch {
        return; // kubectl's own chatter; the probe speaks JSON only
      }
      if ('id' in msg) {
        this.pending.get(msg.id)?.(msg);
        this.pending.delete(msg.id);
      } else if (msg.ev === 'tag' && msg.listener === '' && msg.tag === 'ready') markReady();
      else this.events.push(msg);
    });
    void child.then((r) => {
      this.exited = `exited with code ${r.exitCode ?? '?'}${r.signal ? ` (signal ${r.signal})` : ''}`;
      markReady();
      for (const [id, resolve] of this.pending) resolve({ id, ok: false, code: 'EPROBE', message: this.failure() });
      this.pending.clear();
    });
  }

  /** Start the launcher and wait for the probe's ready line. */
  static async start(argv: readonly string[], opts: ExecProbeOptions = {}): Promise<ExecProbe> {
    const [cmd, ...args] = argv;
    if (!cmd) throw new Error('ExecProbe: empty launcher argv');
    const child = execa(cmd, args, {
      env: opts.env ?? process.env,
      extendEnv: opts.env === undefined,
      stdin: 'pipe',
      stdout: 'pipe',
      stderr: 'pipe',
      reject: false,
      timeout: opts.timeoutMs ?? 60_000,
    });
    const p = new ExecProbe(argv, child);
    await p.ready;
    if (p.exited) throw new Error(p.failure());
    return p;
  }

  private failure(): string {
    return `probe via \`${this.argv.join(' ')}\` ${this.exited ?? 'is running'}; stderr: ${this.stderr.trim() || '(none)'}`;
  }

  /** Take the events seen so far. */
  drainEvents(): ProbeEvent[] {
    const out = this.events;
    this.events = [];
    return out;
  }

  get running(): boolean {
    return this.exited === undefined;
  }

  /** Send one request; resolves with its reply's value, rejects with the probe's error. */
  request(req: ProbeRequest): Promise<unknown> {
    if (this.exited) return Promise.reject(new Error(this.failure()));
    const id = this.nextId++;
    return new Promise((resolve, reject) => {
      this.pending.set(id, (r) =>
        r.ok ? resolve(r.value) : reject(new ExecProbeError(r.code, `${r.code}: ${r.message}`)),
      );
      this.child.stdin.write(`${JSON.stringify({ id, ...req })}\n`);
    });
  }

  /** Close stdin (the probe exits) and wait for the launcher to end. */
  async close(): Promise<void> {
    this.child.stdin.end();
    await this.child;
  }
}
