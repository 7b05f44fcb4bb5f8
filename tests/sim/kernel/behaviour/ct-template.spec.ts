/**
 * Kernel behaviour: `-j CT --zone N` attaches a conntrack template (xt_CT.c) that the rest of
 * the raw chain sees through nf_ct_get() — ctmark 0, ctinfo NEW — and the first CT rule a packet
 * hits wins (sim/kernel/ct-template.ts). Found by the differential property (seed 20261131).
 */
import { test, expect } from '@playwright/test';
import { renderTrace } from '../../../../sim/kernel/trace.js';
import { client, eventsOf, listenTcp, pair, table } from './world.js';

test('after CT --zone in raw OUTPUT, `-m connmark ! --mark X` sees the template (ctmark 0) and matches', () => {
  const k = pair();
  listenTcp(k, 'b', '0.0.0.0', 80);
  k.iptablesRestore(
    'a',
    4,
    table('raw', '-A OUTPUT -j CT --zone 1', '-A OUTPUT -m connmark ! --mark 0x111/0xfff -j DROP'),
  );
  const r = k.connect(client(k, 'a'), '192.0.2.2', 80);
  expect(r.outcome, renderTrace(r.trace)).toBe('timeout');
  expect(r.reason).toBe('SYN dropped in a: DROP in raw OUTPUT');
});

test('without a CT rule before it, the same raw connmark rule never matches (no entry yet: connmark is false even under !)', () => {
  const k = pair();
  listenTcp(k, 'b', '0.0.0.0', 80);
  k.iptablesRestore('a', 4, table('raw', '-A OUTPUT -m connmark ! --mark 0x111/0xfff -j DROP'));
  expect(k.connect(client(k, 'a'), '192.0.2.2', 80).outcome).toBe('established');
});

test('the template reads as ctstate NEW to later raw rules (and not INVALID), also in raw PREROUTING', () => {
  const k = pair();
  listenTcp(k, 'b', '0.0.0.0', 80);
  k.iptablesRestore(
    'b',
    4,
    table(
      'raw',
      '-A PREROUTING -p tcp -j CT --zone 1',
      '-A PREROUTING -m conntrack --ctstate INVALID -j DROP',
      '-A PREROUTING -m conntrack --ctstate NEW -j LOG --log-prefix tmpl-new',
    ),
  );
  const r = k.connect(client(k, 'a'), '192.0.2.2', 80);
  expect(r.outcome, renderTrace(r.trace)).toBe('established');
  // The template is attached to every packet that hits the CT rule, not only a connection's
  // first: the final ACK, ESTABLISHED once tracked, also reads NEW in raw. Nothing is INVALID.
  expect(
    eventsOf(r.trace, 'log')
      .filter((e) => e.ns === 'b')
      .map((e) => (e.packet.includes('[SYN]') ? 'SYN' : e.packet.includes('[ACK]') ? 'ACK' : e.packet)),
  ).toEqual(['SYN', 'ACK']);
});

test('the first CT rule wins: a later CT --notrack leaves the zone template in place, so the connection is tracked in zone 1', () => {
  const k = pair();
  listenTcp(k, 'b', '0.0.0.0', 80);
  k.iptablesRestore('a', 4, table('raw', '-A OUTPUT -j CT --zone 1', '-A OUTPUT -j CT --notrack'));
  const r = k.connect(client(k, 'a'), '192.0.2.2', 80);
  expect(r.outcome, renderTrace(r.trace)).toBe('established');
  const ct = eventsOf(r.trace, 'conntrack').find((e) => e.ns === 'a');
  expect(ct).toMatchObject({ state: 'NEW', zone: 1 });
});

test('CT --notrack first: a later CT --zone is ignored and the packet stays UNTRACKED', () => {
  const k = pair();
  listenTcp(k, 'b', '0.0.0.0', 80);
  k.iptablesRestore(
    'a',
    4,
    table(
      'raw',
      '-A OUTPUT -j CT --notrack',
      '-A OUTPUT -j CT --zone 1',
      '-A OUTPUT -m conntrack --ctstate UNTRACKED -j LOG --log-prefix untracked',
    ),
  );
  const r = k.connect(client(k, 'a'), '192.0.2.2', 80);
  expect(eventsOf(r.trace, 'conntrack').find((e) => e.ns === 'a')).toMatchObject({ state: 'UNTRACKED' });
  expect(eventsOf(r.trace, 'log').some((e) => e.ns === 'a' && e.prefix.trim() === 'untracked')).toBe(true);
});

test('a packet looped over lo keeps its entry: CT --notrack in raw PREROUTING does not untrack it', () => {
  const k = pair();
  listenTcp(k, 'a', '0.0.0.0', 80);
  k.iptablesRestore(
    'a',
    4,
    table('raw', '-A PREROUTING -i lo -j CT --notrack', '-A PREROUTING -i lo -m conntrack --ctstate UNTRACKED -j DROP'),
  );
  const r = k.connect(client(k, 'a'), '192.0.2.1', 80);
  expect(r.outcome, renderTrace(r.trace)).toBe('established');
});
