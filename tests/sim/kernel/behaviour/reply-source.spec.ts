/**
 * Kernel behaviour: the SYN-ACK leaves from the address the SYN was sent to
 * (inet_csk_route_req). In IPv4 that source must be a local address unless the listener is
 * IP_TRANSPARENT (FLOWI_FLAG_ANYSRC); otherwise the route lookup fails and no SYN-ACK is sent.
 * IPv6 has no such check. Found by the differential property (seed 20261202); the IPv6 half was
 * checked on the real kernel (same lab with ip6tables: established).
 */
import { test, expect } from '@playwright/test';
import { renderTrace } from '../../../../sim/kernel/trace.js';
import type { SimKernel } from '../../../../sim/kernel/kernel.js';
import type { Family } from '../../../../impl/api/ip/address.js';
import { ADMIN, client, listenTcp, pair, table } from './world.js';

/** In a, every TCP packet gets mark 0x111, which selects a local default route: a SYN to any address is delivered to a itself. */
function loopEverything(family: Family): SimKernel {
  const k = pair();
  k.addRoute(
    'a',
    family === 4 ? { dst: 'default', family: 4, via: '192.0.2.2' } : { dst: 'default', family: 6, via: 'fd00::2' },
  );
  k.iptablesRestore('a', family, table('mangle', '-A OUTPUT -p tcp -j MARK --set-xmark 0x111/0xfff'));
  k.addRule('a', { family, priority: 32764, fwmark: 0x111, mask: 0xfff, table: 100 });
  k.addRoute('a', { dst: family === 4 ? '0.0.0.0/0' : '::/0', type: 'local', dev: 'lo', table: 100 });
  return k;
}

test('IPv4: a SYN to a foreign address that reaches a plain listener gets no SYN-ACK (the source is not local): timeout', () => {
  const k = loopEverything(4);
  listenTcp(k, 'a', '0.0.0.0', 80);
  const r = k.connect(client(k, 'a'), '198.51.100.7', 80);
  expect(r.outcome, renderTrace(r.trace)).toBe('timeout');
  expect(r.reason).toContain('source 198.51.100.7 is not a local address of a');
});

test('IPv4: the same SYN reaching an IP_TRANSPARENT listener is answered (established, local address = the foreign address)', () => {
  const k = loopEverything(4);
  listenTcp(k, 'a', '0.0.0.0', 80, { owner: ADMIN, transparent: true });
  const r = k.connect(client(k, 'a'), '198.51.100.7', 80);
  expect(r.outcome, renderTrace(r.trace)).toBe('established');
  expect(r.server?.local?.addr).toEqual({ family: 4, value: 0xc6336407n });
});

test("IPv4: a SYN to one of the namespace's own addresses is answered by a plain listener as usual", () => {
  const k = loopEverything(4);
  listenTcp(k, 'a', '0.0.0.0', 80);
  expect(k.connect(client(k, 'a'), '192.0.2.1', 80).outcome).toBe('established');
});

test('IPv6 has no source check: a plain listener answers a SYN to a foreign address', () => {
  const k = loopEverything(6);
  listenTcp(k, 'a', '::', 80);
  const r = k.connect(client(k, 'a', { family: 6 }), 'fd00:99::7', 80);
  expect(r.outcome, renderTrace(r.trace)).toBe('established');
});
