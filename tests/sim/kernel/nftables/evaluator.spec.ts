/**
 * The nft evaluator, match by match and statement by statement, and the verdict flow within a
 * base chain (jump, goto, return, continue, policy). What the datapath does between chains is in
 * datapath.spec.ts.
 */
import { test, expect } from '@playwright/test';
import { CtTemplate } from '../../../../sim/kernel/ct-template.js';
import { chain, load, nctx, packet, runHook } from './fixtures.js';

/** Does the one rule (then `accept`, else the chain's policy drop) accept the packet? */
function hits(rule: string, c: ReturnType<typeof nctx>, hook = 'output'): boolean {
  const n = load(
    [
      `table inet t {`,
      ` chain c {`,
      `  type filter hook ${hook} priority 0; policy drop;`,
      `  ${rule} accept`,
      ' }',
      '}',
    ].join('\n'),
  );
  const hk = hook === 'output' ? 'OUTPUT' : hook === 'prerouting' ? 'PREROUTING' : 'INPUT';
  const r = runHook(n, c.family, hk, c);
  return r[0]!.verdict.kind === 'accept';
}

const out = (init: Parameters<typeof nctx>[0] extends infer T ? Partial<T> : never = {}): ReturnType<typeof nctx> =>
  nctx({ hook: 'OUTPUT', ...init });

