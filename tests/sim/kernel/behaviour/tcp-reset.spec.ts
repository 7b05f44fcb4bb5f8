/**
 * Kernel behaviour: a TCP segment that finds no connection is answered with a RST
 * (tcp_v4_send_reset / tcp_v6_send_reset) — also the handshake's final ACK, when rules send it
 * somewhere other than the accepting socket. A RST that gets back resets the client's fresh
 * connection: connect() fails with ECONNRESET (sim/kernel/tcp-reset.ts). Found by the
 * differential property (seed 20261130, IPv6). In IPv4 a RST from a non-local address needs a
 * transparent answering socket (seeds 20261201/20261202 of the long run; checked on Linux).
 */
import { test, expect } from '@playwright/test';
import { renderTrace } from '../../../../sim/kernel/trace.js';
import type { SimKernel } from '../../../../sim/kernel/kernel.js';
import type { Family } from '../../../../impl/api/ip/address.js';
import { ADMIN, client, eventsOf, listenTcp, pair, table } from './world.js';

/**
 * a's mesh-like rules: a new connection gets ctmark 0x111; later packets restore it as the packet
 * mark, and mark 0x111 selects table 100 (local default route). So the SYN leaves normally, but
 * the final ACK (and anything after) is re-routed to a's own lo.
 */
function restoreMarkLoop(family: Family): SimKernel {
  const k = pair();
  k.iptablesRestore(
    'a',
    family,
    table(
      'mangle',
      '-A OUTPUT -m connmark --mark 0x111/0xfff -j CONNMARK --restore-mark --nfmask 0xffffffff --ctmask 0xffffffff',
      '-A OUTPUT -p tcp -m connmark ! --mark 0x111/0xfff -j CONNMARK --set-xmark 0x111/0xfff',
    ),
  );
  k.addRule('a', { family, priority: 32764, fwmark: 0x111, mask: 0xfff, table: 100 });
  k.addRoute('a', { dst: family === 4 ? '0.0.0.0/0' : '::/0', type: 'local', dev: 'lo', table: 100 });
  return k;
}

test("IPv6: a final ACK re-routed to the client's own namespace finds no connection; its RST resets the client (ECONNRESET)", () => {
  const k = restoreMarkLoop(6);
  listenTcp(k, 'b', '::', 80);
  const c = client(k, 'a', { family: 6 });
  const r = k.connect(c, 'fd00::2', 80);
  expect(r.outcome, renderTrace(r.trace)).toBe('reset');
  expect(r.reason).toMatch(/^final ACK found no connection in a; the RST from a \(no socket\) reset the client/);
  expect(r.server).toBeUndefined();
  // The RST is sent by a itself, to the client's own address, with no socket mark.
  const rst = eventsOf(r.trace, 'packet').find((e) => e.packet.includes('[RST]'));
  expect(rst).toMatchObject({ ns: 'a' });
  expect(rst!.packet).toMatch(/mark 0x0$/);
  expect(c.state).toBe('closed');
});

test('IPv4: the same RST would leave from 192.0.2.2, not an address of a: it is never sent and the client times out', () => {
  const k = restoreMarkLoop(4);
  listenTcp(k, 'b', '0.0.0.0', 80);
  const r = k.connect(client(k, 'a'), '192.0.2.2', 80);
  expect(r.outcome, renderTrace(r.trace)).toBe('timeout');
  expect(r.reason).toContain('RST not sent: its source 192.0.2.2 is not a local address of a');
  expect(eventsOf(r.trace, 'packet').some((e) => e.packet.includes('[RST]'))).toBe(false);
});

test('IPv4: a transparent listener where the stray ACK lands may answer from the foreign address: the RST resets the client', () => {
  const k = restoreMarkLoop(4);
  listenTcp(k, 'b', '0.0.0.0', 80);
  listenTcp(k, 'a', '0.0.0.0', 80, { owner: ADMIN, transparent: true, label: 'transparent listener in a' });
  const r = k.connect(client(k, 'a'), '192.0.2.2', 80);
  expect(r.outcome, renderTrace(r.trace)).toBe('reset');
  expect(r.reason).toContain('"transparent listener in a"');
});
test("a listener on the port where the stray ACK lands answers it with a RST carrying the listener's SO_MARK", () => {
  const k = restoreMarkLoop(4);
  listenTcp(k, 'b', '0.0.0.0', 80);
  const local = k.socket('a', 'tcp', 4, ADMIN, 'marked listener in a');
  k.setsockopt(local, 'SO_MARK', 0x539);
  k.setsockopt(local, 'IP_TRANSPARENT', true); // so it may answer from the foreign address
  k.bind(local, '0.0.0.0', 80);
  k.listen(local);
  // raw OUTPUT runs before mangle's restore-mark: it still sees the listener's mark on the RST.
  k.iptablesRestore('a', 4, table('raw', '-A OUTPUT -p tcp -m mark --mark 0x539/0xfff -j DROP'));
  const r = k.connect(client(k, 'a'), '192.0.2.2', 80);
  expect(r.outcome, renderTrace(r.trace)).toBe('timeout');
  expect(r.reason).toContain('the RST from socket#');
  expect(r.reason).toContain('"marked listener in a"');
  expect(r.reason).toContain('did not reach the client (dropped in a: DROP in raw OUTPUT)');
});

test('a RST that is lost on the way back leaves the client to time out (the server never accepts)', () => {
  const k = restoreMarkLoop(6);
  listenTcp(k, 'b', '::', 80);
  k.iptablesRestore('a', 6, table('filter', '-A INPUT -i lo -p tcp --tcp-flags RST RST -j DROP'));
  const r = k.connect(client(k, 'a', { family: 6 }), 'fd00::2', 80);
  expect(r.outcome, renderTrace(r.trace)).toBe('timeout');
  expect(r.reason).toMatch(
    /^final ACK found no connection in a, and the RST from a \(no socket\) did not reach the client \(dropped in a/,
  );
});

test('without the re-route the same rules leave the handshake alone (the final ACK reaches b)', () => {
  const k = pair();
  k.iptablesRestore(
    'a',
    4,
    table('mangle', '-A OUTPUT -p tcp -m connmark ! --mark 0x111/0xfff -j CONNMARK --set-xmark 0x111/0xfff'),
  );
  listenTcp(k, 'b', '0.0.0.0', 80);
  expect(k.connect(client(k, 'a'), '192.0.2.2', 80).outcome).toBe('established');
});
