/**
 * In-memory ZDS transport for the sim world. One SimZdsNetwork per simulated node holds the
 * listening addresses; each process gets its own endpoint (a ZdsTransport) carrying that
 * process's credentials, which an accepting server sees as SO_PEERCRED.
 *
 * Frames are delivered on the Clock after `latencyMs` (never earlier than a frame sent before
 * them, so order is kept when the latency changes). The netns handle is the sim NetnsId.
 *
 * Fault hooks, for tests and scenarios: disconnect every connection, change the latency,
 * corrupt or drop the next frame in one direction.
 */
import type { NetnsId } from '../../impl/api/ids.js';
import type { Clock } from '../../impl/host/clock.js';
import type {
  ZdsAddress,
  ZdsConnection,
  ZdsListener,
  ZdsNetnsHandle,
  ZdsPeerCredentials,
  ZdsReceived,
  ZdsTransport,
} from '../../impl/host/zds-transport.js';
import { ReceiveQueue } from '../../impl/api/zds/receive-queue.js';

/** Which way a frame travels: from the client (proxy) or from the server (agent). */
type ZdsDirection = 'client-to-server' | 'server-to-client';

type FrameFault =
  { readonly kind: 'corrupt'; readonly mutate: (bytes: Uint8Array) => Uint8Array } | { readonly kind: 'drop' };

/** A netns handle in the sim: the id itself; closing it is recorded so tests can check ownership. */
class SimNetnsHandle implements ZdsNetnsHandle {
  closed = false;
  constructor(
    readonly netns: NetnsId,
    private readonly onClose: () => void,
  ) {}
  get identity(): string {
    return this.netns;
  }
  close(): void {
    if (this.closed) return;
    this.closed = true;
    this.onClose();
  }
}

class SimEnd implements ZdsConnection {
  peerEnd: SimEnd | undefined;
  private readonly inbox = new ReceiveQueue<ZdsReceived, ZdsReceived>();
  private isClosed = false;

  constructor(
    private readonly net: SimZdsNetwork,
    readonly id: string,
    readonly direction: ZdsDirection,
    readonly peer?: ZdsPeerCredentials,
  ) {}

  get closed(): boolean {
    return this.isClosed;
  }

  send(bytes: Uint8Array, netns?: NetnsId): Promise<void> {
    if (this.isClosed) return Promise.reject(new Error(`ZDS ${this.id}: send on a closed connection`));
    const peer = this.peerEnd;
    let copy: Uint8Array = Uint8Array.from(bytes);
    const fault = this.net.takeFault(this.direction);
    if (fault?.kind === 'drop') return Promise.resolve();
    if (fault?.kind === 'corrupt') copy = fault.mutate(copy);
    this.net.schedule(() => {
      if (!peer) return;
      const handle = netns === undefined ? undefined : this.net.newHandle(netns);
      peer.deliver({ kind: 'frame', frame: handle ? { bytes: copy, netns: handle } : { bytes: copy } });
    });
    return Promise.resolve();
  }

  receive(): Promise<ZdsReceived> {
    if (this.inbox.waiting)
      return Promise.reject(new Error(`ZDS ${this.id}: receive() called while another receive() is pending`));
    return this.inbox.next();
  }

  close(): void {
    this.shut('closed locally');
    const peer = this.peerEnd;
    // The peer sees the end after every frame already in flight.
    this.net.schedule(() => peer?.shut('peer closed the connection'));
  }

  /** Called by the network: a frame (or the end) arrives. */
  deliver(r: ZdsReceived): void {
    if (this.isClosed) {
      if (r.kind === 'frame') r.frame.netns?.close(); // the kernel would close an undelivered fd
      return;
    }
    this.inbox.push(r);
  }

  shut(reason: string): void {
    if (this.isClosed) return;
    this.isClosed = true;
    for (const r of this.inbox.takeAll()) if (r.kind === 'frame') r.frame.netns?.close();
    this.inbox.end({ kind: 'closed', reason });
  }
}

class SimListener implements ZdsListener {
  private readonly backlog = new ReceiveQueue<SimEnd, undefined>();
  private isClosed = false;

  constructor(
    private readonly net: SimZdsNetwork,
    readonly address: ZdsAddress,
  ) {}

  get closed(): boolean {
    return this.isClosed;
  }

