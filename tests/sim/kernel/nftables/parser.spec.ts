/**
 * The nft -f parser: the forms the agent writes (knftables' command form, upstream's golden
 * files) and the block form nft prints, the listing, and every error class with its message, its
 * line and the all-or-nothing rule (one document is one transaction).
 */
import { test, expect } from '@playwright/test';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { NftError, NftStateError } from '../../../../sim/kernel/nftables/errors.js';
import { NfTables } from '../../../../sim/kernel/nftables/nftables.js';
import { chain, load } from './fixtures.js';

const GOLDEN = path.resolve('fixtures/upstream-golden-nft');
const HOST_SETS = [
  'add table inet istio-ambient-nat',
  'add set inet istio-ambient-nat istio-inpod-probes-v4 { type ipv4_addr ; comment "UUID of the pods that are part of ambient mesh" ; }',
  'add set inet istio-ambient-nat istio-inpod-probes-v6 { type ipv6_addr ; comment "UUID of the pods that are part of ambient mesh" ; }',
].join('\n');

test.describe('accepted forms', () => {
  for (const f of fs.readdirSync(GOLDEN).filter((x) => x.endsWith('.golden')))
    test(`upstream golden ${f} applies`, () => {
      const n = new NfTables();
      if (f.startsWith('hostprobe')) n.apply(HOST_SETS, { source: 'sets' });
      n.apply(fs.readFileSync(path.join(GOLDEN, f), 'utf8'), { source: f });
      expect(n.tables().length).toBeGreaterThan(0);
      // re-applying the same document leaves the same listing (flush table then add)
      const first = n.list();
      n.apply(fs.readFileSync(path.join(GOLDEN, f), 'utf8'), { source: f });
      expect(n.list()).toBe(first);
    });

  test('the listing is the block form and applies back to itself', () => {
    const n = load(fs.readFileSync(path.join(GOLDEN, 'default_ipv6.golden'), 'utf8'));
    const listing = n.list();
    expect(listing).toContain(
      'table inet istio-ambient-nat {\n\tchain prerouting {\n\t\ttype nat hook prerouting priority dstnat; policy accept;',
    );
    expect(listing).toContain('\t\ttype route hook output priority mangle; policy accept;');
    expect(listing).toContain('meta mark & 0x00000fff != 0x00000539 counter redirect to :15006');
    const again = new NfTables();
    again.apply(listing, { source: 'listing' });
    expect(again.list()).toBe(listing);
  });

  test('block form with sets, policy, priority arithmetic, comments and anonymous sets over lines', () => {
    const n = load(`# a comment
table ip6 f {
  set s {
    type ipv6_addr
    flags interval
    elements = { fd00::/64, ::1 }
  }
  chain in { type filter hook input priority filter + 5; policy drop;
    ip6 saddr @s accept comment "ours"
    tcp dport { 22,
      80-90 } counter packets 3 bytes 120 accept
  }
}
`);
    expect(n.list('ip6', 'f')).toBe(
      'table ip6 f {\n\tset s {\n\t\ttype ipv6_addr\n\t\tflags interval\n\t\telements = { ::1, fd00::/64 }\n\t}\n\n\tchain in {\n\t\ttype filter hook input priority filter + 5; policy drop;\n\t\tip6 saddr @s accept comment "ours"\n\t\ttcp dport { 22, 80-90 } counter accept\n\t}\n}\n',
    );
  });

  test('insert rule goes first; delete table and delete element; flush table keeps set elements', () => {
    const n = load(`add table inet t
add set inet t s { type ipv4_addr ; }
add element inet t s { 10.0.0.1, 10.0.0.2 }
add chain inet t c { type filter hook output priority 0 ; }
add rule inet t c ip daddr @s counter
insert rule inet t c meta mark 0x1 accept
`);
    expect(n.list('inet', 't')).toMatch(/meta mark 0x00000001 accept\n\t\tip daddr @s counter/);
    n.apply('flush table inet t\ndelete element inet t s { 10.0.0.1 }\n');
    expect(n.list('inet', 't')).not.toContain('ip daddr @s');
    expect(n.elements('inet', 't', 's')).toEqual(['10.0.0.2']);
    n.apply('delete table inet t');
    expect(n.tables()).toEqual([]);
  });

  test('run-time elements: addElements/deleteElements, all or nothing', () => {
    const n = load('add table inet t\nadd set inet t s { type ipv4_addr ; }\n');
    n.addElements('inet', 't', 's', ['10.0.0.1', '10.0.0.3']);
    expect(() => n.addElements('inet', 't', 's', ['10.0.0.4', 'fd00::1'])).toThrow(/IPv4 address/);
    expect(n.elements('inet', 't', 's')).toEqual(['10.0.0.1', '10.0.0.3']);
    expect(() => n.deleteElements('inet', 't', 's', ['10.0.0.1', '10.0.0.9'])).toThrow(NftStateError);
    expect(n.elements('inet', 't', 's')).toEqual(['10.0.0.1', '10.0.0.3']);
    n.deleteElements('inet', 't', 's', ['10.0.0.1']);
    expect(n.elements('inet', 't', 's')).toEqual(['10.0.0.3']);
    expect(() => n.deleteTable('inet', 'nope')).toThrow(/no nftables table inet nope/);
  });
});

