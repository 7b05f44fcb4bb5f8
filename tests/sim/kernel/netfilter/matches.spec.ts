import { test, expect } from '@playwright/test';
import { Netfilter } from '../../../../sim/kernel/netfilter/netfilter.js';
import { IpSets } from '../../../../sim/kernel/netfilter/ipset.js';
import type { Hook } from '../../../../sim/kernel/netfilter/types.js';
import { ctx, packet, type CtxInit } from './fixtures.js';

/** Does `spec` (filter or given table) match the packet described by init? Detected by a LOG target. */
function hits(spec: string, init: CtxInit, opts: { table?: string; family?: 4 | 6; ipsets?: IpSets } = {}): boolean {
  const t = opts.table ?? 'filter';
  const nf = new Netfilter(opts.family ?? 4, opts.ipsets ? { ipsets: opts.ipsets } : {});
  nf.restore(`*${t}\n-A ${init.hook} ${spec} -j LOG --log-prefix hit\nCOMMIT\n`);
  const c = ctx(init);
  nf.runTable(t as 'filter', init.hook, c);
  return c.logs.includes('hit');
}

const IN: Hook = 'INPUT';

test.describe('basic matches and their negations', () => {
  test('-s/-d prefixes and ! negation', () => {
    expect(hits('-s 10.244.0.0/16', { hook: IN })).toBe(true);
    expect(hits('-s 10.245.0.0/16', { hook: IN })).toBe(false);
    expect(hits('! -s 10.245.0.0/16', { hook: IN })).toBe(true);
    expect(hits('-d 10.244.2.7', { hook: IN })).toBe(true);
    expect(hits('! -d 10.244.2.7/32', { hook: IN })).toBe(false);
    expect(hits('-s 0.0.0.0/0', { hook: IN })).toBe(true);
    expect(hits('-s fd00::/8', { hook: IN, packet: packet({ src: 'fd00::1' }) }, { family: 6 })).toBe(true);
  });

  test('comma address lists expand to one rule per address, like iptables', () => {
    const nf = new Netfilter(4);
    nf.restore('*filter\n-A INPUT -s 10.0.0.0/8,192.0.2.1 -d 198.51.100.1,198.51.100.2 -j DROP\nCOMMIT\n');
    expect(nf.rules().map((r) => r.text)).toEqual([
      '-A INPUT -s 10.0.0.0/8 -d 198.51.100.1/32 -j DROP',
      '-A INPUT -s 10.0.0.0/8 -d 198.51.100.2/32 -j DROP',
      '-A INPUT -s 192.0.2.1/32 -d 198.51.100.1/32 -j DROP',
      '-A INPUT -s 192.0.2.1/32 -d 198.51.100.2/32 -j DROP',
    ]);
    expect(nf.rules().every((r) => r.line === 2)).toBe(true);
  });

  test('-i/-o with + wildcard and negation; a missing device compares as empty', () => {
    expect(hits('-i eth0', { hook: IN, inIface: 'eth0' })).toBe(true);
    expect(hits('-i eth+', { hook: IN, inIface: 'eth12' })).toBe(true);
    expect(hits('-i eth+', { hook: IN, inIface: 'veth1' })).toBe(false);
    expect(hits('! -i lo', { hook: IN, inIface: 'eth0' })).toBe(true);
    expect(hits('-o lo', { hook: 'OUTPUT', outIface: 'lo' })).toBe(true);
    expect(hits('! -o lo', { hook: 'OUTPUT' })).toBe(true);
    expect(hits('-o +', { hook: 'OUTPUT' })).toBe(true);
  });

  test('-p by name and number, all, negation; icmp in v6 is ipv6-icmp (58)', () => {
    expect(hits('-p tcp', { hook: IN })).toBe(true);
    expect(hits('-p 6', { hook: IN })).toBe(true);
    expect(hits('-p udp', { hook: IN })).toBe(false);
    expect(hits('! -p udp', { hook: IN })).toBe(true);
    expect(hits('-p all', { hook: IN })).toBe(true);
    expect(hits('-p icmp', { hook: IN, packet: packet({ proto: 'icmp' }) })).toBe(true);
    expect(hits('-p ipv6-icmp', { hook: IN, packet: packet({ proto: 'icmp', src: 'fd00::1' }) }, { family: 6 })).toBe(
      true,
    );
    expect(hits('-p icmpv6', { hook: IN, packet: packet({ proto: 'icmp', src: 'fd00::1' }) }, { family: 6 })).toBe(
      true,
    );
    expect(hits('-p icmp', { hook: IN, packet: packet({ proto: 'icmp', src: 'fd00::1' }) }, { family: 6 })).toBe(false);
  });
});