test.describe('matches', () => {
  test('addresses: exact, prefix, !=, anonymous set, and the other family never matches', () => {
    const c = out({ packet: packet({ dst: '10.1.2.3' }) });
    expect(hits('ip daddr 10.1.2.3', c)).toBe(true);
    expect(hits('ip daddr 10.1.0.0/16', c)).toBe(true);
    expect(hits('ip daddr != 10.1.0.0/16', c)).toBe(false);
    expect(hits('ip daddr { 10.9.9.9, 10.1.2.0/24 }', c)).toBe(true);
    expect(hits('ip daddr != { 10.9.9.9 }', c)).toBe(true);
    // ip6 payload on an IPv4 packet: the nfproto dependency fails, even with !=
    expect(hits('ip6 daddr != ::1', c)).toBe(false);
    const v6 = out({ packet: packet({ src: 'fd00::1', dst: 'fd00::2' }) });
    expect(hits('ip6 daddr fd00::/64', v6)).toBe(true);
    expect(hits('ip daddr != 1.2.3.4', v6)).toBe(false);
  });

  test('a port match carries its protocol: tcp dport != 15008 never matches UDP', () => {
    expect(hits('tcp dport != 15008', out({ packet: packet({ proto: 'tcp', dport: 80 }) }))).toBe(true);
    expect(hits('tcp dport != 15008', out({ packet: packet({ proto: 'udp', dport: 80 }) }))).toBe(false);
    expect(hits('udp dport 53', out({ packet: packet({ proto: 'udp', dport: 53 }) }))).toBe(true);
    // th: any transport with ports
    expect(hits('th dport 53', out({ packet: packet({ proto: 'udp', dport: 53 }) }))).toBe(true);
    expect(hits('th dport 53', out({ packet: packet({ proto: 'tcp', dport: 53 }) }))).toBe(true);
    expect(hits('tcp dport 1000-2000', out({ packet: packet({ dport: 1500 }) }))).toBe(true);
    expect(hits('tcp dport { 1, 1500 }', out({ packet: packet({ dport: 1500 }) }))).toBe(true);
    expect(hits('tcp sport 40000', out())).toBe(true);
  });

  test('meta l4proto, meta nfproto', () => {
    expect(hits('meta l4proto tcp', out())).toBe(true);
    expect(hits('meta l4proto != tcp', out())).toBe(false);
    expect(hits('meta l4proto { udp, tcp }', out())).toBe(true);
    expect(hits('meta nfproto ipv6', out())).toBe(false);
    expect(hits('meta nfproto ipv4', out())).toBe(true);
  });

  test('marks: value, and MASK ==/!=, & MASK == V', () => {
    const c = out({ packet: packet({ mark: 0x1539 }) });
    expect(hits('mark and 0xfff == 0x539', c)).toBe(true);
    expect(hits('mark and 0xfff != 0x539', c)).toBe(false);
    expect(hits('meta mark & 0xfff == 0x539', c)).toBe(true);
    expect(hits('meta mark 0x1539', c)).toBe(true);
    expect(hits('meta mark 0x539', c)).toBe(false);
  });

  test('meta skuid/skgid: no socket, or a kernel socket without a file, never match — not even !=', () => {
    expect(hits('meta skuid 1000', out({ socket: { uid: 1000, gid: 1000 } }))).toBe(true);
    expect(hits('skuid != 1000', out({ socket: { uid: 0, gid: 0 } }))).toBe(true);
    expect(hits('meta skuid != 1000', out())).toBe(false);
    expect(hits('meta skuid != 1000', out({ kernelSocket: true }))).toBe(false);
    expect(hits('meta skgid != 5', out({ kernelSocket: true }))).toBe(false);
    expect(hits('meta skgid 7', out({ socket: { uid: 0, gid: 7 } }))).toBe(true);
  });

  test('iifname/oifname: no device reads as "" (oifname != lo matches in prerouting)', () => {
    expect(hits('oifname != "lo"', nctx({ hook: 'PREROUTING', inIface: 'eth0' }), 'prerouting')).toBe(true);
    expect(hits('iifname "eth0"', nctx({ hook: 'PREROUTING', inIface: 'eth0' }), 'prerouting')).toBe(true);
    expect(hits('iifname "eth*"', nctx({ hook: 'PREROUTING', inIface: 'eth1' }), 'prerouting')).toBe(true);
    expect(hits('oifname lo', out({ outIface: 'lo' }))).toBe(true);
    expect(hits('oifname != lo', out({ outIface: 'lo' }))).toBe(false);
  });

  test('tcp flags: bits set (implicit), & mask == value', () => {
    const syn = out({ packet: packet({ syn: true, ack: false }) });
    const synack = out({ packet: packet({ syn: true, ack: true }) });
    expect(hits('tcp flags syn', syn)).toBe(true);
    expect(hits('tcp flags syn', synack)).toBe(true);
    expect(hits('tcp flags & (syn|ack|rst|fin) == syn', syn)).toBe(true);
    expect(hits('tcp flags & (syn | ack) == syn', synack)).toBe(false);
    expect(hits('tcp flags == syn', synack)).toBe(false);
    expect(hits('tcp flags ack', syn)).toBe(false);
  });

  test('ct state / mark / zone / direction; without an entry only invalid/untracked states match', () => {
    const est = out({ ct: { state: 'ESTABLISHED', mark: 0x2111, zone: 3, direction: 'reply' } });
    expect(hits('ct state established,related', est)).toBe(true);
    expect(hits('ct state { new, established }', est)).toBe(true);
    expect(hits('ct state new', est)).toBe(false);
    expect(hits('ct state & (new | established) == 0', est)).toBe(false);
    expect(hits('ct mark and 0xfff == 0x111', est)).toBe(true);
    expect(hits('ct zone 3', est)).toBe(true);
    expect(hits('ct direction reply', est)).toBe(true);
    const none = out({ ct: 'none' });
    expect(hits('ct state invalid', none)).toBe(true);
    expect(hits('ct mark != 5', none)).toBe(false);
    expect(hits('ct zone != 5', none)).toBe(false);
  });

  test('named sets: elements added and deleted at run time count for the next packet', () => {
    const n = load(
      'add table inet t\nadd set inet t s { type ipv4_addr ; }\nadd chain inet t c { type filter hook output priority 0 ; policy drop ; }\nadd rule inet t c ip daddr @s accept\n',
    );
    const c = out({ packet: packet({ dst: '10.0.0.9' }) });
    expect(runHook(n, 4, 'OUTPUT', c)[0]!.verdict.kind).toBe('drop');
    n.addElements('inet', 't', 's', ['10.0.0.9']);
    expect(runHook(n, 4, 'OUTPUT', c)[0]!.verdict.kind).toBe('accept');
    n.apply('delete element inet t s { 10.0.0.9 }');
    expect(runHook(n, 4, 'OUTPUT', c)[0]!.verdict.kind).toBe('drop');
  });

  test('fib daddr type local', () => {
    expect(hits('fib daddr type local', out({ packet: packet({ dst: '10.0.0.1' }), local: ['10.0.0.1'] }))).toBe(true);
    expect(hits('fib daddr type local', out({ packet: packet({ dst: '10.0.0.2' }), local: ['10.0.0.1'] }))).toBe(false);
  });
});

