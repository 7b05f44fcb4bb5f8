/**
 * HBONE with the tunnel in native code (impl/linux/native/hbone-tunnel.cc: OpenSSL + nghttp2
 * on the socket's fd): the same port, wire and checks as the node:tls + node:http2 transport
 * (hbone-tls.ts), but a tunnel stream relayed to a plain connection never enters JavaScript
 * (Sockets.relayNative hands the pair to the tunnel). docs/hbone-data-path.md says why.
 *
 * Decisions stay here: the SPIFFE identity of the peer certificate (client: one of the
 * expected identities; server: the mesh's trust domain), the CONNECT answer (by the proxy).
 * A connection that is not an unread Linux socket (the sim's) goes to the node:tls transport.
 */
import { X509Certificate } from 'node:crypto';
import type {
  ByteStream,
  HboneConnectRequest,
  HboneFailure,
  HboneInboundStream,
  HboneOutcome,
  HboneServeOptions,
  HboneTransport,
} from '../host/hbone.js';
import type { ReadResult, Relay, RelayResult, SocketOutcome, TcpConnection } from '../host/sockets.js';
import type { PeerIdentity } from '../api/identity.js';
import { WRITE_BUFFER } from './byte-stream-duplex.js';
import { TlsHbone } from './hbone-tls.js';
import { loadHboneAddon, type NativeTlsContext, type NativeTunnel, type TunnelEvent } from './hbone-native-addon.js';
import { authorityText, certificateOrFail, checkClientIdentity, fail, checkServerIdentity } from './hbone-outcome.js';
import { identityFromSan, type CertificateSource, type IssuedCertificate } from './mesh-ca.js';
import { socketFd, takeNativeSocket, type FdRelayable } from './sockets.js';

function identityOf(der: Buffer | undefined): PeerIdentity | undefined {
  if (!der) return undefined;
  try {
    return identityFromSan(new X509Certificate(der).subjectAltName);
  } catch {
    return undefined; // a certificate Node cannot parse names nobody
  }
}

const RESET: SocketOutcome<void> = {
  ok: false,
  kind: 'reset',
  errno: 'ECONNRESET',
  call: 'send',
  message: 'HBONE stream reset',
};

/** One CONNECT stream of a native tunnel, as the port's ByteStream (and relayable to an fd). */
class TunnelStream implements ByteStream, FdRelayable {
  private readonly queue: ReadResult[] = [];
  private waiter: ((r: ReadResult) => void) | undefined;
  private reading = false;
  private finished = false;
  private closed = false;
  private drainWaiters: (() => void)[] = [];
  /** The peer's END_STREAM arrived and is passed on next turn (see onEnd). */
  private endPending = false;
  /** Counts 'drain' events: one can arrive inside the write() call that asks for it. */
  private drains = 0;
  private relayed: ((r: RelayResult) => void) | undefined;

  constructor(
    private readonly tunnel: NativeTunnel,
    readonly id: number,
  ) {}

  // ---- events from the tunnel ----
  onData(b: Buffer): void {
    this.push({ done: false, bytes: new Uint8Array(b.buffer, b.byteOffset, b.byteLength) });
  }
  onEnd(): void {
    // node:http2 resets a stream as END_STREAM followed by RST_STREAM: a clean end is believed
    // one turn later, so the reset that follows at once is reported as what it is.
    this.endPending = true;
    setImmediate(() => this.push({ done: true }));
  }
  onReset(message: string): void {
    this.closed = true;
    this.push({ done: true, failure: { ok: false, kind: 'reset', errno: 'ECONNRESET', call: 'recv', message } });
    this.wakeWriters();
  }
  onDrain(): void {
    this.drains++;
    this.wakeWriters();
  }
  onRelayed(r: RelayResult): void {
    this.closed = true;
    this.relayed?.(r);
    this.relayed = undefined;
  }
  /** The tunnel is gone: whatever waits fails, and nothing may call into it any more. */
  onTunnelClosed(): void {
    // After a clean end the tunnel closes as a matter of course; only a stream cut short fails.
    if (!this.finished && !this.endPending) this.onReset('HBONE tunnel closed');
    this.closed = true;
    this.onRelayed({ aToB: 0, bToA: 0, ended: 'reset' });
  }

