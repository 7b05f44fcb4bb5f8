/**
 * Linux adapter of the Sockets port: the native addon creates and configures the socket in
 * the target namespace, then Node's event loop adopts the fd.
 *
 * - Listeners: the addon binds and listens; `net.Server.listen({ fd })` serves the fd.
 * - Connections: the addon creates (and binds) the socket; `new net.Socket({ fd })` adopts
 *   the unconnected fd and `connect()` is called in the same tick, so libuv performs the
 *   non-blocking connect on our fd (it reuses an fd it already has rather than opening one).
 * - Accepted connections: SO_ORIGINAL_DST is read at accept time from the accepted socket's
 *   fd (`socket._handle.fd`, internal to Node but present for TCP on Linux), while the fd is
 *   certainly open.
 * - UDP: the addon creates, configures and binds a datagram socket; `dgram` adopts the bound
 *   fd (`socket.bind({ fd })`).
 */
import * as dgram from 'node:dgram';
import * as net from 'node:net';
import type { NetnsId } from '../api/ids.js';
import type { ByteStream } from '../host/hbone.js';
import type {
  BindUdpOptions,
  ConnectTcpOptions,
  IpFamily,
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
  Relay,
  RelayResult,
} from '../host/sockets.js';
import { WRITE_BUFFER } from './byte-stream-duplex.js';
import { fdCalls, NativeSocketError, RawSocket, type NativeAddress, type NativeSpliceRelay } from './sockets-native.js';

const DEFAULT_BACKLOG = 128;
const DEFAULT_CONNECT_TIMEOUT_MS = 10_000;
/** Pause the kernel socket once this many unread bytes are queued in user space. */
const READ_HIGH_WATER = 1 << 20;

const KIND_BY_ERRNO: Readonly<Record<string, SocketFailureKind>> = {
  ECONNREFUSED: 'refused',
  ETIMEDOUT: 'timeout',
  ECONNRESET: 'reset',
  EPIPE: 'reset',
  ENETUNREACH: 'unreachable',
  EHOSTUNREACH: 'unreachable',
  EADDRINUSE: 'addr-in-use',
  EADDRNOTAVAIL: 'addr-not-available',
  EPERM: 'permission',
  EACCES: 'permission',
};

function failure(errno: string, call: string, message: string): SocketFailure {
  const kind: SocketFailureKind =
    call.startsWith('open') && errno === 'ENOENT' ? 'no-netns' : (KIND_BY_ERRNO[errno] ?? 'other');
  return { ok: false, kind, errno, call, message };
}

/** An error from the addon or from Node as a failure outcome; anything else is re-thrown. */
function toFailure(e: unknown, what: string): SocketFailure {
  if (e instanceof NativeSocketError) {
    if (e.errno === 0) throw e; // an argument error: a bug in the caller, not a network condition
    return failure(e.code, e.syscall, `${what}: ${e.message}`);
  }
  const err = e as NodeJS.ErrnoException;
  if (err instanceof Error && typeof err.code === 'string') {
    return failure(err.code, err.syscall ?? 'unknown', `${what}: ${err.message}`);
  }
  throw e;
}

function describeNetns(netns: NetnsId | undefined): string {
  return netns === undefined ? 'own netns' : `netns ${netns}`;
}

function nativeFamily(f: IpFamily): 'inet' | 'inet6' {
  return f === 4 ? 'inet' : 'inet6';
}

function fromNative(a: NativeAddress): SocketAddress {
  return { family: a.family === 'inet' ? 4 : 6, address: a.address, port: a.port };
}

function fromNode(address: string | undefined, family: string | undefined, port: number | undefined): SocketAddress {
  if (address === undefined || port === undefined)
    throw new Error('socket has no address (it is closed or not connected)');
  return { family: family === 'IPv6' ? 6 : 4, address, port };
}

/** The fd under a net.Socket (Node keeps it on the internal TCP handle). */
function fdOf(sock: net.Socket): number | undefined {
  // `_handle` is not in Node's typings; it is the libuv TCP wrap, whose `fd` is the socket fd on Unix.
  const handle = (sock as unknown as { _handle?: { fd?: unknown } | null })._handle;
  return typeof handle?.fd === 'number' && handle.fd >= 0 ? handle.fd : undefined;
}

