/**
 * Typed access to the ZDS calls of the native addon (impl/linux/native/zds-seqpacket.cc, built
 * into the same build/Release/ambient_lab_sockets.node as sockets.cc). Errors are re-thrown as
 * ZdsNativeError naming the call and the socket path.
 */
import { existsSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { ADDON_FILE } from './sockets-native.js';

interface RecvResult {
  readonly data: Buffer;
  readonly fds: number[];
  readonly truncated: boolean;
  readonly ctruncated: boolean;
  readonly otherControl: boolean;
  readonly eof: boolean;
}

interface PeerCred {
  readonly pid: number;
  readonly uid: number;
  readonly gid: number;
}

interface NsInfo {
  readonly dev: number;
  readonly ino: number;
  readonly isNetns: boolean;
}

/** libuv poll on Node's loop; the callback gets (status, readable, writable). */
export interface FdWatcher {
  start(readable: boolean, writable: boolean): void;
  stop(): void;
  close(): void;
}

interface ZdsAddon {
  seqpacketSocket(): number;
  unixBind(fd: number, path: string): void;
  unixConnect(fd: number, path: string): void;
  listen(fd: number, backlog: number): void;
  seqpacketAccept(fd: number): number | null;
  seqpacketSend(fd: number, data: Uint8Array, passFd: number | null): number | null;
  seqpacketRecv(fd: number, maxBytes: number): RecvResult | null;
  peerCred(fd: number): PeerCred;
  nsInfo(fd: number): NsInfo;
  close(fd: number): void;
  FdWatcher: new (fd: number, cb: (status: number, readable: boolean, writable: boolean) => void) => FdWatcher;
}

export class ZdsNativeError extends Error {
  constructor(
    message: string,
    readonly code: string,
    readonly syscall: string,
  ) {
    super(message);
    this.name = 'ZdsNativeError';
  }
}

let cached: ZdsAddon | undefined;

function load(): ZdsAddon {
  if (cached) return cached;
  let dir = dirname(fileURLToPath(import.meta.url));
  for (;;) {
    const candidate = join(dir, ADDON_FILE);
    if (existsSync(candidate)) {
      const addon = createRequire(import.meta.url)(candidate) as Partial<ZdsAddon>;
      if (typeof addon.seqpacketSocket !== 'function') {
        throw new Error(
          `the native addon at ${candidate} predates the ZDS calls: run \`npm install\` (or node tools/build-native.mjs) to rebuild it`,
        );
      }
      cached = addon as ZdsAddon;
      return cached;
    }
    const up = dirname(dir);
    if (up === dir) break;
    dir = up;
  }
  throw new Error(
    'the native socket addon is not built: run `npm install` in the ambient-lab package (needs python3, make and g++)',
  );
}

/** Run an addon call, re-throwing its error with `where` (a socket path or connection id). */
export function zdsNative<T>(where: string, fn: (a: ZdsAddon) => T): T {
  const a = load();
  try {
    return fn(a);
  } catch (e) {
    const err = e as Partial<{ message: string; code: string; syscall: string }>;
    throw new ZdsNativeError(
      `${err.message ?? String(e)} (ZDS socket ${where})`,
      typeof err.code === 'string' ? err.code : 'EINVAL',
      typeof err.syscall === 'string' ? err.syscall : 'argument check',
    );
  }
}