test.describe('port matches carry their protocol (Diekmann Ports_Fail lesson)', () => {
  test('port and range, ! negation, open-ended ranges', () => {
    expect(hits('-p tcp --dport 80', { hook: IN })).toBe(true);
    expect(hits('-p tcp --dport 81', { hook: IN })).toBe(false);
    expect(hits('-p tcp ! --dport 81', { hook: IN })).toBe(true);
    expect(hits('-p tcp --dport 70:90', { hook: IN })).toBe(true);
    expect(hits('-p tcp --dport :79', { hook: IN })).toBe(false);
    expect(hits('-p tcp --sport 40000:', { hook: IN })).toBe(true);
    expect(hits('-p udp -m udp --sport 53', { hook: IN, packet: packet({ proto: 'udp', sport: 53 }) })).toBe(true);
  });

  test('a negated tcp port does not match UDP packets (the port belongs to tcp)', () => {
    // ! --dport 22 inside -m tcp means "tcp and dport != 22", never "any protocol".
    const nf = new Netfilter(4);
    nf.restore(
      '*filter\n:C - [0:0]\n-A INPUT -j C\n-A INPUT -j ACCEPT\n-A C -p tcp --sport 22 -j RETURN\n-A C -p udp --dport 80 -j RETURN\n-A C -j DROP\nCOMMIT\n',
    );
    const v = (p: Parameters<typeof packet>[0]) =>
      nf.runTable('filter', 'INPUT', ctx({ hook: IN, packet: packet(p) })).verdict.kind;
    expect(v({ proto: 'tcp', sport: 22 })).toBe('accept');
    expect(v({ proto: 'udp', sport: 22, dport: 81 })).toBe('drop');
    expect(v({ proto: 'udp', dport: 80 })).toBe('accept');
    expect(v({ proto: 'tcp', dport: 80 })).toBe('drop');
  });

  test('multiport lists and ranges, ! negation, --ports matches either side', () => {
    expect(hits('-p tcp -m multiport --dports 22,70:90', { hook: IN })).toBe(true);
    expect(hits('-p tcp -m multiport --dports 22,443', { hook: IN })).toBe(false);
    expect(hits('-p tcp -m multiport ! --dports 22,443', { hook: IN })).toBe(true);
    expect(hits('-p tcp -m multiport --sports 40000', { hook: IN })).toBe(true);
    expect(hits('-p tcp -m multiport --ports 40000', { hook: IN })).toBe(true);
    expect(hits('-p udp -m multiport --ports 80', { hook: IN })).toBe(false);
  });

  test('--tcp-flags and --syn', () => {
    expect(hits('-p tcp --syn', { hook: IN, packet: packet({ syn: true }) })).toBe(true);
    expect(hits('-p tcp --syn', { hook: IN, packet: packet({ syn: true, ack: true }) })).toBe(false);
    expect(hits('-p tcp ! --syn', { hook: IN, packet: packet({ syn: true, ack: true }) })).toBe(true);
    expect(hits('-p tcp --tcp-flags SYN,ACK ACK', { hook: IN, packet: packet({ syn: false, ack: true }) })).toBe(true);
  });
});