/** Set the options shared by listening and connecting sockets. */
function configure(raw: RawSocket, opts: { family: IpFamily; mark?: number; transparent?: boolean }): void {
  if (opts.mark !== undefined) raw.setOption('SO_MARK', opts.mark);
  if (opts.transparent) raw.setOption(opts.family === 4 ? 'IP_TRANSPARENT' : 'IPV6_TRANSPARENT', 1);
}

class LinuxTcpConnection implements TcpConnection {
  readonly localAddress: SocketAddress;
  readonly remoteAddress: SocketAddress;
  private readonly queue: Uint8Array[] = [];
  private queued = 0;
  private finished: { failure?: SocketFailure } | undefined;
  private waiter: ((r: ReadResult) => void) | undefined;
  /** Reading has started (a 'data' listener is on): the socket can no longer be handed over whole. */
  private reading = false;
  /** The socket is corked until the end of this event-loop turn (see write). */
  private corked = false;
  /** Handed over to another owner (node:tls) by `takeNativeSocket`: this object no longer follows it. */
  detached = false;
  private readonly onEnd = (): void => this.finish({});
  private readonly onError = (e: Error): void => this.finish({ failure: toFailure(e, `connection ${this.label}`) });

  constructor(
    readonly sock: net.Socket,
    private readonly label: string,
    private readonly origDst: { value: SocketAddress | undefined } | { error: Error },
  ) {
    this.localAddress = fromNode(sock.localAddress, sock.localFamily, sock.localPort);
    this.remoteAddress = fromNode(sock.remoteAddress, sock.remoteFamily, sock.remotePort);
    // As ztunnel: TCP_NODELAY on every accepted and created socket (a relay must not add Nagle delay).
    sock.setNoDelay(true);
    sock.on('end', this.onEnd);
    sock.on('error', this.onError);
    sock.on('close', this.onEnd);
  }

  /**
   * Give the net.Socket to another owner (node:tls over the native handle), if nothing has been
   * read from it yet; afterwards this object only keeps its addresses.
   */
  detach(): net.Socket | undefined {
    if (!this.detachable()) return undefined;
    this.detached = true;
    this.sock.off('end', this.onEnd);
    this.sock.off('error', this.onError);
    this.sock.off('close', this.onEnd);
    return this.sock;
  }

  /** Nothing has been read from or written to the socket, and it is open: it can change owner whole. */
  detachable(): boolean {
    return (
      !this.reading &&
      !this.corked &&
      !this.detached &&
      !this.finished &&
      !this.sock.destroyed &&
      this.sock.writableLength === 0
    );
  }

  originalDst(): SocketAddress | undefined {
    if ('error' in this.origDst) throw this.origDst.error;
    return this.origDst.value;
  }

  /** Start reading on the first read(): until then the kernel keeps the bytes (see detach). */
  private startReading(): void {
    if (this.reading) return;
    this.reading = true;
    this.sock.on('data', (chunk: Buffer) =>
      this.push(new Uint8Array(chunk.buffer, chunk.byteOffset, chunk.byteLength)),
    );
    this.sock.resume();
  }

  private push(bytes: Uint8Array): void {
    if (this.waiter) {
      const w = this.waiter;
      this.waiter = undefined;
      w({ done: false, bytes });
      return;
    }
    this.queue.push(bytes);
    this.queued += bytes.byteLength;
    if (this.queued >= READ_HIGH_WATER) this.sock.pause();
  }

  private finish(f: { failure?: SocketFailure }): void {
    if (this.finished) return;
    this.finished = f;
    if (this.waiter) {
      const w = this.waiter;
      this.waiter = undefined;
      w({ done: true, ...f });
    }
  }

  read(): Promise<ReadResult> {
    if (this.detached) throw new Error(`connection ${this.label}: read() after the socket was handed to TLS`);
    this.startReading();
    const next = this.queue.shift();
    if (next) {
      this.queued -= next.byteLength;
      if (this.queued < READ_HIGH_WATER) this.sock.resume();
      return Promise.resolve({ done: false, bytes: next });
    }
    if (this.finished) return Promise.resolve({ done: true, ...this.finished });
    if (this.waiter) throw new Error(`connection ${this.label}: read() called again before the previous read resolved`);
    return new Promise((resolve) => {
      this.waiter = resolve;
    });
  }

