/**
 * The HBONE port: an HTTP/2 CONNECT tunnel over mutual TLS 1.3 between two node proxies
 * (as upstream ztunnel's HBONE). The proxy opens the TCP connection itself (through the Sockets port, in
 * the source pod's netns, with the proxy mark) and hands it here; the transport does the TLS
 * handshake with the certificate of the given identity, the CONNECT request and the response.
 *
 * Certificates are the transport's business: it is built with a certificate source (a test
 * CA) and fails with 'no-certificate' when it holds none for the identity asked — the proxy's
 * fail-closed path. Two adapters: real TLS + HTTP/2 (impl/linux/hbone-tls.ts, runs over any
 * TcpConnection, sim ones included) and a sim stand-in that carries identities in a framed
 * header (sim/hbone/sim-hbone.ts).
 */
import type { PeerIdentity } from '../api/identity.js';
import type { SocketAddress, SocketOutcome, TcpConnection } from './sockets.js';

/** A bidirectional byte stream: a TCP connection, or one CONNECT stream inside a tunnel. */
export type ByteStream = Pick<TcpConnection, 'read' | 'write' | 'end' | 'close' | 'reset'>;

export type HboneFailureKind =
  | 'no-certificate' // this side holds no certificate for the identity (fail closed)
  | 'handshake' // TLS failed: bad chain, trust domain mismatch, not TLS at all
  | 'peer-identity' // the server's certificate names none of the expected identities
  | 'rejected' // the server answered the CONNECT with a non-200 status
  | 'protocol' // malformed CONNECT or response
  | 'closed'; // the TCP connection ended first

export interface HboneFailure {
  readonly ok: false;
  readonly kind: HboneFailureKind;
  /** HTTP status for 'rejected'. */
  readonly status?: number;
  readonly message: string;
}

export type HboneOutcome<T> = { readonly ok: true; readonly value: T } | HboneFailure;

export interface HboneConnectRequest {
  /** Identity whose certificate this side presents (the source pod's service account). */
  readonly local: PeerIdentity;
  /** The server's certificate must name one of these (the destination workload's identity). */
  readonly expectedPeers: readonly PeerIdentity[];
  /** The CONNECT `:authority`: the destination pod IP and target port. */
  readonly authority: SocketAddress;
  /** Original client address, sent as `Forwarded: for=`. */
  readonly forwardedFor?: string;
}

/** One CONNECT request received by the server side, awaiting the proxy's decision. */
export interface HboneInboundStream {
  /** Identity from the client certificate's SPIFFE URI SAN (verified against the mesh root). */
  readonly peerIdentity: PeerIdentity;
  /** The raw `:authority` text ('10.244.1.6:8080'), for the proxy to parse and check. */
  readonly authority: string;
  readonly method: string;
  /** Answer 200 and get the tunnelled byte stream. */
  accept(): Promise<SocketOutcome<ByteStream>>;
  /** Answer `status` (400 bad target, 401 denied, 503 upstream failed) and end the stream. */
  reject(status: number, reason: string): void;
}

export interface HboneServeOptions {
  /** Identity whose certificate this side presents (the destination pod). */
  readonly local: PeerIdentity;
  readonly onStream: (s: HboneInboundStream) => void;
}

export interface HboneTransport {
  /** Client side over an established TCP connection to the peer's 15008. */
  connect(conn: TcpConnection, req: HboneConnectRequest): Promise<HboneOutcome<ByteStream>>;
  /**
   * Server side over an accepted connection on 15008: resolves when the handshake succeeded
   * (streams then arrive on `onStream`) or failed (the connection is closed).
   */
  serve(conn: TcpConnection, opts: HboneServeOptions): Promise<HboneOutcome<void>>;
}
