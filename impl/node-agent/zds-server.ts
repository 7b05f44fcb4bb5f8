/**
 * The node agent's side of ZDS: it listens, checks who connected, waits for the proxy's hello,
 * sends the snapshot of enrolled pods, then streams Add and Del, each awaiting its ack.
 *
 * Choices (upstream behaviour: istio/istio cni/pkg/nodeagent/ztunnelserver_linux.go; where we differ, why):
 * - The peer's uid (SO_PEERCRED) must be in `allowedUids`; upstream accepts any client, which
 *   lets any local process that reaches the socket receive every pod's netns.
 * - All requests on a connection go through one queue: send, then wait for the ack, then the
 *   next. Acks are matched by order only (the protocol has no ids).
 * - An ack that does not come within `ackTimeoutMs` fails that request AND closes the
 *   connection. Upstream keeps the connection, so a late ack can be read as the reply to the
 *   next request; closing makes the proxy reconnect and get a fresh snapshot instead.
 * - A NACK (non-empty Ack.error) fails that request with reason 'nack'; the connection stays.
 *   The CNI ADD path must fail closed on it. The 'nack' event names the request's origin: a
 *   caller's own request already got the rejection (and retries on its own schedule); only
 *   snapshot and resync nacks reach nobody else.
 * - Several connections may be open (a restarted proxy connects before the old one exits).
 *   Adds go to the newest connection that said hello; Dels go to all, so a draining old proxy
 *   also drops the pod (as upstream). When the newest goes away and an older one remains, the
 *   older one is re-sent an Add for every pod with a netns (it may have missed Adds made
 *   meanwhile; a repeated Add with the same netns is a no-op at the proxy).
 * - Anything the proxy sends that is not a valid hello first and then one valid response per
 *   request (an fd attached, a cut datagram, an unsolicited ack, undecodable bytes) is a
 *   protocol error: the connection is closed.
 */
import type { NetnsId, PodUid } from '../api/ids.js';
import { decodeHello, decodeResponse, encodeRequest } from '../api/zds/codec.js';
import type { WorkloadInfo, WorkloadRequest } from '../api/zds/messages.js';
import type { Clock, TimerHandle } from '../host/clock.js';
import type { Logger } from '../host/log.js';
import type {
  ZdsAddress,
  ZdsConnection,
  ZdsListener,
  ZdsPeerCredentials,
  ZdsTransport,
} from '../host/zds-transport.js';

/** A pod as the snapshot reports it. Without a netns handle it is sent as Keep. */
export interface ZdsSnapshotEntry {
  readonly uid: PodUid;
  readonly info: WorkloadInfo;
  readonly netns?: NetnsId;
}

interface ZdsServerOptions {
  readonly transport: ZdsTransport;
  readonly address: ZdsAddress;
  readonly clock: Clock;
  readonly log: Logger;
  /** Uids a connecting proxy may run as (checked with the peer credentials). Must not be empty. */
  readonly allowedUids: readonly number[];
  /** The enrolled pods now; asked once per connection, when its hello arrives. */
  readonly snapshot: () => readonly ZdsSnapshotEntry[];
  /** How long to wait for each ack (default 5000 ms, as upstream's read deadline). */
  readonly ackTimeoutMs?: number;
  /** How long a new connection may take to say hello (default 5000 ms). */
  readonly helloTimeoutMs?: number;
  /** Each request's time from sent to its ack, nack or timeout (the agent's round-trip histogram). */
  readonly onRoundTrip?: (request: WorkloadRequest['kind'], result: 'ack' | 'nack' | 'timeout', ms: number) => void;
}

type ZdsSendFailure = 'nack' | 'timeout' | 'no-proxy' | 'closed';

/**
 * Who sent a request: a caller of addWorkload/delWorkload (which gets the rejection and does its
 * own retrying), or the server itself (snapshot, or resync after falling back to an older
 * connection), whose failures nobody awaits — only the event tells the agent about those.
 */