  /**
   * Resolves at once while less than WRITE_BUFFER bytes wait in Node's send buffer, else on 'drain':
   * the caller may keep writing, with backpressure, without waiting for each chunk to reach the
   * kernel. A failure of an accepted write surfaces on the next write and as a read failure.
   */
  write(bytes: Uint8Array): Promise<SocketOutcome<void>> {
    const sock = this.sock;
    if (sock.destroyed || sock.writableEnded) {
      const f = this.finished?.failure;
      return Promise.resolve(
        f ?? failure('EPIPE', 'send', `write on connection ${this.label}: the connection is already closed`),
      );
    }
    // Writes made in one event-loop turn leave in one writev. Over HBONE the relay is handed
    // HTTP/2 data in pieces cut at TLS record and frame boundaries (16 KiB down to 9 bytes),
    // each from its own I/O callback; a syscall and a TCP segment per piece was the largest
    // cost of the inbound relay. setImmediate runs right after this turn's I/O callbacks.
    if (!this.corked) {
      this.corked = true;
      sock.cork();
      setImmediate(() => {
        this.corked = false;
        sock.uncork();
      });
    }
    sock.write(bytes);
    if (sock.writableLength < WRITE_BUFFER || !sock.writableNeedDrain)
      return Promise.resolve({ ok: true, value: undefined });
    return new Promise((resolve) => {
      const done = (): void => {
        sock.off('drain', done);
        sock.off('close', done);
        const f = this.finished?.failure;
        resolve(
          sock.destroyed
            ? (f ??
                failure('EPIPE', 'send', `write on connection ${this.label}: the connection closed with data unsent`))
            : { ok: true, value: undefined },
        );
      };
      sock.on('drain', done);
      sock.on('close', done);
    });
  }

  end(): Promise<void> {
    return new Promise((resolve) => {
      if (this.sock.destroyed || this.sock.writableEnded) return resolve();
      this.sock.end(() => resolve());
    });
  }

  close(): void {
    this.sock.destroy();
  }

  reset(): void {
    if (this.sock.destroyed) return;
    this.sock.resetAndDestroy();
  }
}

/**
 * The net.Socket under a connection of this adapter that nobody has read from yet, taken over
 * by the caller (the TLS adapter runs node:tls on the native handle rather than on a JS stream
 * bridge). Undefined for other adapters' connections (the sim's) and for connections already
 * read from: callers then fall back to the port's read/write.
 */
export function takeNativeSocket(conn: TcpConnection): net.Socket | undefined {
  return conn instanceof LinuxTcpConnection ? conn.detach() : undefined;
}

/** The fd under a net.Socket of this adapter (see takeNativeSocket), if it is open. */
export function socketFd(sock: net.Socket): number | undefined {
  return fdOf(sock);
}

class LinuxTcpListener implements TcpListener {
  constructor(
    private readonly server: net.Server,
    readonly address: SocketAddress,
  ) {}

  close(): Promise<void> {
    return new Promise((resolve) => this.server.close(() => resolve()));
  }
}

/** Read SO_ORIGINAL_DST of an accepted socket now, while its fd is certainly open. */
function readOriginalDst(sock: net.Socket, netns: string): { value: SocketAddress | undefined } | { error: Error } {
  const fd = fdOf(sock);
  if (fd === undefined)
    return {
      error: new Error(`original destination unavailable: the accepted socket has no fd (in ${netns || 'own netns'})`),
    };
  try {
    return { value: fromNative(fdCalls.originalDst(fd, netns)) };
  } catch (e) {
    if (e instanceof NativeSocketError && e.code === 'ENOENT') return { value: undefined };
    return { error: e instanceof Error ? e : new Error(String(e)) };
  }
}

class LinuxUdpSocket implements UdpSocket {
  private closed = false;

  constructor(
    private readonly sock: dgram.Socket,
    readonly address: SocketAddress,
    private readonly where: string,
  ) {}

