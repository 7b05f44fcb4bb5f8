/**
 * Addresses, routes, policy rules and forwarding: what `ip addr/route/rule` and
 * net.ipv4.ip_forward do to the path a packet takes.
 */
import { test, expect } from '@playwright/test';
import { fibLookup } from '../../../../sim/kernel/fib.js';
import { formatIp, parseIp } from '../../../../impl/api/ip/address.js';
import { formatRoute, TABLE_DEFAULT, TABLE_LOCAL, TABLE_MAIN } from '../../../../sim/kernel/route.js';
import { formatRule } from '../../../../sim/kernel/policy-rule.js';
import { renderTrace } from '../../../../sim/kernel/trace.js';
import type { SimKernel } from '../../../../sim/kernel/kernel.js';
import { ADMIN, client, eventsOf, listenTcp, pair, routed } from './world.js';

/** pair() plus a second link a:eth1 (198.51.100.1/24) <-> b:eth1 (198.51.100.2/24). */
function twoLinks(): SimKernel {
  const k = pair();
  k.addVeth('a', 'eth1', 'b', 'eth1');
  k.addAddress('a', 'eth1', '198.51.100.1/24');
  k.addAddress('b', 'eth1', '198.51.100.2/24');
  k.setLink('a', 'eth1', true);
  k.setLink('b', 'eth1', true);
  return k;
}

function lookup(
  k: SimKernel,
  ns: string,
  dst: string,
  mark = 0,
  iif?: string,
): { kind: string; dev?: string; via?: string; table?: number } {
  const d = fibLookup(k.netns(ns), {
    family: parseIp(dst).family,
    src: undefined,
    dst: parseIp(dst),
    mark,
    iif,
    oif: undefined,
  });
  if (d.kind === 'unicast' || d.kind === 'local')
    return { kind: d.kind, dev: d.dev, via: formatIp(d.nextHop), table: d.route.table };
  return { kind: d.kind };
}

test('adding an address installs a local route in table local and, with the link up, a prefix route in main', () => {
  const k = pair();
  const routes = k
    .netns('a')
    .routes.all()
    .filter((r) => r.dev === 'eth0')
    .map(formatRoute);
  expect(routes).toContain('local 192.0.2.1 dev eth0 table local proto kernel src 192.0.2.1');
  expect(routes).toContain('192.0.2.0/24 dev eth0 proto kernel src 192.0.2.1');
  expect(routes).toContain('local fd00::1 dev eth0 table local proto kernel src fd00::1');
  expect(routes).toContain('fd00::/64 dev eth0 proto kernel src fd00::1 metric 256');
  expect(lookup(k, 'a', '192.0.2.1')).toMatchObject({ kind: 'local', table: TABLE_LOCAL });
  expect(lookup(k, 'a', '192.0.2.77')).toMatchObject({
    kind: 'unicast',
    dev: 'eth0',
    via: '192.0.2.77',
    table: TABLE_MAIN,
  });
});

test('the longest matching prefix wins over a shorter one', () => {
  const k = twoLinks();
  k.addRoute('a', { dst: '10.96.0.0/16', via: '192.0.2.2' });
  k.addRoute('a', { dst: '10.96.1.0/24', via: '198.51.100.2' });
  expect(lookup(k, 'a', '10.96.1.5')).toMatchObject({ dev: 'eth1', via: '198.51.100.2' });
  expect(lookup(k, 'a', '10.96.2.5')).toMatchObject({ dev: 'eth0', via: '192.0.2.2' });
});

test('between routes of equal prefix the lower metric wins', () => {
  const k = twoLinks();
  k.addRoute('a', { dst: '10.96.0.0/16', via: '192.0.2.2', metric: 200 });
  k.addRoute('a', { dst: '10.96.0.0/16', via: '198.51.100.2', metric: 100 });
  expect(lookup(k, 'a', '10.96.3.3')).toMatchObject({ dev: 'eth1', via: '198.51.100.2' });
});

