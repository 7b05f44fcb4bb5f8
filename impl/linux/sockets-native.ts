/**
 * Typed access to the native socket addon (impl/linux/native/sockets.cc, built by
 * `npm install` into build/Release/ambient_lab_sockets.node). Errors of the addon are re-thrown
 * as `NativeSocketError` naming the call and the network namespace.
 */
import { existsSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

type NativeFamily = 'inet' | 'inet6' | 'packet';
type NativeType = 'stream' | 'dgram' | 'raw';

/** Integer socket options the addon knows; the first group is settable, the second read-only. */
type SockOptName =
  | 'SO_MARK'
  | 'SO_REUSEADDR'
  | 'SO_REUSEPORT'
  | 'IP_TRANSPARENT'
  | 'IP_FREEBIND'
  | 'IPV6_TRANSPARENT'
  | 'IPV6_FREEBIND'
  | 'IPV6_V6ONLY'
  | 'SO_ERROR'
  | 'SO_DOMAIN'
  | 'SO_TYPE';

export interface NativeAddress {
  readonly family: 'inet' | 'inet6';
  readonly address: string;
  readonly port: number;
}

/** The addon's exports, exactly (see sockets.cc). All calls are synchronous and throw on failure. */
interface Addon {
  socket(netns: string | null, family: NativeFamily, type: NativeType): number;
  setsockopt(fd: number, name: SockOptName, value: number): void;
  getsockopt(fd: number, name: SockOptName): number;
  bind(fd: number, address: string, port: number): void;
  listen(fd: number, backlog: number): void;
  localAddress(fd: number): NativeAddress;
  peerAddress(fd: number): NativeAddress;
  originalDst(fd: number): NativeAddress;
  socketNetnsInode(fd: number): number;
  close(fd: number): void;
  /** splice-relay.cc: relays two connected TCP fds (it dups them) until both directions end. */
  SpliceRelay: new (
    fdA: number,
    fdB: number,
    onDone: (aToB: number, bToA: number, ended: 'eof' | 'reset', code: string | undefined) => void,
    pipeBytes: number,
  ) => NativeSpliceRelay;
}

/** A running kernel relay (splice-relay.cc). No onDone after abort(). */
export interface NativeSpliceRelay {
  /** Reset both sockets now; returns the bytes relayed [aToB, bToA]. */
  abort(): [number, number];
}

export const ADDON_FILE = join('build', 'Release', 'ambient_lab_sockets.node');

export class NativeSocketError extends Error {
  constructor(
    message: string,
    /** errno name ('EPERM'); 'EINVAL' for argument errors caught before the kernel. */
    readonly code: string,
    /** Positive C errno, 0 when the error did not come from the kernel. */
    readonly errno: number,
    /** The call that failed: 'setns', 'socket', 'setsockopt', 'bind', ... */
    readonly syscall: string,
    /** Namespace the socket lives in, as given ('' = the process's own). */
    readonly netns: string,
  ) {
    super(message);
    this.name = 'NativeSocketError';
  }
}

let cached: Addon | undefined;

/** Walk up from this module (impl/linux or dist/impl/linux) to the package root holding the build. */
function findAddon(): string {
  const tried: string[] = [];
  let dir = dirname(fileURLToPath(import.meta.url));
  for (;;) {
    const candidate = join(dir, ADDON_FILE);
    tried.push(candidate);
    if (existsSync(candidate)) return candidate;
    const up = dirname(dir);
    if (up === dir) break;
    dir = up;
  }
  throw new Error(
    `the native socket addon is not built (looked for ${tried.slice(0, 4).join(', ')}${tried.length > 4 ? ', ...' : ''}): run \`npm install\` in the ambient-lab package (needs python3, make and g++)`,
  );
}

function addon(): Addon {
  if (!cached) {
    const require = createRequire(import.meta.url);
    cached = require(findAddon()) as Addon;
  }
  return cached;
}

function where(netns: string): string {
  return netns === '' ? 'the process network namespace' : `network namespace ${netns}`;
}

/** Run an addon call and re-throw its error with the namespace. */
function call<T>(netns: string, fn: (a: Addon) => T): T {
  const a = addon();
  try {
    return fn(a);
  } catch (e) {
    const err = e as Partial<{ message: string; code: string; errno: number; syscall: string }>;
    const code = typeof err.code === 'string' ? err.code : 'EINVAL';
    throw new NativeSocketError(
      `${err.message ?? String(e)} (in ${where(netns)})`,
      code,
      typeof err.errno === 'number' ? err.errno : 0,
      typeof err.syscall === 'string' ? err.syscall : 'argument check',
      netns,
    );
  }
}

/**
 * A socket fd created by the addon, before Node adopts it. `netns` is kept for error messages;
 * the kernel binds the socket to its namespace at creation, so later calls need no setns.
 */
export class RawSocket {
  private closed = false;

  private constructor(
    readonly fd: number,
    readonly netns: string,
  ) {}

  /**
   * socket(2) inside `netns` (a /run/netns/NAME or /proc/PID/ns/net path; undefined = own
   * namespace). The namespace switch happens on a short-lived helper thread, so this
   * process's threads never leave their own namespace.
   */
  static open(netns: string | undefined, family: NativeFamily, type: NativeType): RawSocket {
    const ns = netns ?? '';
    const fd = call(ns, (a) => a.socket(netns ?? null, family, type));
    return new RawSocket(fd, ns);
  }

  setOption(name: SockOptName, value: number | boolean): void {
    const v = typeof value === 'boolean' ? (value ? 1 : 0) : value;
    call(this.netns, (a) => a.setsockopt(this.fd, name, v));
  }

  getOption(name: SockOptName): number {
    return call(this.netns, (a) => a.getsockopt(this.fd, name));
  }

  bind(address: string, port: number): void {
    call(this.netns, (a) => a.bind(this.fd, address, port));
  }

  listen(backlog: number): void {
    call(this.netns, (a) => a.listen(this.fd, backlog));
  }

  localAddress(): NativeAddress {
    return call(this.netns, (a) => a.localAddress(this.fd));
  }

  /** Inode of the namespace the socket belongs to (compare with stat(netns path).ino). */
  netnsInode(): number {
    return call(this.netns, (a) => a.socketNetnsInode(this.fd));
  }

  /** Close an fd Node has not adopted. After Node adopts it, Node owns and closes it. */
  close(): void {
    if (this.closed) return;
    this.closed = true;
    call(this.netns, (a) => a.close(this.fd));
  }

  /** Forget the fd without closing it: Node has adopted it. */
  release(): number {
    this.closed = true;
    return this.fd;
  }
}

/** Calls on an fd owned by someone else (an accepted net.Socket's handle). */
export const fdCalls = {
  originalDst: (fd: number, netns: string): NativeAddress => call(netns, (a) => a.originalDst(fd)),
  localAddress: (fd: number, netns: string): NativeAddress => call(netns, (a) => a.localAddress(fd)),
  peerAddress: (fd: number, netns: string): NativeAddress => call(netns, (a) => a.peerAddress(fd)),
  getOption: (fd: number, name: SockOptName, netns: string): number => call(netns, (a) => a.getsockopt(fd, name)),
  netnsInode: (fd: number, netns: string): number => call(netns, (a) => a.socketNetnsInode(fd)),
  spliceRelay: (
    fdA: number,
    fdB: number,
    netns: string,
    onDone: ConstructorParameters<Addon['SpliceRelay']>[2],
    pipeBytes: number,
  ): NativeSpliceRelay => call(netns, (a) => new a.SpliceRelay(fdA, fdB, onDone, pipeBytes)),
};