  send(to: SocketAddress, bytes: Uint8Array): Promise<SocketOutcome<void>> {
    const what = `send udp ${bytes.byteLength} bytes to ${to.address} port ${to.port} from ${this.where}`;
    if (to.family !== this.address.family)
      throw new Error(`${what}: destination is IPv${to.family} but the socket family is IPv${this.address.family}`);
    if (this.closed) return Promise.resolve(failure('EBADF', 'sendto', `${what}: the socket is closed`));
    return new Promise((resolve) => {
      this.sock.send(bytes, to.port, to.address, (e) =>
        resolve(e ? toFailure(e, what) : { ok: true, value: undefined }),
      );
    });
  }

  close(): Promise<void> {
    if (this.closed) return Promise.resolve();
    this.closed = true;
    return new Promise((resolve) => this.sock.close(() => resolve()));
  }
}

/**
 * socket(2) in the namespace, the options a bound socket takes (v6only, `beforeBind`, reuseport,
 * mark, transparent), bind, `afterBind` (listen); the fd is closed again on any failure.
 */
function openBound(
  opts: BindUdpOptions | ListenTcpOptions,
  type: 'dgram' | 'stream',
  what: string,
  beforeBind?: (raw: RawSocket) => void,
  afterBind?: (raw: RawSocket) => void,
): { raw: RawSocket; bound: SocketAddress } | SocketFailure {
  let raw: RawSocket;
  try {
    raw = RawSocket.open(opts.netns, nativeFamily(opts.family), type);
  } catch (e) {
    return toFailure(e, what);
  }
  try {
    if (opts.family === 6 && opts.v6Only !== undefined) raw.setOption('IPV6_V6ONLY', opts.v6Only);
    beforeBind?.(raw);
    if (opts.reusePort) raw.setOption('SO_REUSEPORT', 1);
    configure(raw, opts);
    raw.bind(opts.address, opts.port);
    afterBind?.(raw);
    return { raw, bound: fromNative(raw.localAddress()) };
  } catch (e) {
    raw.close();
    return toFailure(e, what);
  }
}

/**
 * A stream that can relay itself to a connected socket's fd outside JavaScript (a stream of the
 * native HBONE tunnel, impl/linux/hbone-native.ts). The result counts `aToB` from the stream to
 * the fd and `bToA` back. Undefined when it cannot (it was already read from or written to).
 */
export interface FdRelayable {
  relayToFd(fd: number): Relay | undefined;
}

function isFdRelayable(x: ByteStream): x is ByteStream & FdRelayable {
  return typeof (x as Partial<FdRelayable>).relayToFd === 'function';
}

/** `stream` relays itself to `conn`'s fd; `swap` when the caller named the connection first. */
function fdRelay(conn: LinuxTcpConnection, stream: FdRelayable, swap: boolean): Relay | undefined {
  if (!conn.detachable()) return undefined;
  const fd = fdOf(conn.sock);
  if (fd === undefined) return undefined;
  const r = stream.relayToFd(fd);
  if (!r) return undefined;
  conn.detach()?.destroy(); // the tunnel holds its own dup of the fd
  if (!swap) return r;
  return { done: r.done.then((x) => ({ aToB: x.bToA, bToA: x.aToB, ended: x.ended })), abort: () => r.abort() };
}

/** Both ways outside JavaScript: splice(2) for two plain connections, the tunnel for a tunnel stream and a connection. */
function nativeRelay(a: ByteStream, b: ByteStream, pipeBytes: number, kernel: boolean): Relay | undefined {
  if (a instanceof LinuxTcpConnection && isFdRelayable(b)) return fdRelay(a, b, true);
  if (b instanceof LinuxTcpConnection && isFdRelayable(a)) return fdRelay(b, a, false);
  return kernel ? kernelRelay(a, b, pipeBytes) : undefined;
}

/**
 * The kernel relay (native/splice-relay.cc) for two connections of this adapter that nobody
 * has used yet: the addon takes dups of their fds, then Node's sockets are closed (closing one
 * of two fds of a socket sends nothing; the addon's copies keep the connections open).
 * Undefined, with both connections untouched, when that is not possible.
 */