  private push(r: ReadResult): void {
    if (this.finished) return;
    if (r.done) this.finished = true;
    if (this.waiter) {
      const w = this.waiter;
      this.waiter = undefined;
      if (!r.done && !this.closed) this.tunnel.consume(this.id, r.bytes.byteLength);
      w(r);
    } else {
      this.queue.push(r);
    }
  }

  private wakeWriters(): void {
    const ws = this.drainWaiters;
    this.drainWaiters = [];
    for (const w of ws) w();
  }

  // ---- ByteStream ----
  read(): Promise<ReadResult> {
    if (!this.reading) {
      this.reading = true;
      if (!this.closed) this.tunnel.readStart(this.id); // may deliver held bytes at once
    }
    const r = this.queue.shift();
    if (r) {
      if (r.done) this.queue.unshift(r);
      // The HTTP/2 windows open only as the reader takes bytes: that is the backpressure.
      else if (!this.closed) this.tunnel.consume(this.id, r.bytes.byteLength);
      return Promise.resolve(r);
    }
    if (this.waiter) throw new Error(`HBONE stream ${this.id}: read() called again before the previous read resolved`);
    return new Promise((resolve) => {
      this.waiter = resolve;
    });
  }

  write(bytes: Uint8Array): Promise<SocketOutcome<void>> {
    if (this.closed) return Promise.resolve(RESET);
    const drains = this.drains;
    const queued = this.tunnel.write(this.id, bytes);
    if (queued < 0) return Promise.resolve(RESET);
    if (queued < WRITE_BUFFER || this.drains !== drains) return Promise.resolve({ ok: true, value: undefined });
    return new Promise((resolve) =>
      this.drainWaiters.push(() => resolve(this.closed ? RESET : { ok: true, value: undefined })),
    );
  }

  end(): Promise<void> {
    if (!this.closed) this.tunnel.end(this.id);
    return Promise.resolve();
  }

  close(): void {
    if (!this.closed) this.tunnel.end(this.id);
  }

  reset(): void {
    if (this.closed) return;
    this.closed = true;
    this.tunnel.reset(this.id);
    this.wakeWriters();
  }

  relayToFd(fd: number): Relay | undefined {
    if (this.reading || this.closed) return undefined;
    // Waiting before the call: the relay can end inside it (a reset already received).
    const done = new Promise<RelayResult>((resolve) => {
      this.relayed = resolve;
    });
    if (!this.tunnel.relay(this.id, fd)) {
      this.relayed = undefined;
      return undefined;
    }
    return {
      done,
      abort: () => {
        if (this.closed) return;
        const [toFd, fromFd] = this.tunnel.abortRelay(this.id); // resets both ends; no 'relayed' follows
        this.onRelayed({ aToB: toFd, bToA: fromFd, ended: 'aborted' });
      },
    };
  }
}

/** The JS side of one native tunnel: routes its events to promises and streams. */
class TunnelSession {
  readonly tunnel: NativeTunnel;
  private readonly streams = new Map<number, TunnelStream>();
  // Settled by events. The handshake can finish inside the constructor (the peer's bytes were
  // already there), before anyone waits: the outcome is kept, not only handed to a waiter.
  private handshakeResult: { der: Buffer | undefined } | HboneFailure | undefined;
  private handshakeWaiter: ((r: { der: Buffer | undefined } | HboneFailure) => void) | undefined;
  private responseResult: number | HboneFailure | undefined;
  private responseWaiter: ((r: number | HboneFailure) => void) | undefined;
  onRequest: (id: number, method: string, authority: string) => void = () => undefined;

  constructor(
    ctor: new (
      fd: number,
      ctx: NativeTlsContext,
      server: boolean,
      onEvent: (...e: TunnelEvent) => void,
    ) => NativeTunnel,
    fd: number,
    ctx: NativeTlsContext,
    server: boolean,
  ) {
    this.tunnel = new ctor(fd, ctx, server, (...e) => this.onEvent(e));
  }

