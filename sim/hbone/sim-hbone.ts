/**
 * Sim stand-in for HBONE: the same port (impl/host/hbone.ts) as the real TLS + HTTP/2
 * transport, but the "handshake" is a JSON line carrying a certificate token from a sim CA.
 * It keeps what the proxy and the properties depend on — who the peer is (verified against
 * the mesh root: a token the CA issued, same trust domain), which identity the server must
 * have, the CONNECT authority and status — and drops the cryptography, which costs ~ms per
 * connection in real TLS (see bench/ztunnel-hbone-cost.ts) and would dominate a sim run.
 *
 * Wire (one stream per TCP connection):
 *   client -> server  {"v":1,"cert":T,"method":"CONNECT","authority":"ip:port","forwarded":...}\n
 *   server -> client  {"cert":T}\n            (the server's certificate; the client checks it)
 *   server -> client  {"status":200}\n        then raw bytes both ways, or a non-200 and close.
 * A server that cannot verify the client certificate closes the connection (TLS alert).
 */
import type { PeerIdentity } from '../../impl/api/identity.js';
import type {
  ByteStream,
  HboneConnectRequest,
  HboneFailure,
  HboneFailureKind,
  HboneInboundStream,
  HboneOutcome,
  HboneServeOptions,
  HboneTransport,
} from '../../impl/host/hbone.js';
import type { ReadResult, SocketOutcome, TcpConnection } from '../../impl/host/sockets.js';

function spiffe(id: PeerIdentity): string {
  return `spiffe://${id.trustDomain}/ns/${id.namespace}/sa/${id.serviceAccount}`;
}

/** A mesh root that issues opaque certificate tokens per SPIFFE identity. */
export class SimMeshCa {
  private serial = 0;
  private readonly issued = new Map<string, PeerIdentity>();
  /** Identities this CA refuses to issue (a certificate fetch that fails). */
  readonly refuse = new Set<string>();

  constructor(
    readonly trustDomain: string,
    readonly name = `sim-ca-${trustDomain}`,
  ) {}

  /** A certificate token for `id`, or undefined when the CA refuses (or the trust domain differs). */
  issue(id: PeerIdentity): string | undefined {
    if (id.trustDomain !== this.trustDomain || this.refuse.has(spiffe(id))) return undefined;
    const token = `${this.name}#${++this.serial}`;
    this.issued.set(token, id);
    return token;
  }

  /** The identity a token was issued for, if this CA issued it. */
  verify(token: unknown): PeerIdentity | undefined {
    return typeof token === 'string' ? this.issued.get(token) : undefined;
  }
}

function fail(kind: HboneFailureKind, message: string, status?: number): HboneFailure {
  return status === undefined ? { ok: false, kind, message } : { ok: false, kind, message, status };
}

/** Reads JSON lines off a connection, then hands the rest of the bytes on as a stream. */
class LineReader {
  private buf = Buffer.alloc(0);
  private ended: ReadResult | undefined;

  constructor(private readonly conn: TcpConnection) {}

  async line(): Promise<Record<string, unknown> | undefined> {
    for (;;) {
      const nl = this.buf.indexOf(0x0a);
      if (nl >= 0) {
        const text = this.buf.subarray(0, nl).toString('utf8');
        this.buf = this.buf.subarray(nl + 1);
        try {
          const v: unknown = JSON.parse(text);
          return typeof v === 'object' && v !== null ? (v as Record<string, unknown>) : undefined;
        } catch {
          return undefined;
        }
      }
      if (this.ended || this.buf.length > 65536) return undefined;
      const r = await this.conn.read();
      if (r.done) {
        this.ended = r;
        continue;
      }
      this.buf = Buffer.concat([this.buf, r.bytes]);
    }
  }

  /** The connection as a byte stream, starting with any bytes read past the last line. */
  stream(): ByteStream {
    let pending: ReadResult | undefined =
      this.buf.length > 0 ? { done: false, bytes: new Uint8Array(this.buf) } : this.ended;
    const conn = this.conn;
    return {
      read: () => {
        if (pending) {
          const p = pending;
          pending = p.done ? p : undefined;
          return Promise.resolve(p);
        }
        return conn.read();
      },
      write: (b) => conn.write(b),
      end: () => conn.end(),
      close: () => conn.close(),
      reset: () => conn.reset(),
    };
  }
}

async function writeLine(conn: TcpConnection, v: unknown): Promise<boolean> {
  const r = await conn.write(Buffer.from(`${JSON.stringify(v)}\n`, 'utf8'));
  return r.ok;
}

