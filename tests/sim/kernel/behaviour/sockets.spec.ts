/**
 * Sockets: bind rules and listener choice, capability checks (by kernel version), original
 * destination, addresses each end sees, dual-stack listeners, UDP, and AF_PACKET sends.
 */
import { test, expect } from '@playwright/test';
import { SimErrnoError } from '../../../../sim/kernel/errors.js';
import { formatIp } from '../../../../impl/api/ip/address.js';
import { formatSockAddr } from '../../../../sim/kernel/socket.js';
import { renderTrace } from '../../../../sim/kernel/trace.js';
import type { Credentials } from '../../../../sim/kernel/process.js';
import type { SockOpt, SimKernel } from '../../../../sim/kernel/kernel.js';
import {
  ADMIN,
  ADMIN_ONLY,
  OTHER_USER,
  RAW_ONLY,
  USER,
  client,
  conntrackOn,
  eventsOf,
  listenTcp,
  pair,
  table,
} from './world.js';

function errnoOf(f: () => unknown): string | undefined {
  try {
    f();
    return undefined;
  } catch (e) {
    if (e instanceof SimErrnoError) return e.errno;
    throw e;
  }
}

function setopt(k: SimKernel, who: Credentials, opt: SockOpt, value: number | boolean): string {
  const s = k.socket('a', 'tcp', 4, who);
  return errnoOf(() => k.setsockopt(s, opt, value)) ?? 'ok';
}

test('a listener bound to a specific address wins over a wildcard listener on the same port', () => {
  const k = pair();
  const wild = listenTcp(k, 'b', '0.0.0.0', 80, { reusePort: true, label: 'wildcard' });
  const specific = listenTcp(k, 'b', '192.0.2.2', 80, { reusePort: true, label: 'specific' });
  for (let i = 0; i < 4; i++) expect(k.connect(client(k, 'a'), '192.0.2.2', 80).listener).toBe(specific);
  // Addresses the specific socket does not cover still reach the wildcard one.
  expect(k.connect(client(k, 'b'), '127.0.0.1', 80).listener).toBe(wild);
});

test('binding the same address and port twice is EADDRINUSE, and so is a specific bind under a wildcard one', () => {
  const k = pair();
  listenTcp(k, 'b', '0.0.0.0', 80);
  expect(errnoOf(() => k.bind(k.socket('b', 'tcp', 4, USER), '0.0.0.0', 80))).toBe('EADDRINUSE');
  expect(errnoOf(() => k.bind(k.socket('b', 'tcp', 4, USER), '192.0.2.2', 80))).toBe('EADDRINUSE');
  // Other port, other protocol: free.
  expect(errnoOf(() => k.bind(k.socket('b', 'tcp', 4, USER), '192.0.2.2', 81))).toBeUndefined();
  expect(errnoOf(() => k.bind(k.socket('b', 'udp', 4, USER), '0.0.0.0', 80))).toBeUndefined();
});

test('SO_REUSEPORT lets sockets of the same uid share a port, and the group shares the connections', () => {
  const k = pair();
  const one = listenTcp(k, 'b', '0.0.0.0', 80, { reusePort: true, label: 'one' });
  const two = listenTcp(k, 'b', '0.0.0.0', 80, { reusePort: true, label: 'two' });
  const chosen = new Set<unknown>();
  for (let i = 0; i < 16; i++) {
    const r = k.connect(client(k, 'a'), '192.0.2.2', 80);
    expect(r.outcome).toBe('established');
    chosen.add(r.listener);
  }
  expect(chosen).toEqual(new Set([one, two]));
});

test('SO_REUSEPORT does not let a different uid join the group: EADDRINUSE', () => {
  const k = pair();
  listenTcp(k, 'b', '0.0.0.0', 80, { reusePort: true, owner: USER });
  const other = k.socket('b', 'tcp', 4, OTHER_USER);
  k.setsockopt(other, 'SO_REUSEPORT', true);
  expect(errnoOf(() => k.bind(other, '0.0.0.0', 80))).toBe('EADDRINUSE');
  // Nor a socket of the same uid that did not set SO_REUSEPORT itself.
  expect(errnoOf(() => k.bind(k.socket('b', 'tcp', 4, USER), '0.0.0.0', 80))).toBe('EADDRINUSE');
});

