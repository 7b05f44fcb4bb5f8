import { test, expect } from '@playwright/test';
import { Netfilter, RestoreError } from '../../../../sim/kernel/netfilter/netfilter.js';
import { IpSets } from '../../../../sim/kernel/netfilter/ipset.js';
import { ISTIO_INPOD_V4 } from './fixtures.js';

/** Restore `text`, expect a RestoreError at `line` whose message matches `re`. */
function rejects(text: string, line: number, re: RegExp, family: 4 | 6 = 4, nf = new Netfilter(family)): RestoreError {
  let err: unknown;
  try {
    nf.restore(text, { source: 'case.rules' });
  } catch (e) {
    err = e;
  }
  expect(err).toBeInstanceOf(RestoreError);
  const re2 = err as RestoreError;
  expect(re2.line, re2.message).toBe(line);
  expect(re2.source).toBe('case.rules');
  expect(re2.message).toMatch(re);
  expect(re2.message).toContain(`case.rules:${line}:`);
  expect(re2.message).toContain(`in line: ${text.split('\n')[line - 1] ?? ''}`);
  return re2;
}

const f = (...rules: string[]): string => ['*filter', ':U - [0:0]', ...rules, 'COMMIT', ''].join('\n');
const n = (...rules: string[]): string => ['*nat', ':U - [0:0]', ':V - [0:0]', ...rules, 'COMMIT', ''].join('\n');
const m = (...rules: string[]): string => ['*mangle', ':U - [0:0]', ...rules, 'COMMIT', ''].join('\n');

