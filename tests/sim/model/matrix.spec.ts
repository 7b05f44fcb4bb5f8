/**
 * Judging cells against the expected table, spreading the budget, sharding, and the summary
 * table's notation.
 */
import { test, expect } from '@playwright/test';
import { FAILING, judge, parseShard, planCells, renderMatrix, runsPerCell } from '../../../scenarios/model/matrix.js';
import { defaultCatalog } from '../../../scenarios/model/catalog.js';

test('a cell fails exactly when reality differs from the table, in either direction', () => {
  const holds = { verdict: 'holds' as const, why: 'w' };
  const bypass = { verdict: 'bypass' as const, why: 'w' };
  expect(judge('holds', holds)).toBe('holds');
  expect(judge('bypass', bypass)).toBe('bypass found');
  expect(judge('bypass', holds)).toBe('unexpected bypass');
  expect(judge('holds', bypass)).toBe('bypass not found');
  expect(judge('holds', { ...bypass, requires: 'appExec' })).toBe('not evaluated');
  expect(judge('error', holds)).toBe('error');
  expect(judge('holds', undefined)).toBe('no expectation');
  expect([...FAILING].sort()).toEqual(['bypass not found', 'error', 'no expectation', 'unexpected bypass']);
});

test('the budget is spread over the cells and the full matrix covers every property × threat × profile', () => {
  const c = defaultCatalog();
  const all = planCells(c);
  expect(all).toHaveLength(c.properties.length * c.threats.length * c.profiles.length);
  expect(runsPerCell(600, all.length)).toBe(Math.ceil(600 / all.length));
  expect(runsPerCell(1, 120)).toBe(1);
  expect(() => planCells(c, { threats: ['nobody'] })).toThrow(/unknown threat "nobody"; known: app-nonroot/);
  expect(parseShard('2/3')).toEqual({ index: 2, count: 3 });
  expect(() => parseShard('0/3')).toThrow(/expected i\/n/);
  const shards = [1, 2, 3].map((index) => planCells(c, { shard: { index, count: 3 } }));
  expect(shards.flat()).toHaveLength(all.length);
});

test('the summary table marks differences and which search found a bypass', () => {
  const text = renderMatrix([
    {
      property: 'convergence',
      threat: 'host-root',
      profile: 'upstream',
      backend: 'iptables',
      status: 'unexpected bypass',
      runs: 3,
      foundBy: ['model'],
    },
    { property: 'convergence', threat: 'host-root', profile: 'strict', backend: 'iptables', status: 'holds', runs: 7 },
    {
      property: 'inbound-capture',
      threat: 'outside',
      profile: 'upstream',
      backend: 'iptables',
      status: 'bypass found',
      runs: 1,
      foundBy: ['model', 'attacks'],
    },
  ]);
  const lines = text.split('\n');
  expect(lines[0]).toMatch(/^property\s+threat\s+upstream\s+strict$/);
  expect(lines[2]).toMatch(/^convergence\s+host-root\s+!BYPASS\[m\] \(3\)\s+holds \(7\)$/);
  expect(lines[3]).toMatch(/^inbound-capture\s+outside\s+BYPASS\[ma\] \(1\)$/);
});

test('backend axis: iptables by default; --backends adds nftables cells with their own column and expectations', () => {
  const c = defaultCatalog();
  const base = planCells(c);
  expect(new Set(base.map((x) => x.backend))).toEqual(new Set(['iptables']));
  const both = planCells(c, { backends: ['iptables', 'nftables'] });
  expect(both).toHaveLength(base.length * 2);
  expect(() => planCells(c, { backends: ['ebpf'] })).toThrow(/unknown backend "ebpf"; known: iptables, nftables/);
  // upstream's nftables backend matches the kubelet's uid, so a non-root host process's TCP is captured
  expect(c.expected('inbound-capture', 'host-process', 'upstream', 'iptables')).toMatchObject({
    verdict: 'bypass',
    classes: expect.arrayContaining(['finding-k']),
  });
  const nft = c.expected('inbound-capture', 'host-process', 'upstream', 'nftables');
  expect(nft).toMatchObject({ verdict: 'bypass', classes: ['B8'] });
  // strict's nftables ruleset is its iptables ruleset translated: the same cells
  for (const x of base.filter((x) => x.profile === 'strict'))
    expect(c.expected(x.property, x.threat, 'strict', 'nftables')).toEqual(
      c.expected(x.property, x.threat, 'strict', 'iptables'),
    );
  const text = renderMatrix([
    {
      property: 'outbound-capture',
      threat: 'app-root',
      profile: 'strict',
      backend: 'iptables',
      status: 'holds',
      runs: 1,
    },
    {
      property: 'outbound-capture',
      threat: 'app-root',
      profile: 'strict',
      backend: 'nftables',
      status: 'holds',
      runs: 2,
    },
  ]);
  expect(text.split('\n')[0]).toMatch(/strict\s+strict\/nftables/);
});