test('SO_MARK needs CAP_NET_ADMIN; CAP_NET_RAW suffices only from Linux 5.17 (5.15 vs 6.1)', () => {
  const old = pair({ kernelVersion: '5.15' });
  const cur = pair({ kernelVersion: '6.1' });
  expect(setopt(old, USER, 'SO_MARK', 0x539)).toBe('EPERM');
  expect(setopt(cur, USER, 'SO_MARK', 0x539)).toBe('EPERM');
  expect(setopt(old, ADMIN_ONLY, 'SO_MARK', 0x539)).toBe('ok');
  expect(setopt(cur, ADMIN_ONLY, 'SO_MARK', 0x539)).toBe('ok');
  expect(setopt(old, RAW_ONLY, 'SO_MARK', 0x539)).toBe('EPERM');
  expect(setopt(cur, RAW_ONLY, 'SO_MARK', 0x539)).toBe('ok');
});

test('a socket mark is carried by every packet the socket sends', () => {
  const k = pair();
  k.iptablesRestore('a', 4, table('filter', '-A OUTPUT -m mark --mark 0x539 -j DROP'));
  listenTcp(k, 'b', '0.0.0.0', 80);
  expect(k.connect(client(k, 'a', { mark: 0x539 }), '192.0.2.2', 80).outcome).toBe('timeout');
  expect(k.connect(client(k, 'a', { mark: 0x538 }), '192.0.2.2', 80).outcome).toBe('established');
});

test('IP_TRANSPARENT needs CAP_NET_ADMIN or CAP_NET_RAW', () => {
  for (const v of ['5.15', '6.1']) {
    const k = pair({ kernelVersion: v });
    expect(setopt(k, USER, 'IP_TRANSPARENT', true)).toBe('EPERM');
    expect(setopt(k, RAW_ONLY, 'IP_TRANSPARENT', true)).toBe('ok');
    expect(setopt(k, ADMIN_ONLY, 'IP_TRANSPARENT', true)).toBe('ok');
  }
});

test('binding an address the namespace does not have is EADDRNOTAVAIL unless the socket is transparent', () => {
  const k = pair();
  expect(errnoOf(() => k.bind(k.socket('a', 'tcp', 4, ADMIN), '203.0.113.7', 0))).toBe('EADDRNOTAVAIL');
  expect(errnoOf(() => k.bind(k.socket('a', 'tcp', 4, ADMIN), '192.0.2.2', 0))).toBe('EADDRNOTAVAIL');
  const t = k.socket('a', 'tcp', 4, ADMIN);
  k.setsockopt(t, 'IP_TRANSPARENT', true);
  expect(errnoOf(() => k.bind(t, '203.0.113.7', 0))).toBeUndefined();
  expect(formatIp(t.local!.addr)).toBe('203.0.113.7');
});

test('the client and the accepted socket see each other as local and peer addresses', () => {
  const k = pair();
  listenTcp(k, 'b', '0.0.0.0', 80);
  const c = client(k, 'a');
  const r = k.connect(c, '192.0.2.2', 80);
  expect(formatSockAddr(c.local!)).toBe('192.0.2.1:32768'); // lowest ephemeral port, source of the route
  expect(formatSockAddr(c.remote!)).toBe('192.0.2.2:80');
  expect(formatSockAddr(r.server!.local!)).toBe('192.0.2.2:80');
  expect(formatSockAddr(r.server!.remote!)).toBe('192.0.2.1:32768');
  const c6 = client(k, 'a', { family: 6 });
  const r6 = k.connect(c6, 'fd00::2', 80);
  expect(r6.outcome).toBe('refused'); // the v4 wildcard listener does not take IPv6
});

test('SO_ORIGINAL_DST returns the pre-NAT destination for IPv4 and IPv6, and the real one without NAT', () => {
  const k = pair();
  for (const fam of [4, 6] as const)
    k.iptablesRestore('b', fam, table('nat', '-A PREROUTING -p tcp --dport 80 -j REDIRECT --to-ports 15006'));
  listenTcp(k, 'b', '::', 15006);
  const r4 = k.connect(client(k, 'a'), '192.0.2.2', 80);
  const r6 = k.connect(client(k, 'a', { family: 6 }), 'fd00::2', 80);
  expect(formatSockAddr(k.originalDst(r4.server!))).toBe('192.0.2.2:80');
  expect(formatSockAddr(k.originalDst(r6.server!))).toBe('[fd00::2]:80');
  expect(formatSockAddr(r6.server!.local!)).toBe('[fd00::2]:15006');
  // The client's own socket: a has no rule that needs conntrack, so there is no entry (ENOENT,
  // as on Linux); once a tracks, its entry (not NATed) gives the real destination.
  expect(errnoOf(() => k.originalDst(r4.client))).toBe('ENOENT');
  conntrackOn(k, 'a', [4]);
  const tracked = k.connect(client(k, 'a'), '192.0.2.2', 80);
  expect(formatSockAddr(k.originalDst(tracked.client))).toBe('192.0.2.2:80');
});