test.describe('iptables-restore rejects what the kernel or iptables rejects, naming the line', () => {
  const cases: [string, string, number, RegExp, (4 | 6)?][] = [
    [
      'unknown match module',
      f('-A INPUT -m recent --rcheck -j DROP'),
      3,
      /match module "recent" is not supported.*supported: tcp, udp/,
    ],
    [
      'unknown option of a loaded module',
      f('-A INPUT -m mark --bogus 1 -j DROP'),
      3,
      /unknown option "--bogus" for modules mark/,
    ],
    ['port option without -p', f('-A INPUT --dport 80 -j DROP'), 3, /unknown option "--dport".*forget -m or -p/],
    [
      '-m tcp without -p tcp (xt_tcpudp checks the protocol)',
      f('-A INPUT -m tcp --dport 80 -j DROP'),
      3,
      /tcp match needs `-p tcp'/,
    ],
    ['multiport without -p', f('-A INPUT -m multiport --dports 80 -j DROP'), 3, /multiport match needs/],
    ['unknown target', f('-A INPUT -j QUEUEX'), 3, /no such target or chain "?QUEUEX"?|-j QUEUEX: no such target/],
    ['jump to an undeclared chain', f('-A INPUT -j NOPE'), 3, /-j NOPE: no such target or chain/],
    ['jump to a built-in chain', f('-A U -j INPUT'), 3, /cannot jump to a built-in chain/],
    ['goto a built-in chain', f('-A U -g OUTPUT'), 3, /cannot goto a built-in chain/],
    ['IPv6 address in iptables', f('-A INPUT -s fd00::1 -j DROP'), 3, /IPv6 address but this is iptables/],
    ['IPv4 address in ip6tables', f('-A INPUT -d 10.0.0.1 -j DROP'), 3, /IPv4 address but this is ip6tables/, 6],
    ['host name instead of address', f('-A INPUT -s example.com -j DROP'), 3, /host names are not supported/],
    ['bad prefix length', f('-A INPUT -s 10.0.0.0/33 -j DROP'), 3, /invalid prefix length/],
    ['non-contiguous dotted mask', f('-A INPUT -s 10.0.0.0/255.0.255.0 -j DROP'), 3, /not contiguous/],
    ['bad port', f('-A INPUT -p tcp --dport 70000 -j DROP'), 3, /"70000" is not a port/],
    ['reversed port range', f('-A INPUT -p udp --sport 90:80 -j DROP'), 3, /invalid port range "90:80"/],
    ['service name as port', f('-A INPUT -p tcp --dport http -j DROP'), 3, /service names are not supported/],
    ['bad mark', f('-A INPUT -m mark --mark 0xzz -j DROP'), 3, /is not a number/],
    ['mark too big', f('-A INPUT -m mark --mark 0x1ffffffff -j DROP'), 3, /is not a number|does not fit/],
    [
      'REDIRECT outside nat',
      f('-A INPUT -p tcp -j REDIRECT --to-ports 1'),
      3,
      /REDIRECT is not valid in the filter table/,
    ],
    [
      'REDIRECT in nat POSTROUTING',
      n('-A POSTROUTING -p tcp -j REDIRECT'),
      4,
      /target REDIRECT is used at nat POSTROUTING.*only at PREROUTING, OUTPUT/,
    ],
    [
      'DNAT in a user chain reached from POSTROUTING',
      n('-A U -p tcp -j DNAT --to-destination 10.0.0.1', '-A POSTROUTING -j U'),
      4,
      /DNAT is used at nat POSTROUTING \(chain U is reached from POSTROUTING\)/,
    ],
    ['SNAT in nat PREROUTING', n('-A PREROUTING -j SNAT --to-source 10.0.0.1'), 4, /SNAT is used at nat PREROUTING/],
    ['MASQUERADE in nat OUTPUT', n('-A OUTPUT -j MASQUERADE'), 4, /MASQUERADE is used at nat OUTPUT/],
    ['TPROXY in mangle OUTPUT', m('-A OUTPUT -p tcp -j TPROXY --on-port 1'), 3, /TPROXY is used at mangle OUTPUT/],
    ['TPROXY without -p tcp|udp', m('-A PREROUTING -j TPROXY --on-port 1'), 3, /TPROXY: a port specification needs/],
    ['TPROXY in nat', n('-A PREROUTING -p tcp -j TPROXY --on-port 1'), 4, /TPROXY is not valid in the nat table/],
    ['CT outside raw', m('-A PREROUTING -j CT --notrack'), 3, /CT is not valid in the mangle table/],
    ['NOTRACK outside raw', m('-A PREROUTING -j NOTRACK'), 3, /NOTRACK is not valid in the mangle table/],
    [
      'REJECT in mangle (ipt_REJECT is filter-only)',
      m('-A INPUT -j REJECT'),
      3,
      /REJECT is not valid in the mangle table/,
    ],
    ['owner match in INPUT', f('-A INPUT -m owner --uid-owner 0 -j ACCEPT'), 3, /match owner is used at filter INPUT/],
    [
      'owner match in a user chain reached from INPUT',
      f('-A U -m owner --socket-exists -j ACCEPT', '-A OUTPUT -j U', '-A INPUT -j U'),
      3,
      /match owner is used at filter INPUT \(chain U is reached from .*INPUT/,
    ],
    ['owner with a user name', f('-A OUTPUT -m owner --uid-owner root -j ACCEPT'), 3, /names are not supported/],
    ['-o in INPUT', f('-A INPUT -o eth0 -j ACCEPT'), 3, /can't use -o with INPUT/],
    ['-i in OUTPUT', f('-A OUTPUT -i eth0 -j ACCEPT'), 3, /can't use -i with OUTPUT/],
    ['jump loop', n('-A U -j V', '-A V -j U', '-A OUTPUT -j U'), 5, /jump loop: OUTPUT -> U -> V -> U.*ELOOP/],
    ['policy on a user chain', '*filter\n:U DROP [0:0]\nCOMMIT\n', 2, /user chain U cannot have a policy/],
    ['duplicate chain declaration', '*filter\n:U - [0:0]\n:U - [0:0]\nCOMMIT\n', 3, /declared twice/],
    ['-N of an existing chain', '*filter\n:U - [0:0]\n-N U\nCOMMIT\n', 3, /chain already exists/],
    ['missing COMMIT', '*filter\n-A INPUT -j ACCEPT\n', 1, /has no COMMIT line/],
    ['new table before COMMIT', '*filter\n*nat\nCOMMIT\n', 2, /COMMIT expected before starting another table/],
    ['unknown table', '*bogus\nCOMMIT\n', 1, /unknown table "bogus"/],
    ['rule outside a table', '-A INPUT -j ACCEPT\n', 1, /outside a table/],
    ['negated address list', f('-A INPUT ! -s 10.0.0.1,10.0.0.2 -j DROP'), 3, /several addresses/],
    ['set match without a registry', f('-A INPUT -m set --match-set x src -j DROP'), 3, /no ipset registry/],
    ['unterminated quote', f('-A INPUT -m comment --comment "abc -j DROP'), 3, /unterminated " quote/],
    ['policy other than ACCEPT/DROP', '*filter\n:INPUT REJECT [0:0]\nCOMMIT\n', 2, /policy "REJECT"/],
    [
      'built-in chain of another table',
      '*filter\n:PREROUTING ACCEPT [0:0]\nCOMMIT\n',
      2,
      /not a built-in chain of table filter/,
    ],
    ['-X of a referenced chain', f('-A INPUT -j U', '-X U'), 4, /still referenced/],
    ['REJECT tcp-reset without -p tcp', f('-A INPUT -j REJECT --reject-with tcp-reset'), 3, /tcp-reset needs `-p tcp'/],
    [
      'REJECT v4 type in ip6tables',
      f('-A INPUT -j REJECT --reject-with icmp-host-prohibited'),
      3,
      /not valid for IPv6/,
      6,
    ],
    ['REDIRECT --to-ports without -p', n('-A OUTPUT -j REDIRECT --to-ports 1'), 4, /port specification needs/],
    [
      'DNAT v6 with a port but no brackets',
      n('-A OUTPUT -p tcp -j DNAT --to-destination fd00::1:99999'),
      4,
      /invalid IP address.*\[addr\]:port/,
      6,
    ],
    [
      'CT option outside the subset',
      '*raw\n-A PREROUTING -j CT --helper ftp\nCOMMIT\n',
      2,
      /unknown option "--helper".*target CT/,
    ],
    [
      'addrtype --limit-iface-in at OUTPUT',
      f('-A OUTPUT -m addrtype --dst-type LOCAL --limit-iface-in -j ACCEPT'),
      3,
      /match addrtype is used at filter OUTPUT/,
    ],
    ['option given twice', f('-A INPUT -p tcp --dport 1 --dport 2 -j DROP'), 3, /can only be used once/],
    [
      'target option negated',
      '*mangle\n-A OUTPUT -j MARK ! --set-mark 1\nCOMMIT\n',
      2,
      /cannot be negated|unknown option/,
    ],
  ];
  for (const [name, text, line, re, fam] of cases) {
    test(`rejects: ${name}`, () => {
      rejects(text, line, re, fam ?? 4);
    });
  }

  test('unknown ipset at restore is an error, as the kernel refuses to reference a missing set', () => {
    const sets = new IpSets();
    rejects(
      f('-A INPUT -m set --match-set missing dst -j DROP'),
      3,
      /ipset "missing" does not exist/,
      4,
      new Netfilter(4, { ipsets: sets }),
    );
    sets.create('v6set', 'hash:ip', 6);
    rejects(
      f('-A INPUT -m set --match-set v6set dst -j DROP'),
      3,
      /family inet6, rules are IPv4/,
      4,
      new Netfilter(4, { ipsets: sets }),
    );
  });
});

test.describe('restore is atomic: a failing restore changes nothing', () => {
  test('an error in a later table leaves the earlier tables of the same text unapplied', () => {
    const nf = new Netfilter(4);
    nf.restore(ISTIO_INPOD_V4);
    const before = nf.save();
    const bad = '*mangle\n-A PREROUTING -j ACCEPT\nCOMMIT\n*filter\n-A INPUT -j NOPE\nCOMMIT\n';
    expect(() => nf.restore(bad)).toThrow(RestoreError);
    expect(nf.save()).toBe(before);
    expect(() => nf.restore(bad, { noflush: true })).toThrow(RestoreError);
    expect(nf.save()).toBe(before);
    expect(nf.rules().length).toBe(18);
  });

  test('a commit-time error (hook check) leaves the previous rules in force for evaluation', () => {
    const nf = new Netfilter(4);
    nf.restore('*nat\n:U - [0:0]\n-A OUTPUT -j U\n-A U -p tcp -j REDIRECT --to-ports 15001\nCOMMIT\n');
    expect(() => nf.restore('*nat\n:U - [0:0]\n-A POSTROUTING -j U\n-A U -p tcp -j REDIRECT\nCOMMIT\n')).toThrow(
      /REDIRECT is used at nat POSTROUTING/,
    );
    expect(nf.save('nat')).toContain('-A OUTPUT -j U');
    expect(nf.save('nat')).not.toContain('-A POSTROUTING -j U');
  });
});
