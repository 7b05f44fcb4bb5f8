/**
 * Issue 20, upstream parity: the agent makes a pod's namespace hold exactly its plan.
 * - IPv6 disabled on the pod's lo: the v6 return route is left out (upstream reads the pod's
 *   disable_ipv6 the same way); it used to fail every ADD with "IPv6 is disabled on nexthop device".
 * - Leftovers: after a restart with other settings (DNS capture, IPv6, profile), and in the repair
 *   loop, what the current plan does not contain goes, in every table and both families.
 */
import { test, expect } from '@playwright/test';
import { AgentWorld } from './harness.js';
import { simNetnsPath } from '../../../../sim/kernel/netns.js';
import { netnsId } from '../../../../impl/api/ids.js';
import { buildInpodPlan } from '../../../../impl/node-agent/rule-builder.js';
import { drift, leftovers } from '../../../../impl/node-agent/plan-drift.js';
import type { AppliedState } from '../../../../impl/host/netns-rules.js';
import type { NodeAgentConfig } from '../../../../impl/node-agent/node-agent.js';

const AMBIENT = { 'istio.io/dataplane-mode': 'ambient' };
type Settings = Pick<NodeAgentConfig, 'profile' | 'ipv6' | 'dnsCapture'>;

async function state(w: AgentWorld, netns: string): Promise<AppliedState> {
  return w.rules.read(netnsId(simNetnsPath(netns)));
}

async function world(settings: Settings): Promise<AgentWorld> {
  const w = new AgentWorld(settings.profile);
  w.settings = settings;
  await w.namespace('shop', AMBIENT);
  await w.startAgent();
  w.startProxy();
  await w.run(100);
  return w;
}

async function enrolled(w: AgentWorld, name: string, opts: { loIpv6Disabled?: boolean } = {}): Promise<string> {
  const { cni, netns } = await w.pod('shop', name, opts);
  expect(cni.exitCode, cni.stdout).toBe(0);
  await w.run(100);
  expect(await w.annotation('shop', name)).toBe('enabled');
  return netns;
}

test('IPv6 capture on, lo without IPv6: the ADD succeeds with the v6 rules and fwmark rule but no v6 local route', async () => {
  const w = await world({ profile: 'upstream', ipv6: true, dnsCapture: true });
  // Control: the kernel (sim, as Linux) refuses the v6 local route on such a lo, so the full plan cannot apply.
  const full = buildInpodPlan({
    profile: 'upstream',
    ipv6: true,
    dnsCapture: true,
    ingressMode: false,
    virtualInterfaces: [],
  });
  const { netns: probe } = w.sandbox('probe-uid');
  w.kernel.setIpv6Disabled(probe, 'lo', true);
  await expect(w.rules.apply(netnsId(simNetnsPath(probe)), full)).rejects.toThrow(/IPv6 is disabled on nexthop device/);
  expect(await state(w, probe)).toEqual({ iptables: { ipv4: '', ipv6: '' }, rules: [], routes: [] });

  const netns = await enrolled(w, 'web', { loIpv6Disabled: true });
  const s = await state(w, netns);
  expect(s.iptables.ipv6).toContain(
    '-A ISTIO_OUTPUT ! -d ::1/128 -p tcp -m mark ! --mark 0x539/0xfff -j REDIRECT --to-ports 15001',
  );
  expect(s.rules.map((r) => r.family)).toEqual(['ipv4', 'ipv6']);
  expect(s.routes.map((r) => `${r.family} ${r.dst}`)).toEqual(['ipv4 0.0.0.0/0']);
  // A pod whose lo has IPv6 gets the v6 route: the fact is read per pod, not once per node.
  const other = await enrolled(w, 'db');
  expect((await state(w, other)).routes.map((r) => `${r.family} ${r.dst}`)).toEqual(['ipv4 0.0.0.0/0', 'ipv6 ::/0']);
  // The repair loop sees the route-less plan as exact and leaves the pod alone.
  await w.run(25_000);
  expect(w.metrics.get('ambient_lab_agent_repairs_total', { what: 'rules' })).toBe(0);
  expect(await w.truthful()).toEqual([]);
});