test.describe('statements', () => {
  test('meta mark set: a value, ct mark, and X & M | V; without an entry `meta mark set ct mark` breaks the rule', () => {
    const n = load(
      chain([
        'meta mark set 0x5',
        'meta mark set meta mark & 0xf0 | 0x100 counter',
        'meta mark set ct mark accept',
        'drop',
      ]),
    );
    const c = out({ packet: packet({ mark: 0xff }), ct: { mark: 0x77 } });
    expect(runHook(n, 4, 'OUTPUT', c)[0]!.verdict.kind).toBe('accept');
    expect(c.packet.mark).toBe(0x77);
    const d = out({ packet: packet({ mark: 0xff }), ct: 'none' });
    expect(runHook(n, 4, 'OUTPUT', d)[0]!.verdict.kind).toBe('drop');
    expect(d.packet.mark).toBe(0x100); // 0x5 & 0xf0 | 0x100; then the ct read broke the accept rule
  });

  test('ct mark set ct mark & 0xfffff000 | 0x111 (upstream), and nothing on a template or without an entry', () => {
    const n = load(
      chain(['meta mark & 0xfff == 0x539 counter ct mark set ct mark & 0xfffff000 |  0x111'], 'prerouting', {
        priority: -150,
      }),
    );
    const c = nctx({ hook: 'PREROUTING', packet: packet({ mark: 0x539 }), ct: { mark: 0x12345 } });
    runHook(n, 4, 'PREROUTING', c);
    expect(c.ct!.mark).toBe(0x12111);
    const tmpl = new CtTemplate(1, 4);
    const t = Object.assign(nctx({ hook: 'PREROUTING', packet: packet({ mark: 0x539 }) }), { ct: tmpl });
    runHook(n, 4, 'PREROUTING', t);
    expect(tmpl.mark).toBe(0);
  });

  test('ct zone set and notrack call the context; log records its prefix', () => {
    const n = load(
      chain(['udp dport 53 ct zone set 1', 'tcp dport 80 notrack', 'log prefix "x: "'], 'output', { priority: -300 }),
    );
    const u = out({ packet: packet({ proto: 'udp', dport: 53 }) });
    runHook(n, 4, 'OUTPUT', u);
    expect(u.zone).toBe(1);
    expect(u.notrack).toBe(false);
    const t = out({ packet: packet({ proto: 'tcp', dport: 80 }) });
    runHook(n, 4, 'OUTPUT', t);
    expect(t.notrack).toBe(true);
    expect(t.logs).toEqual(['x: ']);
  });

  test("tproxy: a found socket goes on to the rule's verdict; none breaks the rule (the chain goes on)", () => {
    const n = load(
      chain(['meta l4proto tcp tproxy ip to :15001 meta mark set 0x111 accept', 'drop'], 'prerouting', {
        priority: -150,
      }),
    );
    const ok = nctx({ hook: 'PREROUTING', inIface: 'eth0', tproxyOk: true });
    expect(runHook(n, 4, 'PREROUTING', ok)[0]!.verdict.kind).toBe('accept');
    expect(ok.tproxied).toEqual([{ addr: 'default', port: 15001 }]);
    expect(ok.packet.mark).toBe(0x111);
    const none = nctx({ hook: 'PREROUTING', inIface: 'eth0', tproxyOk: false });
    expect(runHook(n, 4, 'PREROUTING', none)[0]!.verdict.kind).toBe('drop');
    expect(none.packet.mark).toBe(0);
    // tproxy ip: an IPv6 packet does not reach it
    const v6 = nctx({ hook: 'PREROUTING', inIface: 'eth0', packet: packet({ src: 'fd00::1' }) });
    runHook(n, 6, 'PREROUTING', v6);
    expect(v6.tproxied).toEqual([]);
  });

  test('NAT statements end the chain with their binding; dnat ip applies to IPv4 only', () => {
    const n = load(
      chain(['ip daddr 10.9.9.9 tcp dport 80 dnat to 10.0.0.1:8080', 'tcp dport 80 redirect to :15001'], 'output', {
        type: 'nat',
        priority: -100,
      }),
    );
    const a = out({ packet: packet({ dst: '10.9.9.9' }) });
    expect(runHook(n, 4, 'OUTPUT', a)[0]!.verdict).toMatchObject({
      kind: 'nat',
      action: { kind: 'dnat', ports: [8080, 8080] },
    });
    const b = out({ packet: packet({ dst: '10.9.9.8' }) });
    expect(runHook(n, 4, 'OUTPUT', b)[0]!.verdict).toEqual({
      kind: 'nat',
      action: { kind: 'redirect', ports: [15001, 15001] },
    });
  });

  test('reject: icmpx by default, tcp reset on request', () => {
    const n = load(chain(['tcp dport 1 reject with tcp reset', 'reject']));
    expect(runHook(n, 4, 'OUTPUT', out({ packet: packet({ dport: 1 }) }))[0]!.verdict).toEqual({
      kind: 'reject',
      with: 'tcp-reset',
    });
    expect(runHook(n, 4, 'OUTPUT', out())[0]!.verdict).toEqual({ kind: 'reject', with: 'icmp-port-unreachable' });
  });
});