type ZdsRequestOrigin = 'caller' | 'snapshot' | 'resync';

/** Why an addWorkload/delWorkload did not succeed. */
export class ZdsSendError extends Error {
  constructor(
    readonly reason: ZdsSendFailure,
    message: string,
    readonly uid?: PodUid,
    /** The proxy's error text, for 'nack'. */
    readonly proxyError?: string,
  ) {
    super(message);
    this.name = 'ZdsSendError';
  }
}

export type ZdsServerEvent =
  | {
      readonly type: 'rejected';
      readonly connection: string;
      readonly peer?: ZdsPeerCredentials;
      readonly reason: string;
    }
  | {
      readonly type: 'connected';
      readonly connection: string;
      readonly peer: ZdsPeerCredentials;
      readonly version: number;
    }
  | { readonly type: 'snapshot-sent'; readonly connection: string; readonly workloads: number; readonly nacks: number }
  | {
      readonly type: 'nack';
      readonly connection: string;
      readonly request: WorkloadRequest['kind'];
      readonly uid?: PodUid;
      readonly error: string;
      readonly origin: ZdsRequestOrigin;
    }
  | { readonly type: 'protocol-error'; readonly connection: string; readonly error: string }
  | { readonly type: 'disconnected'; readonly connection: string; readonly reason: string };

interface Op {
  readonly req: WorkloadRequest;
  readonly netns?: NetnsId;
  readonly origin: ZdsRequestOrigin;
  resolve(): void;
  reject(e: ZdsSendError): void;
}

const uidOf = (req: WorkloadRequest): PodUid | undefined => (req.kind === 'snapshot-sent' ? undefined : req.uid);
const describe = (req: WorkloadRequest): string =>
  req.kind === 'snapshot-sent' ? 'SnapshotSent' : `${req.kind} ${req.uid}`;

type ConnState = 'hello' | 'snapshot' | 'ready' | 'closed';

/** One proxy connection: its request queue and its reader. */
class ProxyConnection {
  state: ConnState = 'hello';
  private readonly queue: Op[] = [];
  private inFlight: { op: Op; timer: TimerHandle; sentAt: number } | undefined;
  private sending = false;
  private helloTimer: TimerHandle | undefined;

  constructor(
    private readonly server: ZdsServer,
    readonly conn: ZdsConnection,
    readonly peer: ZdsPeerCredentials,
    private readonly opts: Required<Pick<ZdsServerOptions, 'ackTimeoutMs' | 'helloTimeoutMs'>> &
      Pick<ZdsServerOptions, 'onRoundTrip'> & {
        clock: Clock;
        log: Logger;
      },
  ) {}

  get id(): string {
    return this.conn.id;
  }

  start(): void {
    this.helloTimer = this.opts.clock.setTimer(this.opts.helloTimeoutMs, () => {
      this.protocolError(`no ZdsHello within ${this.opts.helloTimeoutMs} ms`);
    });
    void this.readLoop();
  }

  /** Queue a request; the promise settles with its ack. */
  request(req: WorkloadRequest, netns?: NetnsId, origin: ZdsRequestOrigin = 'caller'): Promise<void> {
    if (this.state === 'closed') {
      return Promise.reject(
        new ZdsSendError('closed', `ZDS ${describe(req)}: proxy connection ${this.id} is closed`, uidOf(req)),
      );
    }
    return new Promise((resolve, reject) => {
      this.queue.push({ req, ...(netns === undefined ? {} : { netns }), origin, resolve, reject });
      void this.pump();
    });
  }

  close(reason: string): void {
    if (this.state === 'closed') return;
    this.state = 'closed';
    this.helloTimer?.cancel();
    this.conn.close();
    const fail = (op: Op): void =>
      op.reject(
        new ZdsSendError(
          'closed',
          `ZDS ${describe(op.req)}: proxy connection ${this.id} closed before the ack (${reason})`,
          uidOf(op.req),
        ),
      );
    if (this.inFlight) {
      this.inFlight.timer.cancel();
      fail(this.inFlight.op);
      this.inFlight = undefined;
    }
    for (const op of this.queue.splice(0)) fail(op);
    this.server.connectionClosed(this, reason);
  }

