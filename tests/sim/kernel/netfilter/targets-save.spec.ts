import { test, expect } from '@playwright/test';
import { Netfilter } from '../../../../sim/kernel/netfilter/netfilter.js';
import { ctx, packet } from './fixtures.js';

function mangleOut(
  rules: string[],
  mark: number,
  ctmark: number | 'none',
): { mark: number; ctmark: number | undefined } {
  const nf = new Netfilter(4);
  nf.restore(['*mangle', ...rules.map((r) => `-A OUTPUT ${r}`), 'COMMIT', ''].join('\n'));
  const c = ctx({ hook: 'OUTPUT', packet: packet({ mark }), ct: ctmark === 'none' ? 'none' : { mark: ctmark } });
  nf.runTable('mangle', 'OUTPUT', c);
  return { mark: c.packet.mark, ctmark: c.ct?.mark };
}

test.describe('MARK arithmetic (xt_MARK: mark = (mark & ~mask) ^ value)', () => {
  test('--set-xmark, --set-mark, --and-mark, --or-mark, --xor-mark', () => {
    expect(mangleOut(['-j MARK --set-xmark 0x111/0xfff'], 0xabcdef, 0).mark).toBe(0xabc111);
    expect(mangleOut(['-j MARK --set-xmark 0x1/0x0'], 0x3, 0).mark).toBe(0x2); // xor semantics
    expect(mangleOut(['-j MARK --set-mark 0x5'], 0xff00, 0).mark).toBe(0x5);
    expect(mangleOut(['-j MARK --set-mark 0x5/0xf'], 0xff0a, 0).mark).toBe(0xff05);
    expect(mangleOut(['-j MARK --and-mark 0xf0'], 0xabc, 0).mark).toBe(0xb0);
    expect(mangleOut(['-j MARK --or-mark 0x3'], 0x10, 0).mark).toBe(0x13);
    expect(mangleOut(['-j MARK --xor-mark 0x3'], 0x11, 0).mark).toBe(0x12);
    expect(mangleOut(['-j MARK --set-xmark 0xffffffff/0xffffffff'], 0, 0).mark).toBe(0xffffffff);
  });
});

test.describe('CONNMARK (xt_CONNMARK)', () => {
  test('--set-xmark acts on the ctmark; no entry → no-op', () => {
    expect(mangleOut(['-j CONNMARK --set-xmark 0x111/0xfff'], 0, 0xf000).ctmark).toBe(0xf111);
    expect(mangleOut(['-j CONNMARK --set-mark 0x3/0x7'], 0, 0xff).ctmark).toBe(0xfb);
    expect(mangleOut(['-j CONNMARK --set-xmark 0x111/0xfff', '-j CONNMARK --restore-mark'], 0x5, 'none')).toEqual({
      mark: 0x5,
      ctmark: undefined,
    });
  });
  test('--save-mark: ct = (ct & ~ctmask) ^ (nf & nfmask); --restore-mark: nf = (nf & ~nfmask) ^ (ct & ctmask)', () => {
    expect(mangleOut(['-j CONNMARK --save-mark'], 0x1234, 0xffff0000).ctmark).toBe(0x1234);
    expect(mangleOut(['-j CONNMARK --save-mark --nfmask 0xff --ctmask 0xff'], 0x1234, 0xffff0000).ctmark).toBe(
      0xffff0034,
    );
    expect(mangleOut(['-j CONNMARK --save-mark --mask 0xf0'], 0x1234, 0x0f).ctmark).toBe(0x3f);
    expect(mangleOut(['-j CONNMARK --restore-mark'], 0x1234, 0x111).mark).toBe(0x111);
    expect(mangleOut(['-j CONNMARK --restore-mark --nfmask 0xfff --ctmask 0xfff'], 0xa000, 0x7111).mark).toBe(0xa111);
  });
});

