/**
 * The Sockets port (impl/host/sockets.ts) over the simulated kernel: the same proxy code that
 * runs on Linux opens its listeners and connections here, and every SYN, SYN-ACK, ACK, data
 * segment and FIN still goes through the SimKernel datapath (netfilter, conntrack, routing).
 *
 * Model, and what it leaves out:
 * - Several adapters (one per process: proxy, apps, a restarted proxy) share one kernel; a
 *   per-kernel registry maps sim sockets to adapter objects, so a connect made through one
 *   adapter hands the accepted socket to the listener of another (or of none: a listener the
 *   test made with raw SimKernel calls keeps its accept queue and inbox for the test to read).
 * - connect() is the kernel's synchronous three-way handshake; the listener's onConnection runs
 *   before connectTcp resolves. A handler that connects again before its first await nests the
 *   next handshake inside this one; a redirect loop (a proxy whose upstream leg is redirected
 *   back into its own listener) would recurse until the stack overflows. Nesting is therefore
 *   capped at MAX_ACCEPT_NESTING: the connect that would go deeper fails with ELOOP, which the
 *   proxy reports as a failed upstream — a bounded, observable failure. (Linux would loop until
 *   it runs out of ports or file descriptors; the outcome for the client is the same: no
 *   connection to where it wanted.) A 'timeout' outcome waits `timeoutMs` on the clock when one is
 *   given (virtual time), so a dropped SYN costs what it costs on Linux.
 * - Data: write() sends one segment through the datapath with `sendTcp`; bytes travel as a
 *   latin1 string (the kernel's payload type) and are moved from the peer socket's inbox into
 *   the peer connection's read queue. A segment the datapath does not deliver is a 'reset'
 *   failure (a real kernel would retransmit, then time out or get a RST; the proxy sees a
 *   failed connection either way). No windows: the read queue is unbounded.
 * - end() is a half-close (the peer reads end of stream); the kernel FIN (conntrack sees the
 *   end) is sent when the socket is closed. reset() ends the peer's reads with a 'reset'
 *   failure. Peer notifications are direct, not segments.
 * - UDP: send() is the kernel's sendUdp (netfilter, conntrack, routing as for TCP). A socket
 *   bound through an adapter receives whatever lands in its kernel inbox — from an adapter or
 *   from a raw kernel sendUdp (the worlds' apps) — in onDatagram, one microtask later (a
 *   receive is never nested inside the sender's call, so a proxy that forwards in its handler
 *   does not recurse). The kernel has no receive hook, so the adapter takes over that socket's
 *   inbox push. A datagram that finds no socket is lost, as on Linux (no ICMP
 *   port-unreachable is modelled back to the sender).
 */
import type { NetnsId } from '../../impl/api/ids.js';
import type {
  BindUdpOptions,
  ConnectTcpOptions,
  ListenTcpOptions,
  ReadResult,
  SocketAddress,
  SocketFailure,
  SocketFailureKind,
  SocketOutcome,
  Sockets,
  TcpConnection,
  TcpListener,
  UdpDatagram,
  UdpSocket,
} from '../../impl/host/sockets.js';
import type { Clock } from '../../impl/host/clock.js';
import { formatIp, ipEquals, isUnspecified, parseIp } from '../../impl/api/ip/address.js';
import { SimErrnoError } from './errors.js';
import type { SimKernel } from './kernel.js';
import type { Credentials } from './process.js';
import type { SimSocket, SockAddr } from './socket.js';

interface SimSocketsOptions {
  readonly kernel: SimKernel;
  /** Who owns the sockets (uid, capabilities): the process this adapter stands for. */
  readonly owner: Credentials;
  /** Namespace used when a call names none (the process's own netns). */
  readonly defaultNetns: string;
  /** Label on the sim sockets, shown in traces ("ztunnel", "app-a"). */
  readonly label?: string;
  /** Virtual clock: when given, a connect that times out waits its timeout on it. */
  readonly clock?: Clock;
}

interface ListenerEntry {
  readonly kind: 'listener';
  readonly onConnection: (conn: TcpConnection) => void;
  readonly adapter: SimSockets;
}

