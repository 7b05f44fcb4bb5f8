import { test, expect } from '@playwright/test';
import { Netfilter } from '../../../../sim/kernel/netfilter/netfilter.js';
import { ctx, packet, table } from './fixtures.js';

function load(text: string, family: 4 | 6 = 4): Netfilter {
  const nf = new Netfilter(family);
  nf.restore(text);
  return nf;
}

test.describe('chain traversal: jump, return, goto, policy (ipt_do_table, iptables(8))', () => {
  test('falling off a user chain returns to the rule after the jump', () => {
    const nf = load(table('filter', ['A'], ['-A INPUT -j A', '-A INPUT -j DROP', '-A A -p udp -j ACCEPT']));
    const r = nf.runTable('filter', 'INPUT', ctx({ hook: 'INPUT', inIface: 'eth0' }));
    expect(r.verdict).toEqual({ kind: 'drop' });
    expect(r.steps.map((s) => `${s.chain}:${s.position}:${s.effect}`)).toEqual([
      'INPUT:1:jump A',
      'A:0:return',
      'INPUT:2:DROP',
    ]);
  });

  test('a matching RETURN in a user chain returns to the caller; later rules of that chain are skipped', () => {
    const nf = load(
      table('filter', ['A'], ['-A INPUT -j A', '-A INPUT -j ACCEPT', '-A A -p tcp -j RETURN', '-A A -j DROP']),
    );
    expect(nf.runTable('filter', 'INPUT', ctx({ hook: 'INPUT' })).verdict).toEqual({ kind: 'accept' });
    expect(nf.runTable('filter', 'INPUT', ctx({ hook: 'INPUT', packet: packet({ proto: 'udp' }) })).verdict).toEqual({
      kind: 'drop',
    });
  });

  test('RETURN in a built-in chain applies the policy', () => {
    const nf = load(table('filter', [], ['-A INPUT -p tcp -j RETURN', '-A INPUT -j ACCEPT'], { INPUT: 'DROP' }));
    const r = nf.runTable('filter', 'INPUT', ctx({ hook: 'INPUT' }));
    expect(r.verdict).toEqual({ kind: 'drop' });
    expect(r.steps.at(-1)).toMatchObject({ position: 0, text: 'policy DROP', effect: 'DROP' });
  });

  test('falling off a built-in chain applies its policy', () => {
    const nf = load(table('filter', [], ['-A OUTPUT -p udp -j ACCEPT'], { OUTPUT: 'DROP' }));
    expect(nf.runTable('filter', 'OUTPUT', ctx({ hook: 'OUTPUT' })).verdict).toEqual({ kind: 'drop' });
    expect(nf.runTable('filter', 'OUTPUT', ctx({ hook: 'OUTPUT', packet: packet({ proto: 'udp' }) })).verdict).toEqual({
      kind: 'accept',
    });
  });

  test('goto example (Semantics_Goto.thy): main: call foo; deny-all, foo: goto bar, bar: [] → deny-all still runs', () => {
    const nf = load(table('filter', ['FOO', 'BAR'], ['-A INPUT -j FOO', '-A INPUT -j DROP', '-A FOO -g BAR']));
    const r = nf.runTable('filter', 'INPUT', ctx({ hook: 'INPUT' }));
    expect(r.verdict).toEqual({ kind: 'drop' });
    expect(r.steps.map((s) => s.effect)).toEqual(['jump FOO', 'goto BAR', 'return', 'DROP']);
  });

  test('after a goto, the rest of the goto-ing chain is skipped (no frame is pushed for it)', () => {
    const nf = load(
      table('filter', ['FOO', 'BAR'], ['-A INPUT -j FOO', '-A INPUT -j ACCEPT', '-A FOO -g BAR', '-A FOO -j DROP']),
    );
    expect(nf.runTable('filter', 'INPUT', ctx({ hook: 'INPUT' })).verdict).toEqual({ kind: 'accept' });
  });

  test('goto from a built-in chain: when the target ends, the built-in policy applies', () => {
    const nf = load(table('filter', ['BAR'], ['-A INPUT -g BAR', '-A INPUT -j ACCEPT'], { INPUT: 'DROP' }));
    expect(nf.runTable('filter', 'INPUT', ctx({ hook: 'INPUT' })).verdict).toEqual({ kind: 'drop' });
  });

  test('RETURN inside a goto target returns to the chain that jumped (not to the goto-ing chain)', () => {
    const nf = load(
      table(
        'filter',
        ['A', 'B', 'C'],
        [
          '-A INPUT -j A',
          '-A INPUT -j DROP',
          '-A A -j B',
          '-A A -j ACCEPT',
          '-A B -g C',
          '-A B -j DROP',
          '-A C -j RETURN',
        ],
      ),
    );
    // INPUT → A (jump) → B (jump) → C (goto): RETURN pops to A, rule 2 ACCEPT.
    expect(nf.runTable('filter', 'INPUT', ctx({ hook: 'INPUT' })).verdict).toEqual({ kind: 'accept' });
  });

  test('nested jumps unwind in order', () => {
    const nf = load(
      table(
        'mangle',
        ['A', 'B'],
        [
          '-A PREROUTING -j A',
          '-A PREROUTING -j MARK --or-mark 0x4',
          '-A A -j B',
          '-A A -j MARK --or-mark 0x2',
          '-A B -j MARK --or-mark 0x1',
        ],
      ),
    );
    const c = ctx({ hook: 'PREROUTING', inIface: 'eth0' });
    expect(nf.runTable('mangle', 'PREROUTING', c).verdict).toEqual({ kind: 'accept' });
    expect(c.packet.mark).toBe(7);
  });

  test('a rule without a target only counts and processing continues', () => {
    const nf = load(table('filter', [], ['-A INPUT -p tcp', '-A INPUT -j DROP']));
    const r = nf.runTable('filter', 'INPUT', ctx({ hook: 'INPUT' }));
    expect(r.verdict).toEqual({ kind: 'drop' });
    expect(r.steps.length).toBe(2);
  });

  test('steps carry table, chain, position, restore line and normalised text', () => {
    const nf = new Netfilter(4);
    nf.restore('*nat\n:U - [0:0]\n\n# comment\n-A OUTPUT -p tcp --dport 80 -j U\n-A U -j REDIRECT\nCOMMIT\n', {
      source: 'x.rules',
    });
    const r = nf.runTable('nat', 'OUTPUT', ctx({ hook: 'OUTPUT', outIface: 'eth0' }));
    expect(r.steps[0]).toEqual({
      table: 'nat',
      chain: 'OUTPUT',
      position: 1,
      line: 5,
      text: '-A OUTPUT -p tcp -m tcp --dport 80 -j U',
      effect: 'jump U',
    });
    expect(r.steps[1]).toMatchObject({ chain: 'U', position: 1, line: 6, effect: 'REDIRECT' });
    expect(r.verdict).toEqual({ kind: 'nat', action: { kind: 'redirect' } });
    expect(nf.runTable('nat', 'OUTPUT', ctx({ hook: 'OUTPUT' }), { trace: false }).steps).toEqual([]);
  });

  test('non-terminating targets continue: MARK, CONNMARK, LOG, CT, NOTRACK', () => {
    const nf = load(
      '*raw\n-A OUTPUT -j CT --zone 7\n-A OUTPUT -j LOG --log-prefix "p: "\n-A OUTPUT -j NOTRACK\n-A OUTPUT -j DROP\nCOMMIT\n',
    );
    const c = ctx({ hook: 'OUTPUT' });
    expect(nf.runTable('raw', 'OUTPUT', c).verdict).toEqual({ kind: 'drop' });
    expect(c.zone).toBe(7);
    expect(c.notrack).toBe(true);
    expect(c.logs).toEqual(['p: ']);
  });

  test('TPROXY ends the table with its verdict; --on-ip/--tproxy-mark carried', () => {
    const nf = load(
      '*mangle\n-A PREROUTING -p tcp -j TPROXY --on-port 15006 --tproxy-mark 0x111/0xfff\n-A PREROUTING -j DROP\nCOMMIT\n',
    );
    const r = nf.runTable('mangle', 'PREROUTING', ctx({ hook: 'PREROUTING', inIface: 'eth0' }));
    expect(r.verdict).toEqual({ kind: 'tproxy', port: 15006, addr: undefined, mark: { value: 0x111, mask: 0xfff } });
  });

  test('REJECT yields its --reject-with; DNAT/SNAT/MASQUERADE carry address and ports', () => {
    const nf = load(
      '*filter\n-A INPUT -p tcp -j REJECT --reject-with tcp-reset\nCOMMIT\n*nat\n-A OUTPUT -p tcp -j DNAT --to-destination 10.96.0.1:80-90\n-A POSTROUTING -p udp -j MASQUERADE --to-ports 1000-2000\n-A POSTROUTING -j SNAT --to-source 192.0.2.1\nCOMMIT\n',
    );
    expect(nf.runTable('filter', 'INPUT', ctx({ hook: 'INPUT' })).verdict).toEqual({
      kind: 'reject',
      with: 'tcp-reset',
    });
    expect(nf.runTable('nat', 'OUTPUT', ctx({ hook: 'OUTPUT' })).verdict).toEqual({
      kind: 'nat',
      action: { kind: 'dnat', addr: { family: 4, value: 0x0a600001n }, ports: [80, 90] },
    });
    expect(
      nf.runTable('nat', 'POSTROUTING', ctx({ hook: 'POSTROUTING', packet: packet({ proto: 'udp' }) })).verdict,
    ).toEqual({ kind: 'nat', action: { kind: 'masquerade', ports: [1000, 2000] } });
    expect(nf.runTable('nat', 'POSTROUTING', ctx({ hook: 'POSTROUTING' })).verdict).toEqual({
      kind: 'nat',
      action: { kind: 'snat', addr: { family: 4, value: 0xc0000201n } },
    });
  });

  test('isEmpty / hasRules let the datapath skip empty tables', () => {
    const nf = load(table('filter', [], ['-A INPUT -j ACCEPT'], { FORWARD: 'DROP' }));
    expect(nf.isEmpty('filter')).toBe(false);
    expect(nf.isEmpty('nat')).toBe(true);
    expect(nf.hasRules('filter', 'INPUT')).toBe(true);
    expect(nf.hasRules('filter', 'FORWARD')).toBe(true);
    expect(nf.hasRules('filter', 'OUTPUT')).toBe(false);
    expect(nf.hasRules('raw', 'INPUT')).toBe(false);
  });
});