test.describe('iptables-save normalisation (as iptables 1.8.9 nf_tables prints it, checked in a real netns)', () => {
  const cases: [string, string, string][] = [
    ['mangle', '-A OUTPUT -j MARK --set-mark 5', '-A OUTPUT -j MARK --set-xmark 0x5/0xffffffff'],
    ['mangle', '-A OUTPUT -j MARK --and-mark 5', '-A OUTPUT -j MARK --set-xmark 0x0/0xfffffffa'],
    ['mangle', '-A OUTPUT -j MARK --or-mark 5', '-A OUTPUT -j MARK --set-xmark 0x5/0x5'],
    ['mangle', '-A OUTPUT -j MARK --xor-mark 5', '-A OUTPUT -j MARK --set-xmark 0x5/0x0'],
    [
      'mangle',
      '-A OUTPUT -j CONNMARK --save-mark',
      '-A OUTPUT -j CONNMARK --save-mark --nfmask 0xffffffff --ctmask 0xffffffff',
    ],
    [
      'mangle',
      '-A OUTPUT -j CONNMARK --restore-mark --mask 0xff',
      '-A OUTPUT -j CONNMARK --restore-mark --nfmask 0xff --ctmask 0xff',
    ],
    ['mangle', '-A OUTPUT -j CONNMARK --set-mark 3/7', '-A OUTPUT -j CONNMARK --set-xmark 0x3/0x7'],
    [
      'mangle',
      '-A PREROUTING -p tcp -j TPROXY --on-port 15006 --tproxy-mark 0x111/0xfff',
      '-A PREROUTING -p tcp -j TPROXY --on-port 15006 --on-ip 0.0.0.0 --tproxy-mark 0x111/0xfff',
    ],
    [
      'mangle',
      '-A PREROUTING -p tcp -j TPROXY --on-port 1',
      '-A PREROUTING -p tcp -j TPROXY --on-port 1 --on-ip 0.0.0.0 --tproxy-mark 0x0/0x0',
    ],
    [
      'mangle',
      '-A PREROUTING -p tcp -j TPROXY --on-port 15006 --on-ip 127.0.0.1 --tproxy-mark 0x111',
      '-A PREROUTING -p tcp -j TPROXY --on-port 15006 --on-ip 127.0.0.1 --tproxy-mark 0x111/0xffffffff',
    ],
    [
      'mangle',
      '-A PREROUTING -p tcp -m multiport --dports 80,90:99 -m conntrack --ctstate RELATED,ESTABLISHED -j LOG --log-prefix "hi there" --log-level 4',
      '-A PREROUTING -p tcp -m multiport --dports 80,90:99 -m conntrack --ctstate RELATED,ESTABLISHED -j LOG --log-prefix "hi there"',
    ],
    [
      'mangle',
      '-A PREROUTING -m state --state NEW -m addrtype --dst-type LOCAL --limit-iface-in -m comment --comment "a b" -j ACCEPT',
      '-A PREROUTING -m state --state NEW -m addrtype --dst-type LOCAL --limit-iface-in -m comment --comment "a b" -j ACCEPT',
    ],
    [
      'mangle',
      '-A PREROUTING -p tcp --syn -j DROP',
      '-A PREROUTING -p tcp -m tcp --tcp-flags FIN,SYN,RST,ACK SYN -j DROP',
    ],
    ['filter', '-A INPUT -j REJECT', '-A INPUT -j REJECT --reject-with icmp-port-unreachable'],
    ['filter', '-A INPUT -p 47 -j ACCEPT', '-A INPUT -p gre -j ACCEPT'],
    ['filter', '-A INPUT -p all -j ACCEPT', '-A INPUT -j ACCEPT'],
    [
      'filter',
      '-A INPUT -p tcp -m tcp ! --dport 5:6 --sport 7 -j ACCEPT',
      '-A INPUT -p tcp -m tcp --sport 7 ! --dport 5:6 -j ACCEPT',
    ],
    [
      'filter',
      '-A INPUT -p tcp --dport 5 -m tcp --sport 7 -j ACCEPT',
      '-A INPUT -p tcp -m tcp --sport 7 --dport 5 -j ACCEPT',
    ],
    ['filter', '-A INPUT -p tcp --dport :100 -j ACCEPT', '-A INPUT -p tcp -m tcp --dport 0:100 -j ACCEPT'],
    ['filter', '-A INPUT -p tcp --dport 5:5 -j ACCEPT', '-A INPUT -p tcp -m tcp --dport 5 -j ACCEPT'],
    ['filter', '-A INPUT -m mark ! --mark 7 -j ACCEPT', '-A INPUT -m mark ! --mark 0x7 -j ACCEPT'],
    [
      'filter',
      '-A INPUT -m addrtype ! --src-type LOCAL,UNICAST -j ACCEPT',
      '-A INPUT -m addrtype ! --src-type UNICAST,LOCAL -j ACCEPT',
    ],
    [
      'filter',
      '-A INPUT -m conntrack --ctstate SNAT,INVALID,UNTRACKED -j ACCEPT',
      '-A INPUT -m conntrack --ctstate INVALID,UNTRACKED,SNAT -j ACCEPT',
    ],
    ['filter', '-A INPUT -j LOG --log-level debug', '-A INPUT -j LOG --log-level 7'],
    [
      'filter',
      '-A FORWARD -i eth0 -s 1.2.3.4/255.255.0.0 ! -o lo -d 5.0.0.0/8 -p udp -j ACCEPT',
      '-A FORWARD -s 1.2.0.0/16 -d 5.0.0.0/8 -i eth0 ! -o lo -p udp -j ACCEPT',
    ],
    [
      'filter',
      '-A INPUT -m comment --comment "say \\"hi\\"" -j ACCEPT',
      '-A INPUT -m comment --comment "say \\"hi\\"" -j ACCEPT',
    ],
    ['filter', '-A INPUT -m comment --comment "" -j ACCEPT', '-A INPUT -m comment --comment "" -j ACCEPT'],
    [
      'filter',
      '-A OUTPUT -m owner --uid-owner 5 --gid-owner 3 --socket-exists -j ACCEPT',
      '-A OUTPUT -m owner --socket-exists --uid-owner 5 --gid-owner 3 -j ACCEPT',
    ],
    [
      'nat',
      '-A OUTPUT -p tcp -m owner --uid-owner 1000-2000 --gid-owner 5 -j DNAT --to-destination 10.0.0.1:80-90',
      '-A OUTPUT -p tcp -m owner --uid-owner 1000-2000 --gid-owner 5 -j DNAT --to-destination 10.0.0.1:80-90',
    ],
    [
      'nat',
      '-A POSTROUTING -p tcp -j MASQUERADE --to-ports 1000-2000',
      '-A POSTROUTING -p tcp -j MASQUERADE --to-ports 1000-2000',
    ],
    [
      'nat',
      '-A POSTROUTING -p tcp ! --sport 1:5 -j SNAT --to-source 10.0.0.2:99',
      '-A POSTROUTING -p tcp -m tcp ! --sport 1:5 -j SNAT --to-source 10.0.0.2:99',
    ],
    [
      'nat',
      '-A POSTROUTING -p tcp -m conntrack ! --ctstate DNAT --ctorigdst 10.1.0.0/16 -j RETURN',
      '-A POSTROUTING -p tcp -m conntrack ! --ctstate DNAT --ctorigdst 10.1.0.0/16 -j RETURN',
    ],
    ['raw', '-A PREROUTING -j CT --notrack', '-A PREROUTING -j CT --notrack'],
  ];
  for (const [tbl, input, expected] of cases) {
    test(`${tbl}: ${input}`, () => {
      const nf = new Netfilter(4);
      nf.restore(`*${tbl}\n${input}\nCOMMIT\n`);
      expect(nf.rules().map((r) => r.text)).toEqual([expected]);
      const again = new Netfilter(4);
      again.restore(nf.save());
      expect(again.save()).toBe(nf.save());
    });
  }

  test('ip6tables forms: ipv6-icmp, [addr]:port, ::1/128, icmp6 reject default', () => {
    const nf = new Netfilter(6);
    nf.restore(
      '*nat\n-A OUTPUT -p icmpv6 -j ACCEPT\n-A OUTPUT -p udp -m multiport --sports 1,2:3 -j DNAT --to-destination [fd00::1]:80\n-A OUTPUT -d ::1 -p udp -m udp --sport 5 -j DNAT --to-destination fd00::1\nCOMMIT\n*filter\n-A INPUT -p tcp -j REJECT\nCOMMIT\n',
    );
    expect(nf.rules().map((r) => r.text)).toEqual([
      '-A OUTPUT -p ipv6-icmp -j ACCEPT',
      '-A OUTPUT -p udp -m multiport --sports 1,2:3 -j DNAT --to-destination [fd00::1]:80',
      '-A OUTPUT -d ::1/128 -p udp -m udp --sport 5 -j DNAT --to-destination fd00::1',
      '-A INPUT -p tcp -j REJECT --reject-with icmp6-port-unreachable',
    ]);
  });
});

