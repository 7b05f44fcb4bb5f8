/**
 * The kernel relay of the Linux sockets adapter (splice(2), impl/linux/native/splice-relay.cc)
 * against the portable relay (impl/ztunnel/relay.ts), on the real kernel: every scenario runs
 * with both and must give the same observable result — bytes intact both ways, byte counts,
 * a half-close passed on while the other direction keeps flowing, a reset passed on as a
 * reset, abort resetting both — and the kernel relay must leave no fd behind.
 *
 * Topology: one private namespace; client -> "proxy" listener -> server listener on 127.0.0.1,
 * the proxy side relaying the accepted connection to its own connection to the server.
 */
import * as fs from 'node:fs';
import { test, expect } from '@playwright/test';
import { netnsWorld } from '../../worlds.js';
import type { NetnsId } from '../../../impl/api/ids.js';
import type { ByteStream } from '../../../impl/host/hbone.js';
import type { Relay, SocketOutcome, TcpConnection } from '../../../impl/host/sockets.js';
import { LinuxSockets } from '../../../impl/linux/sockets.js';
import { relay, relayConnections } from '../../../impl/ztunnel/relay.js';
import { pattern, withLab } from './fixture.js';

const w = netnsWorld();
test.skip(!w.available, w.reason);

function ok<T>(o: SocketOutcome<T>): T {
  if (!o.ok) throw new Error(`expected success, got ${o.kind} (${o.errno}) from ${o.call}: ${o.message}`);
  return o.value;
}

interface Pair {
  /** The client's end (outside the relay) and the server's accepted end. */
  readonly client: TcpConnection;
  readonly server: TcpConnection;
  readonly relay: Relay;
  /** The relay really ran in the kernel (for kind 'kernel'). */
  readonly inKernel: boolean;
  close(): Promise<void>;
}

type Kind = 'kernel' | 'portable';

/** Connect client -> proxy -> server in `ns`; the proxy relays with the given kind of relay. */
async function pair(ns: NetnsId, kind: Kind, pipeBytes?: number): Promise<Pair> {
  const sockets = new LinuxSockets({
    kernelRelay: kind === 'kernel',
    ...(pipeBytes !== undefined ? { kernelRelayPipeBytes: pipeBytes } : {}),
  });
  let serverConn: (c: TcpConnection) => void = () => undefined;
  const serverSide = new Promise<TcpConnection>((r) => {
    serverConn = r;
  });
  const server = ok(
    await sockets.listenTcp({ netns: ns, family: 4, address: '127.0.0.1', port: 0 }, (c) => serverConn(c)),
  );
  let started: (x: { relay: Relay; inKernel: boolean }) => void = () => undefined;
  const relayStarted = new Promise<{ relay: Relay; inKernel: boolean }>((r) => {
    started = r;
  });
  const proxy = ok(
    await sockets.listenTcp({ netns: ns, family: 4, address: '127.0.0.1', port: 0 }, (down) => {
      void (async () => {
        const up = ok(await sockets.connectTcp({ netns: ns, family: 4, dst: server.address, timeoutMs: 5000 }));
        const k = sockets.relayNative?.(down, up);
        started({ relay: k ?? relayConnections(sockets, down, up), inKernel: k !== undefined });
      })();
    }),
  );
  const client = ok(await sockets.connectTcp({ netns: ns, family: 4, dst: proxy.address, timeoutMs: 5000 }));
  const { relay: r, inKernel } = await relayStarted;
  return {
    client,
    server: await serverSide,
    relay: r,
    inKernel,
    close: async () => {
      client.close();
      await proxy.close();
      await server.close();
    },
  };
}

/** Read until end of stream: the bytes, and how it ended. */
async function drain(c: TcpConnection): Promise<{ bytes: Buffer; end: string }> {
  const parts: Uint8Array[] = [];
  for (;;) {
    const r = await c.read();
    if (r.done) return { bytes: Buffer.concat(parts), end: r.failure ? `failure ${r.failure.errno}` : 'eof' };
    parts.push(r.bytes);
  }
}

function openFds(): number {
  return fs.readdirSync('/proc/self/fd').length;
}