interface Registry {
  readonly listeners: Map<SimSocket, ListenerEntry>;
  readonly conns: Map<SimSocket, SimTcpConnection>;
  /** UDP sockets an adapter bound, with their receive callback. */
  readonly udp: Map<SimSocket, (d: UdpDatagram) => void>;
  /** Per namespace: next source port to try for an explicit source address (counts down). */
  readonly spoofCursor: Map<string, number>;
}

const registries = new WeakMap<SimKernel, Registry>();

/** Deepest chain of connects made from inside accept handlers (see the model notes above). */
const MAX_ACCEPT_NESTING = 32;
/** Current nesting per kernel (synchronous, so a plain counter is exact). */
const nesting = new WeakMap<SimKernel, number>();

function registryOf(k: SimKernel): Registry {
  let r = registries.get(k);
  if (!r) registries.set(k, (r = { listeners: new Map(), conns: new Map(), udp: new Map(), spoofCursor: new Map() }));
  return r;
}

const KIND_BY_ERRNO: Readonly<Record<string, SocketFailureKind>> = {
  EADDRINUSE: 'addr-in-use',
  EADDRNOTAVAIL: 'addr-not-available',
  EPERM: 'permission',
  EACCES: 'permission',
  ENETUNREACH: 'unreachable',
};

function failure(kind: SocketFailureKind, errno: string, call: string, message: string): SocketFailure {
  return { ok: false, kind, errno, call, message };
}

function fromErrno(e: unknown, what: string): SocketFailure {
  if (e instanceof SimErrnoError)
    return failure(KIND_BY_ERRNO[e.errno] ?? 'other', e.errno, e.call, `${what}: ${e.message}`);
  throw e;
}

function toAddress(a: SockAddr): SocketAddress {
  return { family: a.addr.family, address: formatIp(a.addr), port: a.port };
}

function latin1(bytes: Uint8Array): string {
  return Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength).toString('latin1');
}

/** One end of an established simulated TCP connection. */
class SimTcpConnection implements TcpConnection {
  readonly localAddress: SocketAddress;
  readonly remoteAddress: SocketAddress;
  /** The other end, when an adapter owns it. */
  peer: SimTcpConnection | undefined;
  private readonly queue: ReadResult[] = [];
  private readonly waiters: ((r: ReadResult) => void)[] = [];
  private sentEnd = false;
  private gotEnd = false;
  private closed = false;

  constructor(
    private readonly kernel: SimKernel,
    readonly socket: SimSocket,
    /** Peer socket, to pick delivered segments out of its inbox. */
    private readonly peerSocket: SimSocket | undefined,
    private readonly accepted: boolean,
  ) {
    // As getsockname/getpeername report them: IPv4-mapped on a dual-stack socket's IPv4 connection.
    this.localAddress = toAddress(socket.reported(socket.local!));
    this.remoteAddress = toAddress(socket.reported(socket.remote!));
  }

  originalDst(): SocketAddress | undefined {
    if (!this.accepted) return undefined;
    try {
      return toAddress(this.kernel.originalDst(this.socket));
    } catch (e) {
      if (e instanceof SimErrnoError && (e.errno === 'ENOENT' || e.errno === 'ENOTCONN')) return undefined;
      throw e;
    }
  }

  read(): Promise<ReadResult> {
    const r = this.queue.shift();
    if (r) {
      if (r.done) this.queue.unshift(r); // end of stream stays readable
      return Promise.resolve(r);
    }
    return new Promise((resolve) => this.waiters.push(resolve));
  }