  private async pump(): Promise<void> {
    if (this.sending || this.inFlight || this.state === 'closed' || this.state === 'hello') return;
    const op = this.queue.shift();
    if (!op) return;
    this.sending = true;
    try {
      await this.conn.send(encodeRequest(op.req), op.netns);
    } catch (e) {
      this.sending = false;
      const msg = (e as Error).message;
      op.reject(
        new ZdsSendError(
          'closed',
          `ZDS ${describe(op.req)}: sending to proxy connection ${this.id} failed: ${msg}`,
          uidOf(op.req),
        ),
      );
      this.close(`send failed: ${msg}`);
      return;
    }
    this.sending = false;
    // close() may have run while the send was pending.
    if ((this.state as ConnState) === 'closed') {
      op.reject(
        new ZdsSendError('closed', `ZDS ${describe(op.req)}: proxy connection ${this.id} closed`, uidOf(op.req)),
      );
      return;
    }
    const timer = this.opts.clock.setTimer(this.opts.ackTimeoutMs, () => {
      if (this.inFlight?.op !== op) return;
      this.opts.onRoundTrip?.(op.req.kind, 'timeout', this.opts.clock.now() - this.inFlight.sentAt);
      this.inFlight = undefined;
      op.reject(
        new ZdsSendError(
          'timeout',
          `ZDS ${describe(op.req)}: no ack from proxy connection ${this.id} within ${this.opts.ackTimeoutMs} ms; closing it so the proxy reconnects and resyncs`,
          uidOf(op.req),
        ),
      );
      this.close('ack timeout');
    });
    this.inFlight = { op, timer, sentAt: this.opts.clock.now() };
  }

  private async readLoop(): Promise<void> {
    for (;;) {
      const r = await this.conn.receive();
      if (this.state === 'closed') {
        if (r.kind === 'frame') r.frame.netns?.close();
        return;
      }
      if (r.kind === 'closed') {
        this.close(r.reason ?? 'proxy closed the connection');
        return;
      }
      if (r.kind === 'bad-frame') {
        this.protocolError(r.reason);
        return;
      }
      if (r.frame.netns) {
        r.frame.netns.close();
        this.protocolError('the proxy attached a netns handle to its message');
        return;
      }
      try {
        if (this.state === 'hello') this.onHello(r.frame.bytes);
        else this.onResponse(r.frame.bytes);
      } catch (e) {
        this.protocolError((e as Error).message);
        return;
      }
    }
  }

  private onHello(bytes: Uint8Array): void {
    const hello = decodeHello(bytes);
    this.helloTimer?.cancel();
    this.state = 'snapshot';
    // Upstream only logs the version; so do we, since V1 is the only one that exists.
    this.server.helloReceived(this, hello.version);
  }

  private onResponse(bytes: Uint8Array): void {
    const res = decodeResponse(bytes);
    const f = this.inFlight;
    if (!f)
      throw new Error(
        `unsolicited ack${res.error ? ` (error ${JSON.stringify(res.error)})` : ''}: no request is waiting for one`,
      );
    this.inFlight = undefined;
    f.timer.cancel();
    this.opts.onRoundTrip?.(f.op.req.kind, res.error === '' ? 'ack' : 'nack', this.opts.clock.now() - f.sentAt);
    if (res.error === '') f.op.resolve();
    else {
      const uid = uidOf(f.op.req);
      this.server.emit({
        type: 'nack',
        connection: this.id,
        request: f.op.req.kind,
        ...(uid ? { uid } : {}),
        error: res.error,
        origin: f.op.origin,
      });
      f.op.reject(
        new ZdsSendError('nack', `ZDS ${describe(f.op.req)}: the proxy refused it: ${res.error}`, uid, res.error),
      );
    }
    void this.pump();
  }

