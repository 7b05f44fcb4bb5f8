/**
 * Namespaces and devices: veth pairs join namespaces, bridges switch between their ports at
 * layer 2, a down link carries nothing, and deleting a namespace takes its veth peers along.
 */
import { test, expect } from '@playwright/test';
import { SimKernel } from '../../../../sim/kernel/kernel.js';
import { renderTrace } from '../../../../sim/kernel/trace.js';
import { ADMIN, client, eventsOf, listenTcp, pair, table, tablesRun } from './world.js';

test('a veth pair carries a TCP connection between two namespaces', () => {
  const k = pair();
  const srv = listenTcp(k, 'b', '0.0.0.0', 80);
  const r = k.connect(client(k, 'a'), '192.0.2.2', 80);
  expect(r.outcome, renderTrace(r.trace)).toBe('established');
  expect(r.listener).toBe(srv);
  const x = eventsOf(r.trace, 'xmit')[0]!;
  expect([x.fromNs, x.fromDev, x.toNs, x.toDev]).toEqual(['a', 'eth0', 'b', 'eth0']);
});

test('a bridge switches frames between its ports without running the bridge namespace iptables', () => {
  const k = new SimKernel();
  k.addNetns('host');
  k.addBridge('host', 'br0');
  k.setLink('host', 'br0', true);
  for (const [ns, dev, ip] of [
    ['p1', 'v1', '10.244.0.11'],
    ['p2', 'v2', '10.244.0.12'],
  ] as const) {
    k.addNetns(ns);
    k.addVeth(ns, 'eth0', 'host', dev);
    k.setMaster('host', dev, 'br0');
    k.addAddress(ns, 'eth0', `${ip}/24`);
    k.setLink(ns, 'eth0', true);
    k.setLink('host', dev, true);
  }
  // Without br_netfilter, a DROP everything in the host's filter/raw tables does not see switched frames.
  k.iptablesRestore(
    'host',
    4,
    table('raw', '-A PREROUTING -j DROP') +
      table('filter', ':FORWARD DROP [0:0]', '-A FORWARD -j DROP', '-A INPUT -j DROP'),
  );
  const srv = listenTcp(k, 'p2', '0.0.0.0', 80);
  const r = k.connect(client(k, 'p1'), '10.244.0.12', 80);
  expect(r.outcome, renderTrace(r.trace)).toBe('established');
  expect(r.listener).toBe(srv);
  expect(tablesRun(r.trace).filter((t) => t.startsWith('host '))).toEqual([]);
  expect(eventsOf(r.trace, 'route').some((e) => e.ns === 'host' && e.decision.includes('switched v1 -> v2'))).toBe(
    true,
  );
});

test('a packet addressed to the bridge itself goes up the host stack (and its iptables)', () => {
  const k = new SimKernel();
  k.addNetns('host');
  k.setLink('host', 'lo', true);
  k.addBridge('host', 'br0');
  k.addAddress('host', 'br0', '10.244.0.1/24');
  k.setLink('host', 'br0', true);
  k.addNetns('p1');
  k.addVeth('p1', 'eth0', 'host', 'v1');
  k.setMaster('host', 'v1', 'br0');
  k.addAddress('p1', 'eth0', '10.244.0.11/24');
  k.setLink('p1', 'eth0', true);
  k.setLink('host', 'v1', true);
  listenTcp(k, 'host', '0.0.0.0', 80);
  k.iptablesRestore('host', 4, table('filter', '-A INPUT -i br0 -p tcp --dport 80 -j DROP'));
  const r = k.connect(client(k, 'p1'), '10.244.0.1', 80);
  expect(r.outcome).toBe('timeout');
  expect(eventsOf(r.trace, 'drop').map((d) => d.reason)).toContain('DROP in filter INPUT');
});

test('a link that is down carries nothing: the connection times out', () => {
  const k = pair();
  listenTcp(k, 'b', '0.0.0.0', 80);
  k.setLink('b', 'eth0', false);
  const r = k.connect(client(k, 'a'), '192.0.2.2', 80);
  expect(r.outcome).toBe('timeout');
  expect(eventsOf(r.trace, 'drop')[0]!.reason).toContain('eth0 is down');
});

test('bringing a link down removes its prefix route: the sender has no route', () => {
  const k = pair();
  k.setLink('a', 'eth0', false);
  const r = k.connect(client(k, 'a'), '192.0.2.2', 80);
  expect(r.outcome).toBe('unreachable');
});

test('deleting a namespace removes the veth peer in the other namespace, and its routes', () => {
  const k = pair();
  expect(k.netns('a').links.has('eth0')).toBe(true);
  k.deleteNetns('b');
  expect(k.hasNetns('b')).toBe(false);
  expect(k.netns('a').links.has('eth0')).toBe(false);
  expect(
    k
      .netns('a')
      .routes.all()
      .some((r) => r.dev === 'eth0'),
  ).toBe(false);
  const r = k.connect(client(k, 'a'), '192.0.2.2', 80);
  expect(r.outcome).toBe('unreachable');
});

test('a new namespace has only lo, and lo starts down', () => {
  const k = new SimKernel();
  const n = k.addNetns('x');
  expect([...n.links.keys()]).toEqual(['lo']);
  expect(n.link('lo').up).toBe(false);
  // With lo down, 127.0.0.1 is not routable.
  const r = k.connect(k.socket('x', 'tcp', 4, ADMIN), '127.0.0.1', 80);
  expect(r.outcome).toBe('unreachable');
});
