/**
 * The node proxy's side of ZDS: connect to the node agent, say hello, process the snapshot and
 * then the stream of Add / Del, calling the proxy's handler for each and answering every
 * request with exactly one ack (empty error) or nack (the handler's error). On disconnect it
 * reconnects with exponential backoff and jitter; the new connection gets a full snapshot.
 *
 * Rules enforced (as upstream ztunnel, src/inpod/protocol.rs and src/inpod/workloadmanager.rs):
 * - an Add must carry exactly one netns handle; any other request must carry none;
 * - Keep is allowed only before SnapshotSent, and SnapshotSent only once per connection;
 * - a Del before SnapshotSent only removes the uid from the snapshot set (and is passed on);
 * - on SnapshotSent the handler is told which uids the snapshot named, to drop the others.
 * A broken rule, an undecodable frame or a frame the kernel cut is a protocol error: the client
 * nacks it, closes the connection and reconnects. A handler failure is a nack; the connection
 * stays (the agent decides what to do, e.g. fail the pod's CNI ADD).
 *
 * Netns handle ownership: the handler owns the handle once onAdd resolves; if onAdd rejects,
 * the client closes it.
 */
import type { PodUid } from '../api/ids.js';
import { decodeRequest, encodeHello, encodeResponse } from '../api/zds/codec.js';
import { ZDS_VERSION, type WorkloadInfo, type WorkloadRequest } from '../api/zds/messages.js';
import type { Clock, TimerHandle } from '../host/clock.js';
import type { Logger } from '../host/log.js';
import type { Random } from '../host/random.js';
import type { ZdsAddress, ZdsConnection, ZdsNetnsHandle, ZdsTransport } from '../host/zds-transport.js';

/** What the proxy does for each request. A rejection's message is sent as the NACK error. */
export interface ZdsWorkloadHandler {
  /** Serve pod `uid` inside `netns` (same uid and same netns identity again: a no-op). */
  onAdd(uid: PodUid, info: WorkloadInfo, netns: ZdsNetnsHandle): Promise<void>;
  /** Snapshot only: the agent lost this pod's netns handle; keep serving it if you do. */
  onKeep(uid: PodUid): Promise<void>;
  /** Stop serving pod `uid` now. */
  onDel(uid: PodUid): Promise<void>;
  /** The snapshot is complete: stop serving every pod not in `named`. */
  onSnapshotSent(named: ReadonlySet<PodUid>): Promise<void>;
}

export interface ZdsBackoff {
  /** First delay after a failure (default 10 ms, as upstream). */
  readonly initialMs: number;
  /** Cap (default 15 000 ms, as upstream). */
  readonly maxMs: number;
  /** Each delay is scaled by a uniform factor in [1 - jitter, 1 + jitter] (default 0.2). */
  readonly jitter: number;
}

interface ZdsClientOptions {
  readonly transport: ZdsTransport;
  readonly address: ZdsAddress;
  readonly clock: Clock;
  readonly random: Random;
  readonly log: Logger;
  readonly handler: ZdsWorkloadHandler;
  readonly backoff?: Partial<ZdsBackoff>;
}

export type ZdsClientEvent =
  | { readonly type: 'connected'; readonly connection: string }
  | { readonly type: 'connect-failed'; readonly error: string; readonly retryInMs: number }
  | { readonly type: 'ready'; readonly connection: string; readonly workloads: number }
  | {
      readonly type: 'nack';
      readonly connection: string;
      readonly request: WorkloadRequest['kind'] | 'undecodable';
      readonly uid?: PodUid;
      readonly error: string;
    }
  | { readonly type: 'protocol-error'; readonly connection: string; readonly error: string }
  | { readonly type: 'disconnected'; readonly connection: string; readonly reason: string; readonly retryInMs: number };

/** Why a session ended. */
class SessionEnd {
  constructor(readonly reason: string) {}
}

export class ZdsClient {
  private stopped = true;
  private conn: ZdsConnection | undefined;
  private isReady = false;
  private loop: Promise<void> | undefined;
  private sleeping: { timer: TimerHandle; wake: () => void } | undefined;
  private readonly subscribers = new Set<(e: ZdsClientEvent) => void>();
  private readonly backoff: ZdsBackoff;
  private readonly log: Logger;

  constructor(private readonly opts: ZdsClientOptions) {
    this.backoff = { initialMs: 10, maxMs: 15_000, jitter: 0.2, ...opts.backoff };
    this.log = opts.log.child({ component: 'zds-client', address: opts.address });
  }

  /** Start connecting (and reconnecting) until stop(). */
  start(): void {
    if (!this.stopped) return;
    this.stopped = false;
    this.loop = this.run();
  }

  /** Close the connection and stop reconnecting. Served pods are the handler's business. */
  async stop(): Promise<void> {
    this.stopped = true;
    this.conn?.close();
    if (this.sleeping) {
      this.sleeping.timer.cancel();
      this.sleeping.wake();
    }
    await this.loop;
  }

  /** Connected to the agent. */
  connected(): boolean {
    return this.conn !== undefined;
  }

  /** The current connection's snapshot has been processed (upstream readiness, minus pending pods). */
  ready(): boolean {
    return this.isReady;
  }

  on(fn: (e: ZdsClientEvent) => void): () => void {
    this.subscribers.add(fn);
    return () => this.subscribers.delete(fn);
  }

  // ---- internals ----

