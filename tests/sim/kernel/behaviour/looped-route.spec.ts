/**
 * Kernel behaviour: a packet looped over `lo` keeps the route it was sent by (loopback_xmit keeps
 * skb_dst; ip_rcv_finish/ip6_rcv_finish route only packets without one), so a mark changed in
 * mangle POSTROUTING after that route was chosen does not re-route it on arrival
 * (sim/kernel/looped-route.ts). Found by the differential property (seed 20261201, IPv6); both
 * families checked on Linux 6.1 (fixtures/fidelity/v6-looped-syn-reroute-seed-20261201.yaml,
 * fixtures/fidelity/v4-looped-syn-kept-route.yaml).
 */
import { test, expect } from '@playwright/test';
import { renderTrace } from '../../../../sim/kernel/trace.js';
import type { SimKernel } from '../../../../sim/kernel/kernel.js';
import type { Family } from '../../../../impl/api/ip/address.js';
import { ADMIN, client, eventsOf, listenTcp, pair, table } from './world.js';

/**
 * In a: mark 0x111 selects table 100 (`local default dev lo`), so a marked packet to b's address
 * loops over a's own lo; mangle POSTROUTING then re-marks TCP to non-local destinations 0x539,
 * which selects nothing (main table: b's address is not local to a, and a does not forward).
 * `markInOutput`: mangle OUTPUT sets 0x111 (re-routing the packet) instead of the socket's SO_MARK.
 */
function loopThenRemark(family: Family, markInOutput: boolean): SimKernel {
  const k = pair();
  k.addRule('a', { family, priority: 32764, fwmark: 0x111, mask: 0xfff, table: 100 });
  k.addRoute('a', { dst: family === 4 ? '0.0.0.0/0' : '::/0', type: 'local', dev: 'lo', table: 100 });
  k.iptablesRestore(
    'a',
    family,
    table(
      'mangle',
      ...(markInOutput
        ? [`-A OUTPUT -p tcp -d ${family === 4 ? '192.0.2.2' : 'fd00::2'} -j MARK --set-xmark 0x111/0xfff`]
        : []),
      '-A POSTROUTING -p tcp -m addrtype ! --dst-type LOCAL -j MARK --set-xmark 0x539/0xfff',
    ),
  );
  return k;
}

const keptRoutes = (trace: Parameters<typeof eventsOf>[0]): string[] =>
  eventsOf(trace, 'route')
    .filter((e) => e.ns === 'a' && e.decision.startsWith('kept the output route'))
    .map((e) => e.decision);

test('IPv6: a SYN looped over lo by its SO_MARK route is delivered locally despite a new mark from POSTROUTING: refused', () => {
  const k = loopThenRemark(6, false);
  listenTcp(k, 'b', '::', 80);
  // Nobody listens on port 80 in a: the looped SYN is answered with a RST (IPv6 does not check
  // its source). Routed again on arrival with mark 0x539 it would be dropped (forwarding off).
  const r = k.connect(client(k, 'a', { family: 6, mark: 0x111 }), 'fd00::2', 80);
  expect(r.outcome, renderTrace(r.trace)).toBe('refused');
  expect(r.server).toBeUndefined();
  expect(keptRoutes(r.trace)[0]).toContain('table 100');
});

for (const family of [4, 6] as const) {
  test(`IPv${family}: a transparent listener in a accepts a SYN looped by a mark from mangle OUTPUT and re-marked in POSTROUTING`, () => {
    const k = loopThenRemark(family, true);
    listenTcp(k, 'b', family === 4 ? '0.0.0.0' : '::', 80, { label: 'listener in b' });
    // Transparent: in IPv4 the SYN-ACK leaves from b's address, which is foreign to a.
    listenTcp(k, 'a', family === 4 ? '0.0.0.0' : '::', 80, {
      owner: ADMIN,
      transparent: true,
      family,
      label: 'local listener in a',
    });
    const r = k.connect(client(k, 'a', { family }), family === 4 ? '192.0.2.2' : 'fd00::2', 80);
    expect(r.outcome, renderTrace(r.trace)).toBe('established');
    expect(r.server?.describe()).toContain('"local listener in a"');
    expect(keptRoutes(r.trace)[0]).toContain('table 100');
  });
}

test('without the loop (no mark) nothing keeps a route: the SYN is routed on arrival in b and reaches b', () => {
  const k = loopThenRemark(4, false);
  listenTcp(k, 'b', '0.0.0.0', 80, { label: 'listener in b' });
  const r = k.connect(client(k, 'a'), '192.0.2.2', 80);
  expect(r.outcome, renderTrace(r.trace)).toBe('established');
  expect(r.server?.describe()).toContain('"listener in b"');
  expect(eventsOf(r.trace, 'route').some((e) => e.decision.startsWith('kept the output route'))).toBe(false);
});

/**
 * b: a client marked 0x539 is tracked in zone 1 (raw OUTPUT), so its connection to 127.0.0.1 has
 * its entry there; the listener's SYN-ACK (zone 0) finds none, and the final ACK, INVALID in zone 1
 * (the entry never saw the SYN-ACK), is tracked afresh on lo in zone 0 as a new connection:
 * nat PREROUTING DNATs it to b's own address. That drops its kept route; routed on arrival, it
 * has a loopback source (differential seed 20261204, checked on Linux 6.1).
 */
function dnatOnLo(family: Family): SimKernel {
  const k = pair();
  k.iptablesRestore(
    'b',
    family,
    [
      table('raw', '-A OUTPUT -p tcp -m mark --mark 0x539/0xfff -j CT --zone 1'),
      table(
        'nat',
        `-A PREROUTING -p tcp -m addrtype --dst-type LOCAL -j DNAT --to-destination ${family === 4 ? '192.0.2.2' : 'fd00::2'}`,
      ),
    ].join(''),
  );
  listenTcp(k, 'b', family === 4 ? '0.0.0.0' : '::', 80, { family, label: 'listener in b' });
  return k;
}

test('IPv4: a final ACK from 127.0.0.1 DNATed on lo is routed on arrival: martian source, dropped; the server never accepts', () => {
  const k = dnatOnLo(4);
  const r = k.connect(client(k, 'b', { owner: ADMIN, mark: 0x539 }), '127.0.0.1', 80);
  expect(r.outcome, renderTrace(r.trace)).toBe('timeout');
  expect(r.server).toBeUndefined();
  const drops = eventsOf(r.trace, 'drop').map((e) => e.reason);
  expect(drops).toContain('martian source 127.0.0.1 to 192.0.2.2 routed on arrival on lo (route_localnet=0)');
});

// Checked on Linux 6.1: fixtures/fidelity/loopback-no-martian-after-dnat-v6.yaml.
test('IPv6: the same final ACK from ::1 is not a martian on lo: it is routed to the listener, which answers it with a RST', () => {
  const k = dnatOnLo(6);
  const r = k.connect(client(k, 'b', { owner: ADMIN, mark: 0x539, family: 6 }), '::1', 80);
  expect(
    eventsOf(r.trace, 'drop').some((e) => e.reason.includes('martian')),
    renderTrace(r.trace),
  ).toBe(false);
  expect(r.outcome, renderTrace(r.trace)).toBe('reset');
});