  waitHandshake(): Promise<{ der: Buffer | undefined } | HboneFailure> {
    if (this.handshakeResult) return Promise.resolve(this.handshakeResult);
    return new Promise((resolve) => {
      this.handshakeWaiter = resolve;
    });
  }

  waitResponse(): Promise<number | HboneFailure> {
    if (this.responseResult !== undefined) return Promise.resolve(this.responseResult);
    return new Promise((resolve) => {
      this.responseWaiter = resolve;
    });
  }

  private settleHandshake(r: { der: Buffer | undefined } | HboneFailure): void {
    if (this.handshakeResult) return;
    this.handshakeResult = r;
    this.handshakeWaiter?.(r);
  }

  private settleResponse(r: number | HboneFailure): void {
    if (this.responseResult !== undefined) return;
    this.responseResult = r;
    this.responseWaiter?.(r);
  }

  stream(id: number): TunnelStream {
    let s = this.streams.get(id);
    if (!s) {
      s = new TunnelStream(this.tunnel, id);
      this.streams.set(id, s);
    }
    return s;
  }

  private settleFailure(f: HboneFailure): void {
    this.settleHandshake(f);
    this.settleResponse(f);
  }

  private onEvent(e: TunnelEvent): void {
    switch (e[0]) {
      case 'handshake':
        this.settleHandshake({ der: e[1] });
        return;
      case 'failed':
        this.settleFailure(fail(e[1], e[2]));
        return;
      case 'response':
        this.settleResponse(e[2]);
        return;
      case 'request':
        this.stream(e[1]);
        this.onRequest(e[1], e[2], e[3]);
        return;
      case 'data':
        this.streams.get(e[1])?.onData(e[2]);
        return;
      case 'end':
        this.streams.get(e[1])?.onEnd();
        return;
      case 'reset':
        this.streams.get(e[1])?.onReset(e[2]);
        this.settleResponse(fail('closed', `stream closed before a response: ${e[2]}`));
        return;
      case 'drain':
        this.streams.get(e[1])?.onDrain();
        return;
      case 'relayed':
        this.streams.get(e[1])?.onRelayed({ aToB: e[2], bToA: e[3], ended: e[4] });
        this.streams.delete(e[1]);
        return;
      case 'closed':
        this.settleFailure(fail('closed', 'the HBONE connection closed'));
        for (const s of this.streams.values()) s.onTunnelClosed();
        this.streams.clear();
        return;
    }
  }
}

interface NativeHboneOptions {
  readonly certificates: CertificateSource;
}

export class NativeHbone implements HboneTransport {
  private readonly addon;
  private readonly fallback: TlsHbone;
  /** One SSL_CTX per issued certificate and role (parsing PEMs per connection costs more than the rest). */
  private readonly contexts = new WeakMap<
    IssuedCertificate,
    { client?: NativeTlsContext; server?: NativeTlsContext }
  >();

  /** Throws when the addon is not built (see `NativeHbone.available`). */
  constructor(private readonly opts: NativeHboneOptions) {
    const a = loadHboneAddon();
    if (!('addon' in a)) throw new Error(`native HBONE unavailable: ${a.reason}`);
    this.addon = a.addon;
    this.fallback = new TlsHbone(opts);
  }

  /** Whether the addon is built here, and why not. */
  static available(): { readonly ok: true } | { readonly ok: false; readonly reason: string } {
    const a = loadHboneAddon();
    return 'addon' in a ? { ok: true } : { ok: false, reason: a.reason };
  }

  private context(cert: IssuedCertificate, server: boolean): NativeTlsContext {
    let c = this.contexts.get(cert);
    if (!c) {
      c = {};
      this.contexts.set(cert, c);
    }
    const role = server ? 'server' : 'client';
    c[role] ??= new this.addon.TlsContext(cert.certPem, cert.keyPem, this.opts.certificates.rootPem, server);
    return c[role]!;
  }

