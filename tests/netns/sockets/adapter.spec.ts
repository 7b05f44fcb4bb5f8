/**
 * The Sockets port as the node proxy uses it (impl/linux/sockets.ts), against the real kernel:
 * listeners and connections inside private namespaces, data both ways, original destinations,
 * and every failure as a typed outcome.
 */
import { test, expect } from '@playwright/test';
import { netnsWorld } from '../../worlds.js';
import { execIn, ipIn } from '../../../e2e/netns/ip.js';
import { netnsId } from '../../../impl/api/ids.js';
import { markValue } from '../../../impl/api/marks.js';
import type { SocketOutcome, TcpConnection, TcpListener } from '../../../impl/host/sockets.js';
import { LinuxSockets } from '../../../impl/linux/sockets.js';
import { ownNetnsInode, threadNetns, withLab } from './fixture.js';

const w = netnsWorld();
test.skip(!w.available, w.reason);

const sockets = new LinuxSockets();

function ok<T>(o: SocketOutcome<T>): T {
  if (!o.ok) throw new Error(`expected success, got ${o.kind} (${o.errno}) from ${o.call}: ${o.message}`);
  return o.value;
}

async function readAll(c: TcpConnection): Promise<string> {
  let s = '';
  for (;;) {
    const r = await c.read();
    if (r.done) {
      if (r.failure) throw new Error(`read failed: ${r.failure.message}`);
      return s;
    }
    s += Buffer.from(r.bytes).toString();
  }
}

/** A listener that answers every connection with a description of what it saw, then closes. */
async function describingListener(opts: Parameters<LinuxSockets['listenTcp']>[0]): Promise<SocketOutcome<TcpListener>> {
  return sockets.listenTcp(opts, (conn) => {
    void (async () => {
      const first = await conn.read();
      const hello = first.done ? '' : Buffer.from(first.bytes).toString();
      const seen = { hello, local: conn.localAddress, remote: conn.remoteAddress, orig: conn.originalDst() ?? null };
      await conn.write(Buffer.from(JSON.stringify(seen)));
      await conn.end();
    })();
  });
}

async function exchange(
  opts: Parameters<LinuxSockets['connectTcp']>[0],
): Promise<{ conn: TcpConnection; seen: { hello: string; local: unknown; remote: unknown; orig: unknown } }> {
  const conn = ok(await sockets.connectTcp(opts));
  ok(await conn.write(Buffer.from('hello')));
  const seen = JSON.parse(await readAll(conn)) as { hello: string; local: unknown; remote: unknown; orig: unknown };
  return { conn, seen };
}

test('listen and connect inside a namespace, bytes both ways, and this process stays in its own namespace', async () => {
  const own = ownNetnsInode();
  await withLab(async (lab) => {
    const a = await lab.ns('a');
    const listener = ok(await describingListener({ netns: a.id, family: 4, address: '127.0.0.1', port: 0 }));
    expect(listener.address.address).toBe('127.0.0.1');
    expect(listener.address.port).toBeGreaterThan(0);
    const { conn, seen } = await exchange({ netns: a.id, family: 4, dst: listener.address });
    expect(seen.hello).toBe('hello');
    expect(seen.local).toEqual(listener.address);
    expect(seen.remote).toEqual(conn.localAddress);
    expect(conn.remoteAddress).toEqual(listener.address);
    // No NAT rule in the namespace: conntrack keeps no entry, so no original destination.
    expect(seen.orig).toBeNull();
    expect(conn.originalDst()).toBeUndefined();
    conn.close();
    await listener.close();
    // The same port from this process's own namespace finds nothing: the listener was in `a`.
    const outside = await sockets.connectTcp({ family: 4, dst: listener.address, timeoutMs: 5_000 });
    expect(outside.ok ? 'connected' : outside.kind).toBe('refused');
  });
  expect(ownNetnsInode()).toBe(own);
  for (const ino of threadNetns().values()) expect(ino).toBe(own);
});