test('a default route via a gateway sends off-link traffic to the gateway as next hop', () => {
  const k = routed();
  expect(lookup(k, 'c', '203.0.113.2')).toMatchObject({ kind: 'unicast', dev: 'eth0', via: '198.51.100.1' });
  expect(lookup(k, 'c', 'fd00:5::2')).toMatchObject({ kind: 'unicast', dev: 'eth0', via: 'fd00:c::1' });
  const srv = listenTcp(k, 's', '0.0.0.0', 80);
  const r = k.connect(client(k, 'c'), '203.0.113.2', 80);
  expect(r.outcome, renderTrace(r.trace)).toBe('established');
  expect(r.listener).toBe(srv);
  expect(eventsOf(r.trace, 'route').find((e) => e.ns === 'c')!.decision).toContain('default via 198.51.100.1 dev eth0');
});

test('a `local 0.0.0.0/0 dev lo` route in table 100 makes any address local for packets the rule selects', () => {
  const k = pair();
  k.addRule('a', { family: 4, priority: 32764, fwmark: 0x111, mask: 0xfff, table: 100 });
  k.addRoute('a', { dst: '0.0.0.0/0', type: 'local', dev: 'lo', table: 100 });
  expect(lookup(k, 'a', '203.0.113.9', 0x111)).toMatchObject({ kind: 'local', table: 100, dev: 'lo' });
  expect(lookup(k, 'a', '203.0.113.9', 0)).toEqual({ kind: 'unreachable' });
  // A marked connection to a foreign address is delivered to a local wildcard listener (AnyIP).
  // The listener carries the mark too: its SYN-ACK back to 203.0.113.9 needs the same rule. It
  // must be IP_TRANSPARENT as well: the SYN-ACK's source 203.0.113.9 is not local (reply-source.spec.ts).
  const srv = k.socket('a', 'tcp', 4, ADMIN, 'anyip listener');
  k.setsockopt(srv, 'SO_MARK', 0x111);
  k.setsockopt(srv, 'IP_TRANSPARENT', true);
  k.bind(srv, '0.0.0.0', 80);
  k.listen(srv);
  // The route lookup picks the destination as source (local route without prefsrc); that source
  // is no address of the namespace, so without IP_TRANSPARENT the kernel refuses: ENETUNREACH
  // (ip_route_output_key_hash_rcu; found by the differential test against Linux).
  const plain = k.connect(client(k, 'a', { mark: 0x111 }), '203.0.113.9', 80);
  expect(plain.outcome).toBe('unreachable');
  expect(plain.reason).toContain('ENETUNREACH');
  const transparent = client(k, 'a', { mark: 0x111 });
  k.setsockopt(transparent, 'IP_TRANSPARENT', true);
  const r = k.connect(transparent, '203.0.113.9', 80);
  expect(r.outcome, renderTrace(r.trace)).toBe('established');
  expect(r.listener).toBe(srv);
  expect(formatIp(r.server!.local!.addr)).toBe('203.0.113.9');
  // A plain (not transparent) AnyIP listener gets the SYN but cannot answer it (checked on the real
  // kernel with the equivalent lab file: timeout).
  const plainSrv = k.socket('a', 'tcp', 4, ADMIN, 'plain anyip listener');
  k.setsockopt(plainSrv, 'SO_MARK', 0x111);
  k.bind(plainSrv, '0.0.0.0', 81);
  k.listen(plainSrv);
  const toPlain = client(k, 'a', { mark: 0x111 });
  k.setsockopt(toPlain, 'IP_TRANSPARENT', true);
  expect(k.connect(toPlain, '203.0.113.9', 81).outcome).toBe('timeout');
});