  private emit(e: ZdsClientEvent): void {
    for (const fn of [...this.subscribers]) {
      try {
        fn(e);
      } catch (err) {
        this.log.error('ZDS client event subscriber threw', { event: e.type, error: (err as Error).message });
      }
    }
  }

  private delay(attempt: number): number {
    const base = Math.min(this.backoff.maxMs, this.backoff.initialMs * 2 ** Math.min(attempt, 30));
    const factor = 1 + this.backoff.jitter * (2 * this.opts.random.next() - 1);
    return Math.max(0, Math.round(base * factor));
  }

  private sleep(ms: number): Promise<void> {
    return new Promise((resolve) => {
      const wake = (): void => {
        this.sleeping = undefined;
        resolve();
      };
      this.sleeping = { timer: this.opts.clock.setTimer(ms, wake), wake };
    });
  }

  private async run(): Promise<void> {
    let attempt = 0;
    while (!this.stopped) {
      let conn: ZdsConnection;
      try {
        conn = await this.opts.transport.connect(this.opts.address);
      } catch (e) {
        const retryInMs = this.delay(attempt++);
        const error = (e as Error).message;
        this.log.warn('failed to connect to the node agent; is it healthy?', { error, retryInMs });
        this.emit({ type: 'connect-failed', error, retryInMs });
        await this.sleep(retryInMs);
        continue;
      }
      if (this.stopped) {
        conn.close();
        break;
      }
      this.conn = conn;
      this.emit({ type: 'connected', connection: conn.id });
      const end = await this.session(conn);
      conn.close();
      this.conn = undefined;
      const reachedReady = this.isReady;
      this.isReady = false;
      if (reachedReady) attempt = 0;
      if (this.stopped) break;
      const retryInMs = this.delay(attempt++);
      this.log.warn('ZDS connection ended; reconnecting', { connection: conn.id, reason: end.reason, retryInMs });
      this.emit({ type: 'disconnected', connection: conn.id, reason: end.reason, retryInMs });
      await this.sleep(retryInMs);
    }
  }

  private async session(conn: ZdsConnection): Promise<SessionEnd> {
    try {
      await conn.send(encodeHello({ version: ZDS_VERSION.V1 }));
    } catch (e) {
      return new SessionEnd(`sending the hello failed: ${(e as Error).message}`);
    }
    const named = new Set<PodUid>();
    let snapshotDone = false;

    const respond = async (error: string): Promise<SessionEnd | undefined> => {
      try {
        await conn.send(encodeResponse({ kind: 'ack', error }));
        return undefined;
      } catch (e) {
        return new SessionEnd(`sending the ack failed: ${(e as Error).message}`);
      }
    };
    const protocolError = async (error: string): Promise<SessionEnd> => {
      this.log.warn('ZDS protocol error; nacking and reconnecting', { connection: conn.id, error });
      this.emit({ type: 'protocol-error', connection: conn.id, error });
      await respond(`protocol error: ${error}`);
      return new SessionEnd(`protocol error: ${error}`);
    };

    for (;;) {
      const r = await conn.receive();
      if (r.kind === 'closed') return new SessionEnd(r.reason ?? 'the agent closed the connection');
      if (this.stopped) {
        if (r.kind === 'frame') r.frame.netns?.close();
        return new SessionEnd('stopping');
      }
      if (r.kind === 'bad-frame') return protocolError(r.reason);
      const handle = r.frame.netns;
      let req: WorkloadRequest;
      try {
        req = decodeRequest(r.frame.bytes);
      } catch (e) {
        handle?.close();
        this.emit({ type: 'nack', connection: conn.id, request: 'undecodable', error: (e as Error).message });
        return protocolError((e as Error).message);
      }
      if (req.kind !== 'add' && handle) {
        handle.close();
        return protocolError(`unexpected netns handle on a ${req.kind} request`);
      }
      if (req.kind === 'add' && !handle) return protocolError(`add ${req.uid} carries no netns handle`);
      if (req.kind === 'keep' && snapshotDone) return protocolError(`keep ${req.uid} after SnapshotSent`);
      if (req.kind === 'snapshot-sent' && snapshotDone) return protocolError('a second SnapshotSent on one connection');

      let error = '';
      try {
        switch (req.kind) {
          case 'add':
            if (!snapshotDone) named.add(req.uid);
            try {
              await this.opts.handler.onAdd(req.uid, req.info, handle!);
            } catch (e) {
              handle!.close();
              throw e;
            }
            break;
          case 'keep':
            named.add(req.uid);
            await this.opts.handler.onKeep(req.uid);
            break;
          case 'del':
            named.delete(req.uid);
            await this.opts.handler.onDel(req.uid);
            break;
          case 'snapshot-sent':
            snapshotDone = true;
            await this.opts.handler.onSnapshotSent(named);
            break;
        }
      } catch (e) {
        error = e instanceof Error ? e.message || e.name : String(e);
        if (error === '') error = 'handler failed without a message';
      }
      if (error !== '') {
        const uid = req.kind === 'snapshot-sent' ? undefined : req.uid;
        this.log.warn('nacking a ZDS request', { connection: conn.id, request: req.kind, uid, error });
        this.emit({ type: 'nack', connection: conn.id, request: req.kind, ...(uid ? { uid } : {}), error });
      }
      const failed = await respond(error);
      if (failed) return failed;
      if (req.kind === 'snapshot-sent' && error === '' && !this.isReady) {
        this.isReady = true;
        this.emit({ type: 'ready', connection: conn.id, workloads: named.size });
      }
    }
  }
}