  async write(bytes: Uint8Array): Promise<SocketOutcome<void>> {
    const what = `write ${bytes.byteLength} bytes ${this.localAddress.address}:${this.localAddress.port} -> ${this.remoteAddress.address}:${this.remoteAddress.port} in ${this.socket.netns}`;
    if (this.closed || this.sentEnd)
      return failure(
        'reset',
        'EPIPE',
        'send',
        `${what}: this side already ${this.closed ? 'closed' : 'ended'} the connection`,
      );
    if (this.socket.state !== 'established')
      return failure('reset', 'EPIPE', 'send', `${what}: the socket is ${this.socket.state}`);
    if (bytes.byteLength === 0) return { ok: true, value: undefined };
    const payload = latin1(bytes);
    const { delivered } = this.kernel.sendTcp(this.socket, payload);
    if (!delivered)
      return failure(
        'reset',
        'ECONNRESET',
        'send',
        `${what}: the segment was not delivered (peer gone, or the datapath dropped it)`,
      );
    if (this.peerSocket) {
      // The kernel pushed the segment into the peer socket's inbox; hand it to its adapter.
      const peer = this.peer;
      if (peer && this.peerSocket.inbox.length > 0) {
        const item = this.peerSocket.inbox.pop()!;
        peer.deliver({ done: false, bytes: new Uint8Array(Buffer.from(item.payload, 'latin1')) });
      }
    }
    return { ok: true, value: undefined };
  }

  async end(): Promise<void> {
    if (this.sentEnd || this.closed) return;
    this.sentEnd = true;
    this.peer?.deliver({ done: true });
    this.maybeRelease();
  }

  close(): void {
    if (this.closed) return;
    if (!this.sentEnd) this.peer?.deliver({ done: true });
    this.sentEnd = true;
    this.finish();
  }

  reset(): void {
    if (this.closed) return;
    this.peer?.deliver({
      done: true,
      failure: failure(
        'reset',
        'ECONNRESET',
        'recv',
        `connection reset by peer ${this.localAddress.address}:${this.localAddress.port} (${this.socket.netns})`,
      ),
    });
    this.sentEnd = true;
    this.finish();
  }

  /** Called by the peer: bytes or end of stream arrived. */
  deliver(r: ReadResult): void {
    if (this.gotEnd) return;
    if (r.done) this.gotEnd = true;
    const w = this.waiters.shift();
    if (w) {
      w(r);
      if (r.done) for (const rest of this.waiters.splice(0)) rest(r);
    } else {
      this.queue.push(r);
    }
    if (r.done) this.maybeRelease();
  }

  get isClosed(): boolean {
    return this.closed;
  }

  private maybeRelease(): void {
    if (this.sentEnd && this.gotEnd) this.finish();
  }

  private finish(): void {
    if (this.closed) return;
    this.closed = true;
    if (this.socket.state !== 'closed') this.kernel.close(this.socket);
    registryOf(this.kernel).conns.delete(this.socket);
    if (!this.gotEnd) this.deliver({ done: true });
    // A closed socket answers the peer's next segment with RST: the peer's writes fail.
  }
}

class SimTcpListener implements TcpListener {
  constructor(
    private readonly kernel: SimKernel,
    private readonly socket: SimSocket,
    readonly address: SocketAddress,
  ) {}

  async close(): Promise<void> {
    if (this.socket.state === 'closed') return;
    registryOf(this.kernel).listeners.delete(this.socket);
    this.kernel.close(this.socket);
  }
}

class SimUdpSocket implements UdpSocket {
  constructor(
    private readonly kernel: SimKernel,
    readonly socket: SimSocket,
    readonly address: SocketAddress,
  ) {}

  async send(to: SocketAddress, bytes: Uint8Array): Promise<SocketOutcome<void>> {
    const what = `send udp ${bytes.byteLength} bytes ${this.address.address}:${this.address.port} -> ${to.address}:${to.port} in ${this.socket.netns}`;
    if (this.socket.state === 'closed') return failure('other', 'EBADF', 'sendto', `${what}: the socket is closed`);
    if (to.family !== this.address.family)
      throw new Error(`${what}: destination is IPv${to.family} but the socket family is IPv${this.address.family}`);
    const r = this.kernel.sendUdp(this.socket, to.address, to.port, latin1(bytes));
    if (r.outcome === 'unreachable') return failure('unreachable', 'ENETUNREACH', 'sendto', `${what}: ${r.reason}`);
    return { ok: true, value: undefined };
  }

  async close(): Promise<void> {
    if (this.socket.state === 'closed') return;
    registryOf(this.kernel).udp.delete(this.socket);
    this.kernel.close(this.socket);
  }
}

export class SimSockets implements Sockets {
  private readonly k: SimKernel;