test.describe('verdict flow in one base chain', () => {
  const doc = `table inet t {
  chain c { type filter hook output priority 0; policy drop;
    jump a
    goto b
  }
  chain a {
    tcp dport 1 accept
    continue
    tcp dport 2 return
    counter
  }
  chain b {
    tcp dport 3 accept
  }
}`;
  test('jump returns to the next rule; goto does not come back; falling off the base chain is the policy', () => {
    const n = load(doc);
    const r1 = n.run(n.chainsAt(4, 'OUTPUT')!.chains[0]!, out({ packet: packet({ dport: 1 }) }), true);
    expect(r1.verdict.kind).toBe('accept');
    expect(r1.steps.map((s) => `${s.chain}#${s.position}:${s.effect}`)).toEqual(['c#1:jump a', 'a#1:accept']);
    const r2 = n.run(n.chainsAt(4, 'OUTPUT')!.chains[0]!, out({ packet: packet({ dport: 2 }) }), true);
    expect(r2.steps.map((s) => `${s.chain}#${s.position}:${s.effect}`)).toEqual([
      'c#1:jump a',
      'a#2:continue',
      'a#3:return',
      'c#2:goto b',
      'c#0:drop',
    ]);
    expect(r2.verdict.kind).toBe('drop');
    const r3 = n.run(n.chainsAt(4, 'OUTPUT')!.chains[0]!, out({ packet: packet({ dport: 3 }) }), false);
    expect(r3.verdict.kind).toBe('accept');
    expect(r3.steps).toEqual([]);
  });

  test('an ip table is not consulted for IPv6 and an ip6 table not for IPv4; inet for both', () => {
    const n = load(
      `${chain(['drop'], 'output', { family: 'ip' })}\ntable ip6 u {\n chain c {\n  type filter hook output priority 0;\n }\n}\n`,
    );
    expect(n.chainsAt(4, 'OUTPUT')!.chains.map((c) => c.label)).toEqual(['ip t c']);
    expect(n.chainsAt(6, 'OUTPUT')!.chains.map((c) => c.label)).toEqual(['ip6 u c']);
    expect(
      load(chain([]))
        .chainsAt(6, 'OUTPUT')!
        .chains.map((c) => c.label),
    ).toEqual(['inet t c']);
  });

  test('needsConntrack: ct expressions and NAT need it (inet: both families), notrack and marks do not', () => {
    expect(load(chain(['meta mark set 1', 'notrack'], 'output', { priority: -300 })).needsConntrack(4)).toBe(false);
    const ct = load(`add table ip t\nadd chain ip t x\nadd rule ip t x ct state established accept\n`);
    expect([ct.needsConntrack(4), ct.needsConntrack(6)]).toEqual([true, false]);
    const nat = load(chain(['tcp dport 1 redirect to :5'], 'output', { type: 'nat' }));
    expect([nat.needsConntrack(4), nat.needsConntrack(6)]).toEqual([true, true]);
  });
});
