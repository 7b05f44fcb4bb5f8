/**
 * HBONE for real: mutual TLS 1.3 (ALPN h2, no SNI, no session resumption) with SPIFFE
 * certificates from a CertificateSource, and one HTTP/2 CONNECT stream per tunnelled
 * connection (no pooling — each connection gets its own TLS session; upstream pools up to 100
 * streams per connection). On a connection of the Linux Sockets adapter TLS runs on the native
 * socket (node:tls and HTTP/2 then stay in C++ between kernel and stream); on any other
 * TcpConnection (the sim's) it runs over ByteStreamDuplex, so the same transport works on both.
 *
 * Verification, as upstream ztunnel (src/tls/): both sides require a chain to the mesh root;
 * the client requires the server's single SPIFFE URI SAN to be one of the expected identities;
 * the server requires the client's trust domain to equal its own and leaves the identity to
 * authorization.
 */
import * as http2 from 'node:http2';
import * as tls from 'node:tls';
import type {
  ByteStream,
  HboneConnectRequest,
  HboneFailure,
  HboneOutcome,
  HboneServeOptions,
  HboneTransport,
} from '../host/hbone.js';
import type { SocketOutcome, TcpConnection } from '../host/sockets.js';
import type { PeerIdentity } from '../api/identity.js';
import { ByteStreamDuplex, duplexByteStream } from './byte-stream-duplex.js';
import { authorityText, certificateOrFail, checkClientIdentity, fail, checkServerIdentity } from './hbone-outcome.js';
import { identityFromSan, type CertificateSource, type IssuedCertificate } from './mesh-ca.js';
import { takeNativeSocket } from './sockets.js';

const { HTTP2_HEADER_METHOD, HTTP2_HEADER_AUTHORITY, HTTP2_HEADER_STATUS } = http2.constants;

/** HTTP/2 settings as upstream's defaults (stream 4 MiB, connection 16 MiB window; 1 MiB frames). */
const H2_SETTINGS: http2.Settings = { initialWindowSize: 4 << 20, maxFrameSize: 1 << 20 };
const H2_CONN_WINDOW = 16 << 20;

function peerIdentity(s: tls.TLSSocket): PeerIdentity | undefined {
  // The X509Certificate form parses only the field asked for; getPeerCertificate() builds every
  // field of a JS object per connection.
  const san = s.getPeerX509Certificate()?.subjectAltName;
  return san === undefined ? undefined : identityFromSan(san);
}

/**
 * One SecureContext per issued certificate: building one parses the key, the certificate and
 * the root, which cost more than the rest of a connection's setup when done per connection.
 * Keyed by the certificate object, so a re-issued certificate gets a fresh context.
 */
const contexts = new WeakMap<IssuedCertificate, tls.SecureContext>();

function contextFor(cert: IssuedCertificate, rootPem: string): tls.SecureContext {
  let ctx = contexts.get(cert);
  if (!ctx) {
    ctx = tls.createSecureContext({
      key: cert.keyPem,
      cert: cert.certPem,
      ca: rootPem,
      minVersion: 'TLSv1.3',
      maxVersion: 'TLSv1.3',
    });
    contexts.set(cert, ctx);
  }
  return ctx;
}

interface TlsHboneOptions {
  readonly certificates: CertificateSource;
}

export class TlsHbone implements HboneTransport {
  constructor(private readonly opts: TlsHboneOptions) {}