test('an accepted connection reports its pre-REDIRECT destination (IPv4 and IPv6)', async () => {
  await withLab(async (lab) => {
    const a = await lab.ns('a');
    await ipIn(a.name, ['link', 'add', 'd0', 'type', 'veth', 'peer', 'name', 'd1']);
    await ipIn(a.name, ['addr', 'add', '10.244.0.1/24', 'dev', 'd0']);
    await ipIn(a.name, ['addr', 'add', 'fd00::1/64', 'dev', 'd0', 'nodad']);
    await ipIn(a.name, ['link', 'set', 'd0', 'up']);
    await ipIn(a.name, ['link', 'set', 'd1', 'up']);
    await execIn(
      a.name,
      ['iptables-restore'],
      '*nat\n-A OUTPUT -p tcp -d 10.244.0.0/24 -j REDIRECT --to-ports 15001\nCOMMIT\n',
    );
    await execIn(
      a.name,
      ['ip6tables-restore'],
      '*nat\n-A OUTPUT -p tcp -d fd00::/64 -j REDIRECT --to-ports 15001\nCOMMIT\n',
    );
    const l4 = ok(
      await describingListener({ netns: a.id, family: 4, address: '0.0.0.0', port: 15001, mark: markValue(0x539) }),
    );
    const l6 = ok(await describingListener({ netns: a.id, family: 6, address: '::', port: 15001, v6Only: true }));
    for (const [family, dst] of [
      [4, '10.244.0.42'],
      [6, 'fd00::42'],
    ] as const) {
      for (const port of [80, 8443]) {
        const { conn, seen } = await exchange({ netns: a.id, family, dst: { family, address: dst, port } });
        expect(seen.orig).toEqual({ family, address: dst, port });
        expect(seen.local).toEqual({ family, address: family === 4 ? '127.0.0.1' : '::1', port: 15001 });
        conn.close();
      }
    }
    await l4.close();
    await l6.close();
  });
});

test('failures are typed outcomes: refused, timeout, unreachable, addr-in-use, addr-not-available, no-netns', async () => {
  await withLab(async (lab) => {
    const a = await lab.ns('a');
    const ns = a.id;
    const refused = await sockets.connectTcp({
      netns: ns,
      family: 4,
      dst: { family: 4, address: '127.0.0.1', port: 9 },
    });
    expect(refused).toMatchObject({ ok: false, kind: 'refused', errno: 'ECONNREFUSED' });
    if (!refused.ok) expect(refused.message).toContain(ns);

    // SYNs dropped on input: nobody answers, the deadline decides.
    await execIn(a.name, ['iptables', '-A', 'INPUT', '-p', 'tcp', '--dport', '7001', '-j', 'DROP']);
    const silent = ok(
      await sockets.listenTcp({ netns: ns, family: 4, address: '127.0.0.1', port: 7001 }, () => undefined),
    );
    const timedOut = await sockets.connectTcp({
      netns: ns,
      family: 4,
      dst: { family: 4, address: '127.0.0.1', port: 7001 },
      timeoutMs: 300,
    });
    expect(timedOut).toMatchObject({ ok: false, kind: 'timeout', errno: 'ETIMEDOUT' });
    await silent.close();

    // A DROP on output does not fail a non-blocking connect: the SYN is retransmitted, so the
    // outcome is a timeout as well (not EPERM, which a UDP send would get).
    await execIn(a.name, ['iptables', '-A', 'OUTPUT', '-p', 'tcp', '--dport', '7002', '-j', 'DROP']);
    const dropped = await sockets.connectTcp({
      netns: ns,
      family: 4,
      dst: { family: 4, address: '127.0.0.1', port: 7002 },
      timeoutMs: 300,
    });
    expect(dropped).toMatchObject({ ok: false, kind: 'timeout', errno: 'ETIMEDOUT' });

    const noRoute = await sockets.connectTcp({
      netns: ns,
      family: 4,
      dst: { family: 4, address: '198.51.100.1', port: 80 },
    });
    expect(noRoute).toMatchObject({ ok: false, kind: 'unreachable', errno: 'ENETUNREACH' });

    const first = ok(
      await sockets.listenTcp({ netns: ns, family: 4, address: '0.0.0.0', port: 15006 }, () => undefined),
    );
    const second = await sockets.listenTcp({ netns: ns, family: 4, address: '0.0.0.0', port: 15006 }, () => undefined);
    expect(second).toMatchObject({ ok: false, kind: 'addr-in-use', errno: 'EADDRINUSE', call: 'bind' });
    await first.close();

    const foreign = await sockets.listenTcp(
      { netns: ns, family: 4, address: '203.0.113.9', port: 15006 },
      () => undefined,
    );
    expect(foreign).toMatchObject({ ok: false, kind: 'addr-not-available', errno: 'EADDRNOTAVAIL' });
    const foreignT = ok(
      await sockets.listenTcp(
        { netns: ns, family: 4, address: '203.0.113.9', port: 15006, transparent: true },
        () => undefined,
      ),
    );
    await foreignT.close();

    const gone = await sockets.connectTcp({
      netns: netnsId('/run/netns/al-no-such-netns'),
      family: 4,
      dst: { family: 4, address: '127.0.0.1', port: 9 },
    });
    expect(gone).toMatchObject({ ok: false, kind: 'no-netns', errno: 'ENOENT', call: 'open' });

    // The mark reaches netfilter: a mark-matching REJECT refuses only the marked connection.
    await execIn(a.name, [
      'iptables',
      '-A',
      'OUTPUT',
      '-p',
      'tcp',
      '--dport',
      '7003',
      '-m',
      'mark',
      '--mark',
      '0x539',
      '-j',
      'REJECT',
      '--reject-with',
      'tcp-reset',
    ]);
    const open = ok(await describingListener({ netns: ns, family: 4, address: '127.0.0.1', port: 7003 }));
    const marked = await sockets.connectTcp({ netns: ns, family: 4, dst: open.address, mark: markValue(0x539) });
    expect(marked).toMatchObject({ ok: false, kind: 'refused' });
    const unmarked = await exchange({ netns: ns, family: 4, dst: open.address });
    expect(unmarked.seen.hello).toBe('hello');
    unmarked.conn.close();
    await open.close();
  });
});