test('SO_ORIGINAL_DST fails with ENOENT for an untracked connection', () => {
  const k = pair();
  k.iptablesRestore(
    'b',
    4,
    table('raw', '-A PREROUTING -p tcp --dport 80 -j CT --notrack', '-A OUTPUT -p tcp --sport 80 -j CT --notrack'),
  );
  listenTcp(k, 'b', '0.0.0.0', 80);
  const r = k.connect(client(k, 'a'), '192.0.2.2', 80);
  expect(r.outcome, renderTrace(r.trace)).toBe('established');
  expect(errnoOf(() => k.originalDst(r.server!))).toBe('ENOENT');
});

test('SO_ORIGINAL_DST looks only in zone 0: a connection tracked in another zone gives ENOENT', () => {
  const k = pair();
  k.iptablesRestore(
    'b',
    4,
    table('raw', '-A PREROUTING -i eth0 -j CT --zone 7', '-A OUTPUT -o eth0 -j CT --zone 7') +
      table('nat', '-A PREROUTING -p tcp --dport 80 -j REDIRECT --to-ports 15006'),
  );
  const proxy = listenTcp(k, 'b', '0.0.0.0', 15006);
  const r = k.connect(client(k, 'a'), '192.0.2.2', 80);
  expect(r.outcome, renderTrace(r.trace)).toBe('established');
  expect(r.listener).toBe(proxy); // NAT works within the zone
  expect(errnoOf(() => k.originalDst(r.server!))).toBe('ENOENT');
});

test('an IPv6 wildcard listener accepts IPv4 connections unless IPV6_V6ONLY is set', () => {
  const k = pair();
  const dual = listenTcp(k, 'b', '::', 80);
  const c = client(k, 'a');
  const r = k.connect(c, '192.0.2.2', 80);
  expect(r.outcome, renderTrace(r.trace)).toBe('established');
  expect(r.listener).toBe(dual);
  // The tables keep the packets' IPv4 addresses; the socket API reports them v4-mapped, as
  // getpeername/getsockname do on Linux for an IPv4 connection on an AF_INET6 socket.
  expect(formatSockAddr(r.server!.remote!)).toBe(formatSockAddr(c.local!));
  expect(formatSockAddr(r.server!.reported(r.server!.local!))).toBe('[::ffff:192.0.2.2]:80');
  expect(formatSockAddr(r.server!.reported(r.server!.remote!))).toBe(`[::ffff:192.0.2.1]:${c.local!.port}`);
  // The client's own AF_INET socket reports plain IPv4.
  expect(formatSockAddr(c.reported(c.local!))).toBe(formatSockAddr(c.local!));

  const k2 = pair();
  listenTcp(k2, 'b', '::', 80, { v6only: true });
  expect(k2.connect(client(k2, 'a'), '192.0.2.2', 80).outcome).toBe('refused');
  expect(k2.connect(client(k2, 'a', { family: 6 }), 'fd00::2', 80).outcome).toBe('established');
});

test('an IPv6 wildcard bind without IPV6_V6ONLY conflicts with an IPv4 wildcard bind on the port', () => {
  const k = pair();
  listenTcp(k, 'b', '0.0.0.0', 80);
  expect(errnoOf(() => k.bind(k.socket('b', 'tcp', 6, USER), '::', 80))).toBe('EADDRINUSE');
  const v6only = k.socket('b', 'tcp', 6, USER);
  k.setsockopt(v6only, 'IPV6_V6ONLY', true);
  expect(errnoOf(() => k.bind(v6only, '::', 80))).toBeUndefined();
});

