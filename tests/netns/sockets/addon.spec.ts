/**
 * Each call of the native socket addon against the real kernel, in private namespaces.
 */
import { test, expect } from '@playwright/test';
import * as fs from 'node:fs';
import * as net from 'node:net';
import { netnsWorld } from '../../worlds.js';
import { ipIn } from '../../../e2e/netns/ip.js';
import { NativeSocketError, RawSocket, fdCalls } from '../../../impl/linux/sockets-native.js';
import { ownNetnsInode, threadNetns, withLab } from './fixture.js';

const w = netnsWorld();
test.skip(!w.available, w.reason);

function thrown(fn: () => unknown): NativeSocketError {
  try {
    fn();
  } catch (e) {
    if (e instanceof NativeSocketError) return e;
    throw e;
  }
  throw new Error('expected the call to throw');
}

test('a socket opened in a namespace lives there, and every thread of this process stays home', async () => {
  await withLab(async (lab) => {
    const a = await lab.ns('a');
    const own = ownNetnsInode();
    expect(a.inode).not.toBe(own);
    const before = threadNetns();
    for (const family of ['inet', 'inet6'] as const) {
      for (const type of ['stream', 'dgram'] as const) {
        const s = RawSocket.open(a.id, family, type);
        try {
          expect(s.netnsInode()).toBe(a.inode);
          expect(s.getOption('SO_DOMAIN')).toBe(family === 'inet' ? 2 : 10);
        } finally {
          s.close();
        }
      }
    }
    const plain = RawSocket.open(undefined, 'inet', 'stream');
    expect(plain.netnsInode()).toBe(own);
    plain.close();
    expect(ownNetnsInode()).toBe(own);
    const after = threadNetns();
    for (const [tid, ino] of after) expect({ tid, ino }).toEqual({ tid, ino: before.get(tid) ?? own });
    for (const ino of after.values()) expect(ino).toBe(own);
  });
});

test('a failed namespace switch throws a coded error naming the call and the namespace, and leaves the process home', async () => {
  const own = ownNetnsInode();
  const missing = thrown(() => RawSocket.open('/run/netns/al-does-not-exist', 'inet', 'stream'));
  expect(missing.code).toBe('ENOENT');
  expect(missing.syscall).toBe('open');
  expect(missing.message).toContain('/run/netns/al-does-not-exist');
  // A namespace file of the wrong type: setns(CLONE_NEWNET) refuses it.
  const wrong = thrown(() => RawSocket.open('/proc/self/ns/uts', 'inet', 'stream'));
  expect(wrong.code).toBe('EINVAL');
  expect(wrong.syscall).toBe('setns');
  expect(wrong.message).toContain('setns(/proc/self/ns/uts, CLONE_NEWNET)');
  expect(wrong.message).toContain('network namespace /proc/self/ns/uts');
  expect(ownNetnsInode()).toBe(own);
  for (const ino of threadNetns().values()) expect(ino).toBe(own);
});

test('/proc/PID/ns/net works as a namespace handle', async () => {
  await withLab(async (lab) => {
    const a = await lab.ns('a');
    // A process parked in the namespace gives a /proc/PID/ns/net handle to it.
    const { spawn } = await import('node:child_process');
    const child = spawn('ip', ['netns', 'exec', a.name, 'sleep', '30'], { stdio: 'ignore' });
    try {
      let handle = '';
      for (let i = 0; i < 100 && handle === ''; i++) {
        // `ip netns exec` execs sleep in place, so the pid is the same once it has switched.
        const p = `/proc/${child.pid}/ns/net`;
        if (fs.existsSync(p) && fs.statSync(p).ino === a.inode) handle = p;
        else await new Promise((r) => setTimeout(r, 20));
      }
      expect(handle).not.toBe('');
      const s = RawSocket.open(handle, 'inet', 'stream');
      expect(s.netnsInode()).toBe(a.inode);
      s.close();
    } finally {
      child.kill('SIGKILL');
    }
  });
});

