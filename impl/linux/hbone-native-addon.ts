/**
 * Typed access to the native HBONE tunnel (impl/linux/native/hbone-tunnel.cc, built by
 * `npm install` into build/Release/ambient_lab_hbone.node when nghttp2's header is present).
 * `loadHboneAddon()` says why when it is not there, so callers can fall back to node:tls.
 */
import { existsSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { ADDON_FILE } from './sockets-native.js';

/** An SSL_CTX built from one certificate, its key and the mesh root. */
export interface NativeTlsContext {
  readonly __brand: 'NativeTlsContext';
}

/** Events of a tunnel, in the order they happen (see hbone-tunnel.cc). */
export type TunnelEvent =
  | readonly ['handshake', Buffer | undefined, string]
  | readonly ['failed', 'handshake' | 'closed' | 'protocol', string]
  | readonly ['response', number, number]
  | readonly ['request', number, string, string, string]
  | readonly ['data', number, Buffer]
  | readonly ['end', number]
  | readonly ['reset', number, string]
  | readonly ['drain', number]
  | readonly ['relayed', number, number, number, 'eof' | 'reset']
  | readonly ['closed'];

export interface NativeTunnel {
  request(authority: string, forwarded: string): number;
  serve(): void;
  /** False when the client already went away. */
  respond(streamId: number, status: number): boolean;
  /** Relay the stream to a connected socket (dups the fd); false when the stream was already used from JS. */
  relay(streamId: number, fd: number): boolean;
  /** Reset both ends of a relayed stream; [toFd, fromFd] bytes so far. No 'relayed' event follows. */
  abortRelay(streamId: number): [number, number];
  /** Bytes now queued for the stream, or -1 when it is closed. */
  write(streamId: number, bytes: Uint8Array): number;
  end(streamId: number): void;
  reset(streamId: number): void;
  /** The JS reader took `n` bytes: open the HTTP/2 windows by as much. */
  consume(streamId: number, n: number): void;
  /** Deliver the stream's bytes to JS ('data' events) from now on. */
  readStart(streamId: number): void;
  /** Reset everything; no events afterwards. */
  close(): void;
}

interface Addon {
  TlsContext: new (certPem: string, keyPem: string, rootPem: string, server: boolean) => NativeTlsContext;
  // The addon calls back with a flat argument list; TunnelEvent names each shape.
  HboneTunnel: new (
    fd: number,
    ctx: NativeTlsContext,
    server: boolean,
    onEvent: (...e: TunnelEvent) => void,
  ) => NativeTunnel;
}

const HBONE_ADDON_FILE = join('build', 'Release', 'ambient_lab_hbone.node');

let cached: { addon: Addon } | { reason: string } | undefined;

/** Walk up from this module (impl/linux or dist/impl/linux) to the package root holding the socket addon's build. */
function packageRoot(): string | undefined {
  let dir = dirname(fileURLToPath(import.meta.url));
  for (;;) {
    if (existsSync(join(dir, ADDON_FILE))) return dir;
    const up = dirname(dir);
    if (up === dir) return undefined;
    dir = up;
  }
}

/** The addon, or why it cannot be used. */
export function loadHboneAddon(): { addon: Addon } | { reason: string } {
  if (cached) return cached;
  const root = packageRoot();
  const file = join(root ?? '.', HBONE_ADDON_FILE);
  if (root === undefined) {
    cached = { reason: 'the native addons are not built: run `npm install` in the ambient-lab package' };
  } else if (!existsSync(file)) {
    cached = {
      reason: `${file} is not built: install nghttp2's header (Debian: apt-get install -y libnghttp2-dev) and run npm install again`,
    };
  } else {
    try {
      cached = { addon: createRequire(import.meta.url)(file) as Addon };
    } catch (e) {
      cached = { reason: `loading ${file} failed: ${(e as Error).message}` };
    }
  }
  return cached;
}
