/**
 * The Sockets port: TCP listeners and connections, and UDP sockets, inside a given network namespace, with the
 * options a node proxy needs (SO_MARK, IP_TRANSPARENT, SO_REUSEPORT) and the original
 * destination of a redirected connection (SO_ORIGINAL_DST).
 *
 * Only concepts the simulated kernel models appear here: namespace, family, address, port,
 * mark, transparent, reuseport, v6only, original destination, and errno-shaped failures. The
 * socket owner (uid, capabilities) is the process running the adapter, not a per-call option.
 *
 * Network conditions (refused, timeout, reset, address in use, permission) are outcomes, not
 * exceptions: a security property must see "the connection failed" as data. Exceptions are
 * kept for programming errors (an address literal of the wrong family, a port out of range).
 */
import type { NetnsId } from '../api/ids.js';
import type { ByteStream } from './hbone.js';
import type { MarkValue } from '../api/marks.js';

/** IP version, as the sim writes it. */
export type IpFamily = 4 | 6;

/** An IP socket address. `address` is the kernel's text form ('10.244.1.5', 'fd00::1'). */
export interface SocketAddress {
  readonly family: IpFamily;
  readonly address: string;
  readonly port: number;
}

/** Why a socket call failed, in the vocabulary the properties reason with. */
export type SocketFailureKind =
  | 'refused' // ECONNREFUSED: RST in reply to SYN (no listener, or REJECT --reject-with tcp-reset)
  | 'timeout' // no answer within the deadline (SYN dropped), or ETIMEDOUT
  | 'reset' // ECONNRESET / EPIPE on an established connection
  | 'unreachable' // ENETUNREACH / EHOSTUNREACH (no route, or an ICMP unreachable)
  | 'addr-in-use' // EADDRINUSE
  | 'addr-not-available' // EADDRNOTAVAIL: binding an address that is not local (and not transparent)
  | 'permission' // EPERM / EACCES: a missing capability (SO_MARK, IP_TRANSPARENT, setns); a TCP SYN dropped on output is a 'timeout'
  | 'no-netns' // the namespace handle does not exist
  | 'other';

export interface SocketFailure {
  readonly ok: false;
  readonly kind: SocketFailureKind;
  /** The errno name the kernel returned ('ECONNREFUSED'), or 'ETIMEDOUT' for a deadline. */
  readonly errno: string;
  /** The call that failed ('connect', 'bind', 'setsockopt(SO_MARK=1337)', 'setns', ...). */
  readonly call: string;
  /** What failed, on what (namespace, address), for humans. */
  readonly message: string;
}

export type SocketOutcome<T> = { readonly ok: true; readonly value: T } | SocketFailure;

/** Options shared by listening and connecting sockets. */
interface SocketOptionsBase {
  /** Namespace to create the socket in; omitted = the adapter's own namespace. */
  readonly netns?: NetnsId;
  readonly family: IpFamily;
  /** SO_MARK on the socket (needs CAP_NET_ADMIN). The proxy marks every socket it opens in a pod. */
  readonly mark?: MarkValue;
  /** IP_TRANSPARENT / IPV6_TRANSPARENT (needs CAP_NET_ADMIN): bind non-local addresses, TPROXY delivery. */
  readonly transparent?: boolean;
}

export interface ListenTcpOptions extends SocketOptionsBase {
  /** Local address literal of `family`; the wildcard is '0.0.0.0' or '::'. */
  readonly address: string;
  /** 0 = the kernel picks an ephemeral port (see `TcpListener.address`). */
  readonly port: number;
  /** SO_REUSEPORT: several listeners of the same uid share the port (proxy restarts overlap). */
  readonly reusePort?: boolean;
  /** IPV6_V6ONLY for family 6; omitted = the namespace default (net.ipv6.bindv6only, normally 0). */
  readonly v6Only?: boolean;
  /** listen(2) backlog; default 128 (as ztunnel). */
  readonly backlog?: number;
}

export interface ConnectTcpOptions extends SocketOptionsBase {
  readonly dst: SocketAddress;
  /**
   * Local address to bind before connecting. With `transparent` it may be non-local (the
   * inbound proxy connects to the app from the client's original address).
   */
  readonly src?: { readonly address: string; readonly port?: number };
  /** Give up after this long; the outcome is 'timeout'. Default 10 000 ms (as ztunnel). */
  readonly timeoutMs?: number;
}

/** One read from a connection: bytes, or the end of the stream (clean, or with a failure). */
export type ReadResult =
  { readonly done: false; readonly bytes: Uint8Array } | { readonly done: true; readonly failure?: SocketFailure };

