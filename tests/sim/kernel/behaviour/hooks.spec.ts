/**
 * Netfilter hook order as the datapath drives it (docs/design.md, 'The simulated kernel'): which tables run
 * at which hook, in which order relative to conntrack and routing, and what a terminal verdict
 * at each place does to a connection.
 */
import { test, expect } from '@playwright/test';
import { renderTrace, type TraceEvent } from '../../../../sim/kernel/trace.js';
import type { SimKernel } from '../../../../sim/kernel/kernel.js';
import { client, conntrackOn, eventsOf, listenTcp, logs, pair, routed, table } from './world.js';

/** A LOG rule in every chain of raw, mangle, nat and filter, prefixed "<table>-<CHAIN>". */
function logEverywhere(k: SimKernel, ns: string): void {
  const chains: Record<string, string[]> = {
    raw: ['PREROUTING', 'OUTPUT'],
    mangle: ['PREROUTING', 'INPUT', 'FORWARD', 'OUTPUT', 'POSTROUTING'],
    nat: ['PREROUTING', 'INPUT', 'OUTPUT', 'POSTROUTING'],
    filter: ['INPUT', 'FORWARD', 'OUTPUT'],
  };
  let text = '';
  for (const [t, cs] of Object.entries(chains))
    text += table(t, ...cs.map((c) => `-A ${c} -p tcp -j LOG --log-prefix "${t}-${c}"`));
  k.iptablesRestore(ns, 4, text);
  // LOG alone does not make Linux track the namespace's connections, and without conntrack the
  // nat chains never run (nf_nat_inet_fn accepts a packet with no entry).
  conntrackOn(k, ns, [4]);
}

/** Events of the first packet only (up to its delivery or drop). */
function firstPacket(trace: readonly TraceEvent[]): TraceEvent[] {
  const end = trace.findIndex((e) => e.kind === 'deliver' || e.kind === 'drop');
  return trace.slice(0, end + 1);
}

/** Position of the first event matching, for ordering assertions. */
function at(trace: readonly TraceEvent[], pred: (e: TraceEvent) => boolean): number {
  const i = trace.findIndex(pred);
  if (i < 0) throw new Error(`event not in trace:\n${renderTrace(trace)}`);
  return i;
}

test('a locally generated packet passes raw, conntrack, mangle, nat and filter OUTPUT, then mangle and nat POSTROUTING', () => {
  const k = pair();
  logEverywhere(k, 'a');
  listenTcp(k, 'b', '0.0.0.0', 80);
  const r = k.connect(client(k, 'a'), '192.0.2.2', 80);
  expect(r.outcome, renderTrace(r.trace)).toBe('established');
  const syn = firstPacket(r.trace);
  expect(logs(syn).filter((l) => l.startsWith('a:'))).toEqual([
    'a:raw-OUTPUT',
    'a:mangle-OUTPUT',
    'a:nat-OUTPUT',
    'a:filter-OUTPUT',
    'a:mangle-POSTROUTING',
    'a:nat-POSTROUTING',
  ]);
  // Routing comes first; conntrack runs between raw and mangle.
  const route = at(syn, (e) => e.kind === 'route' && e.ns === 'a');
  const raw = at(syn, (e) => e.kind === 'table' && e.table === 'raw');
  const ct = at(syn, (e) => e.kind === 'conntrack' && e.ns === 'a');
  const mangle = at(syn, (e) => e.kind === 'table' && e.table === 'mangle');
  expect(route < raw && raw < ct && ct < mangle).toBe(true);
});

