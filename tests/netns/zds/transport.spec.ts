/**
 * The Linux ZDS transport on the real kernel: SOCK_SEQPACKET message boundaries, a netns fd
 * passed with SCM_RIGHTS and used to open a socket in that namespace, SO_PEERCRED with a
 * client running as another uid, the server and client state machines end to end, clean close.
 */
import { test, expect } from '@playwright/test';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { netnsWorld } from '../../worlds.js';
import { netnsId, podUid } from '../../../impl/api/ids.js';
import { encodeHello, encodeRequest, encodeResponse } from '../../../impl/api/zds/codec.js';
import type { Logger } from '../../../impl/host/log.js';
import type { ZdsConnection, ZdsListener, ZdsNetnsHandle, ZdsReceived } from '../../../impl/host/zds-transport.js';
import { SystemClock } from '../../../impl/linux/clock.js';
import { SystemRandom } from '../../../impl/linux/random.js';
import { RawSocket } from '../../../impl/linux/sockets-native.js';
import { zdsNative } from '../../../impl/linux/zds-native.js';
import { LinuxZdsTransport } from '../../../impl/linux/zds-transport.js';
import { ZdsServer, ZdsSendError, type ZdsServerEvent } from '../../../impl/node-agent/zds-server.js';
import { ZdsClient } from '../../../impl/ztunnel/zds-client.js';
import { runAddonAs, withLab } from '../sockets/fixture.js';

const w = netnsWorld();
test.skip(!w.available, w.reason);

const quiet: Logger = { debug() {}, info() {}, warn() {}, error() {}, child: () => quiet };

/** A fresh socket path in a private temp dir that uid 1000 may also reach. */
function socketDir(): { dir: string; sock: string; dispose(): void } {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'al-zds-'));
  fs.chmodSync(dir, 0o755);
  return { dir, sock: path.join(dir, 'ztunnel.sock'), dispose: () => fs.rmSync(dir, { recursive: true, force: true }) };
}

async function within<T>(p: Promise<T>, ms = 5000, what = 'operation'): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const t = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`${what} did not finish within ${ms} ms`)), ms);
  });
  try {
    return await Promise.race([p, t]);
  } finally {
    clearTimeout(timer);
  }
}

async function pair(
  transport: LinuxZdsTransport,
  sock: string,
): Promise<{ l: ZdsListener; server: ZdsConnection; client: ZdsConnection }> {
  const l = await transport.listen(sock);
  const client = await transport.connect(sock);
  const server = await within(l.accept(), 5000, 'accept');
  if (!server) throw new Error('listener closed');
  return { l, server, client };
}

function frameOf(r: ZdsReceived): { bytes: Uint8Array; netns?: ZdsNetnsHandle } {
  if (r.kind !== 'frame') throw new Error(`expected a frame, got ${JSON.stringify(r)}`);
  return r.frame;
}

const openFds = (): number => fs.readdirSync('/proc/self/fd').length;

test('SEQPACKET keeps message boundaries; oversized datagrams are bad frames; peer credentials are ours', async () => {
  const d = socketDir();
  const t = new LinuxZdsTransport();
  try {
    const { l, server, client } = await pair(t, d.sock);
    expect(server.peer).toEqual({ pid: process.pid, uid: process.getuid?.(), gid: process.getgid?.() });
    const sizes = [1, 1024, 2, 700];
    for (const n of sizes) await client.send(new Uint8Array(n).fill(n & 0xff));
    for (const n of sizes) {
      const f = frameOf(await within(server.receive()));
      expect(f.bytes.length).toBe(n);
      expect(f.bytes.every((b) => b === (n & 0xff))).toBe(true);
      expect(f.netns).toBeUndefined();
    }
    await client.send(new Uint8Array(1500));
    const big = await within(server.receive());
    expect(big).toEqual({ kind: 'bad-frame', reason: 'datagram longer than 1024 bytes (MSG_TRUNC)' });
    // The connection still works after a bad frame.
    await client.send(encodeHello({ version: 1 }));
    expect(Array.from(frameOf(await within(server.receive())).bytes)).toEqual([0x08, 0x01]);
    client.close();
    expect(await within(server.receive())).toEqual({ kind: 'closed', reason: 'peer closed the connection' });
    await l.close();
    expect(fs.existsSync(d.sock)).toBe(false);
  } finally {
    d.dispose();
  }
});