  constructor(private readonly opts: SimSocketsOptions) {
    this.k = opts.kernel;
  }

  private ns(netns: NetnsId | undefined): string {
    return netns ?? this.opts.defaultNetns;
  }

  /** The socket options a listener and a UDP socket share, in the order a Linux caller sets them before bind. */
  private applyOptions(s: Parameters<SimKernel['setsockopt']>[0], opts: ListenTcpOptions | BindUdpOptions): void {
    if (opts.family === 6 && opts.v6Only !== undefined) this.k.setsockopt(s, 'IPV6_V6ONLY', opts.v6Only);
    if (opts.reusePort) this.k.setsockopt(s, 'SO_REUSEPORT', true);
    if (opts.mark !== undefined) this.k.setsockopt(s, 'SO_MARK', opts.mark);
    if (opts.transparent) this.k.setsockopt(s, 'IP_TRANSPARENT', true);
  }

  async listenTcp(
    opts: ListenTcpOptions,
    onConnection: (conn: TcpConnection) => void,
  ): Promise<SocketOutcome<TcpListener>> {
    const ns = this.ns(opts.netns);
    const what = `listen tcp ${opts.address} port ${opts.port} in ${ns}`;
    if (!this.k.hasNetns(ns)) return failure('no-netns', 'ENOENT', 'setns', `${what}: no such network namespace`);
    const s = this.k.socket(ns, 'tcp', opts.family, this.opts.owner, this.opts.label ?? '');
    try {
      this.applyOptions(s, opts);
      this.k.bind(s, opts.address, opts.port);
      this.k.listen(s);
    } catch (e) {
      this.k.close(s);
      return fromErrno(e, what);
    }
    registryOf(this.k).listeners.set(s, { kind: 'listener', onConnection, adapter: this });
    return { ok: true, value: new SimTcpListener(this.k, s, toAddress(s.local!)) };
  }

  async bindUdp(opts: BindUdpOptions, onDatagram: (d: UdpDatagram) => void): Promise<SocketOutcome<UdpSocket>> {
    const ns = this.ns(opts.netns);
    const what = `bind udp ${opts.address} port ${opts.port} in ${ns}`;
    if (!this.k.hasNetns(ns)) return failure('no-netns', 'ENOENT', 'setns', `${what}: no such network namespace`);
    const s = this.k.socket(ns, 'udp', opts.family, this.opts.owner, this.opts.label ?? '');
    try {
      this.applyOptions(s, opts);
      this.k.bind(s, opts.address, opts.port);
    } catch (e) {
      this.k.close(s);
      return fromErrno(e, what);
    }
    registryOf(this.k).udp.set(s, onDatagram);
    // Deliver instead of queueing: the kernel pushes every datagram for this socket here.
    s.inbox.push = (...items): number => {
      for (const item of items) {
        const d: UdpDatagram = {
          from: toAddress(s.reported(item.from)),
          bytes: new Uint8Array(Buffer.from(item.payload, 'latin1')),
        };
        queueMicrotask(() => {
          if (s.state !== 'closed') onDatagram(d);
        });
      }
      return 0;
    };
    return { ok: true, value: new SimUdpSocket(this.k, s, toAddress(s.local!)) };
  }

  /**
   * A source port for an explicit (often foreign, transparent) source address. Binding port 0
   * would take the namespace's next ephemeral port, and since every namespace counts up from
   * 32768, the inbound proxy spoofing a client would systematically pick ports the client's
   * namespace hands out next: the proxy's tuple (client -> app) then equals a later client
   * connection's tuple, whose SYN meets the proxy's established socket instead of the redirect.
   * Linux picks ports pseudo-randomly, so there the clash is rare, not impossible (noted for
   * the lead). The sim counts these ports down from the top of the range instead, skipping any
   * tuple conntrack holds live, so the two sequences meet only after ~28k connections.
   */
  private freePort(ns: string, address: string, opts: ConnectTcpOptions): number {
    const n = this.k.netns(ns);
    const src = parseIp(address);
    const dst = parseIp(opts.dst.address);
    const reg = registryOf(this.k);
    const lo = 32768;
    const hi = 60999;
    let cur = reg.spoofCursor.get(ns) ?? hi;
    for (let i = 0; i <= hi - lo; i++) {
      const p = cur;
      cur = cur <= lo ? hi : cur - 1;
      if (n.conntrack.liveInUse(0, { proto: 'tcp', src, sport: p, dst, dport: opts.dst.port })) continue;
      if (
        n.sockets
          .all()
          .some(
            (o) =>
              o.state !== 'closed' &&
              o.local?.port === p &&
              o.proto === 'tcp' &&
              !o.acceptedFrom &&
              (isUnspecified(o.local.addr) || ipEquals(o.local.addr, src)),
          )
      )
        continue;
      reg.spoofCursor.set(ns, cur);
      return p;
    }
    throw new Error(`connect in ${ns}: no free source port for ${address}`);
  }