test('IPv6: a `local ::/0 dev lo` policy route for a foreign destination takes a source address of the namespace, not the destination', () => {
  // Unlike IPv4 (source = destination, then ENETUNREACH), ipv6_dev_get_saddr picks one of the
  // namespace's own addresses, so connect() goes ahead: the SYN loops over lo, is delivered
  // locally through the same rule, and finds no listener → RST → refused (found by the
  // differential test against Linux, fixtures/fidelity/v6-local-route-source-seed-20260102.yaml).
  const k = pair();
  k.addRule('a', { family: 6, priority: 32764, fwmark: 0x111, mask: 0xfff, table: 100 });
  k.addRoute('a', { dst: '::/0', type: 'local', dev: 'lo', table: 100 });
  const c = client(k, 'a', { mark: 0x111, family: 6 });
  const refused = k.connect(c, 'fd00:9::9', 80);
  expect(refused.outcome, renderTrace(refused.trace)).toBe('refused');
  expect(formatIp(c.local!.addr)).toBe('fd00::1');
  // With a listener (AnyIP) the same connection is accepted locally, from fd00::1.
  const srv = listenTcp(k, 'a', '::', 80, { family: 6 });
  const r = k.connect(client(k, 'a', { mark: 0x111, family: 6 }), 'fd00:9::9', 80);
  expect(r.outcome, renderTrace(r.trace)).toBe('established');
  expect(r.listener).toBe(srv);
  expect(formatIp(r.server!.remote!.addr)).toBe('fd00::1');
  expect(formatIp(r.server!.local!.addr)).toBe('fd00:9::9');
});

test('blackhole, unreachable and prohibit routes stop the connection before it leaves', () => {
  const k = pair();
  k.addRoute('a', { dst: '10.96.1.0/24', type: 'blackhole' });
  k.addRoute('a', { dst: '10.96.2.0/24', type: 'unreachable' });
  k.addRoute('a', { dst: '10.96.3.0/24', type: 'prohibit' });
  k.addRoute('a', { dst: '10.96.0.0/16', via: '192.0.2.2' });
  expect(lookup(k, 'a', '10.96.1.1')).toEqual({ kind: 'blackhole' });
  expect(lookup(k, 'a', '10.96.2.1')).toEqual({ kind: 'unreachable' });
  expect(lookup(k, 'a', '10.96.3.1')).toEqual({ kind: 'prohibit' });
  expect(lookup(k, 'a', '10.96.4.1')).toMatchObject({ kind: 'unicast' });
  for (const dst of ['10.96.1.1', '10.96.2.1', '10.96.3.1']) {
    const r = k.connect(client(k, 'a'), dst, 80);
    expect(r.outcome).toBe('unreachable');
    expect(eventsOf(r.trace, 'xmit')).toEqual([]);
  }
});

test('connect with no route to the destination is unreachable and sends nothing', () => {
  const k = pair();
  const r = k.connect(client(k, 'a'), '203.0.113.5', 80);
  expect(r.outcome).toBe('unreachable');
  expect(r.reason).toContain('ENETUNREACH');
  expect(r.trace).toEqual([]);
});

test('every namespace starts with the policy rules 0 local, 32766 main, 32767 default for IPv4 and IPv6', () => {
  const k = pair();
  for (const fam of [4, 6] as const) {
    const rules = k.netns('a').rules.list(fam);
    expect(rules.map((r) => [r.priority, r.table])).toEqual([
      [0, TABLE_LOCAL],
      [32766, TABLE_MAIN],
      [32767, TABLE_DEFAULT],
    ]);
    expect(rules.map(formatRule)).toEqual([
      '0: from all lookup local',
      '32766: from all lookup main',
      '32767: from all lookup default',
    ]);
  }
});

test('an fwmark rule selects by (mark & mask) == value', () => {
  const k = twoLinks();
  k.addRule('a', { family: 4, priority: 100, fwmark: 0x100, mask: 0xf00, table: 100 });
  k.addRoute('a', { dst: '10.96.0.0/16', via: '198.51.100.2', table: 100 });
  k.addRoute('a', { dst: '10.96.0.0/16', via: '192.0.2.2' });
  expect(lookup(k, 'a', '10.96.0.1', 0x1ff)).toMatchObject({ dev: 'eth1', table: 100 });
  expect(lookup(k, 'a', '10.96.0.1', 0x100)).toMatchObject({ dev: 'eth1', table: 100 });
  expect(lookup(k, 'a', '10.96.0.1', 0x200)).toMatchObject({ dev: 'eth0', table: TABLE_MAIN });
  expect(lookup(k, 'a', '10.96.0.1', 0)).toMatchObject({ dev: 'eth0', table: TABLE_MAIN });
});

