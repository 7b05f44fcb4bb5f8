/**
 * Issue 19, "inserted rules are never repaired": an app with NET_ADMIN inserts an ACCEPT ahead of
 * the hook into ISTIO_OUTPUT in the built-in nat OUTPUT. drift() only looks at the plan's own
 * chains and hooks (upstream, as istio-cni); under strict foreignRules() reports anything else in
 * the plan's tables and the agent re-applies those tables whole, so the rule is gone after the
 * next repair pass.
 */
import { test, expect } from '@playwright/test';
import { AgentWorld } from './harness.js';
import { simNetnsPath } from '../../../../sim/kernel/netns.js';
import { netnsId } from '../../../../impl/api/ids.js';
import { buildInpodPlan } from '../../../../impl/node-agent/rule-builder.js';
import { drift } from '../../../../impl/node-agent/plan-drift.js';
import { foreignRules } from '../../../../impl/node-agent/foreign-rules.js';
import type { AppliedState, RedirectionPlan } from '../../../../impl/host/netns-rules.js';
import type { Profile } from '../../../../impl/api/profile.js';

const AMBIENT = { 'istio.io/dataplane-mode': 'ambient' };
const INSERTED_ACCEPT = '*nat\n-I OUTPUT 1 -j ACCEPT\nCOMMIT\n';

function plan(profile: Profile): RedirectionPlan {
  const common = { ipv6: false, dnsCapture: false, ingressMode: false, virtualInterfaces: [] };
  return profile === 'strict'
    ? buildInpodPlan({ ...common, profile, proxyUid: 0, probePorts: [] })
    : buildInpodPlan({ ...common, profile });
}

/** The namespace state after applying `p` to a fresh sandbox and then restoring `extra` (noflush). */
async function stateWith(p: RedirectionPlan, extra?: string): Promise<AppliedState> {
  const w = new AgentWorld('strict');
  const { netns } = w.sandbox('s');
  const id = netnsId(simNetnsPath(netns));
  await w.rules.apply(id, p, 'exclusive');
  if (extra !== undefined) w.kernel.iptablesRestore(netns, 4, extra, { noflush: true });
  return w.rules.read(id);
}

test('foreignRules(): the exact strict plan has none', async () => {
  const p = plan('strict');
  expect(foreignRules(await stateWith(p), p)).toEqual([]);
  expect(drift(await stateWith(p), p)).toEqual([]);
});

test('foreignRules(): an ACCEPT inserted in nat OUTPUT ahead of the hook is drift (drift() alone misses it)', async () => {
  const p = plan('strict');
  const s = await stateWith(p, INSERTED_ACCEPT);
  expect(drift(s, p)).toEqual([]);
  expect(foreignRules(s, p)).toEqual([
    'ipv4 nat: built-in chain OUTPUT holds [-A OUTPUT -j ACCEPT | -A OUTPUT -j ISTIO_OUTPUT], the plan [-A OUTPUT -j ISTIO_OUTPUT]',
  ]);
});

test('upstream: the same inserted ACCEPT is no drift (drift() is all the upstream agent checks, as today)', async () => {
  const p = plan('upstream');
  const s = await stateWith(p, INSERTED_ACCEPT);
  expect(s.iptables.ipv4).toContain('-A OUTPUT -j ACCEPT\n');
  expect(drift(s, p)).toEqual([]);
});

test('foreignRules(): a user chain the plan does not declare is drift, with its hook', async () => {
  const p = plan('strict');
  const s = await stateWith(p, '*nat\n:APP_ESCAPE - [0:0]\n-A APP_ESCAPE -j ACCEPT\n-A OUTPUT -j APP_ESCAPE\nCOMMIT\n');
  expect(foreignRules(s, p)).toEqual([
    'ipv4 nat: user chain APP_ESCAPE is not in the plan',
    'ipv4 nat: built-in chain OUTPUT holds [-A OUTPUT -j ISTIO_OUTPUT | -A OUTPUT -j APP_ESCAPE], the plan [-A OUTPUT -j ISTIO_OUTPUT]',
  ]);
});

test('foreignRules(): a changed built-in policy is drift', async () => {
  const p = plan('strict');
  const s = await stateWith(p, '*nat\n:POSTROUTING DROP [0:0]\nCOMMIT\n');
  expect(foreignRules(s, p)).toEqual(['ipv4 nat: built-in chain POSTROUTING has policy DROP, not ACCEPT']);
});

