/**
 * TPROXY (assign the packet to a transparent local socket, set the mark, keep the header) and
 * the re-route a mark change in mangle OUTPUT triggers (ip_route_me_harder).
 */
import { test, expect } from '@playwright/test';
import { formatSockAddr } from '../../../../sim/kernel/socket.js';
import { renderTrace } from '../../../../sim/kernel/trace.js';
import type { SimKernel } from '../../../../sim/kernel/kernel.js';
import { ADMIN, client, eventsOf, listenTcp, pair, table } from './world.js';

/** b intercepts TCP to port 80 (for any destination a routes through it) with TPROXY to 15006. */
function tproxyLab(): SimKernel {
  const k = pair();
  k.addRoute('a', { dst: '203.0.113.0/24', via: '192.0.2.2' });
  k.iptablesRestore(
    'b',
    4,
    table(
      'mangle',
      '-A PREROUTING -p tcp --dport 80 -j TPROXY --on-port 15006 --on-ip 127.0.0.1 --tproxy-mark 0x111/0xfff',
    ),
  );
  k.addRule('b', { family: 4, priority: 32764, fwmark: 0x111, mask: 0xfff, table: 100 });
  k.addRoute('b', { dst: '0.0.0.0/0', type: 'local', dev: 'lo', table: 100 });
  return k;
}

test('TPROXY hands the connection to a transparent listener, keeps the original destination and sets the mark', () => {
  const k = tproxyLab();
  const proxy = listenTcp(k, 'b', '0.0.0.0', 15006, { owner: ADMIN, transparent: true });
  const c = client(k, 'a');
  const r = k.connect(c, '203.0.113.50', 80);
  expect(r.outcome, renderTrace(r.trace)).toBe('established');
  expect(r.listener).toBe(proxy);
  // No header rewrite: the accepted socket's local address is the address the client dialled.
  expect(formatSockAddr(r.server!.local!)).toBe('203.0.113.50:80');
  expect(formatSockAddr(r.server!.remote!)).toBe(formatSockAddr(c.local!));
  expect(eventsOf(r.trace, 'mark').find((m) => m.ns === 'b')).toMatchObject({
    from: 0,
    to: 0x111,
    why: 'TPROXY --tproxy-mark',
  });
  // The mark then selects table 100, whose local default route delivers the packet here.
  expect(
    eventsOf(r.trace, 'route').some((e) => e.ns === 'b' && e.decision.includes('local via rule 32764 (table 100)')),
  ).toBe(true);
});

test('TPROXY drops the packet when the listener on the port is not transparent', () => {
  const k = tproxyLab();
  listenTcp(k, 'b', '0.0.0.0', 15006, { owner: ADMIN });
  const r = k.connect(client(k, 'a'), '203.0.113.50', 80);
  expect(r.outcome).toBe('timeout');
  expect(eventsOf(r.trace, 'drop')[0]).toMatchObject({
    ns: 'b',
    reason: 'TPROXY: no transparent socket for port 15006 (the kernel drops)',
  });
});

test('TPROXY drops the packet when no socket listens on the port at all (fail closed)', () => {
  const k = tproxyLab();
  const r = k.connect(client(k, 'a'), '203.0.113.50', 80);
  expect(r.outcome).toBe('timeout');
  expect(eventsOf(r.trace, 'drop')[0]!.reason).toContain('TPROXY');
});

/** a with two ways out (eth0 to b, eth1 to b) and 10.96.0.1 on b's lo. */
function twoPaths(): SimKernel {
  const k = pair();
  k.addVeth('a', 'eth1', 'b', 'eth1');
  k.addAddress('a', 'eth1', '198.51.100.1/24');
  k.addAddress('b', 'eth1', '198.51.100.2/24');
  k.setLink('a', 'eth1', true);
  k.setLink('b', 'eth1', true);
  k.addAddress('b', 'lo', '10.96.0.1/32');
  k.addRoute('a', { dst: '10.96.0.0/16', via: '192.0.2.2' });
  k.addRule('a', { family: 4, priority: 100, fwmark: 0x2, mask: 0xff, table: 100 });
  k.addRoute('a', { dst: '10.96.0.0/16', via: '198.51.100.2', table: 100 });
  listenTcp(k, 'b', '0.0.0.0', 80);
  return k;
}

test('a mark set in mangle OUTPUT re-routes the packet through fwmark policy routing', () => {
  const k = twoPaths();
  const before = k.connect(client(k, 'a'), '10.96.0.1', 80);
  expect(eventsOf(before.trace, 'xmit')[0]!.fromDev).toBe('eth0');
  k.iptablesRestore('a', 4, table('mangle', '-A OUTPUT -d 10.96.0.1/32 -j MARK --set-mark 0x2'));
  const r = k.connect(client(k, 'a'), '10.96.0.1', 80);
  expect(r.outcome, renderTrace(r.trace)).toBe('established');
  expect(eventsOf(r.trace, 'xmit')[0]!.fromDev).toBe('eth1');
  expect(
    eventsOf(r.trace, 'route').some(
      (e) =>
        e.ns === 'a' &&
        e.decision.startsWith('mangle OUTPUT changed the packet: re-route') &&
        e.decision.includes('table 100'),
    ),
  ).toBe(true);
});

test('a mark set in filter OUTPUT (after the re-route point) does not change the route', () => {
  const k = twoPaths();
  k.iptablesRestore('a', 4, table('filter', '-A OUTPUT -d 10.96.0.1/32 -j MARK --set-mark 0x2'));
  const r = k.connect(client(k, 'a'), '10.96.0.1', 80);
  expect(r.outcome, renderTrace(r.trace)).toBe('established');
  expect(eventsOf(r.trace, 'xmit')[0]!.fromDev).toBe('eth0');
});