function kernelRelay(a: ByteStream, b: ByteStream, pipeBytes: number): Relay | undefined {
  if (!(a instanceof LinuxTcpConnection) || !(b instanceof LinuxTcpConnection) || a === b) return undefined;
  if (!a.detachable() || !b.detachable()) return undefined;
  const fa = fdOf(a.sock);
  const fb = fdOf(b.sock);
  if (fa === undefined || fb === undefined) return undefined;
  let settle: (r: RelayResult) => void = () => undefined;
  const done = new Promise<RelayResult>((resolve) => {
    settle = resolve;
  });
  let native: NativeSpliceRelay;
  try {
    native = fdCalls.spliceRelay(fa, fb, '', (aToB, bToA, ended) => settle({ aToB, bToA, ended }), pipeBytes);
  } catch {
    // Out of fds or pipes: the portable relay can still carry these two, and reports its own failures.
    return undefined;
  }
  a.detach()?.destroy();
  b.detach()?.destroy();
  return {
    done,
    abort: () => {
      const [aToB, bToA] = native.abort();
      settle({ aToB, bToA, ended: 'aborted' }); // no effect once the relay has ended by itself
    },
  };
}

interface LinuxSocketsOptions {
  /** Relay plain connection pairs with splice(2) in the kernel (default true); false: through the process. */
  readonly kernelRelay?: boolean;
  /**
   * Pipe size per direction of a kernel relay, 4 KiB .. 1 MiB (default 256 KiB): bytes one
   * splice call can move. For a process without CAP_SYS_ADMIN or CAP_SYS_RESOURCE, pipe memory
   * counts against its uid's quota (/proc/sys/fs/pipe-user-pages-soft, 64 MiB by default): past
   * it the kernel refuses the size and new pipes get one or two pages; the relay then moves
   * smaller pieces, still correctly. The deployed proxy holds CAP_SYS_ADMIN, so it is exempt.
   */
  readonly kernelRelayPipeBytes?: number;
}

const DEFAULT_KERNEL_RELAY_PIPE_BYTES = 256 << 10;

export class LinuxSockets implements Sockets {
  readonly relayNative?: (a: ByteStream, b: ByteStream) => Relay | undefined;

  constructor(opts: LinuxSocketsOptions = {}) {
    const pipeBytes = opts.kernelRelayPipeBytes ?? DEFAULT_KERNEL_RELAY_PIPE_BYTES;
    if (!Number.isInteger(pipeBytes) || pipeBytes < 4096 || pipeBytes > 1 << 20) {
      throw new RangeError(
        `LinuxSockets: kernelRelayPipeBytes must be an integer from 4096 to 1048576 (got ${pipeBytes})`,
      );
    }
    const kernel = opts.kernelRelay ?? true;
    this.relayNative = (a, b) => nativeRelay(a, b, pipeBytes, kernel);
  }

  async bindUdp(opts: BindUdpOptions, onDatagram: (d: UdpDatagram) => void): Promise<SocketOutcome<UdpSocket>> {
    const what = `bind udp ${opts.address} port ${opts.port} in ${describeNetns(opts.netns)}`;
    const b = openBound(opts, 'dgram', what);
    if ('ok' in b) return b;
    const { raw, bound } = b;
    const where = `${bound.address}:${bound.port} (${describeNetns(opts.netns)})`;
    const sock = dgram.createSocket({ type: opts.family === 4 ? 'udp4' : 'udp6' });
    sock.on('message', (msg, rinfo) => {
      onDatagram({
        from: { family: rinfo.family === 'IPv6' ? 6 : 4, address: rinfo.address, port: rinfo.port },
        bytes: new Uint8Array(msg.buffer, msg.byteOffset, msg.byteLength),
      });
    });
    return new Promise((resolve) => {
      const onError = (e: Error): void => {
        raw.close();
        resolve(toFailure(e, what));
      };
      sock.once('error', onError);
      sock.bind({ fd: raw.fd }, () => {
        raw.release();
        sock.off('error', onError);
        // Errors after binding (ICMP errors surfaced on a later recv) must not crash the process.
        sock.on('error', () => undefined);
        resolve({ ok: true, value: new LinuxUdpSocket(sock, bound, where) });
      });
    });
  }

