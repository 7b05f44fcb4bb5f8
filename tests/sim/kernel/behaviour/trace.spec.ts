/**
 * Packet traces: each step names the namespace, hook, table, chain, rule text and line, the
 * verdict, NAT and mark changes, the routing decision and the socket chosen — as structured
 * events (for JSON) and as text.
 */
import { test, expect } from '@playwright/test';
import { renderTrace } from '../../../../sim/kernel/trace.js';
import type { ConnectResult, SimKernel } from '../../../../sim/kernel/kernel.js';
import { client, eventsOf, listenTcp, pair, table } from './world.js';

const RULES =
  table('mangle', '-A PREROUTING -p tcp --dport 80 -j MARK --set-mark 0x20') +
  table(
    'nat',
    ':CAPTURE - [0:0]',
    '-A PREROUTING -p tcp -j CAPTURE',
    '-A CAPTURE -p tcp --dport 80 -j REDIRECT --to-ports 15006',
  );

function captured(): { k: SimKernel; r: ConnectResult } {
  const k = pair();
  k.iptablesRestore('b', 4, RULES, { source: 'rules.txt' });
  listenTcp(k, 'b', '0.0.0.0', 15006, { label: 'proxy' });
  const r = k.connect(client(k, 'a'), '192.0.2.2', 80);
  return { k, r };
}

test('a trace names namespace, hook, table, chain, rule text and line, and the verdict of each table', () => {
  const { r } = captured();
  expect(r.outcome, renderTrace(r.trace)).toBe('established');
  const nat = eventsOf(r.trace, 'table').find((e) => e.ns === 'b' && e.table === 'nat' && e.hook === 'PREROUTING')!;
  expect(nat.verdict).toBe('NAT redirect');
  expect(nat.steps.map((s) => ({ chain: s.chain, position: s.position, line: s.line, text: s.text }))).toEqual([
    { chain: 'PREROUTING', position: 1, line: 6, text: '-A PREROUTING -p tcp -j CAPTURE' },
    {
      chain: 'CAPTURE',
      position: 1,
      line: 7,
      text: '-A CAPTURE -p tcp -m tcp --dport 80 -j REDIRECT --to-ports 15006',
    },
  ]);
  const mangle = eventsOf(r.trace, 'table').find((e) => e.ns === 'b' && e.table === 'mangle')!;
  expect(mangle).toMatchObject({ hook: 'PREROUTING', verdict: 'ACCEPT' });
  expect(mangle.steps[0]).toMatchObject({ chain: 'PREROUTING', position: 1, line: 2 });
});

test('a trace records the NAT rewrite, the mark change, the routing decision and the socket chosen', () => {
  const { r } = captured();
  const syn = r.trace.slice(0, r.trace.findIndex((e) => e.kind === 'deliver') + 1);
  expect(eventsOf(syn, 'mark')).toEqual([{ kind: 'mark', ns: 'b', from: 0, to: 0x20, why: 'mangle PREROUTING' }]);
  expect(eventsOf(syn, 'nat')).toEqual([
    { kind: 'nat', ns: 'b', hook: 'PREROUTING', what: 'destination 192.0.2.2:80 -> 192.0.2.2:15006' },
  ]);
  expect(eventsOf(syn, 'route').map((e) => `${e.ns}: ${e.decision}`)).toEqual([
    'a: unicast via rule 32766 (table 254): 192.0.2.0/24 dev eth0 proto kernel src 192.0.2.1',
    'b: local via rule 0 (table 255): local 192.0.2.2 dev eth0 table local proto kernel src 192.0.2.2',
  ]);
  expect(eventsOf(syn, 'xmit')).toEqual([
    { kind: 'xmit', fromNs: 'a', fromDev: 'eth0', toNs: 'b', toDev: 'eth0', scrubbed: true },
  ]);
  expect(eventsOf(syn, 'deliver')).toEqual([
    { kind: 'deliver', ns: 'b', socket: 'socket#1 "proxy" tcp 0.0.0.0:15006 in b' },
  ]);
  // a has no rule that needs conntrack, so it does not track (OFF); b's REDIRECT turned it on.
  expect(eventsOf(syn, 'conntrack').map((e) => `${e.ns} ${e.state} zone ${e.zone}`)).toEqual([
    'a OFF zone 0',
    'b NEW zone 0',
  ]);
});

test('a dropped packet ends its trace with the place and reason of the drop', () => {
  const k = pair();
  k.iptablesRestore('b', 4, table('filter', '-A INPUT -p tcp --dport 80 -j DROP'));
  const r = k.connect(client(k, 'a'), '192.0.2.2', 80);
  const last = r.trace[r.trace.length - 1]!;
  expect(last).toEqual({ kind: 'drop', ns: 'b', reason: 'DROP in filter INPUT' });
  const filter = eventsOf(r.trace, 'table').find((e) => e.table === 'filter')!;
  expect(filter).toMatchObject({ ns: 'b', hook: 'INPUT', verdict: 'DROP' });
  expect(filter.steps).toEqual([expect.objectContaining({ chain: 'INPUT', position: 1, line: 2, effect: 'DROP' })]);
});

test('renderTrace prints one readable line per step, rules with chain, position and line', () => {
  const { r } = captured();
  const text = renderTrace(r.trace);
  const lines = text.split('\n');
  expect(lines[0]).toBe(
    '[a] send from socket#2 "client" tcp 192.0.2.1:32768 in a: tcp 192.0.2.1:32768 -> 192.0.2.2:80 [SYN] mark 0x0',
  );
  expect(lines).toContain('[a] xmit eth0 -> [b] eth0 (netns crossed: mark and conntrack scrubbed)');
  expect(lines).toContain('[b] PREROUTING nat: NAT redirect');
  expect(
    lines.some((l) =>
      l.startsWith('      CAPTURE #1 (line 7): -A CAPTURE -p tcp -m tcp --dport 80 -j REDIRECT --to-ports 15006  => '),
    ),
  ).toBe(true);
  expect(lines).toContain(
    '      PREROUTING #1 (line 2): -A PREROUTING -p tcp -m tcp --dport 80 -j MARK --set-xmark 0x20/0xffffffff  => MARK --set-xmark 0x20/0xffffffff',
  );
  expect(lines).toContain('[b] mark 0x0 -> 0x20 (mangle PREROUTING)');
  expect(lines).toContain('[b] PREROUTING nat: destination 192.0.2.2:80 -> 192.0.2.2:15006');
  expect(lines).toContain('[b] delivered to socket#1 "proxy" tcp 0.0.0.0:15006 in b');
});

test('with tracing off the kernel behaves the same and records nothing', () => {
  const k = pair();
  k.setTracing(false);
  k.iptablesRestore('b', 4, RULES);
  const proxy = listenTcp(k, 'b', '0.0.0.0', 15006);
  const r = k.connect(client(k, 'a'), '192.0.2.2', 80);
  expect(r.outcome).toBe('established');
  expect(r.listener).toBe(proxy);
  expect(r.trace).toEqual([]);
});