  async connect(conn: TcpConnection, req: HboneConnectRequest): Promise<HboneOutcome<ByteStream>> {
    const authority = authorityText(req.authority);
    const cert = await certificateOrFail(this.opts.certificates, req.local, conn);
    if ('ok' in cert) return cert;
    const sock = tls.connect({
      socket: takeNativeSocket(conn) ?? new ByteStreamDuplex(conn),
      secureContext: contextFor(cert, this.opts.certificates.rootPem),
      ALPNProtocols: ['h2'],
      rejectUnauthorized: true,
      checkServerIdentity: () => undefined, // identity is checked on the SPIFFE SAN below, not a hostname
    });
    const hs = await new Promise<HboneFailure | undefined>((resolve) => {
      sock.once('secureConnect', () => resolve(undefined));
      sock.once('error', (e) =>
        resolve(fail('handshake', `HBONE to ${authority}: TLS handshake failed: ${e.message}`)),
      );
      sock.once('close', () =>
        resolve(fail('closed', `HBONE to ${authority}: connection closed during the TLS handshake`)),
      );
      // A half-open socket (allowHalfOpen) reports the peer's FIN only as 'end', never 'close'.
      sock.once('end', () =>
        resolve(fail('closed', `HBONE to ${authority}: the server closed the connection during the TLS handshake`)),
      );
    });
    if (hs) {
      sock.destroy();
      return hs;
    }
    const server = peerIdentity(sock);
    const checked = checkServerIdentity(server, req, authority);
    if (!checked.ok) {
      sock.destroy();
      return checked;
    }
    sock.on('error', () => undefined); // errors surface on the HTTP/2 stream
    const session = http2.connect(`https://${authority}`, { createConnection: () => sock, settings: H2_SETTINGS });
    session.on('error', () => undefined);
    session.on('connect', () => session.setLocalWindowSize(H2_CONN_WINDOW));
    const headers: http2.OutgoingHttpHeaders = {
      [HTTP2_HEADER_METHOD]: 'CONNECT',
      [HTTP2_HEADER_AUTHORITY]: authority,
    };
    if (req.forwardedFor) headers['forwarded'] = `for="${req.forwardedFor}"`;
    const stream = session.request(headers, { endStream: false });
    const status = await new Promise<number | HboneFailure>((resolve) => {
      stream.once('response', (h) => resolve(Number(h[HTTP2_HEADER_STATUS])));
      stream.once('error', (e) => resolve(fail('protocol', `HBONE to ${authority}: CONNECT failed: ${e.message}`)));
      stream.once('close', () => resolve(fail('closed', `HBONE to ${authority}: stream closed before a response`)));
    });
    if (typeof status !== 'number' || status !== 200) {
      stream.destroy();
      session.destroy();
      return typeof status === 'number'
        ? fail('rejected', `HBONE to ${authority}: CONNECT answered ${status}`, status)
        : status;
    }
    stream.once('close', () => session.close());
    return { ok: true, value: duplexByteStream(stream, () => stream.close(http2.constants.NGHTTP2_CANCEL)) };
  }

  async serve(conn: TcpConnection, opts: HboneServeOptions): Promise<HboneOutcome<void>> {
    const cert = await certificateOrFail(this.opts.certificates, opts.local, conn);
    if ('ok' in cert) return cert;
    const sock = new tls.TLSSocket(takeNativeSocket(conn) ?? new ByteStreamDuplex(conn), {
      isServer: true,
      secureContext: contextFor(cert, this.opts.certificates.rootPem),
      requestCert: true,
      rejectUnauthorized: true,
      ALPNProtocols: ['h2'],
    });
    const hs = await new Promise<HboneFailure | undefined>((resolve) => {
      sock.once('secure', () => resolve(undefined));
      sock.once('error', (e) => resolve(fail('handshake', `TLS handshake failed: ${e.message}`)));
      sock.once('close', () => resolve(fail('closed', 'connection closed during the TLS handshake')));
      // The accepted socket is half-open (allowHalfOpen): a client's FIN comes only as 'end'.
      sock.once('end', () => resolve(fail('closed', 'the client closed the connection during the TLS handshake')));
    });
    if (hs) {
      sock.destroy();
      return hs;
    }
    const peerCert = peerIdentity(sock);
    const client = checkClientIdentity(peerCert, opts.local);
    if (!client.ok) {
      sock.destroy();
      return client;
    }
    const peer = client.value;
    sock.on('error', () => undefined);
    // tls.Server clears this flag when it hands a secured socket on; a TLSSocket made by hand
    // keeps it, and HTTP/2 would then wait for a 'secureConnect' that a server never emits.
    (sock as tls.TLSSocket & { secureConnecting: boolean }).secureConnecting = false; // undocumented field
    // A cleartext HTTP/2 server fed the already-decrypted TLS socket: the TLS layer is ours.
    const h2 = http2.createServer({ settings: H2_SETTINGS });
    h2.on('session', (s) => {
      s.on('error', () => undefined);
      s.setLocalWindowSize(H2_CONN_WINDOW);
    });
    h2.on('stream', (stream, headers) => {
      stream.on('error', () => undefined);
      let answered = false;
      opts.onStream({
        peerIdentity: peer,
        authority: String(headers[HTTP2_HEADER_AUTHORITY] ?? ''),
        method: String(headers[HTTP2_HEADER_METHOD] ?? ''),
        accept: async (): Promise<SocketOutcome<ByteStream>> => {
          if (answered) throw new Error('HBONE stream answered twice');
          answered = true;
          if (stream.destroyed)
            return {
              ok: false,
              kind: 'reset',
              errno: 'ECONNRESET',
              call: 'send',
              message: 'HBONE client went away before the 200',
            };
          stream.respond({ [HTTP2_HEADER_STATUS]: 200 });
          return { ok: true, value: duplexByteStream(stream, () => stream.close(http2.constants.NGHTTP2_CANCEL)) };
        },
        reject: (status) => {
          if (answered || stream.destroyed) return;
          answered = true;
          stream.respond({ [HTTP2_HEADER_STATUS]: status }, { endStream: true });
        },
      });
    });
    sock.once('close', () => h2.close());
    h2.emit('connection', sock);
    return { ok: true, value: undefined };
  }
}