test('a UDP datagram reaches the bound socket with the sender address; with no socket it is reported as such', () => {
  const k = pair();
  const rx = k.socket('b', 'udp', 4, USER, 'dns');
  k.bind(rx, '0.0.0.0', 53);
  const tx = client(k, 'a', { proto: 'udp' });
  const r = k.sendUdp(tx, '192.0.2.2', 53, 'query');
  expect(r.outcome, renderTrace(r.trace)).toBe('delivered');
  expect(r.socket).toBe(rx);
  expect(rx.inbox).toHaveLength(1);
  expect(rx.inbox[0]!.payload).toBe('query');
  // The unconnected sender is bound to 0.0.0.0:port; the datagram carries the route's source.
  expect(formatSockAddr(tx.local!)).toBe('0.0.0.0:32768');
  expect(formatSockAddr(rx.inbox[0]!.from)).toBe('192.0.2.1:32768');
  const none = k.sendUdp(tx, '192.0.2.2', 54, 'nobody');
  expect(none.outcome).toBe('no-socket');
  k.iptablesRestore('b', 4, table('filter', '-A INPUT -p udp --dport 53 -j DROP'));
  expect(k.sendUdp(tx, '192.0.2.2', 53, 'dropped').outcome).toBe('dropped');
  expect(rx.inbox).toHaveLength(1);
});

test('an AF_PACKET send skips the sender namespace netfilter (a DROP in OUTPUT is bypassed)', () => {
  const k = pair();
  k.iptablesRestore('a', 4, table('filter', '-A OUTPUT -j DROP'));
  const srv = k.socket('b', 'udp', 4, USER);
  k.bind(srv, '0.0.0.0', 9999);
  const viaSocket = k.sendUdp(client(k, 'a', { proto: 'udp' }), '192.0.2.2', 9999, 'x');
  expect(viaSocket.outcome).toBe('dropped');
  const raw = k.sendRaw('a', RAW_ONLY, 'eth0', {
    proto: 'udp',
    src: '192.0.2.1',
    sport: 1234,
    dst: '192.0.2.2',
    dport: 9999,
  });
  expect(raw.delivery, renderTrace(raw.trace)).toBe('delivered');
  expect(raw.socket).toBe(srv);
  expect(eventsOf(raw.trace, 'table').filter((e) => e.ns === 'a')).toEqual([]);
});

test('an AF_PACKET send still meets the receiving namespace netfilter', () => {
  const k = pair();
  k.iptablesRestore('b', 4, table('filter', '-A INPUT -p udp -j DROP'));
  const srv = k.socket('b', 'udp', 4, USER);
  k.bind(srv, '0.0.0.0', 9999);
  const raw = k.sendRaw('a', RAW_ONLY, 'eth0', {
    proto: 'udp',
    src: '192.0.2.1',
    sport: 1234,
    dst: '192.0.2.2',
    dport: 9999,
  });
  expect(raw.delivery).toBe('dropped');
});

test('an AF_PACKET send needs CAP_NET_RAW: EPERM otherwise, even with CAP_NET_ADMIN', () => {
  const k = pair();
  const spec = { proto: 'udp' as const, src: '192.0.2.1', sport: 1, dst: '192.0.2.2', dport: 9 };
  expect(errnoOf(() => k.sendRaw('a', USER, 'eth0', spec))).toBe('EPERM');
  expect(errnoOf(() => k.sendRaw('a', ADMIN_ONLY, 'eth0', spec))).toBe('EPERM');
  expect(errnoOf(() => k.sendRaw('a', RAW_ONLY, 'eth0', spec))).toBeUndefined();
});

test('SO_REUSEADDR on both lets two UDP sockets bind one port, but not two TCP listeners', () => {
  // Checked on Linux 6.x: the second UDP bind succeeds.
  const k = pair();
  const udp = (): ReturnType<SimKernel['socket']> => {
    const s = k.socket('b', 'udp', 4, USER);
    k.setsockopt(s, 'SO_REUSEADDR', true);
    return s;
  };
  k.bind(udp(), '0.0.0.0', 5353);
  expect(errnoOf(() => k.bind(udp(), '0.0.0.0', 5353))).toBeUndefined();
  const tcp = (): ReturnType<SimKernel['socket']> => {
    const s = k.socket('b', 'tcp', 4, USER);
    k.setsockopt(s, 'SO_REUSEADDR', true);
    return s;
  };
  const first = tcp();
  k.bind(first, '0.0.0.0', 80);
  k.listen(first);
  expect(errnoOf(() => k.bind(tcp(), '0.0.0.0', 80))).toBe('EADDRINUSE');
});