test('a received packet passes raw, conntrack, mangle and nat PREROUTING, is routed, then mangle, filter and nat INPUT', () => {
  const k = pair();
  logEverywhere(k, 'b');
  listenTcp(k, 'b', '0.0.0.0', 80);
  const r = k.connect(client(k, 'a'), '192.0.2.2', 80);
  expect(r.outcome, renderTrace(r.trace)).toBe('established');
  const syn = firstPacket(r.trace);
  expect(logs(syn)).toEqual([
    'b:raw-PREROUTING',
    'b:mangle-PREROUTING',
    'b:nat-PREROUTING',
    'b:mangle-INPUT',
    'b:filter-INPUT',
    'b:nat-INPUT',
  ]);
  const raw = at(syn, (e) => e.kind === 'table' && e.ns === 'b' && e.table === 'raw');
  const ct = at(syn, (e) => e.kind === 'conntrack' && e.ns === 'b');
  const natPre = at(syn, (e) => e.kind === 'table' && e.ns === 'b' && e.table === 'nat');
  const route = at(syn, (e) => e.kind === 'route' && e.ns === 'b');
  const mangleIn = at(syn, (e) => e.kind === 'table' && e.ns === 'b' && e.hook === 'INPUT');
  expect(raw < ct && ct < natPre && natPre < route && route < mangleIn).toBe(true);
});

test('a forwarded packet passes PREROUTING, is routed, then mangle and filter FORWARD, then mangle and nat POSTROUTING', () => {
  const k = routed();
  logEverywhere(k, 'r');
  listenTcp(k, 's', '0.0.0.0', 80);
  const r = k.connect(client(k, 'c'), '203.0.113.2', 80);
  expect(r.outcome, renderTrace(r.trace)).toBe('established');
  expect(logs(firstPacket(r.trace))).toEqual([
    'r:raw-PREROUTING',
    'r:mangle-PREROUTING',
    'r:nat-PREROUTING',
    'r:mangle-FORWARD',
    'r:filter-FORWARD',
    'r:mangle-POSTROUTING',
    'r:nat-POSTROUTING',
  ]);
});

test('the nat table is consulted only for the first packet of a connection', () => {
  const k = pair();
  logEverywhere(k, 'b');
  listenTcp(k, 'b', '0.0.0.0', 80);
  const c = client(k, 'a');
  const r = k.connect(c, '192.0.2.2', 80);
  expect(r.outcome).toBe('established');
  // SYN in, SYN-ACK out, ACK in: nat chains saw only the SYN; the other tables saw all three.
  const natLogs = logs(r.trace).filter((l) => l.startsWith('b:nat-'));
  expect(natLogs).toEqual(['b:nat-PREROUTING', 'b:nat-INPUT']);
  expect(logs(r.trace).filter((l) => l === 'b:filter-INPUT')).toHaveLength(2);
  expect(logs(r.trace).filter((l) => l === 'b:filter-OUTPUT')).toHaveLength(1);
  const data = k.sendTcp(c, 'hello');
  expect(data.delivered).toBe(true);
  expect(logs(data.trace).filter((l) => l.startsWith('b:nat-'))).toEqual([]);
});

test('raw runs before conntrack: CT --notrack leaves the packet UNTRACKED, so a nat REDIRECT cannot apply', () => {
  const build = (notrack: boolean): SimKernel => {
    const k = pair();
    k.iptablesRestore(
      'b',
      4,
      table(
        'raw',
        ...(notrack
          ? ['-A PREROUTING -p tcp --dport 80 -j CT --notrack', '-A OUTPUT -p tcp --sport 80 -j CT --notrack']
          : []),
      ) + table('nat', '-A PREROUTING -p tcp --dport 80 -j REDIRECT --to-ports 8080'),
    );
    return k;
  };
  for (const notrack of [false, true]) {
    const k = build(notrack);
    const direct = listenTcp(k, 'b', '0.0.0.0', 80, { label: 'direct' });
    const redirected = listenTcp(k, 'b', '0.0.0.0', 8080, { label: 'redirected' });
    const r = k.connect(client(k, 'a'), '192.0.2.2', 80);
    expect(r.outcome, renderTrace(r.trace)).toBe('established');
    expect(r.listener).toBe(notrack ? direct : redirected);
    const states = eventsOf(firstPacket(r.trace), 'conntrack')
      .filter((e) => e.ns === 'b')
      .map((e) => e.state);
    expect(states).toEqual([notrack ? 'UNTRACKED' : 'NEW']);
  }
});