test('SO_MARK is set and read back, and netfilter sees it: a mark-matching REJECT refuses only the marked socket', async () => {
  await withLab(async (lab) => {
    const a = await lab.ns('a');
    const { execIn } = await import('../../../e2e/netns/ip.js');
    await execIn(a.name, [
      'iptables',
      '-A',
      'OUTPUT',
      '-p',
      'tcp',
      '--dport',
      '8080',
      '-m',
      'mark',
      '--mark',
      '0x539',
      '-j',
      'REJECT',
      '--reject-with',
      'tcp-reset',
    ]);
    const l = RawSocket.open(a.id, 'inet', 'stream');
    l.bind('127.0.0.1', 8080);
    l.listen(16);
    const server = net.createServer((c) => c.end());
    await new Promise<void>((r) => server.listen({ fd: l.release() }, r));
    try {
      const connect = async (mark: number | undefined): Promise<string> => {
        const s = RawSocket.open(a.id, 'inet', 'stream');
        if (mark !== undefined) {
          s.setOption('SO_MARK', mark);
          expect(s.getOption('SO_MARK')).toBe(mark);
        } else {
          expect(s.getOption('SO_MARK')).toBe(0);
        }
        const sock = new net.Socket({ fd: s.release() });
        return new Promise((resolve) => {
          sock.once('connect', () => {
            sock.destroy();
            resolve('connected');
          });
          sock.once('error', (e: NodeJS.ErrnoException) => resolve(e.code ?? 'error'));
          sock.connect(8080, '127.0.0.1');
        });
      };
      expect(await connect(undefined)).toBe('connected');
      expect(await connect(0x539)).toBe('ECONNREFUSED');
      expect(await connect(0x538)).toBe('connected');
      // The full 32 bits round-trip.
      const s = RawSocket.open(a.id, 'inet6', 'stream');
      s.setOption('SO_MARK', 0xffffffff);
      expect(s.getOption('SO_MARK')).toBe(0xffffffff);
      s.close();
    } finally {
      await new Promise((r) => server.close(r));
    }
  });
});

test('IP_TRANSPARENT / IPV6_TRANSPARENT allow binding an address that is not local; without them bind fails EADDRNOTAVAIL', async () => {
  await withLab(async (lab) => {
    const a = await lab.ns('a');
    for (const [family, addr, opt] of [
      ['inet', '203.0.113.7', 'IP_TRANSPARENT'],
      ['inet6', 'fd00::77', 'IPV6_TRANSPARENT'],
    ] as const) {
      const plain = RawSocket.open(a.id, family, 'stream');
      const err = thrown(() => plain.bind(addr, 15001));
      expect(err.code).toBe('EADDRNOTAVAIL');
      expect(err.syscall).toBe('bind');
      expect(err.message).toContain(`bind(${addr} port 15001)`);
      expect(err.message).toContain(a.id);
      plain.close();
      const t = RawSocket.open(a.id, family, 'stream');
      t.setOption(opt, 1);
      expect(t.getOption(opt)).toBe(1);
      t.bind(addr, 15001);
      t.listen(8);
      expect(t.localAddress()).toEqual({ family, address: addr, port: 15001 });
      t.close();
    }
  });
});

test('SO_REUSEPORT lets two listeners share a port; without it the second bind fails EADDRINUSE', async () => {
  await withLab(async (lab) => {
    const a = await lab.ns('a');
    const open = (reuse: boolean): RawSocket => {
      const s = RawSocket.open(a.id, 'inet', 'stream');
      s.setOption('SO_REUSEADDR', 1);
      if (reuse) s.setOption('SO_REUSEPORT', 1);
      return s;
    };
    const one = open(true);
    const two = open(true);
    one.bind('0.0.0.0', 15001);
    one.listen(8);
    two.bind('0.0.0.0', 15001);
    two.listen(8);
    expect(two.getOption('SO_REUSEPORT')).toBe(1);
    const three = open(false);
    const err = thrown(() => three.bind('0.0.0.0', 15001));
    expect(err.code).toBe('EADDRINUSE');
    for (const s of [one, two, three]) s.close();
    // Same without SO_REUSEPORT on either: SO_REUSEADDR alone does not share a listening port.
    const four = open(false);
    four.bind('0.0.0.0', 15002);
    four.listen(8);
    const five = open(false);
    expect(thrown(() => five.bind('0.0.0.0', 15002)).code).toBe('EADDRINUSE');
    four.close();
    five.close();
  });
});

test('IPV6_V6ONLY decides whether a [::] listener also takes IPv4', async () => {
  await withLab(async (lab) => {
    const a = await lab.ns('a');
    for (const v6only of [0, 1]) {
      const six = RawSocket.open(a.id, 'inet6', 'stream');
      six.setOption('IPV6_V6ONLY', v6only);
      expect(six.getOption('IPV6_V6ONLY')).toBe(v6only);
      six.bind('::', 15006);
      six.listen(8);
      const four = RawSocket.open(a.id, 'inet', 'stream');
      if (v6only === 1) {
        four.bind('0.0.0.0', 15006);
      } else {
        expect(thrown(() => four.bind('0.0.0.0', 15006)).code).toBe('EADDRINUSE');
      }
      four.close();
      six.close();
    }
  });
});

test('bind rejects an address literal of the wrong family before reaching the kernel', async () => {
  await withLab(async (lab) => {
    const a = await lab.ns('a');
    const s = RawSocket.open(a.id, 'inet', 'stream');
    const err = thrown(() => s.bind('fd00::1', 1));
    expect(err.errno).toBe(0);
    expect(err.message).toContain('not an IPv4 address literal');
    s.close();
  });
});