for (const kind of ['kernel', 'portable'] as const) {
  test.describe(`${kind} relay`, () => {
    test('bytes intact both ways, half-close passed on while the other direction flows, counts reported, no fd left', async () => {
      await withLab(async (lab) => {
        const a = await lab.ns('relay');
        const before = openFds();
        const p = await pair(a.id, kind);
        expect(p.inKernel).toBe(kind === 'kernel');
        const up = pattern(6 << 20, 1);
        const down = pattern(3 << 20, 2);
        // The client sends everything and half-closes; the server reads to EOF, then answers.
        const clientSent = (async () => {
          ok(await p.client.write(up));
          await p.client.end();
        })();
        const atServer = await drain(p.server);
        await clientSent;
        expect(atServer.end).toBe('eof');
        expect(atServer.bytes.equals(up)).toBe(true);
        ok(await p.server.write(down));
        await p.server.end();
        const atClient = await drain(p.client);
        expect(atClient.end).toBe('eof');
        expect(atClient.bytes.equals(down)).toBe(true);
        expect(await p.relay.done).toEqual({ aToB: up.length, bToA: down.length, ended: 'eof' });
        p.server.close();
        await p.close();
        // Node closes handles asynchronously; the relay's own dups and pipes are closed by now.
        await new Promise((r) => setTimeout(r, 50));
        expect(openFds()).toBeLessThanOrEqual(before);
      });
    });

    test('a reset on one side reaches the other as a reset, never as a clean end', async () => {
      await withLab(async (lab) => {
        const a = await lab.ns('relay');
        const p = await pair(a.id, kind);
        ok(await p.client.write(Buffer.from('ping')));
        const first = await p.server.read();
        expect(first.done ? '' : Buffer.from(first.bytes).toString()).toBe('ping');
        p.server.reset();
        const atClient = await drain(p.client);
        expect(atClient.end).toBe('failure ECONNRESET');
        const res = await p.relay.done;
        expect(res.ended).toBe('reset');
        expect(res.aToB).toBe(4);
        await p.close();
      });
    });

    test('abort resets both sides at once', async () => {
      await withLab(async (lab) => {
        const a = await lab.ns('relay');
        const p = await pair(a.id, kind);
        ok(await p.client.write(Buffer.from('x')));
        const first = await p.server.read();
        expect(first.done).toBe(false);
        p.relay.abort();
        expect((await p.relay.done).ended).toBe('aborted');
        expect((await drain(p.client)).end).toBe('failure ECONNRESET');
        expect((await drain(p.server)).end).toBe('failure ECONNRESET');
        await p.close();
      });
    });
  });
}

test('the kernel relay with the smallest pipe (one page per splice) still carries every byte in order', async () => {
  await withLab(async (lab) => {
    const a = await lab.ns('relay');
    const p = await pair(a.id, 'kernel', 4096);
    expect(p.inKernel).toBe(true);
    const up = pattern(1 << 20, 3);
    const sent = (async () => {
      ok(await p.client.write(up));
      await p.client.end();
    })();
    const got = await drain(p.server);
    await sent;
    expect(got.bytes.equals(up)).toBe(true);
    await p.server.end();
    expect(await p.relay.done).toEqual({ aToB: up.length, bToA: 0, ended: 'eof' });
    p.server.close();
    await p.close();
  });
});

test('a kernel relay pipe size out of range is refused when the adapter is made', () => {
  expect(() => new LinuxSockets({ kernelRelayPipeBytes: 100 })).toThrow(
    /kernelRelayPipeBytes must be an integer from 4096 to 1048576 \(got 100\)/,
  );
  expect(() => new LinuxSockets({ kernelRelayPipeBytes: 2 << 20 })).toThrow(/kernelRelayPipeBytes/);
});

test('the kernel relay declines a connection already read from, or a stream that is not its connection; the portable relay then carries it', async () => {
  await withLab(async (lab) => {
    const a = await lab.ns('relay');
    const sockets = new LinuxSockets();
    let serverConn: (c: TcpConnection) => void = () => undefined;
    const serverSide = new Promise<TcpConnection>((r) => {
      serverConn = r;
    });
    const server = ok(
      await sockets.listenTcp({ netns: a.id, family: 4, address: '127.0.0.1', port: 0 }, (c) => serverConn(c)),
    );
    let downConn: (c: TcpConnection) => void = () => undefined;
    const downSide = new Promise<TcpConnection>((r) => {
      downConn = r;
    });
    const proxy = ok(
      await sockets.listenTcp({ netns: a.id, family: 4, address: '127.0.0.1', port: 0 }, (c) => downConn(c)),
    );
    const client = ok(await sockets.connectTcp({ netns: a.id, family: 4, dst: proxy.address, timeoutMs: 5000 }));
    const down = await downSide;
    ok(await client.write(Buffer.from('peeked')));
    const peeked = await down.read(); // e.g. a protocol sniff: the connection is now in user space
    expect(peeked.done).toBe(false);
    const up = ok(await sockets.connectTcp({ netns: a.id, family: 4, dst: server.address, timeoutMs: 5000 }));
    expect(sockets.relayNative?.(down, up)).toBeUndefined();
    // Nor a stream that is not one of its connections (an HBONE stream, say): the connection is untouched.
    const other: ByteStream = {
      read: () => down.read(),
      write: (b) => down.write(b),
      end: () => down.end(),
      close: () => down.close(),
      reset: () => down.reset(),
    };
    expect(sockets.relayNative?.(other, up)).toBeUndefined();
    const r = relay(down, up);
    ok(await client.write(Buffer.from('rest')));
    await client.end();
    const s = await serverSide;
    const got = await drain(s);
    expect(got.bytes.toString()).toBe('rest');
    await s.end();
    expect((await r.done).ended).toBe('eof');
    client.close();
    await proxy.close();
    await server.close();
  });
});
