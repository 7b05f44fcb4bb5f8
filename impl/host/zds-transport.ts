/**
 * The ZDS transport port: the message channel between the node agent (server) and the node
 * proxy (client). Each frame is one whole protobuf message (no length prefix, boundaries kept)
 * plus, optionally, one network namespace handle travelling beside it.
 *
 * Linux (impl/linux/zds-transport.ts): an AF_UNIX SOCK_SEQPACKET socket, one datagram per
 * frame, the netns passed as an fd with SCM_RIGHTS, the peer's pid/uid/gid from SO_PEERCRED.
 * Sim (sim/zds): in-memory frames delivered on the virtual clock, the netns handle is the sim
 * NetnsId.
 *
 * The port carries bytes; impl/api/zds/codec.ts gives them meaning.
 */
import type { NetnsId } from '../api/ids.js';

/** Where the agent listens: a Unix socket path on Linux, a name in the sim. */
export type ZdsAddress = string;

/** Who is on the other end of an accepted connection (SO_PEERCRED at connect time). */
export interface ZdsPeerCredentials {
  readonly pid: number;
  readonly uid: number;
  readonly gid: number;
}

/**
 * A received network namespace. The receiver owns it and must close() it when done (Linux:
 * the fd); keeping it open keeps the namespace alive.
 */
export interface ZdsNetnsHandle {
  /** A name the Sockets port accepts to create sockets in the namespace (Linux: /proc/self/fd/N). */
  readonly netns: NetnsId;
  /**
   * What the namespace is, stable across handles to it (Linux: "dev:inode"; sim: the NetnsId),
   * so a recreated sandbox (new netns, same pod uid) is told apart from a repeated Add.
   */
  readonly identity: string;
  /** Release the handle; idempotent. */
  close(): void;
}

/** One received frame. */
interface ZdsFrame {
  readonly bytes: Uint8Array;
  readonly netns?: ZdsNetnsHandle;
}

export type ZdsReceived =
  | { readonly kind: 'frame'; readonly frame: ZdsFrame }
  /**
   * A datagram that cannot be a valid frame whatever its bytes say: cut by the kernel
   * (MSG_TRUNC / MSG_CTRUNC), or carrying more than one fd or a non-fd control message. Any
   * handles it carried are already closed. The protocol treats it as a protocol error.
   */
  | { readonly kind: 'bad-frame'; readonly reason: string }
  /** The peer closed the connection, or it failed (`reason`), or close() was called here. */
  | { readonly kind: 'closed'; readonly reason?: string };

export interface ZdsConnection {
  /** For logs: which connection this is. */
  readonly id: string;
  /** Credentials of the peer process; set on connections a listener accepted. */
  readonly peer?: ZdsPeerCredentials;
  /**
   * Send one frame, with the namespace named by `netns` attached (Linux: the adapter opens the
   * path, passes the fd, closes its copy). Rejects when the connection is closed or the
   * namespace cannot be opened; the error says which.
   */
  send(bytes: Uint8Array, netns?: NetnsId): Promise<void>;
  /** The next frame, in order. After 'closed' every call returns 'closed'. One reader at a time. */
  receive(): Promise<ZdsReceived>;
  /** Close; a pending receive() resolves 'closed'. Idempotent. */
  close(): void;
}

export interface ZdsListener {
  readonly address: ZdsAddress;
  /** Next accepted connection; undefined once the listener is closed. One caller at a time. */
  accept(): Promise<ZdsConnection | undefined>;
  /** Stop accepting (Linux: also unlinks the socket path). Accepted connections stay open. */
  close(): Promise<void>;
}

export interface ZdsTransport {
  /** Server side (node agent). Rejects if the address is in use or cannot be bound. */
  listen(address: ZdsAddress): Promise<ZdsListener>;
  /** Client side (node proxy). Rejects when nothing listens there (the caller retries). */
  connect(address: ZdsAddress): Promise<ZdsConnection>;
}