  private protocolError(error: string): void {
    if (this.state === 'closed') return;
    this.opts.log.warn('ZDS protocol error; closing the proxy connection', { connection: this.id, error });
    this.server.emit({ type: 'protocol-error', connection: this.id, error });
    this.close(`protocol error: ${error}`);
  }
}

export class ZdsServer {
  private listener: ZdsListener | undefined;
  /** Connections that said hello, oldest first; the last one is the active one. */
  private readonly live: ProxyConnection[] = [];
  private readonly pendingHello = new Set<ProxyConnection>();
  private readonly subscribers = new Set<(e: ZdsServerEvent) => void>();
  private readonly log: Logger;

  constructor(private readonly opts: ZdsServerOptions) {
    if (opts.allowedUids.length === 0) {
      throw new Error(
        'ZdsServer: allowedUids is empty, so no proxy could ever connect; list the uid the node proxy runs as',
      );
    }
    this.log = opts.log.child({ component: 'zds-server', address: opts.address });
  }

  /** Bind and start accepting. */
  async start(): Promise<void> {
    if (this.listener) throw new Error(`ZdsServer.start: already listening on ${this.opts.address}`);
    this.listener = await this.opts.transport.listen(this.opts.address);
    void this.acceptLoop(this.listener);
  }

  /** Stop accepting and close every connection; pending requests fail with 'closed'. */
  async stop(): Promise<void> {
    const l = this.listener;
    this.listener = undefined;
    for (const c of [...this.pendingHello, ...this.live]) c.close('server stopping');
    await l?.close();
  }

  /** A proxy is connected and has said hello (its snapshot may still be in flight). */
  connected(): boolean {
    return this.live.length > 0;
  }

  /** Proxy connections that have said hello (two while an upgrade overlaps old and new). */
  connectionCount(): number {
    return this.live.length;
  }

  /** The active connection has acked its whole snapshot. */
  synced(): boolean {
    return this.active()?.state === 'ready';
  }

  /** Peer credentials of the active connection, if any. */
  activePeer(): ZdsPeerCredentials | undefined {
    return this.active()?.peer;
  }

  /**
   * Tell the proxy to serve pod `uid` in `netns`. Resolves on ACK; rejects with a ZdsSendError:
   * 'nack' (the proxy's error is in proxyError), 'timeout', 'no-proxy' (nothing connected),
   * 'closed' (the connection ended first).
   */
  addWorkload(uid: PodUid, info: WorkloadInfo, netns: NetnsId): Promise<void> {
    const c = this.active();
    if (!c)
      return Promise.reject(
        new ZdsSendError(
          'no-proxy',
          `ZDS add ${uid}: no node proxy is connected to ${this.opts.address}; the pod cannot be captured yet`,
          uid,
        ),
      );
    return c.request({ kind: 'add', uid, info }, netns);
  }

  /**
   * Tell every connected proxy to drop pod `uid`. Resolves when the active one acks (or at once
   * when none is connected: the next snapshot will not name the pod); rejects as addWorkload.
   */
  delWorkload(uid: PodUid): Promise<void> {
    const active = this.active();
    for (const c of this.live) {
      if (c === active) continue;
      c.request({ kind: 'del', uid }).catch((e: unknown) => {
        this.log.warn('ZDS del to an older proxy connection failed', {
          connection: c.id,
          uid,
          error: (e as Error).message,
        });
      });
    }
    return active ? active.request({ kind: 'del', uid }) : Promise.resolve();
  }

  /** Subscribe to events; returns the unsubscribe function. */
  on(fn: (e: ZdsServerEvent) => void): () => void {
    this.subscribers.add(fn);
    return () => this.subscribers.delete(fn);
  }

  // ---- called by connections ----