test.describe('restore commands and noflush', () => {
  test('-I with position, -D by spec and by number, -R, -F, -X, -P, -N; noflush amends, flush replaces', () => {
    const nf = new Netfilter(4);
    nf.restore(
      '*filter\n:INPUT DROP [5:100]\n:A - [0:0]\n-A INPUT -p tcp -j ACCEPT\n-A INPUT -p udp -j ACCEPT\nCOMMIT\n',
    );
    nf.restore('*filter\n-I INPUT 2 -p icmp -j ACCEPT\n-I INPUT -j A\n-N B\n-A A -j B\nCOMMIT\n', { noflush: true });
    expect(nf.rules('filter').map((r) => r.text)).toEqual([
      '-A INPUT -j A',
      '-A INPUT -p tcp -j ACCEPT',
      '-A INPUT -p icmp -j ACCEPT',
      '-A INPUT -p udp -j ACCEPT',
      '-A A -j B',
    ]);
    expect(nf.policy('filter', 'INPUT')).toBe('DROP');
    expect(() => nf.restore('*filter\n-D INPUT -p sctp -j ACCEPT\nCOMMIT\n', { noflush: true })).toThrow(
      /no rule "-p sctp -j ACCEPT"/,
    );
    nf.restore(
      '*filter\n-D INPUT -p tcp -j ACCEPT\n-D INPUT 1\n-R INPUT 1 -p udp -j DROP\n-F A\n-X B\n-P INPUT ACCEPT\nCOMMIT\n',
      { noflush: true },
    );
    expect(nf.rules('filter').map((r) => r.text)).toEqual(['-A INPUT -p udp -j DROP', '-A INPUT -p udp -j ACCEPT']);
    expect(nf.policy('filter', 'INPUT')).toBe('ACCEPT');
    expect(nf.save('filter')).toContain(':A - [0:0]');
    expect(nf.save('filter')).not.toContain(':B - [0:0]');
    nf.restore('*filter\n-A OUTPUT -j DROP\nCOMMIT\n');
    expect(nf.save('filter')).toBe(
      '*filter\n:INPUT ACCEPT [0:0]\n:FORWARD ACCEPT [0:0]\n:OUTPUT ACCEPT [0:0]\n-A OUTPUT -j DROP\nCOMMIT\n',
    );
  });

  test('noflush: redeclaring an existing user chain flushes it', () => {
    const nf = new Netfilter(4);
    nf.restore('*nat\n:U - [0:0]\n-A U -j RETURN\n-A OUTPUT -j U\nCOMMIT\n');
    nf.restore('*nat\n:U - [0:0]\n-A U -p tcp -j REDIRECT\nCOMMIT\n', { noflush: true });
    expect(nf.rules('nat').map((r) => r.text)).toEqual(['-A OUTPUT -j U', '-A U -p tcp -j REDIRECT']);
  });
});