  /**
   * The tunnel over `conn`'s socket; 'not-native' when it is not an unread socket of the Linux
   * adapter (nothing was taken: the node:tls transport can still use it).
   */
  private open(
    conn: TcpConnection,
    ctx: NativeTlsContext,
    server: boolean,
  ): TunnelSession | 'not-native' | HboneFailure {
    const sock = takeNativeSocket(conn);
    if (!sock) return 'not-native';
    try {
      const fd = socketFd(sock);
      if (fd === undefined) return fail('closed', 'the connection closed before the TLS handshake');
      return new TunnelSession(this.addon.HboneTunnel, fd, ctx, server);
    } catch (e) {
      return fail('closed', `could not start the HBONE tunnel: ${(e as Error).message}`);
    } finally {
      sock.destroy(); // the tunnel holds its own dup of the fd
    }
  }

  /**
   * Certificate for `local`, tunnel over `conn`, TLS handshake: the tunnel and the peer's
   * certificate; 'not-native' when the node:tls transport must take `conn` (nothing was taken);
   * else the failure (a failed handshake's message prefixed with `context`).
   */
  private async handshake(
    conn: TcpConnection,
    local: PeerIdentity,
    server: boolean,
    context?: string,
  ): Promise<{ t: TunnelSession; der: Buffer | undefined } | 'not-native' | HboneFailure> {
    const cert = await certificateOrFail(this.opts.certificates, local, conn);
    if ('ok' in cert) return cert;
    const t = this.open(conn, this.context(cert, server), server);
    if (t === 'not-native' || 'ok' in t) return t;
    const hs = await t.waitHandshake();
    if ('ok' in hs) return context ? { ...hs, message: `${context}: ${hs.message}` } : hs;
    return { t, der: hs.der };
  }

  async connect(conn: TcpConnection, req: HboneConnectRequest): Promise<HboneOutcome<ByteStream>> {
    const authority = authorityText(req.authority);
    const hs = await this.handshake(conn, req.local, false, `HBONE to ${authority}`);
    if (hs === 'not-native') return this.fallback.connect(conn, req);
    if ('ok' in hs) return hs;
    const { t } = hs;
    const server = identityOf(hs.der);
    const checked = checkServerIdentity(server, req, authority);
    if (!checked.ok) {
      t.tunnel.close();
      return checked;
    }
    const id = t.tunnel.request(authority, req.forwardedFor ? `for="${req.forwardedFor}"` : '');
    const stream = t.stream(id);
    const status = await t.waitResponse();
    if (typeof status !== 'number') return { ...status, message: `HBONE to ${authority}: ${status.message}` };
    if (status !== 200) {
      t.tunnel.close();
      return fail('rejected', `HBONE to ${authority}: CONNECT answered ${status}`, status);
    }
    return { ok: true, value: stream };
  }

  async serve(conn: TcpConnection, opts: HboneServeOptions): Promise<HboneOutcome<void>> {
    const hs = await this.handshake(conn, opts.local, true);
    if (hs === 'not-native') return this.fallback.serve(conn, opts);
    if ('ok' in hs) return hs;
    const { t } = hs;
    const peerCert = identityOf(hs.der);
    const client = checkClientIdentity(peerCert, opts.local);
    if (!client.ok) {
      t.tunnel.close();
      return client;
    }
    const peer = client.value;
    t.onRequest = (id, method, authority) => {
      let answered = false;
      const s: HboneInboundStream = {
        peerIdentity: peer,
        authority,
        method,
        accept: async (): Promise<SocketOutcome<ByteStream>> => {
          if (answered) throw new Error('HBONE stream answered twice');
          answered = true;
          if (!t.tunnel.respond(id, 200))
            return {
              ok: false,
              kind: 'reset',
              errno: 'ECONNRESET',
              call: 'send',
              message: 'HBONE client went away before the 200',
            };
          return { ok: true, value: t.stream(id) };
        },
        reject: (status) => {
          if (answered) return;
          answered = true;
          t.tunnel.respond(id, status);
        },
      };
      opts.onStream(s);
    };
    t.tunnel.serve();
    return { ok: true, value: undefined };
  }
}