  async listenTcp(
    opts: ListenTcpOptions,
    onConnection: (conn: TcpConnection) => void,
  ): Promise<SocketOutcome<TcpListener>> {
    const what = `listen tcp ${opts.address} port ${opts.port} in ${describeNetns(opts.netns)}`;
    // Node (libuv) and tokio both set SO_REUSEADDR on listeners; it only lets a new listener
    // bind over TIME_WAIT leftovers, never share a port with another listener.
    const b = openBound(
      opts,
      'stream',
      what,
      (raw) => raw.setOption('SO_REUSEADDR', 1),
      (raw) => raw.listen(opts.backlog ?? DEFAULT_BACKLOG),
    );
    if ('ok' in b) return b;
    const { raw, bound } = b;
    const netnsLabel = opts.netns ?? '';
    // allowHalfOpen: the port's end() is a half-close; Node's default would end our side on the
    // peer's FIN. pauseOnConnect: nothing is read until the handler reads (or hands the socket to TLS).
    const server = net.createServer({ allowHalfOpen: true, pauseOnConnect: true }, (sock) => {
      const label = `${sock.remoteAddress}:${sock.remotePort} -> ${bound.address}:${bound.port} (${describeNetns(opts.netns)})`;
      onConnection(new LinuxTcpConnection(sock, label, readOriginalDst(sock, netnsLabel)));
    });
    return new Promise((resolve) => {
      const onError = (e: Error): void => {
        // If Node failed before adopting the fd it is still ours; after adopting, Node closes it.
        if ((e as NodeJS.ErrnoException).syscall !== 'listen') raw.close();
        resolve(toFailure(e, what));
      };
      server.once('error', onError);
      server.listen({ fd: raw.fd }, () => {
        raw.release();
        server.off('error', onError);
        // Errors after listening (e.g. EMFILE on accept) must not crash the process; Node keeps listening.
        server.on('error', () => undefined);
        resolve({ ok: true, value: new LinuxTcpListener(server, bound) });
      });
    });
  }

  async connectTcp(opts: ConnectTcpOptions): Promise<SocketOutcome<TcpConnection>> {
    const what = `connect tcp to ${opts.dst.address} port ${opts.dst.port} in ${describeNetns(opts.netns)}`;
    if (opts.dst.family !== opts.family)
      throw new Error(`${what}: destination is IPv${opts.dst.family} but the socket family is IPv${opts.family}`);
    let raw: RawSocket;
    try {
      raw = RawSocket.open(opts.netns, nativeFamily(opts.family), 'stream');
    } catch (e) {
      return toFailure(e, what);
    }
    try {
      configure(raw, opts);
      if (opts.src) {
        // Binding a foreign source needs IP_FREEBIND besides IP_TRANSPARENT only when the
        // address is not local; setting both is what ztunnel's freebind_connect does.
        if (opts.transparent) raw.setOption(opts.family === 4 ? 'IP_FREEBIND' : 'IPV6_FREEBIND', 1);
        raw.bind(opts.src.address, opts.src.port ?? 0);
      }
    } catch (e) {
      raw.close();
      return toFailure(e, what);
    }
    const sock = new net.Socket({ fd: raw.release(), allowHalfOpen: true });
    sock.pause(); // read nothing until the caller reads or hands the socket to TLS (see takeNativeSocket)
    const timeoutMs = opts.timeoutMs ?? DEFAULT_CONNECT_TIMEOUT_MS;
    return new Promise((resolve) => {
      const timer = setTimeout(() => {
        sock.destroy();
        resolve(failure('ETIMEDOUT', 'connect', `${what}: no answer within ${timeoutMs} ms`));
      }, timeoutMs);
      sock.once('error', (e) => {
        clearTimeout(timer);
        sock.destroy();
        resolve(toFailure(e, what));
      });
      sock.once('connect', () => {
        clearTimeout(timer);
        sock.removeAllListeners('error');
        const label = `${sock.localAddress}:${sock.localPort} -> ${opts.dst.address}:${opts.dst.port} (${describeNetns(opts.netns)})`;
        resolve({ ok: true, value: new LinuxTcpConnection(sock, label, { value: undefined }) });
      });
      // Must run in the tick that adopted the fd: see the module comment.
      sock.connect({ port: opts.dst.port, host: opts.dst.address });
    });
  }
}