test.describe('mark and connmark matches', () => {
  test('--mark value/mask and negation', () => {
    expect(hits('-m mark --mark 0x539/0xfff', { hook: IN, packet: packet({ mark: 0x10539 }) })).toBe(true);
    expect(hits('-m mark --mark 0x539', { hook: IN, packet: packet({ mark: 0x10539 }) })).toBe(false);
    expect(hits('-m mark ! --mark 0x539/0xfff', { hook: IN, packet: packet({ mark: 0x111 }) })).toBe(true);
    expect(hits('-m mark --mark 1337/4095', { hook: IN, packet: packet({ mark: 0x539 }) })).toBe(true);
  });
  test('connmark reads ct.mark; no conntrack entry never matches (even negated)', () => {
    expect(hits('-m connmark --mark 0x111/0xfff', { hook: IN, ct: { mark: 0x7111 } })).toBe(true);
    expect(hits('-m connmark ! --mark 0x111/0xfff', { hook: IN, ct: { mark: 0x7111 } })).toBe(false);
    expect(hits('-m connmark ! --mark 0x111/0xfff', { hook: IN, ct: 'none' })).toBe(false);
  });
});

test.describe('conntrack / state', () => {
  test('--ctstate lists, negation, SNAT/DNAT virtual states, UNTRACKED without an entry', () => {
    expect(hits('-m conntrack --ctstate RELATED,ESTABLISHED', { hook: IN, ct: { state: 'ESTABLISHED' } })).toBe(true);
    expect(hits('-m conntrack --ctstate RELATED,ESTABLISHED', { hook: IN, ct: { state: 'NEW' } })).toBe(false);
    expect(hits('-m conntrack ! --ctstate NEW', { hook: IN, ct: { state: 'INVALID' } })).toBe(true);
    expect(hits('-m conntrack --ctstate DNAT', { hook: IN, ct: { state: 'ESTABLISHED', dnat: true } })).toBe(true);
    expect(hits('-m conntrack --ctstate UNTRACKED', { hook: IN, ct: 'none' })).toBe(true);
    expect(hits('-m state --state NEW', { hook: IN })).toBe(true);
  });
  test('--ctorigdst / --ctorigsrc read the original tuple', () => {
    expect(
      hits('-m conntrack --ctorigdst 10.96.0.0/16', { hook: IN, ct: { origDst: { family: 4, value: 0x0a600005n } } }),
    ).toBe(true);
    expect(hits('-m conntrack ! --ctorigsrc 10.244.1.5', { hook: IN })).toBe(false);
  });
});

test.describe('owner match (xt_owner)', () => {
  const O: Hook = 'OUTPUT';
  test('--socket-exists matches exactly when the packet has a local socket', () => {
    expect(hits('-m owner --socket-exists', { hook: O, socket: { uid: 0, gid: 0 } })).toBe(true);
    expect(hits('-m owner --socket-exists', { hook: O })).toBe(false);
    expect(hits('-m owner ! --socket-exists', { hook: O })).toBe(true);
    expect(hits('-m owner ! --socket-exists', { hook: O, socket: { uid: 0, gid: 0 } })).toBe(false);
  });
  test('--uid-owner/--gid-owner single and ranges; without a socket only fully negated criteria match', () => {
    expect(hits('-m owner --uid-owner 1337', { hook: O, socket: { uid: 1337, gid: 0 } })).toBe(true);
    expect(hits('-m owner --uid-owner 1000-2000', { hook: O, socket: { uid: 999, gid: 0 } })).toBe(false);
    expect(hits('-m owner ! --uid-owner 1000-2000 --gid-owner 5', { hook: O, socket: { uid: 999, gid: 5 } })).toBe(
      true,
    );
    expect(hits('-m owner --uid-owner 0', { hook: O })).toBe(false);
    expect(hits('-m owner ! --uid-owner 0', { hook: O })).toBe(true);
  });
});