test('IPv6 capture on, strict, lo without IPv6: the v6 block ruleset instead of v6 capture, no v6 routing', async () => {
  const w = await world({ profile: 'strict', ipv6: true, dnsCapture: true });
  const netns = await enrolled(w, 'web', { loIpv6Disabled: true });
  const s = await state(w, netns);
  expect(s.iptables.ipv6).toContain('-A ISTIO_OUTPUT -j DROP');
  expect(s.iptables.ipv6).not.toContain('REDIRECT');
  expect(s.rules.map((r) => r.family)).toEqual(['ipv4']);
  expect(s.routes.map((r) => r.family)).toEqual(['ipv4']);
});

const transitions: { name: string; from: Settings; to: Settings; gone: RegExp[] }[] = [
  {
    name: 'DNS capture on → off',
    from: { profile: 'upstream', ipv6: false, dnsCapture: true },
    to: { profile: 'upstream', ipv6: false, dnsCapture: false },
    gone: [/\*raw/, /15053/, /CT --zone/],
  },
  {
    name: 'IPv6 capture on → off',
    from: { profile: 'upstream', ipv6: true, dnsCapture: true },
    to: { profile: 'upstream', ipv6: false, dnsCapture: true },
    gone: [/::1\/128/],
  },
  {
    name: 'strict (IPv6, DNS) → upstream (neither)',
    from: { profile: 'strict', ipv6: true, dnsCapture: true },
    to: { profile: 'upstream', ipv6: false, dnsCapture: false },
    gone: [/\*filter/, /\*raw/, /::1\/128/],
  },
  {
    name: 'upstream (neither) → strict (IPv6, DNS)',
    from: { profile: 'upstream', ipv6: false, dnsCapture: false },
    to: { profile: 'strict', ipv6: true, dnsCapture: true },
    gone: [],
  },
];

for (const t of transitions) {
  test(`agent restart with other settings (${t.name}): the pod's namespace converges to exactly the new plan, as a fresh pod's`, async () => {
    const w = await world(t.from);
    const netns = await enrolled(w, 'web');
    const before = await state(w, netns);
    await w.stopAgent();
    w.settings = t.to;
    await w.startAgent();
    await w.run(2000);
    expect(await w.annotation('shop', 'web')).toBe('enabled');
    const after = await state(w, netns);
    // The reference: a pod enrolled only by the new agent, in a fresh namespace.
    const fresh = await state(w, await enrolled(w, 'fresh'));
    expect(after).toEqual(fresh);
    expect(after).not.toEqual(before);
    const text = after.iptables.ipv4 + after.iptables.ipv6;
    for (const re of t.gone) {
      expect(before.iptables.ipv4 + before.iptables.ipv6).toMatch(re);
      expect(text).not.toMatch(re);
    }
    if (!t.to.ipv6) expect([...after.rules, ...after.routes].filter((r) => r.family === 'ipv6')).toEqual([]);
  });
}