test('getsockname/getpeername and SO_ORIGINAL_DST of an accepted fd after an iptables REDIRECT (IPv4 and IPv6)', async () => {
  await withLab(async (lab) => {
    const a = await lab.ns('a');
    const { execIn } = await import('../../../e2e/netns/ip.js');
    // A veth pair with both ends in `a` gives the namespace routes to 10.244.0.0/24 and fd00::/64.
    await ipIn(a.name, ['link', 'add', 'd0', 'type', 'veth', 'peer', 'name', 'd1']);
    await ipIn(a.name, ['addr', 'add', '10.244.0.1/24', 'dev', 'd0']);
    await ipIn(a.name, ['addr', 'add', 'fd00::1/64', 'dev', 'd0', 'nodad']);
    await ipIn(a.name, ['link', 'set', 'd0', 'up']);
    await ipIn(a.name, ['link', 'set', 'd1', 'up']);
    await execIn(
      a.name,
      ['iptables-restore'],
      '*nat\n-A OUTPUT -p tcp -d 10.244.0.99 --dport 80 -j REDIRECT --to-ports 15001\nCOMMIT\n',
    );
    await execIn(
      a.name,
      ['ip6tables-restore'],
      '*nat\n-A OUTPUT -p tcp -d fd00::99 --dport 80 -j REDIRECT --to-ports 15001\nCOMMIT\n',
    );
    for (const [family, any, target, lo] of [
      ['inet', '0.0.0.0', '10.244.0.99', '127.0.0.1'],
      ['inet6', '::', 'fd00::99', '::1'],
    ] as const) {
      const l = RawSocket.open(a.id, family, 'stream');
      if (family === 'inet6') l.setOption('IPV6_V6ONLY', 1);
      l.bind(any, 15001);
      l.listen(8);
      const seen = new Promise<{ orig: unknown; local: unknown; peer: unknown; handleFd: boolean }>(
        (resolve, reject) => {
          const server = net.createServer((c) => {
            const fd = (c as unknown as { _handle: { fd: number } })._handle.fd;
            try {
              resolve({
                orig: fdCalls.originalDst(fd, a.id),
                local: fdCalls.localAddress(fd, a.id),
                peer: fdCalls.peerAddress(fd, a.id),
                handleFd: fd > 2,
              });
            } catch (e) {
              reject(e);
            }
            c.destroy();
            server.close();
          });
          server.listen({ fd: l.release() });
        },
      );
      const c = RawSocket.open(a.id, family, 'stream');
      const sock = new net.Socket({ fd: c.release() });
      const clientLocal = await new Promise<{ address: string; port: number }>((resolve, reject) => {
        sock.once('error', reject);
        sock.connect(80, target, () => resolve({ address: sock.localAddress ?? '', port: sock.localPort ?? 0 }));
      });
      const got = await seen;
      sock.destroy();
      expect(got.handleFd).toBe(true);
      expect(got.orig).toEqual({ family, address: target, port: 80 });
      expect(got.local).toEqual({ family, address: lo, port: 15001 });
      expect(got.peer).toEqual({ family, address: clientLocal.address, port: clientLocal.port });
    }
  });
});

test('SO_ORIGINAL_DST without any conntrack entry is ENOENT', async () => {
  await withLab(async (lab) => {
    const a = await lab.ns('a');
    // A fresh namespace has no NAT rules, so conntrack is not tracking its connections.
    const l = RawSocket.open(a.id, 'inet', 'stream');
    l.bind('127.0.0.1', 15001);
    l.listen(8);
    const code = new Promise<string>((resolve) => {
      const server = net.createServer((c) => {
        const fd = (c as unknown as { _handle: { fd: number } })._handle.fd;
        try {
          fdCalls.originalDst(fd, a.id);
          resolve('no error');
        } catch (e) {
          resolve(e instanceof NativeSocketError ? `${e.code} ${e.syscall}` : String(e));
        }
        c.destroy();
        server.close();
      });
      server.listen({ fd: l.release() });
    });
    const c = RawSocket.open(a.id, 'inet', 'stream');
    const s2 = new net.Socket({ fd: c.release() });
    s2.on('error', () => undefined);
    s2.connect(15001, '127.0.0.1');
    expect(await code).toBe('ENOENT getsockopt');
    s2.destroy();
  });
});

test('AF_PACKET raw sockets open inside a namespace (as root)', async () => {
  await withLab(async (lab) => {
    const a = await lab.ns('a');
    const p = RawSocket.open(a.id, 'packet', 'raw');
    expect(p.getOption('SO_DOMAIN')).toBe(17);
    expect(p.netnsInode()).toBe(a.inode);
    p.close();
  });
});