test.describe('addrtype via ctx.addrType', () => {
  test('--dst-type LOCAL, negation, several types, --limit-iface-in passes the ingress device', () => {
    expect(hits('-m addrtype --dst-type LOCAL', { hook: IN, local: ['10.244.2.7'] })).toBe(true);
    expect(hits('-m addrtype --dst-type LOCAL', { hook: IN })).toBe(false);
    expect(hits('-m addrtype ! --src-type LOCAL', { hook: IN, local: ['10.244.2.7'] })).toBe(true);
    expect(hits('-m addrtype --dst-type MULTICAST,UNICAST', { hook: IN })).toBe(true);
    expect(
      hits(
        '-m addrtype --dst-type LOCAL --limit-iface-in',
        { hook: 'PREROUTING', inIface: 'eth0', local: ['10.244.2.7'] },
        { table: 'mangle' },
      ),
    ).toBe(false);
    expect(
      hits(
        '-m addrtype --dst-type LOCAL --limit-iface-in',
        { hook: 'PREROUTING', inIface: 'eth0', localByIface: { eth0: ['10.244.2.7'] } },
        { table: 'mangle' },
      ),
    ).toBe(true);
  });
});

test.describe('ipset match and registry', () => {
  test('src/dst membership, negation, hash:net prefixes, later adds are seen without reloading rules', () => {
    const sets = new IpSets();
    sets.create('pods', 'hash:ip', 4, { comment: true });
    sets.create('nets', 'hash:net', 4);
    sets.add('pods', '10.244.2.7', { comment: 'uid-1' });
    sets.add('nets', '10.244.0.0/23');
    const o = { ipsets: sets };
    expect(hits('-m set --match-set pods dst', { hook: IN, ipsets: sets }, o)).toBe(true);
    expect(hits('-m set --match-set pods src', { hook: IN, ipsets: sets }, o)).toBe(false);
    expect(hits('-m set ! --match-set pods src', { hook: IN, ipsets: sets }, o)).toBe(true);
    expect(hits('-m set --match-set nets src', { hook: IN, ipsets: sets }, o)).toBe(true);
    expect(hits('-m set --match-set nets dst', { hook: IN, ipsets: sets }, o)).toBe(false);
    sets.add('nets', '10.244.2.0/24');
    expect(hits('-m set --match-set nets dst', { hook: IN, ipsets: sets }, o)).toBe(true);
    sets.del('pods', '10.244.2.7');
    expect(hits('-m set --match-set pods dst', { hook: IN, ipsets: sets }, o)).toBe(false);
  });

  test('IpSets: add/del/test, family and duplicate errors, save/restore round trip, atomic restore', () => {
    const s = new IpSets();
    s.restore(
      'create istio-inpod-probes-v4 hash:ip family inet hashsize 1024 maxelem 65536 comment\nadd istio-inpod-probes-v4 10.244.1.9 comment "pod-a"\nadd istio-inpod-probes-v4 10.244.1.10 comment "pod b"\n',
    );
    expect(s.test('istio-inpod-probes-v4', '10.244.1.9')).toBe(true);
    expect(s.test('istio-inpod-probes-v4', '10.244.1.11')).toBe(false);
    expect(s.entries('istio-inpod-probes-v4')).toEqual([
      { text: '10.244.1.10', comment: 'pod b' },
      { text: '10.244.1.9', comment: 'pod-a' },
    ]);
    expect(() => s.add('istio-inpod-probes-v4', 'fd00::1')).toThrow(/family inet; "fd00::1" is IPv6/);
    expect(() => s.add('istio-inpod-probes-v4', '10.244.1.9')).toThrow(/already added/);
    s.add('istio-inpod-probes-v4', '10.244.1.9', { exist: true, comment: 'x' });
    expect(() => s.del('istio-inpod-probes-v4', '10.0.0.1')).toThrow(/is not added/);
    expect(() => s.create('bad', 'hash:ip,port' as 'hash:ip', 4)).toThrow(/not supported/);
    const t = new IpSets();
    t.restore(s.save());
    expect(t.save()).toBe(s.save());
    const before = s.save();
    expect(() => s.restore('add istio-inpod-probes-v4 10.244.1.50\nadd nosuch 1.2.3.4\n')).toThrow(
      /line 2: ipset nosuch does not exist/,
    );
    expect(s.save()).toBe(before);
    expect(() => s.restore('create x hash:ip timeout 5\n')).toThrow(/create option "timeout" is not supported/);
    s.destroy('istio-inpod-probes-v4');
    expect(s.get('istio-inpod-probes-v4')).toBeUndefined();
  });
});
