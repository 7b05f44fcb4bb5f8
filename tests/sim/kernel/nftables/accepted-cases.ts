/**
 * Documents the model takes, one per supported form: checked in the model (parser.spec.ts) and
 * against real nft, whose own listing of each must read back into the model
 * (tests/netns/fidelity/nftables-parser.spec.ts).
 */
import { chain } from './fixtures.js';

const OUT = [
  'ip daddr 10.1.2.3 accept',
  'ip daddr != 10.1.0.0/16 accept',
  'ip saddr { 10.9.9.9, 10.1.2.0/24 } accept',
  'ip6 daddr != ::1 accept',
  'ip6 saddr fd00::/64 counter',
  'tcp dport != 15008 accept',
  'tcp dport 1000-2000 accept',
  'tcp dport { 22, 80-90 } accept',
  'udp sport 53 accept',
  'th dport 53 accept',
  'meta l4proto tcp accept',
  'meta l4proto != udp accept',
  'meta l4proto { tcp, udp } accept',
  'meta nfproto ipv6 accept',
  'mark and 0xfff != 0x539 counter accept',
  'meta mark & 0xfff == 0x539 accept',
  'meta mark 0x1 accept',
  'meta skuid 1000 accept',
  'skuid != 1000 accept',
  'meta skgid 7 accept',
  'oifname != "lo" accept',
  'oifname lo accept',
  'iifname "eth*" accept',
  'tcp flags syn accept',
  'tcp flags & (syn|ack|rst|fin) == syn accept',
  'tcp flags == syn accept',
  'ct state established,related accept',
  'ct state { new, established } accept',
  'ct state & (new | established) == 0 accept',
  'ct state invalid drop',
  'ct mark and 0xfff == 0x111 counter meta mark set ct mark',
  'ct zone 3 accept',
  'ct direction reply accept',
  'fib daddr type local accept',
  'meta mark set 0x5',
  'meta mark set meta mark & 0xf0 | 0x100',
  'meta mark & 0xfff == 0x539 counter ct mark set ct mark & 0xfffff000 |  0x111',
  'log prefix "x: " level info',
  'counter packets 3 bytes 120',
  'tcp dport 1 reject with tcp reset',
  'reject',
  'accept comment "ours"',
];

export const ACCEPTED: { readonly name: string; readonly doc: string }[] = [
  ...OUT.map((r) => ({ name: r, doc: chain([r]) })),
  {
    name: 'raw: ct zone set, notrack',
    doc: chain(['udp dport 53 ct zone set 1', 'tcp dport 80 notrack'], 'output', { priority: 'raw' }),
  },
  {
    name: 'nat: redirect, dnat ip, snat, masquerade',
    doc: [
      chain(
        [
          'tcp dport 80 redirect to :8080',
          'ip daddr 10.9.9.9 tcp dport 80 dnat to 10.0.0.1:8080',
          'tcp dport 81 dnat ip6 to [fd00::1]:81',
        ],
        'output',
        { type: 'nat', priority: -100 },
      ),
      'table ip n {',
      '  chain post {',
      '    type nat hook postrouting priority srcnat; policy accept;',
      '    ip daddr 10.0.0.0/8 snat to 10.1.1.1',
      '    oifname "eth0" masquerade',
      '  }',
      '}',
    ].join('\n'),
  },
  {
    name: 'tproxy at prerouting',
    doc: chain(
      ['meta l4proto tcp tproxy ip to :15001 meta mark set 0x111 accept', 'tcp dport 1 tproxy ip6 to [::1]:15001'],
      'prerouting',
      {
        priority: 'mangle',
      },
    ),
  },
  {
    name: 'verdict flow and policy',
    doc: `table inet t {
  chain c { type filter hook output priority filter + 5; policy drop;
    jump a
    goto b
  }
  chain a {
    tcp dport 1 accept
    continue
    tcp dport 2 return
  }
  chain b {
    tcp dport 3 accept
  }
}`,
  },
  {
    name: 'sets: declared, used, elements added and deleted',
    doc: `add table inet s
add set inet s v4 { type ipv4_addr ; flags interval ; comment "probes" ; }
add set inet s ports { type inet_service ; }
add element inet s v4 { 10.0.0.0/8, 192.168.1.1 }
add element inet s ports { 80, 443 }
delete element inet s v4 { 192.168.1.1 }
add chain inet s c { type filter hook input priority 0 ; }
add rule inet s c ip saddr @v4 tcp dport @ports accept
insert rule inet s c meta mark 0x1 drop
`,
  },
  {
    name: 'route chain',
    doc: chain(['tcp dport 7000 meta mark set 0x1'], 'output', { type: 'route', priority: 'mangle' }),
  },
  { name: 'ip6 family', doc: chain(['ip6 daddr ::1 accept'], 'input', { family: 'ip6' }) },
];