test('a netns fd passed with SCM_RIGHTS names that namespace and opens sockets in it', async () => {
  await withLab(async (lab) => {
    const ns = await lab.ns('zds');
    const d = socketDir();
    const t = new LinuxZdsTransport();
    const fdsBefore = openFds();
    try {
      const { l, server, client } = await pair(t, d.sock);
      await server.send(
        encodeRequest({ kind: 'add', uid: podUid('p1'), info: { name: 'a', namespace: 'b', serviceAccount: 'c' } }),
        ns.id,
      );
      const f = frameOf(await within(client.receive()));
      const handle = f.netns;
      expect(handle, 'the frame carries a netns handle').toBeDefined();
      if (!handle) return;
      expect(handle.netns).toMatch(/^\/proc\/self\/fd\/\d+$/);
      expect(handle.identity).toBe(`${fs.statSync(`/run/netns/${ns.name}`).dev}:${ns.inode}`);
      expect(fs.statSync(handle.netns).ino).toBe(ns.inode);
      // The fd is a real handle: a socket created through it lives in the pod's namespace.
      const s = RawSocket.open(handle.netns, 'inet', 'stream');
      try {
        expect(s.netnsInode()).toBe(ns.inode);
        expect(s.netnsInode()).not.toBe(fs.statSync('/proc/self/ns/net').ino);
      } finally {
        s.close();
      }
      handle.close();
      client.close();
      server.close();
      await l.close();
      expect(openFds()).toBe(fdsBefore); // every fd (sockets, passed netns, our copy) released
    } finally {
      d.dispose();
    }
  });
});

test('an attached fd that is not a network namespace is a bad frame, and it is closed', async () => {
  const d = socketDir();
  const t = new LinuxZdsTransport();
  try {
    const { l, server, client } = await pair(t, d.sock);
    const before = openFds();
    await server.send(encodeRequest({ kind: 'snapshot-sent' }), netnsId('/dev/null'));
    expect(await within(client.receive())).toEqual({
      kind: 'bad-frame',
      reason: 'the attached fd is not a network namespace',
    });
    expect(openFds()).toBe(before);
    client.close();
    server.close();
    await l.close();
  } finally {
    d.dispose();
  }
});

test('a second agent cannot take a live socket path; a stale one is replaced', async () => {
  const d = socketDir();
  const t = new LinuxZdsTransport();
  try {
    const l = await t.listen(d.sock);
    await expect(t.listen(d.sock)).rejects.toThrow(/address already in use/);
    // Simulate a crashed agent: close the fd but leave the file.
    const fd = zdsNative(d.sock, (a) => a.seqpacketSocket());
    fs.unlinkSync(d.sock);
    zdsNative(d.sock, (a) => a.unixBind(fd, d.sock));
    zdsNative(d.sock, (a) => a.close(fd));
    await l.close();
    const again = await t.listen(d.sock);
    await again.close();
    await expect(t.connect(d.sock)).rejects.toThrow(/is the node agent running\?/);
  } finally {
    d.dispose();
  }
});

test('SO_PEERCRED: a client running as uid 1000 is rejected by the server; uid 0 is served', async () => {
  await withLab(async (lab) => {
    const ns = await lab.ns('zdsuid');
    const d = socketDir();
    const events: ZdsServerEvent[] = [];
    const server = new ZdsServer({
      transport: new LinuxZdsTransport({ mode: 0o666 }),
      address: d.sock,
      clock: new SystemClock(),
      log: quiet,
      allowedUids: [0],
      snapshot: () => [{ uid: podUid('p1'), info: { name: 'a', namespace: 'b', serviceAccount: 'c' }, netns: ns.id }],
    });
    server.on((e) => events.push(e));
    await server.start();
    try {
      // The rogue: connects, says hello, and reports what it got back (EOF expected, no fd).
      const out = (await runAddonAs(
        ns.name,
        1000,
        [],
        `
        const fd = addon.seqpacketSocket();
        addon.unixConnect(fd, ${JSON.stringify(d.sock)});
        // The server may already have closed it (EPIPE): that is a rejection too.
        let sendError = null;
        try { addon.seqpacketSend(fd, Uint8Array.of(8, 1), null); } catch (e) { sendError = e.code; }
        const started = Date.now();
        const poll = () => {
          let r = null;
          try { r = addon.seqpacketRecv(fd, 1024); } catch (e) { console.log(JSON.stringify({ error: e.code, sendError, pid: process.pid })); return; }
          if (r !== null) { console.log(JSON.stringify({ eof: r.eof, bytes: r.data.length, fds: r.fds.length, sendError, pid: process.pid })); return; }
          if (Date.now() - started > 5000) { console.log(JSON.stringify({ timeout: true, pid: process.pid })); return; }
          setTimeout(poll, 10);
        };
        poll();
      `,
      )) as { eof?: boolean; bytes?: number; fds?: number; error?: string; pid: number };
      expect(out.eof === true || out.error === 'ECONNRESET').toBe(true);
      expect(out.fds ?? 0).toBe(0);
      expect(out.bytes ?? 0).toBe(0); // not a single byte of the snapshot
      const rejected = events.filter((e) => e.type === 'rejected');
      expect(rejected).toHaveLength(1);
      expect(rejected[0]).toMatchObject({ peer: { uid: 1000, gid: 1000, pid: out.pid } });
      expect(server.connected()).toBe(false);

      // Positive control: this process (uid 0) gets the snapshot.
      const t = new LinuxZdsTransport();
      const conn = await t.connect(d.sock);
      await conn.send(encodeHello({ version: 1 }));
      const add = frameOf(await within(conn.receive()));
      expect(add.netns?.identity).toMatch(new RegExp(`:${ns.inode}$`));
      add.netns?.close();
      await conn.send(encodeResponse({ kind: 'ack', error: '' }));
      frameOf(await within(conn.receive())); // SnapshotSent
      conn.close();
      expect(events.map((e) => e.type)).toEqual(['rejected', 'connected']);
    } finally {
      await server.stop();
      d.dispose();
    }
  });
});