  enqueue(end: SimEnd): void {
    this.backlog.push(end);
  }

  accept(): Promise<ZdsConnection | undefined> {
    return this.backlog.next();
  }

  close(): Promise<void> {
    if (!this.isClosed) {
      this.isClosed = true;
      this.net.unlisten(this);
      for (const c of this.backlog.takeAll()) c.close();
      this.backlog.end(undefined);
    }
    return Promise.resolve();
  }
}

interface SimZdsNetworkOptions {
  /** One-way delivery delay of each frame, in ms (default 1). */
  readonly latencyMs?: number;
}

export class SimZdsNetwork {
  private readonly listeners = new Map<ZdsAddress, SimListener>();
  private readonly ends: SimEnd[] = [];
  private readonly faults: Record<ZdsDirection, FrameFault[]> = { 'client-to-server': [], 'server-to-client': [] };
  private latency: number;
  private lastDue = 0;
  private seq = 0;
  /** Netns handles handed out and not yet closed (ownership check for tests). */
  openHandles = 0;

  constructor(
    private readonly clock: Clock,
    opts: SimZdsNetworkOptions = {},
  ) {
    this.latency = opts.latencyMs ?? 1;
  }

  /** A process's view of the network: its transport, connecting with these credentials. */
  endpoint(creds: ZdsPeerCredentials): ZdsTransport {
    return {
      listen: (address) => this.listen(address),
      connect: (address) => this.connect(address, creds),
    };
  }

  // ---- fault hooks ----

  /** Close every live connection, as if the socket broke; both ends see 'closed'. */
  disconnectAll(): void {
    for (const e of this.ends) if (!e.closed) e.close();
  }

  /** Delivery delay for frames sent from now on. */
  setLatency(ms: number): void {
    if (!Number.isFinite(ms) || ms < 0) throw new Error(`SimZdsNetwork.setLatency: invalid ${ms}`);
    this.latency = ms;
  }

  /** Replace the bytes of the next frame sent in `direction`. */
  corruptNextFrame(direction: ZdsDirection, mutate: (bytes: Uint8Array) => Uint8Array): void {
    this.faults[direction].push({ kind: 'corrupt', mutate });
  }

  /** Silently lose the next frame sent in `direction` (a stuck peer, as seen by the sender). */
  dropNextFrame(direction: ZdsDirection): void {
    this.faults[direction].push({ kind: 'drop' });
  }

  /** Live (not closed) connections, counting each end. */
  liveEnds(): number {
    return this.ends.filter((e) => !e.closed).length;
  }

  // ---- internals used by the ends ----

  takeFault(direction: ZdsDirection): FrameFault | undefined {
    return this.faults[direction].shift();
  }

  schedule(fn: () => void): void {
    const due = Math.max(this.clock.now() + this.latency, this.lastDue);
    this.lastDue = due;
    this.clock.setTimer(due - this.clock.now(), fn);
  }

  newHandle(netns: NetnsId): ZdsNetnsHandle {
    this.openHandles++;
    return new SimNetnsHandle(netns, () => {
      this.openHandles--;
    });
  }

  unlisten(l: SimListener): void {
    if (this.listeners.get(l.address) === l) this.listeners.delete(l.address);
  }

  private listen(address: ZdsAddress): Promise<ZdsListener> {
    if (this.listeners.has(address)) {
      return Promise.reject(
        new Error(`ZDS listen on ${address}: address already in use (EADDRINUSE); is another node agent running?`),
      );
    }
    const l = new SimListener(this, address);
    this.listeners.set(address, l);
    return Promise.resolve(l);
  }

  private connect(address: ZdsAddress, creds: ZdsPeerCredentials): Promise<ZdsConnection> {
    const l = this.listeners.get(address);
    if (!l)
      return Promise.reject(
        new Error(`ZDS connect to ${address}: nothing listens there (ECONNREFUSED); is the node agent running?`),
      );
    const n = ++this.seq;
    const client = new SimEnd(this, `sim-zds#${n}/client`, 'client-to-server');
    const server = new SimEnd(
      this,
      `sim-zds#${n}/server(pid ${creds.pid} uid ${creds.uid})`,
      'server-to-client',
      creds,
    );
    client.peerEnd = server;
    server.peerEnd = client;
    this.ends.push(client, server);
    l.enqueue(server);
    return Promise.resolve(client);
  }
}