test('repair loop: leftover chains, an added rule in an own chain and a stray v6 rule and route are removed; foreign rules stay', async () => {
  const w = await world({ profile: 'upstream', ipv6: false, dnsCapture: false });
  const netns = await enrolled(w, 'web');
  const exact = await state(w, netns);
  const plan = buildInpodPlan({
    profile: 'upstream',
    ipv6: false,
    dnsCapture: false,
    ingressMode: false,
    virtualInterfaces: [],
  });
  expect(drift(exact, plan)).toEqual([]);
  // What an older plan (DNS on, IPv6 on) left, an ACCEPT-all inserted at the top of the outbound
  // capture (every line of the plan is still present: the old check saw nothing wrong), and a foreign rule.
  w.kernel.iptablesRestore(
    netns,
    4,
    '*raw\n:ISTIO_OUTPUT - [0:0]\n-A OUTPUT -j ISTIO_OUTPUT\n-A ISTIO_OUTPUT -p udp -m mark --mark 0x539/0xfff -m udp --dport 53 -j CT --zone 1\nCOMMIT\n',
    { noflush: true },
  );
  w.kernel.iptablesRestore(
    netns,
    4,
    '*nat\n-I ISTIO_OUTPUT 1 -j ACCEPT\n-A POSTROUTING -p udp -m udp --dport 9 -j ACCEPT\nCOMMIT\n',
    { noflush: true },
  );
  w.kernel.iptablesRestore(netns, 6, '*nat\n:ISTIO_OUTPUT - [0:0]\n-A OUTPUT -j ISTIO_OUTPUT\nCOMMIT\n', {
    noflush: true,
  });
  w.kernel.addRule(netns, { family: 6, priority: 32764, fwmark: 0x111, mask: 0xfff, table: 100 });
  w.kernel.addRoute(netns, { dst: '::/0', type: 'local', dev: 'lo', table: 100 });
  const drifted = await state(w, netns);
  const d = drift(drifted, plan);
  expect(d[0]).toMatch(
    /^ipv4 nat: chain ISTIO_OUTPUT holds \[-A ISTIO_OUTPUT -j ACCEPT \| -A ISTIO_OUTPUT -d 169\.254\.7\.127\/32 .*\], the plan \[-A ISTIO_OUTPUT -d 169\.254/,
  );
  expect(d.slice(1)).toEqual([
    'ipv4 raw: chain(s) ISTIO_OUTPUT are not in the plan',
    'ipv6 nat: chain(s) ISTIO_OUTPUT are not in the plan',
    'ipv6 ip rule fwmark 273/4095 lookup 100 pref 32764 is not in the plan',
    'ipv6 route local ::/0 dev lo table 100 is not in the plan',
  ]);
  await w.run(12_000); // one repair interval
  const repaired = await state(w, netns);
  expect(repaired.iptables.ipv4).toContain('-A POSTROUTING -p udp -m udp --dport 9 -j ACCEPT');
  expect({
    ...repaired,
    iptables: {
      ...repaired.iptables,
      ipv4: repaired.iptables.ipv4.replace('-A POSTROUTING -p udp -m udp --dport 9 -j ACCEPT\n', ''),
    },
  }).toEqual(exact);
  expect(await w.annotation('shop', 'web')).toBe('enabled');
});

test("leftovers(): nothing for an exact namespace; only the universe's chains, never foreign ISTIO_ chains", () => {
  const plan = buildInpodPlan({
    profile: 'upstream',
    ipv6: false,
    dnsCapture: false,
    ingressMode: false,
    virtualInterfaces: [],
  });
  const empty: AppliedState = { iptables: { ipv4: '', ipv6: '' }, rules: [], routes: [] };
  expect(leftovers(empty, plan)).toBeUndefined();
  const sidecar =
    '*nat\n:PREROUTING ACCEPT [0:0]\n:ISTIO_INBOUND - [0:0]\n:ISTIO_PRERT - [0:0]\n-A PREROUTING -j ISTIO_INBOUND\nCOMMIT\n*raw\n:OUTPUT ACCEPT [0:0]\n:ISTIO_OUTPUT - [0:0]\nCOMMIT\n';
  expect(leftovers({ ...empty, iptables: { ipv4: sidecar, ipv6: '' } }, plan)).toEqual({
    iptables: { ipv4: '*raw\n:ISTIO_OUTPUT - [0:0]\nCOMMIT\n' },
    rules: [],
    routes: [],
  });
  expect(drift(empty, plan)).toContain('ipv4 nat: chain ISTIO_OUTPUT is missing');
});