interface SimHboneOptions {
  /** The mesh root: verifies the peer's certificates (and issues this side's without `certificates`). */
  readonly ca: SimMeshCa;
  /**
   * Where this side's certificates come from: a node proxy's certificate manager over the sim CA
   * (sim-ca.ts), which may have none (fail closed). Absent: `ca` issues any identity on demand
   * (tests of the proxy alone, where who may hold what is not the question).
   */
  readonly certificates?: { certificateFor(id: PeerIdentity): Promise<string | undefined> };
}

export class SimHbone implements HboneTransport {
  constructor(private readonly opts: SimHboneOptions) {}

  private certificate(id: PeerIdentity): Promise<string | undefined> {
    return this.opts.certificates ? this.opts.certificates.certificateFor(id) : Promise.resolve(this.opts.ca.issue(id));
  }

  async connect(conn: TcpConnection, req: HboneConnectRequest): Promise<HboneOutcome<ByteStream>> {
    const cert = await this.certificate(req.local);
    if (!cert) {
      conn.reset();
      return fail('no-certificate', `no certificate for ${spiffe(req.local)} from ${this.opts.ca.name}`);
    }
    const authority = `${req.authority.family === 6 ? `[${req.authority.address}]` : req.authority.address}:${req.authority.port}`;
    if (!(await writeLine(conn, { v: 1, cert, method: 'CONNECT', authority, forwarded: req.forwardedFor }))) {
      return fail('closed', `HBONE to ${authority}: the connection failed before the handshake`);
    }
    const reader = new LineReader(conn);
    const hello = await reader.line();
    if (!hello) {
      conn.close();
      return fail(
        'handshake',
        `HBONE to ${authority}: the server closed the connection during the handshake (certificate rejected?)`,
      );
    }
    const server = this.opts.ca.verify(hello['cert']);
    if (!server) {
      conn.reset();
      return fail('handshake', `HBONE to ${authority}: the server certificate is not from ${this.opts.ca.name}`);
    }
    if (req.expectedPeers.length > 0 && !req.expectedPeers.some((e) => spiffe(e) === spiffe(server))) {
      conn.reset();
      return fail(
        'peer-identity',
        `HBONE to ${authority}: server is ${spiffe(server)}, expected ${req.expectedPeers.map(spiffe).join(' or ')}`,
      );
    }
    const resp = await reader.line();
    const status = typeof resp?.['status'] === 'number' ? resp['status'] : undefined;
    if (status !== 200) {
      conn.close();
      return status === undefined
        ? fail('protocol', `HBONE to ${authority}: no CONNECT response`)
        : fail(
            'rejected',
            `HBONE to ${authority}: CONNECT answered ${status} ${String(resp?.['reason'] ?? '')}`,
            status,
          );
    }
    return { ok: true, value: reader.stream() };
  }

  async serve(conn: TcpConnection, opts: HboneServeOptions): Promise<HboneOutcome<void>> {
    const cert = await this.certificate(opts.local);
    if (!cert) {
      conn.reset();
      return fail('no-certificate', `no certificate for ${spiffe(opts.local)} from ${this.opts.ca.name}`);
    }
    const reader = new LineReader(conn);
    const hello = await reader.line();
    const peer = hello ? this.opts.ca.verify(hello['cert']) : undefined;
    if (!hello || !peer || peer.trustDomain !== opts.local.trustDomain) {
      conn.reset();
      return fail(
        'handshake',
        hello ? 'client certificate not issued by the mesh root, or another trust domain' : 'not an HBONE client',
      );
    }
    if (!(await writeLine(conn, { cert }))) return fail('closed', 'the client went away during the handshake');
    let answered = false;
    const stream: HboneInboundStream = {
      peerIdentity: peer,
      authority: typeof hello['authority'] === 'string' ? hello['authority'] : '',
      method: typeof hello['method'] === 'string' ? hello['method'] : '',
      accept: async (): Promise<SocketOutcome<ByteStream>> => {
        if (answered) throw new Error('HBONE stream answered twice');
        answered = true;
        const ok = await writeLine(conn, { status: 200 });
        if (!ok)
          return {
            ok: false,
            kind: 'reset',
            errno: 'ECONNRESET',
            call: 'send',
            message: 'HBONE client went away before the 200',
          };
        return { ok: true, value: reader.stream() };
      },
      reject: (status, reason) => {
        if (answered) return;
        answered = true;
        void writeLine(conn, { status, reason }).then(() => conn.close());
      },
    };
    opts.onStream(stream);
    return { ok: true, value: undefined };
  }
}