export interface TcpConnection {
  readonly localAddress: SocketAddress;
  readonly remoteAddress: SocketAddress;
  /**
   * Destination the peer addressed before NAT (REDIRECT/DNAT) rewrote it, from conntrack.
   * For a connection that was not rewritten it equals `localAddress`; undefined when the
   * kernel holds no conntrack entry for it (no NAT configured in the namespace), and for
   * connections this side opened.
   */
  originalDst(): SocketAddress | undefined;
  /** Next chunk, or done. Reading is pull-based, so a slow reader applies backpressure. */
  read(): Promise<ReadResult>;
  /**
   * Queue bytes for sending. Resolves when the connection can take more: an adapter may
   * resolve at once while its send buffer is below a high-water mark (so a relay pipelines
   * with backpressure rather than waiting for each chunk), or only once the bytes reached the
   * kernel (the sim's). A failure of bytes already accepted surfaces on a later write and as a
   * read that ends with a failure, never as a clean end.
   */
  write(bytes: Uint8Array): Promise<SocketOutcome<void>>;
  /** Half-close: send FIN, keep reading. */
  end(): Promise<void>;
  /** Full close (FIN if possible). */
  close(): void;
  /** Abort with RST (SO_LINGER 0). */
  reset(): void;
}

export interface TcpListener {
  /** The bound address (with the kernel-chosen port when 0 was asked). */
  readonly address: SocketAddress;
  /** Stop accepting and close the listening socket; established connections stay open. */
  close(): Promise<void>;
}

export interface BindUdpOptions extends SocketOptionsBase {
  /** Local address literal of `family`; the wildcard is '0.0.0.0' or '::'. */
  readonly address: string;
  /** 0 = the kernel picks an ephemeral port (a client socket, e.g. a forwarded DNS query). */
  readonly port: number;
  /** SO_REUSEPORT (upstream sets it on its DNS sockets so a restarted proxy can overlap). */
  readonly reusePort?: boolean;
  /** IPV6_V6ONLY for family 6; omitted = the namespace default. */
  readonly v6Only?: boolean;
}

/** One received UDP datagram. */
export interface UdpDatagram {
  /** The sender, as this socket sees it (after any NAT). */
  readonly from: SocketAddress;
  readonly bytes: Uint8Array;
}

export interface UdpSocket {
  /** The bound address (with the kernel-chosen port when 0 was asked). */
  readonly address: SocketAddress;
  /**
   * sendto(2). A datagram nobody receives is not a failure (UDP has no handshake); only local
   * errors (no route, permission) are. Resolves once the kernel took the datagram.
   */
  send(to: SocketAddress, bytes: Uint8Array): Promise<SocketOutcome<void>>;
  /** Close the socket; no more datagrams are delivered. */
  close(): Promise<void>;
}

/** How a relay of two byte streams ended, and how many bytes went each way. */
export interface RelayResult {
  /** Bytes from `a` to `b`. */
  readonly aToB: number;
  readonly bToA: number;
  /** Why it ended: 'eof' both ways, or the first failure. */
  readonly ended: 'eof' | 'reset' | 'aborted';
}

/** A running relay between two streams. */
export interface Relay {
  readonly done: Promise<RelayResult>;
  /** Tear both sides down at once (policy change, pod removal, drain deadline). */
  abort(): void;
}

export interface Sockets {
  /** Create, configure, bind and listen a TCP socket; `onConnection` gets every accepted connection. */
  listenTcp(opts: ListenTcpOptions, onConnection: (conn: TcpConnection) => void): Promise<SocketOutcome<TcpListener>>;
  /** Create, configure (and bind) a TCP socket and connect it. */
  connectTcp(opts: ConnectTcpOptions): Promise<SocketOutcome<TcpConnection>>;
  /**
   * Create, configure and bind a UDP socket; `onDatagram` gets every datagram it receives.
   * Optional: an adapter (or decorator) without UDP leaves it out, and a caller that needs UDP
   * (the proxy's DNS listener) reports that it cannot serve rather than failing elsewhere.
   */
  bindUdp?(opts: BindUdpOptions, onDatagram: (d: UdpDatagram) => void): Promise<SocketOutcome<UdpSocket>>;
  /**
   * Relay two streams both ways without the bytes passing through the caller's JavaScript
   * (Linux: splice(2) in the kernel for two plain connections; the native HBONE tunnel for one
   * of its streams and a plain connection), with exactly the semantics of the portable relay
   * (impl/ztunnel/relay.ts: half-close passed on, a failure resets both, abort resets both).
   * Undefined when it cannot take these two (a connection or stream already read from, a
   * node:http2 stream): the caller relays them itself. Optional: the sim has none, so its relay
   * is the portable one.
   */
  relayNative?(a: ByteStream, b: ByteStream): Relay | undefined;
}