  emit(e: ZdsServerEvent): void {
    for (const fn of [...this.subscribers]) {
      try {
        fn(e);
      } catch (err) {
        this.log.error('ZDS event subscriber threw', { event: e.type, error: (err as Error).message });
      }
    }
  }

  helloReceived(c: ProxyConnection, version: number): void {
    this.pendingHello.delete(c);
    this.live.push(c);
    this.log.info('node proxy connected', { connection: c.id, peer: c.peer, version });
    this.emit({ type: 'connected', connection: c.id, peer: c.peer, version });
    this.sendSnapshot(c);
  }

  connectionClosed(c: ProxyConnection, reason: string): void {
    this.pendingHello.delete(c);
    const i = this.live.indexOf(c);
    if (i < 0) return;
    const wasActive = i === this.live.length - 1;
    this.live.splice(i, 1);
    this.log.info('node proxy disconnected', { connection: c.id, reason });
    this.emit({ type: 'disconnected', connection: c.id, reason });
    const fallback = this.active();
    if (wasActive && fallback) this.resync(fallback);
  }

  // ---- internals ----

  private active(): ProxyConnection | undefined {
    return this.live[this.live.length - 1];
  }

  private async acceptLoop(l: ZdsListener): Promise<void> {
    for (;;) {
      const conn = await l.accept();
      if (!conn) return;
      const peer = conn.peer;
      if (!peer || !this.opts.allowedUids.includes(peer.uid)) {
        const reason = peer
          ? `peer uid ${peer.uid} (pid ${peer.pid}) is not an allowed node proxy uid (${this.opts.allowedUids.join(', ')})`
          : 'the peer credentials are unknown';
        this.log.warn('rejected a ZDS connection', { connection: conn.id, reason });
        this.emit({ type: 'rejected', connection: conn.id, ...(peer ? { peer } : {}), reason });
        conn.close();
        continue;
      }
      const c = new ProxyConnection(this, conn, peer, {
        ackTimeoutMs: this.opts.ackTimeoutMs ?? 5000,
        helloTimeoutMs: this.opts.helloTimeoutMs ?? 5000,
        ...(this.opts.onRoundTrip ? { onRoundTrip: this.opts.onRoundTrip } : {}),
        clock: this.opts.clock,
        log: this.log,
      });
      this.pendingHello.add(c);
      c.start();
    }
  }

  private sendSnapshot(c: ProxyConnection): void {
    const entries = this.opts.snapshot();
    let nacks = 0;
    for (const e of entries) {
      const req: WorkloadRequest =
        e.netns === undefined ? { kind: 'keep', uid: e.uid } : { kind: 'add', uid: e.uid, info: e.info };
      c.request(req, e.netns, 'snapshot').catch((err: unknown) => {
        if (err instanceof ZdsSendError && err.reason === 'nack') nacks++;
        else
          this.log.warn('ZDS snapshot request failed', { connection: c.id, uid: e.uid, error: (err as Error).message });
      });
    }
    c.request({ kind: 'snapshot-sent' }, undefined, 'snapshot').then(
      () => {
        if (c.state === 'closed') return;
        c.state = 'ready';
        this.emit({ type: 'snapshot-sent', connection: c.id, workloads: entries.length, nacks });
      },
      (err: unknown) => {
        this.log.warn('ZDS snapshot did not complete', { connection: c.id, error: (err as Error).message });
      },
    );
  }

  /** An older connection became active again: re-send every pod it may have missed. */
  private resync(c: ProxyConnection): void {
    const entries = this.opts.snapshot().filter((e) => e.netns !== undefined);
    this.log.info('falling back to an older proxy connection; re-sending adds', {
      connection: c.id,
      workloads: entries.length,
    });
    for (const e of entries) {
      c.request({ kind: 'add', uid: e.uid, info: e.info }, e.netns, 'resync').catch((err: unknown) => {
        this.log.warn('ZDS resync add failed', { connection: c.id, uid: e.uid, error: (err as Error).message });
      });
    }
  }
}