test('SO_REUSEPORT: a second listener joins the port, and serves it after the first closes (proxy restart overlap)', async () => {
  await withLab(async (lab) => {
    const a = await lab.ns('a');
    const opts = { netns: a.id, family: 4 as const, address: '127.0.0.1', port: 15001, reusePort: true };
    const oldL = ok(await describingListener(opts));
    const newL = ok(await describingListener(opts));
    const before = await exchange({ netns: a.id, family: 4, dst: oldL.address });
    expect(before.seen.hello).toBe('hello');
    before.conn.close();
    await oldL.close();
    const after = await exchange({ netns: a.id, family: 4, dst: newL.address });
    expect(after.seen.hello).toBe('hello');
    after.conn.close();
    await newL.close();
  });
});

test('a transparent connect uses a non-local source address, and the server sees it', async () => {
  await withLab(async (lab) => {
    const proxy = await lab.ns('proxy');
    const app = await lab.ns('app');
    await ipIn(proxy.name, ['link', 'add', 'v-proxy', 'type', 'veth', 'peer', 'name', 'v-app', 'netns', app.name]);
    await ipIn(proxy.name, ['addr', 'add', '10.244.9.1/30', 'dev', 'v-proxy']);
    await ipIn(app.name, ['addr', 'add', '10.244.9.2/30', 'dev', 'v-app']);
    await ipIn(proxy.name, ['link', 'set', 'v-proxy', 'up']);
    await ipIn(app.name, ['link', 'set', 'v-app', 'up']);
    // The app answers the foreign client address through the proxy namespace...
    await ipIn(app.name, ['route', 'add', '203.0.113.0/24', 'via', '10.244.9.1']);
    // ...where replies to it are delivered locally, to the transparent socket.
    await ipIn(proxy.name, ['route', 'add', 'local', '203.0.113.0/24', 'dev', 'lo', 'table', '100']);
    await ipIn(proxy.name, ['rule', 'add', 'to', '203.0.113.0/24', 'lookup', '100']);
    const server = ok(await describingListener({ netns: app.id, family: 4, address: '10.244.9.2', port: 8080 }));
    const src = { address: '203.0.113.50' };
    const plain = await sockets.connectTcp({ netns: proxy.id, family: 4, src, dst: server.address });
    expect(plain).toMatchObject({ ok: false, kind: 'addr-not-available' });
    const { conn, seen } = await exchange({ netns: proxy.id, family: 4, src, transparent: true, dst: server.address });
    expect(conn.localAddress.address).toBe('203.0.113.50');
    expect(seen.remote).toEqual(conn.localAddress);
    conn.close();
    await server.close();
  });
});