test('foreignRules(): a table the plan does not use must be empty (a raw NOTRACK there would skip every redirect)', async () => {
  const p = plan('strict');
  expect(p.iptables.ipv4).not.toContain('*security');
  const s = await stateWith(p, '*security\n:OUTPUT DROP [0:0]\n:APP - [0:0]\n-A OUTPUT -j APP\nCOMMIT\n');
  expect(foreignRules(s, p)).toEqual([
    'ipv4 security: the plan does not use this table, and it holds [-A OUTPUT -j APP]',
  ]);
  // an empty table the plan does not use (all policies ACCEPT) is nothing foreign
  const empty = await stateWith(p, '*security\n:OUTPUT ACCEPT [0:0]\nCOMMIT\n');
  expect(foreignRules(empty, p)).toEqual([]);
});

for (const profile of ['upstream', 'strict'] as const) {
  const repaired = profile === 'strict';
  test(`repair loop, ${profile}: an ACCEPT inserted ahead of the nat OUTPUT hook is ${repaired ? 'removed by the next pass' : 'left alone (as upstream istio-cni)'}`, async () => {
    const w = new AgentWorld(profile);
    w.settings = { profile, ipv6: false, dnsCapture: false };
    await w.namespace('shop', AMBIENT);
    await w.startAgent();
    w.startProxy();
    await w.run(100);
    const { cni, netns } = await w.pod('shop', 'web');
    expect(cni.exitCode, cni.stdout).toBe(0);
    await w.run(100);
    expect(await w.annotation('shop', 'web')).toBe('enabled');
    const id = netnsId(simNetnsPath(netns));
    const exact = await w.rules.read(id);
    w.kernel.iptablesRestore(netns, 4, INSERTED_ACCEPT, { noflush: true });
    expect((await w.rules.read(id)).iptables.ipv4).toContain('-A OUTPUT -j ACCEPT\n');
    await w.run(12_000); // one repair interval
    const after = await w.rules.read(id);
    if (repaired) {
      expect(after).toEqual(exact);
      expect(w.metrics.get('ambient_lab_agent_repairs_total', { what: 'rules' })).toBe(1);
    } else {
      expect(after.iptables.ipv4).toContain('-A OUTPUT -j ACCEPT\n');
      expect(w.metrics.get('ambient_lab_agent_repairs_total', { what: 'rules' })).toBe(0);
    }
    expect(await w.annotation('shop', 'web')).toBe('enabled');
  });
}

/** An app with NET_ADMIN leaves TCP untracked, so no redirect and no TPROXY ever sees it. */
const RAW_NOTRACK = '*raw\n-I PREROUTING 1 -p tcp -j CT --notrack\n-I OUTPUT 1 -p tcp -j CT --notrack\nCOMMIT\n';
const NFT_NOTRACK =
  'table inet app-tamper {\n\tchain out {\n\t\ttype filter hook output priority -300; policy accept;\n\t\tmeta l4proto tcp notrack\n\t}\n}\n';

for (const [what, tamper] of [
  ['a raw NOTRACK with DNS capture off (the plan has no raw table)', 'raw'],
  ['a foreign nftables table that untracks TCP (the iptables backend)', 'nft'],
] as const) {
  for (const profile of ['upstream', 'strict'] as const) {
    const repaired = profile === 'strict';
    test(`repair loop, ${profile}: ${what} is ${repaired ? 'removed by the next pass' : 'left alone (upstream looks at its own chains only)'}`, async () => {
      const w = new AgentWorld(profile);
      w.settings = { profile, ipv6: false, dnsCapture: false };
      await w.namespace('shop', AMBIENT);
      await w.startAgent();
      w.startProxy();
      await w.run(100);
      const { cni, netns } = await w.pod('shop', 'web');
      expect(cni.exitCode, cni.stdout).toBe(0);
      await w.run(100);
      const id = netnsId(simNetnsPath(netns));
      const exact = await w.rules.read(id);
      if (tamper === 'raw') w.kernel.iptablesRestore(netns, 4, RAW_NOTRACK, { noflush: true });
      else w.kernel.netns(netns).nftables.apply(NFT_NOTRACK);
      // the upstream agent does not read nftables at all (its adapter sees iptables only)
      if (tamper === 'raw' || repaired) expect(await w.rules.read(id)).not.toEqual(exact);
      await w.run(12_000); // one repair interval
      const after = await w.rules.read(id);
      const left =
        tamper === 'raw'
          ? after.iptables.ipv4.includes('--notrack')
          : w.kernel.netns(netns).nftables.hasTable('inet', 'app-tamper');
      expect(left).toBe(!repaired);
      expect(w.metrics.get('ambient_lab_agent_repairs_total', { what: 'rules' })).toBe(repaired ? 1 : 0);
    });
  }
}
