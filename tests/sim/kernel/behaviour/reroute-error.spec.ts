/**
 * Kernel behaviour: when a hook changes a locally generated packet (mangle OUTPUT mark, nat
 * OUTPUT destination) the kernel re-routes it (ip_route_me_harder); if that fails, the packet
 * is dropped with the error (NF_DROP_ERR). TCP ignores a SYN's transmit error and retransmits,
 * so connect() times out — unlike a failure of connect's own route lookup, which connect()
 * reports at once. UDP's sendmsg() does report it. Found by the differential property
 * (seed 20261201).
 */
import { test, expect } from '@playwright/test';
import { renderTrace } from '../../../../sim/kernel/trace.js';
import { USER, client, listenTcp, pair, table } from './world.js';

test('a SYN from 127.0.0.1 DNATed in nat OUTPUT to another host cannot leave with a loopback source: dropped, connect() times out', () => {
  const k = pair();
  listenTcp(k, 'b', '0.0.0.0', 80);
  k.iptablesRestore('a', 4, table('nat', '-A OUTPUT -p tcp -d 127.0.0.1 -j DNAT --to-destination 192.0.2.2'));
  const r = k.connect(client(k, 'a'), '127.0.0.1', 80);
  expect(r.outcome, renderTrace(r.trace)).toBe('timeout');
  expect(r.reason).toMatch(
    /^SYN dropped in a: re-route after nat OUTPUT: loopback source 127\.0\.0\.1 may not leave by eth0/,
  );
});

test('a re-route after mangle OUTPUT that finds no route: the SYN is dropped and connect() times out', () => {
  const k = pair();
  k.iptablesRestore('a', 4, table('mangle', '-A OUTPUT -p tcp -j MARK --set-xmark 0x7/0xff'));
  k.addRule('a', { family: 4, priority: 100, fwmark: 0x7, mask: 0xff, table: 7, action: 'unreachable' });
  const r = k.connect(client(k, 'a'), '192.0.2.2', 80);
  expect(r.outcome, renderTrace(r.trace)).toBe('timeout');
  expect(r.reason).toContain('re-route after mangle OUTPUT');
});

test("the same route failure in connect's own lookup is reported at once: unreachable", () => {
  const k = pair();
  const r = k.connect(client(k, 'a'), '203.0.113.9', 80);
  expect(r.outcome).toBe('unreachable');
});

test('UDP: sendmsg() reports the re-route error (unreachable), it is not silently lost', () => {
  const k = pair();
  k.iptablesRestore('a', 4, table('nat', '-A OUTPUT -p udp -d 127.0.0.1 -j DNAT --to-destination 192.0.2.2'));
  const s = k.socket('a', 'udp', 4, USER, 'udp client');
  const r = k.sendUdp(s, '127.0.0.1', 53, 'q');
  expect(r.outcome, renderTrace(r.trace)).toBe('unreachable');
});