  async connectTcp(opts: ConnectTcpOptions): Promise<SocketOutcome<TcpConnection>> {
    const ns = this.ns(opts.netns);
    const what = `connect tcp to ${opts.dst.address} port ${opts.dst.port} in ${ns}`;
    if (opts.dst.family !== opts.family)
      throw new Error(`${what}: destination is IPv${opts.dst.family} but the socket family is IPv${opts.family}`);
    if (!this.k.hasNetns(ns)) return failure('no-netns', 'ENOENT', 'setns', `${what}: no such network namespace`);
    const depth = nesting.get(this.k) ?? 0;
    if (depth >= MAX_ACCEPT_NESTING) {
      return failure(
        'other',
        'ELOOP',
        'connect',
        `${what}: ${depth} connects nested inside accept handlers — a redirect loop (an upstream leg redirected back into a listener of the same chain, e.g. a proxy connection that lost its mark exemption)`,
      );
    }
    const s = this.k.socket(ns, 'tcp', opts.family, this.opts.owner, this.opts.label ?? '');
    try {
      if (opts.mark !== undefined) this.k.setsockopt(s, 'SO_MARK', opts.mark);
      if (opts.transparent) this.k.setsockopt(s, 'IP_TRANSPARENT', true);
      if (opts.src) this.k.bind(s, opts.src.address, opts.src.port || this.freePort(ns, opts.src.address, opts));
    } catch (e) {
      this.k.close(s);
      return fromErrno(e, what);
    }
    const r = this.k.connect(s, opts.dst.address, opts.dst.port);
    switch (r.outcome) {
      case 'refused':
        return failure('refused', 'ECONNREFUSED', 'connect', `${what}: ${r.reason}`);
      case 'unreachable':
        return failure('unreachable', 'ENETUNREACH', 'connect', `${what}: ${r.reason}`);
      case 'reset':
        return failure('reset', 'ECONNRESET', 'connect', `${what}: ${r.reason}`);
      case 'timeout': {
        const ms = opts.timeoutMs ?? 10_000;
        if (this.opts.clock) await this.opts.clock.sleep(ms);
        return failure('timeout', 'ETIMEDOUT', 'connect', `${what}: no answer within ${ms} ms (${r.reason})`);
      }
      case 'established':
        break;
    }
    const server = r.server!;
    const reg = registryOf(this.k);
    const client = new SimTcpConnection(this.k, s, server, false);
    reg.conns.set(s, client);
    const entry = r.listener ? reg.listeners.get(r.listener) : undefined;
    if (entry && r.listener) {
      const i = r.listener.acceptQueue.indexOf(server);
      if (i >= 0) r.listener.acceptQueue.splice(i, 1);
      const accepted = new SimTcpConnection(this.k, server, s, true);
      accepted.peer = client;
      client.peer = accepted;
      reg.conns.set(server, accepted);
      nesting.set(this.k, depth + 1);
      try {
        entry.onConnection(accepted);
      } finally {
        nesting.set(this.k, depth);
      }
    }
    return { ok: true, value: client };
  }
}

/** The adapter connection that owns a sim socket, if any (tests inspect marks and 4-tuples). */
export function simConnectionOf(k: SimKernel, s: SimSocket): SimTcpConnection | undefined {
  return registryOf(k).conns.get(s);
}
