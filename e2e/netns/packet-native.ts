/**
 * Typed access to the AF_PACKET calls of the native addon (impl/linux/native/packet.cc, built
 * into build/Release/ambient_lab_packet.node next to the socket addon). The packet socket itself
 * is opened with the socket addon (RawSocket.open(undefined, 'packet', 'raw')), which is where a
 * missing CAP_NET_RAW shows up as EPERM.
 */
import { existsSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { NativeSocketError } from '../../impl/linux/sockets-native.js';

interface PacketAddon {
  packetSend(fd: number, ifname: string, frame: Buffer): number;
  packetRecv(fd: number): { frame: Buffer; outgoing: boolean } | null;
}

const FILE = join('build', 'Release', 'ambient_lab_packet.node');
let cached: PacketAddon | undefined;

function addon(): PacketAddon {
  if (cached) return cached;
  let dir = dirname(fileURLToPath(import.meta.url));
  for (;;) {
    if (existsSync(join(dir, FILE))) {
      cached = createRequire(import.meta.url)(join(dir, FILE)) as PacketAddon;
      return cached;
    }
    const up = dirname(dir);
    if (up === dir)
      throw new Error(
        `the AF_PACKET addon (${FILE}) is not built: run \`node tools/build-native.mjs\` (or \`npm install\`) in the ambient-lab package`,
      );
    dir = up;
  }
}

function call<T>(fn: (a: PacketAddon) => T): T {
  const a = addon();
  try {
    return fn(a);
  } catch (e) {
    const err = e as Partial<{ message: string; code: string; errno: number; syscall: string }>;
    throw new NativeSocketError(
      err.message ?? String(e),
      typeof err.code === 'string' ? err.code : 'EINVAL',
      typeof err.errno === 'number' ? err.errno : 0,
      typeof err.syscall === 'string' ? err.syscall : 'argument check',
      '',
    );
  }
}

/** Send one whole Ethernet frame out of `ifname` (of the packet socket's netns); returns bytes sent. */
export function packetSend(fd: number, ifname: string, frame: Buffer): number {
  return call((a) => a.packetSend(fd, ifname, frame));
}

/** The next queued frame, or undefined when none is queued (never blocks). */
export function packetRecv(fd: number): { frame: Buffer; outgoing: boolean } | undefined {
  return call((a) => a.packetRecv(fd)) ?? undefined;
}
