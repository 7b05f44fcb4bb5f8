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
import { ERRORS } from './error-cases.js';
import { ACCEPTED } from './accepted-cases.js';

const GOLDEN = path.resolve('fixtures/upstream-golden-nft');
const HOST_SETS = [
  'add table inet istio-ambient-nat',
  'add set inet istio-ambient-nat istio-inpod-probes-v4 { type ipv4_addr ; comment "UUID of the pods that are part of ambient mesh" ; }',
  'add set inet istio-ambient-nat istio-inpod-probes-v6 { type ipv6_addr ; comment "UUID of the pods that are part of ambient mesh" ; }',
].join('\n');

test.describe('accepted forms', () => {
  for (const c of ACCEPTED)
    test(`form: ${c.name}`, () => {
      const n = load(c.doc);
      // the listing applies back to the same listing
      const again = new NfTables();
      again.apply(n.list(), { source: 'listing' });
      expect(again.list()).toBe(n.list());
    });

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
