/**
 * How the Linux nftables adapter reads a namespace's ruleset (impl/linux/nft-rules.ts
 * groupRulesetJson): nft's JSON grouped by table, without handles, in nft's order; anything that
 * is not nft's JSON is an error naming the namespace. The real-kernel side is
 * tests/netns/rules/nftables.spec.ts.
 */
import { test, expect } from '@playwright/test';
import { groupRulesetJson } from '../../../impl/linux/nft-rules.js';

const META = { metainfo: { version: '1.0.6', release_name: 'Lester Gooch #5', json_schema_version: 1 } };
const table = (family: string, name: string, handle: number): object => ({ table: { family, name, handle } });
const chain = (family: string, t: string, name: string, handle: number): object => ({
  chain: { family, table: t, name, handle, type: 'nat', hook: 'output', prio: -100, policy: 'accept' },
});
const rule = (family: string, t: string, c: string, handle: number, port: number): object => ({
  rule: {
    family,
    table: t,
    chain: c,
    handle,
    expr: [
      { match: { op: '==', left: { payload: { protocol: 'tcp', field: 'dport' } }, right: port } },
      { accept: null },
    ],
  },
});
const ruleset = (...objs: object[]): string => JSON.stringify({ nftables: [META, ...objs] });

test('tables are grouped with their chains and rules, in order, without handles', () => {
  const out = groupRulesetJson(
    'ns-a',
    ruleset(
      table('ip', 'istio-ambient-nat', 1),
      table('ip6', 'istio-ambient-nat', 2),
      chain('ip', 'istio-ambient-nat', 'out', 1),
      rule('ip', 'istio-ambient-nat', 'out', 2, 80),
      rule('ip', 'istio-ambient-nat', 'out', 3, 443),
    ),
  );
  expect([...out.keys()]).toEqual(['ip istio-ambient-nat', 'ip6 istio-ambient-nat']);
  const nat = JSON.parse(out.get('ip istio-ambient-nat')!) as Record<string, Record<string, unknown>>[];
  expect(nat.map((o) => Object.keys(o)[0])).toEqual(['table', 'chain', 'rule', 'rule']);
  expect(nat.some((o) => 'handle' in Object.values(o)[0]!)).toBe(false);
  expect(JSON.stringify(nat)).toMatch(/"right":80.*"right":443/);
  expect(out.get('ip6 istio-ambient-nat')).toBe('[{"table":{"family":"ip6","name":"istio-ambient-nat"}}]');
});

test('equal rulesets with other handles read equal; a rule changed, added or moved reads differently', () => {
  const read = (...objs: object[]): string | undefined =>
    groupRulesetJson('ns-a', ruleset(table('inet', 't', 9), chain('inet', 't', 'c', 1), ...objs)).get('inet t');
  const base = read(rule('inet', 't', 'c', 2, 80), rule('inet', 't', 'c', 3, 443));
  expect(read(rule('inet', 't', 'c', 7, 80), rule('inet', 't', 'c', 8, 443))).toBe(base);
  expect(read(rule('inet', 't', 'c', 2, 81), rule('inet', 't', 'c', 3, 443))).not.toBe(base);
  expect(read(rule('inet', 't', 'c', 2, 80))).not.toBe(base);
  expect(read(rule('inet', 't', 'c', 3, 443), rule('inet', 't', 'c', 2, 80))).not.toBe(base);
});

test('an empty ruleset has no tables; output that is not nft JSON is an error naming the namespace', () => {
  expect(groupRulesetJson('ns-a', ruleset()).size).toBe(0);
  expect(() => groupRulesetJson('ns-a', 'table ip t {')).toThrow(
    /reading the nftables ruleset in ns-a: not JSON in .*nft -j list ruleset/,
  );
  expect(() => groupRulesetJson('ns-a', '{"x":1}')).toThrow(/no "nftables" array/);
  expect(() => groupRulesetJson('ns-a', JSON.stringify({ nftables: [{ a: {}, b: {} }] }))).toThrow(/2 keys, not one/);
  expect(() => groupRulesetJson('ns-a', ruleset({ rule: { family: 'ip', chain: 'c', expr: [] } }))).toThrow(
    /a rule entry names no table/,
  );
  expect(() => groupRulesetJson('ns-a', ruleset(chain('ip', 't', 'c', 1)))).toThrow(
    /a chain of table ip t comes before the table/,
  );
  expect(() => groupRulesetJson('ns-a', ruleset({ table: { family: 'ipx', name: 't' } }))).toThrow(/names no table/);
});