test('an address added to lo is local (a service VIP on lo accepts connections)', () => {
  const k = pair();
  k.addAddress('b', 'lo', '10.96.0.10/32');
  k.addAddress('b', 'lo', '10.96.1.1/24');
  expect(lookup(k, 'b', '10.96.0.10')).toMatchObject({ kind: 'local', table: TABLE_LOCAL });
  // The kernel makes a loopback address's whole IPv4 prefix local, as for 127.0.0.0/8.
  expect(lookup(k, 'b', '10.96.1.77')).toMatchObject({ kind: 'local', table: TABLE_LOCAL });
  expect(lookup(k, 'b', '127.1.2.3')).toMatchObject({ kind: 'local', table: TABLE_LOCAL });
  const s = k.socket('b', 'tcp', 4, ADMIN);
  k.bind(s, '10.96.0.10', 80);
  k.listen(s);
  k.addRoute('a', { dst: '10.96.0.0/16', via: '192.0.2.2' });
  const r = k.connect(client(k, 'a'), '10.96.0.10', 80);
  expect(r.outcome, renderTrace(r.trace)).toBe('established');
  expect(r.listener).toBe(s);
});

test('a socket mark (SO_MARK) steers the connection through the fwmark rule', () => {
  const k = twoLinks();
  k.addRule('a', { family: 4, priority: 100, fwmark: 0x2, table: 100 });
  k.addRoute('a', { dst: '10.96.0.0/16', via: '198.51.100.2', table: 100 });
  k.addRoute('a', { dst: '10.96.0.0/16', via: '192.0.2.2' });
  // b owns 10.96.0.1 on lo; either link reaches it.
  k.addAddress('b', 'lo', '10.96.0.1/32');
  listenTcp(k, 'b', '0.0.0.0', 80);
  const marked = k.connect(client(k, 'a', { mark: 0x2 }), '10.96.0.1', 80);
  expect(marked.outcome, renderTrace(marked.trace)).toBe('established');
  expect(eventsOf(marked.trace, 'xmit')[0]!.fromDev).toBe('eth1');
  const plain = k.connect(client(k, 'a'), '10.96.0.1', 80);
  expect(plain.outcome).toBe('established');
  expect(eventsOf(plain.trace, 'xmit')[0]!.fromDev).toBe('eth0');
});

test('rules are tried in priority order, whatever order they were added in, and an empty table falls through', () => {
  const k = twoLinks();
  k.addRule('a', { family: 4, priority: 200, table: 102 });
  k.addRule('a', { family: 4, priority: 100, table: 101 });
  k.addRule('a', { family: 4, priority: 50, table: 103 }); // table 103 stays empty: next rule
  k.addRoute('a', { dst: '10.96.0.0/16', via: '198.51.100.2', table: 101 });
  k.addRoute('a', { dst: '10.96.0.0/16', via: '192.0.2.2', table: 102 });
  expect(
    k
      .netns('a')
      .rules.list(4)
      .map((r) => r.priority),
  ).toEqual([0, 50, 100, 200, 32766, 32767]);
  expect(lookup(k, 'a', '10.96.0.1')).toMatchObject({ dev: 'eth1', table: 101 });
});

test('an iif rule applies to packets received on that device, and iif lo to locally generated ones', () => {
  const k = routed();
  listenTcp(k, 's', '0.0.0.0', 80);
  k.addRule('r', { family: 4, priority: 100, iif: 'rc', table: 100 });
  k.addRoute('r', { dst: '203.0.113.0/24', type: 'blackhole', table: 100 });
  const fromC = k.connect(client(k, 'c'), '203.0.113.2', 80);
  expect(fromC.outcome).toBe('timeout');
  expect(eventsOf(fromC.trace, 'drop')[0]).toMatchObject({ ns: 'r' });
  const fromR = k.connect(client(k, 'r'), '203.0.113.2', 80);
  expect(fromR.outcome, renderTrace(fromR.trace)).toBe('established');

  k.addRule('r', { family: 4, priority: 90, iif: 'lo', table: 100 });
  expect(k.connect(client(k, 'r'), '203.0.113.2', 80).outcome).toBe('unreachable');
});

