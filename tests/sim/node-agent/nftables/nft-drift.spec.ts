/**
 * Drift of the nftables backend's tables (impl/node-agent/nftables/nft-drift.ts), as the repair
 * loop asks it: a plan table missing or listed otherwise than right after apply, our tables the
 * plan does not write (another profile's), and under strict every foreign table and iptables rule.
 */
import { test, expect } from '@playwright/test';
import type { AppliedState, RedirectionPlan } from '../../../../impl/host/netns-rules.js';
import { nftDrift, nftLeftovers, nftListingOf } from '../../../../impl/node-agent/nftables/nft-drift.js';
import { leftovers } from '../../../../impl/node-agent/plan-drift.js';

const plan: RedirectionPlan = {
  iptables: {},
  nftables: {
    text: 'add table ip istio-ambient-nat\n',
    tables: [
      { family: 'ip', name: 'istio-ambient-nat' },
      { family: 'ip6', name: 'istio-ambient-nat' },
    ],
  },
  rules: [],
  routes: [],
};
const NAT4 = 'table ip istio-ambient-nat {\n\tchain output {\n\t}\n}\n';
const NAT6 = 'table ip6 istio-ambient-nat {\n}\n';
const state = (nftables: Record<string, string> | undefined, iptables = { ipv4: '', ipv6: '' }): AppliedState => ({
  iptables,
  rules: [],
  routes: [],
  ...(nftables ? { nftables } : {}),
});
const applied = nftListingOf(state({ 'ip istio-ambient-nat': NAT4, 'ip6 istio-ambient-nat': NAT6 }), plan);

test('the listing right after apply is the reference; unchanged tables are no drift', () => {
  expect(applied).toEqual({ 'ip istio-ambient-nat': NAT4, 'ip6 istio-ambient-nat': NAT6 });
  expect(nftDrift(state({ 'ip istio-ambient-nat': NAT4, 'ip6 istio-ambient-nat': NAT6 }), plan, applied, true)).toEqual(
    [],
  );
});

test('a changed or missing plan table is drift (positive controls of the comparison)', () => {
  const changed = NAT4.replace('\t}', '\t\taccept\n\t}');
  expect(
    nftDrift(state({ 'ip istio-ambient-nat': changed, 'ip6 istio-ambient-nat': NAT6 }), plan, applied, false),
  ).toEqual(['nftables table ip istio-ambient-nat differs from its listing at apply']);
  expect(nftDrift(state({ 'ip istio-ambient-nat': NAT4 }), plan, applied, false)).toEqual([
    'nftables table ip6 istio-ambient-nat is missing',
  ]);
});

test("our tables the plan does not write are leftovers (the other profile's), in either mode", () => {
  const s = state({ 'ip istio-ambient-nat': NAT4, 'ip6 istio-ambient-nat': NAT6, 'inet istio-ambient-mangle': 'x' });
  expect(nftLeftovers(s, plan)).toEqual([{ family: 'inet', name: 'istio-ambient-mangle' }]);
  expect(nftDrift(s, plan, applied, false)).toEqual(['nftables table inet istio-ambient-mangle is not in the plan']);
});

test('strict (exclusive): any other table and any iptables rule is foreign; upstream (merge) leaves them alone', () => {
  const s = state(
    { 'ip istio-ambient-nat': NAT4, 'ip6 istio-ambient-nat': NAT6, 'ip app': 'table ip app {\n}\n' },
    { ipv4: '*nat\n:OUTPUT ACCEPT [0:0]\n-A OUTPUT -j ACCEPT\nCOMMIT\n', ipv6: '' },
  );
  expect(nftDrift(s, plan, applied, true)).toEqual([
    'nftables table ip app is foreign',
    'ipv4 iptables holds foreign rules: -A OUTPUT -j ACCEPT',
  ]);
  expect(nftDrift(s, plan, applied, false)).toEqual([]);
});

test('a plan with nftables and an adapter that does not read nftables is an error, never "no drift"', () => {
  expect(() => nftDrift(state(undefined), plan, applied, true)).toThrow(/does not read nftables/);
  expect(() => nftListingOf(state(undefined), plan)).toThrow(/does not read nftables/);
  // the iptables backend (no nftables in the plan, none read): nothing to say
  expect(nftDrift(state(undefined), { iptables: {}, rules: [], routes: [] }, undefined, true)).toEqual([]);
});

test('a plan table absent right after apply is an error, not a reference', () => {
  expect(() => nftListingOf(state({ 'ip istio-ambient-nat': NAT4 }), plan)).toThrow(
    /ip6 istio-ambient-nat is not in the namespace right after the plan was applied/,
  );
});

test('leftovers() hands our nftables tables the plan does not write to remove(), beside its chains and routing', () => {
  const s = state({ 'ip istio-ambient-nat': NAT4, 'ip6 istio-ambient-nat': NAT6, 'inet istio-ambient-raw': 'x' });
  expect(leftovers(s, plan)?.nftables?.tables).toEqual([{ family: 'inet', name: 'istio-ambient-raw' }]);
  // nothing of ours outside the plan: nothing to remove
  expect(leftovers(state({ 'ip istio-ambient-nat': NAT4, 'ip6 istio-ambient-nat': NAT6 }), plan)).toBeUndefined();
});