test('server and client state machines over the real socket: snapshot, add with a usable netns, nack, del, clean close', async () => {
  await withLab(async (lab) => {
    const a = await lab.ns('zdsa');
    const b = await lab.ns('zdsb');
    const d = socketDir();
    const clock = new SystemClock();
    const fdsBefore = openFds();
    const serverEvents: ZdsServerEvent[] = [];
    const served = new Map<string, ZdsNetnsHandle>();
    const socketInodes: number[] = [];
    const server = new ZdsServer({
      transport: new LinuxZdsTransport(),
      address: d.sock,
      clock,
      log: quiet,
      allowedUids: [process.getuid?.() ?? 0],
      snapshot: () => [
        { uid: podUid('pod-a'), info: { name: 'a', namespace: 'ns', serviceAccount: 'sa' }, netns: a.id },
      ],
    });
    server.on((e) => serverEvents.push(e));
    const client = new ZdsClient({
      transport: new LinuxZdsTransport(),
      address: d.sock,
      clock,
      random: new SystemRandom(),
      log: quiet,
      handler: {
        onAdd: (uid, _info, netns) => {
          if (uid === 'pod-refused') return Promise.reject(new Error('listener bind failed: EADDRINUSE'));
          // What the proxy will do: open its listener socket inside the pod's namespace.
          const s = RawSocket.open(netns.netns, 'inet', 'stream');
          socketInodes.push(s.netnsInode());
          s.close();
          served.get(uid)?.close();
          served.set(uid, netns);
          return Promise.resolve();
        },
        onKeep: () => Promise.resolve(),
        onDel: (uid) => {
          served.get(uid)?.close();
          served.delete(uid);
          return Promise.resolve();
        },
        onSnapshotSent: () => Promise.resolve(),
      },
    });
    try {
      await server.start();
      client.start();
      const deadline = Date.now() + 5000;
      while (!server.synced() && Date.now() < deadline) await new Promise((r) => setTimeout(r, 10));
      expect(server.synced()).toBe(true);
      expect(client.ready()).toBe(true);
      await within(server.addWorkload(podUid('pod-b'), { name: 'b', namespace: 'ns', serviceAccount: 'sa' }, b.id));
      expect(socketInodes).toEqual([a.inode, b.inode]);
      const nack = await within(
        server.addWorkload(podUid('pod-refused'), { name: 'r', namespace: 'ns', serviceAccount: 'sa' }, b.id).then(
          () => undefined,
          (e: unknown) => e,
        ),
      );
      expect(nack).toBeInstanceOf(ZdsSendError);
      expect((nack as ZdsSendError).reason).toBe('nack');
      expect((nack as ZdsSendError).proxyError).toBe('listener bind failed: EADDRINUSE');
      await within(server.delWorkload(podUid('pod-a')));
      expect([...served.keys()]).toEqual(['pod-b']);
      await client.stop();
      const until = Date.now() + 5000;
      while (!serverEvents.some((e) => e.type === 'disconnected') && Date.now() < until)
        await new Promise((r) => setTimeout(r, 10));
      expect(serverEvents.map((e) => e.type)).toEqual(['connected', 'snapshot-sent', 'nack', 'disconnected']);
      expect(serverEvents.at(-1)).toMatchObject({ reason: 'peer closed the connection' });
    } finally {
      await client.stop();
      await server.stop();
      for (const h of served.values()) h.close();
      d.dispose();
    }
    expect(fs.existsSync(d.sock)).toBe(false);
    expect(openFds()).toBe(fdsBefore);
  });
});
