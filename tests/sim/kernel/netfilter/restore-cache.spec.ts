/**
 * Restore results and parsed rules are shared by content between namespaces
 * (sim/kernel/netfilter/restore-cache.ts). Sharing must never let one namespace's later edits
 * reach another's rules, and must not change what a restore means.
 */
import { test, expect } from '@playwright/test';
import { Netfilter } from '../../../../sim/kernel/netfilter/netfilter.js';
import { IpSets } from '../../../../sim/kernel/netfilter/ipset.js';

const TEXT = [
  '*nat',
  ':U_OUT - [0:0]',
  '-A OUTPUT -p tcp -m owner ! --uid-owner 1337 -j U_OUT',
  '-A U_OUT -p tcp ! -d 127.0.0.1 -j REDIRECT --to-ports 15001',
  'COMMIT',
  '',
].join('\n');

test('two namespaces restoring the same text get equal rulesets; a later noflush edit in one does not reach the other', () => {
  const a = new Netfilter(4);
  const b = new Netfilter(4);
  a.restore(TEXT);
  b.restore(TEXT);
  expect(b.save()).toBe(a.save());
  a.restore('*nat\n-A OUTPUT -p udp -j REDIRECT --to-ports 15053\n-P OUTPUT DROP\nCOMMIT\n', { noflush: true });
  expect(a.save()).toContain('-A OUTPUT -p udp -j REDIRECT --to-ports 15053');
  expect(a.policy('nat', 'OUTPUT')).toBe('DROP');
  expect(b.save()).not.toContain('15053');
  expect(b.policy('nat', 'OUTPUT')).toBe('ACCEPT');
  // A third namespace still gets the original text's ruleset.
  const c = new Netfilter(4);
  c.restore(TEXT);
  expect(c.save()).toBe(b.save());
});

test('a restore without noflush leaves the tables it does not name alone, cached or not', () => {
  const a = new Netfilter(4);
  a.restore('*filter\n-A INPUT -p tcp --dport 22 -j DROP\nCOMMIT\n');
  a.restore(TEXT);
  a.restore(TEXT); // second time from the cache
  expect(a.save('filter')).toContain('-A INPUT -p tcp -m tcp --dport 22 -j DROP');
  expect(a.save('nat')).toContain('REDIRECT --to-ports 15001');
});

test('the same rule words parse differently when the -j target is a user chain in one table and a missing one in another', () => {
  const withChain = new Netfilter(4);
  withChain.restore('*filter\n:MESH - [0:0]\n-A INPUT -j MESH\nCOMMIT\n');
  expect(withChain.save('filter')).toContain('-A INPUT -j MESH');
  const without = new Netfilter(4);
  expect(() => without.restore('*filter\n-A INPUT -j MESH\nCOMMIT\n')).toThrow(/MESH/);
});

test("rules naming an ipset are parsed against the namespace's own sets (not shared across registries)", () => {
  const sets = new IpSets();
  sets.restore('create mesh hash:ip family inet\nadd mesh 10.244.1.5\n');
  const a = new Netfilter(4, { ipsets: sets });
  const text = '*mangle\n-A PREROUTING -m set --match-set mesh src -j MARK --set-xmark 0x1/0x1\nCOMMIT\n';
  a.restore(text);
  const b = new Netfilter(4, { ipsets: new IpSets() });
  expect(() => b.restore(text)).toThrow(/mesh/);
});