test('with forwarding off a namespace drops packets that are not for it', () => {
  const k = routed({ forwarding: false });
  listenTcp(k, 's', '0.0.0.0', 80);
  const r = k.connect(client(k, 'c'), '203.0.113.2', 80);
  expect(r.outcome).toBe('timeout');
  expect(eventsOf(r.trace, 'drop')[0]).toMatchObject({
    ns: 'r',
    reason: 'not for this host and IPv4 forwarding is off',
  });
  const r6 = k.connect(client(k, 'c', { family: 6 }), 'fd00:5::2', 80);
  expect(r6.outcome).toBe('timeout');
});

test('with forwarding on a namespace forwards between its links, unchanged', () => {
  const k = routed();
  const srv = listenTcp(k, 's', '0.0.0.0', 80);
  const c = client(k, 'c');
  const r = k.connect(c, '203.0.113.2', 80);
  expect(r.outcome, renderTrace(r.trace)).toBe('established');
  expect(r.listener).toBe(srv);
  expect(formatIp(r.server!.remote!.addr)).toBe('198.51.100.2');
  expect(
    eventsOf(r.trace, 'xmit')
      .slice(0, 2)
      .map((x) => `${x.fromNs}:${x.fromDev}->${x.toNs}:${x.toDev}`),
  ).toEqual(['c:eth0->r:rc', 'r:rs->s:eth0']);
  // Forwarding is per family.
  k.setForwarding('r', 6, false);
  listenTcp(k, 's', '::', 81);
  expect(k.connect(client(k, 'c', { family: 6 }), 'fd00:5::2', 81).outcome).toBe('timeout');
});

test('IPv6: the newest global address of a device comes first (source selection ties, REDIRECT), IPv4 keeps its primary', () => {
  // ipv6_link_dev_addr inserts a new address before the others of the same scope; checked on
  // Linux 6.x with fd00:2::2 then fd00:2::3 on eth0 (found by the differential test).
  const k = pair();
  k.addAddress('a', 'eth0', 'fd00::3/64');
  k.addAddress('a', 'eth0', '192.0.2.3/24');
  const srv = listenTcp(k, 'b', '::', 80, { family: 6 });
  const r = k.connect(client(k, 'a', { family: 6 }), 'fd00::2', 80);
  expect(r.outcome, renderTrace(r.trace)).toBe('established');
  expect(r.listener).toBe(srv);
  expect(formatIp(r.server!.remote!.addr)).toBe('fd00::3');
  expect(
    k
      .netns('a')
      .links.get('eth0')!
      .addresses.map((x) => formatIp(x.addr)),
  ).toEqual(['192.0.2.1', 'fd00::3', 'fd00::1', '192.0.2.3']);
});

test('IPv4 sends no packet with a 127/8 source out of a non-loopback device (the route lookup is EINVAL before OUTPUT runs)', () => {
  // Linux __mkroute_output; `ip route get 192.0.2.2 from 127.0.0.1` answers "Invalid argument".
  const k = pair();
  // connect() from a socket bound to 127.0.0.1 to an off-loopback peer: the SYN has no route.
  listenTcp(k, 'b', '0.0.0.0', 80);
  const bound = client(k, 'a');
  k.bind(bound, '127.0.0.1', 0);
  const r1 = k.connect(bound, '192.0.2.2', 80);
  expect(r1.outcome).toBe('unreachable');
  expect(r1.reason).toMatch(/loopback source 127\.0\.0\.1 may not leave by eth0/);
  // A transparent socket with a foreign source connects to 127.0.0.1: the SYN goes over lo, but
  // the SYN-ACK (127.0.0.1 -> the foreign address, routed out of eth0) is never sent.
  listenTcp(k, 'a', '0.0.0.0', 8080, { label: 'app' });
  const spoof = client(k, 'a');
  k.setsockopt(spoof, 'IP_TRANSPARENT', true);
  k.bind(spoof, '192.0.2.77', 0);
  const r2 = k.connect(spoof, '127.0.0.1', 8080);
  expect(r2.outcome).toBe('timeout');
  expect(r2.reason).toMatch(/^SYN-ACK .* unroutable in a: loopback source 127\.0\.0\.1 may not leave by eth0/);
  // The same source leaving by lo (a local destination) is fine.
  const local = client(k, 'a');
  k.bind(local, '127.0.0.1', 0);
  expect(k.connect(local, '192.0.2.1', 8080).outcome).toBe('established');
});