/** Each case: a document, the line the error is on, and words of the message. */
const ERRORS: { name: string; doc: string; line: number; message: RegExp }[] = [
  {
    name: 'unsupported statement',
    doc: chain(['queue num 1']),
    line: 4,
    message: /"queue" is not supported here \(supported matches: .*statements: .*counter/,
  },
  {
    name: 'unsupported meta key',
    doc: chain(['meta priority 1']),
    line: 4,
    message: /"meta priority" is not supported/,
  },
  {
    name: 'bad address',
    doc: chain(['ip daddr 1.2.3.400 accept']),
    line: 4,
    message: /Could not resolve hostname: "1.2.3.400"/,
  },
  { name: 'port above 65535', doc: chain(['tcp dport 70000 accept']), line: 4, message: /Service out of range: 70000/ },
  { name: 'unknown jump target', doc: chain(['jump nope']), line: 4, message: /No such file or directory: chain nope/ },
  {
    name: 'jump to a base chain',
    doc: chain(['jump c']),
    line: 4,
    message: /Operation not supported: jump to base chain c/,
  },
  {
    name: 'jump loop',
    doc: `${chain(['jump a'])}\nadd chain inet t a\nadd chain inet t b\nadd rule inet t a jump b\nadd rule inet t b jump a\n`,
    line: 10,
    message: /Too many links/,
  },
  {
    name: 'nat statement in a filter chain',
    doc: chain(['tcp dport 1 redirect to :5']),
    line: 4,
    message: /redirect is valid only in a nat-type chain at prerouting or output/,
  },
  {
    name: 'snat at output',
    doc: chain(['ip daddr 1.1.1.1 snat to 1.2.3.4'], 'output', { type: 'nat' }),
    line: 4,
    message: /snat is valid only in a nat-type chain at postrouting or input/,
  },
  {
    name: 'tproxy outside prerouting',
    doc: chain(['meta l4proto tcp tproxy to :1']),
    line: 4,
    message: /tproxy is valid only in a chain at prerouting/,
  },
  {
    name: 'tproxy without a transport match',
    doc: chain(['tproxy to :1'], 'prerouting'),
    line: 4,
    message: /Transparent proxy support requires transport protocol match/,
  },
  {
    name: 'redirect port without a transport match',
    doc: chain(['redirect to :5'], 'output', { type: 'nat' }),
    line: 4,
    message: /transport protocol mapping is only valid after transport protocol match/,
  },
  {
    name: 'dnat address in inet without a family',
    doc: chain(['tcp dport 1 dnat to 1.2.3.4'], 'output', { type: 'nat' }),
    line: 4,
    message: /ip or ip6 must be specified with address for inet tables/,
  },
  {
    name: 'nat chain at forward',
    doc: chain([], 'forward', { type: 'nat' }),
    line: 3,
    message: /a nat chain cannot attach to hook forward/,
  },
  {
    name: 'route chain at prerouting',
    doc: chain([], 'prerouting', { type: 'route' }),
    line: 3,
    message: /a route chain cannot attach to hook prerouting/,
  },
  {
    name: 'nat chain at priority -200',
    doc: chain([], 'output', { type: 'nat', priority: -200 }),
    line: 3,
    message: /priority must be above -200/,
  },
  {
    name: 'ip match in an ip6 table',
    doc: chain(['ip daddr 1.2.3.4 accept'], 'output', { family: 'ip6' }),
    line: 4,
    message: /conflicting protocols specified: ip6 vs. ip/,
  },
  {
    name: 'tcp and udp in one rule',
    doc: chain(['tcp dport 1 udp dport 2 accept']),
    line: 4,
    message: /conflicting protocols specified: tcp vs. udp/,
  },
  {
    name: 'statement after a verdict',
    doc: chain(['accept counter']),
    line: 4,
    message: /Statement after terminal statement has no effect/,
  },
  { name: 'missing set', doc: chain(['ip daddr @nope accept']), line: 4, message: /Set "nope" does not exist/ },
  {
    name: 'set of another type',
    doc: 'add table inet t\nadd set inet t s { type ipv4_addr ; }\nadd chain inet t c\nadd rule inet t c ip6 daddr @s accept\n',
    line: 4,
    message: /datatype mismatch, expected IPv4 address, expression has type IPv6 address/,
  },
  {
    name: 'prefix in a set without interval',
    doc: 'add table inet t\nadd set inet t s { type ipv4_addr ; }\nadd element inet t s { 10.0.0.0/8 }\n',
    line: 3,
    message: /You must add 'flags interval'/,
  },
  {
    name: 'delete a missing element',
    doc: 'add table inet t\nadd set inet t s { type ipv4_addr ; }\ndelete element inet t s { 10.0.0.1 }\n',
    line: 3,
    message: /No such file or directory: element 10.0.0.1/,
  },
  {
    name: 'delete a missing table',
    doc: 'delete table inet nope\n',
    line: 1,
    message: /No such file or directory: table inet nope/,
  },
  {
    name: 'rule in a missing table',
    doc: 'add rule inet nope c accept\n',
    line: 1,
    message: /table inet nope does not exist/,
  },
  { name: 'unknown command', doc: 'list ruleset\n', line: 1, message: /"list" is not a command the model supports/ },
  { name: 'unsupported family', doc: 'add table netdev t\n', line: 1, message: /family netdev is not supported/ },
  {
    name: 'base chain changes its hook',
    doc: `${chain([])}\nadd chain inet t c { type filter hook input priority 0 ; }\n`,
    line: 6,
    message: /Device or resource busy: chain c is already a filter chain at output/,
  },
  {
    name: 'unterminated string',
    doc: 'add table inet t\nadd chain inet t c\nadd rule inet t c comment "x\n',
    line: 3,
    message: /unterminated " string/,
  },
];

test.describe('errors: as nft rejects them, naming source:line, and nothing changes', () => {
  for (const e of ERRORS)
    test(e.name, () => {
      const n = load(
        'add table inet keep\nadd chain inet keep k { type filter hook input priority 0 ; }\nadd rule inet keep k accept\n',
      );
      const before = n.list();
      let err: unknown;
      try {
        n.apply(`${e.doc}\n`, { source: 'doc.nft' });
      } catch (x) {
        err = x;
      }
      expect(err).toBeInstanceOf(NftError);
      const ne = err as NftError;
      expect(ne.message).toMatch(e.message);
      expect(ne.line).toBe(e.line);
      expect(ne.message.startsWith(`doc.nft:${e.line}: `)).toBe(true);
      expect(ne.lineText).toBe(e.doc.split('\n')[e.line - 1]);
      expect(n.list()).toBe(before);
    });

  test('positive control: a document that is fine changes the state', () => {
    const n = load('add table inet keep\n');
    n.apply(chain(['accept']));
    expect(n.list()).toContain('table inet t');
  });
});