test('raw runs before conntrack: CT --zone puts the connection in that zone, apart from zone 0', () => {
  const k = pair();
  k.iptablesRestore('b', 4, table('raw', '-A PREROUTING -i eth0 -j CT --zone 7', '-A OUTPUT -o eth0 -j CT --zone 7'));
  conntrackOn(k, 'a', [4]);
  listenTcp(k, 'b', '0.0.0.0', 80);
  const r = k.connect(client(k, 'a'), '192.0.2.2', 80);
  expect(r.outcome, renderTrace(r.trace)).toBe('established');
  const entries = k.netns('b').conntrack.entries();
  expect(entries.map((e) => e.zone)).toEqual([7]);
  expect(
    eventsOf(r.trace, 'conntrack')
      .filter((e) => e.ns === 'b')
      .map((e) => `${e.state} zone ${e.zone}`),
  ).toEqual(['NEW zone 7', 'ESTABLISHED zone 7', 'ESTABLISHED zone 7']);
  // The client side (tracking on) is untouched: zone 0 there.
  expect(
    k
      .netns('a')
      .conntrack.entries()
      .map((e) => e.zone),
  ).toEqual([0]);
});

test('mangle PREROUTING runs before nat PREROUTING: a mark set in mangle is seen by a nat rule', () => {
  const k = pair();
  k.iptablesRestore(
    'b',
    4,
    table('mangle', '-A PREROUTING -p tcp --dport 80 -j MARK --set-mark 0x5') +
      table('nat', '-A PREROUTING -m mark --mark 0x5 -p tcp -j REDIRECT --to-ports 8080'),
  );
  listenTcp(k, 'b', '0.0.0.0', 80);
  const redirected = listenTcp(k, 'b', '0.0.0.0', 8080);
  const r = k.connect(client(k, 'a'), '192.0.2.2', 80);
  expect(r.outcome, renderTrace(r.trace)).toBe('established');
  expect(r.listener).toBe(redirected);
});

test('filter INPUT runs after routing: a DROP there stops local delivery but not forwarded traffic', () => {
  const k = routed();
  k.iptablesRestore('r', 4, table('filter', '-A INPUT -p tcp -j DROP'));
  listenTcp(k, 's', '0.0.0.0', 80);
  listenTcp(k, 'r', '0.0.0.0', 80);
  expect(k.connect(client(k, 'c'), '203.0.113.2', 80).outcome).toBe('established');
  const toRouter = k.connect(client(k, 'c'), '198.51.100.1', 80);
  expect(toRouter.outcome).toBe('timeout');
  expect(eventsOf(toRouter.trace, 'drop')[0]).toMatchObject({ ns: 'r', reason: 'DROP in filter INPUT' });
});

test('a DROP in filter FORWARD stops forwarded traffic but not local delivery', () => {
  const k = routed();
  k.iptablesRestore('r', 4, table('filter', '-A FORWARD -p tcp -j DROP'));
  listenTcp(k, 's', '0.0.0.0', 80);
  listenTcp(k, 'r', '0.0.0.0', 80);
  const through = k.connect(client(k, 'c'), '203.0.113.2', 80);
  expect(through.outcome).toBe('timeout');
  expect(eventsOf(through.trace, 'drop')[0]).toMatchObject({ ns: 'r', reason: 'DROP in filter FORWARD' });
  expect(k.connect(client(k, 'c'), '198.51.100.1', 80).outcome).toBe('established');
});

test('a REJECT on the way makes connect fail as refused, not time out', () => {
  const k = pair();
  listenTcp(k, 'b', '0.0.0.0', 80);
  k.iptablesRestore('b', 4, table('filter', '-A INPUT -p tcp --dport 80 -j REJECT --reject-with tcp-reset'));
  const r = k.connect(client(k, 'a'), '192.0.2.2', 80);
  expect(r.outcome).toBe('refused');
  k.iptablesRestore('b', 4, table('filter', '-A INPUT -p tcp --dport 80 -j DROP'));
  expect(k.connect(client(k, 'a'), '192.0.2.2', 80).outcome).toBe('timeout');
});

test('a SYN to a port nobody listens on is answered with RST: refused', () => {
  const k = pair();
  const r = k.connect(client(k, 'a'), '192.0.2.2', 81);
  expect(r.outcome).toBe('refused');
  expect(r.reason).toContain('RST');
});
