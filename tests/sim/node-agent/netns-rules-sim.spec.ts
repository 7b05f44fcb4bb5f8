/**
 * The sim adapter of the NetnsRules port: the same plan checks and --noflush transactions as the
 * Linux adapter, applied to the simulated kernel.
 */
import { test, expect } from '@playwright/test';
import { SimNetnsRules } from '../../../sim/kernel/netns-rules-adapter.js';
import { buildInpodPlan } from '../../../impl/node-agent/rule-builder.js';
import { netnsId } from '../../../impl/api/ids.js';
import { formatSockAddr } from '../../../sim/kernel/socket.js';
import { APP, buildInpodLab } from '../kernel/inpod-fixture.js';

const plan = buildInpodPlan({
  profile: 'upstream',
  ipv6: true,
  dnsCapture: true,
  ingressMode: false,
  virtualInterfaces: [],
});
const EMPTY_RULES =
  '*nat\n:PREROUTING ACCEPT [0:0]\n:INPUT ACCEPT [0:0]\n:OUTPUT ACCEPT [0:0]\n:POSTROUTING ACCEPT [0:0]\nCOMMIT\n';

function lab() {
  // The fixture installs the upstream fixture rules; start from a pod with no rules instead.
  const l = buildInpodLab({ rules: EMPTY_RULES, ipRule: false });
  return { ...l, rules: new SimNetnsRules(l.k), pod: netnsId('pod-a') };
}

test('apply installs rules, ip rules and routes that capture outbound TCP; applying twice changes nothing', async () => {
  const { k, rules, pod, proxy } = lab();
  const before = await rules.read(pod);
  await rules.apply(pod, plan);
  const once = await rules.read(pod);
  expect(once.rules).toEqual([
    { family: 'ipv4', priority: 32764, fwmark: { value: 0x111, mask: 0xfff }, table: 100 },
    { family: 'ipv6', priority: 32764, fwmark: { value: 0x111, mask: 0xfff }, table: 100 },
  ]);
  expect(once.routes.map((r) => `${r.family} ${r.dst} ${r.dev} ${r.table}`)).toEqual([
    'ipv4 0.0.0.0/0 lo 100',
    'ipv6 ::/0 lo 100',
  ]);
  expect(once.iptables.ipv4).toContain('-j REDIRECT --to-ports 15001');
  expect(once).not.toEqual(before);
  await rules.apply(pod, plan);
  expect(await rules.read(pod)).toEqual(once);
  const c = k.socket('pod-a', 'tcp', 4, APP);
  const r = k.connect(c, '10.244.1.6', 8080);
  expect(r.listener).toBe(proxy.outbound);
  expect(formatSockAddr(k.originalDst(r.server!))).toBe('10.244.1.6:8080');
});

test('remove restores the original state, twice is fine, and traffic goes direct again', async () => {
  const { k, rules, pod, appB } = lab();
  const before = await rules.read(pod);
  await rules.apply(pod, plan);
  await rules.remove(pod, plan);
  expect(await rules.read(pod)).toEqual(before);
  await rules.remove(pod, plan);
  expect(await rules.read(pod)).toEqual(before);
  const r = k.connect(k.socket('pod-a', 'tcp', 4, APP), '10.244.1.6', 8080);
  expect(r.listener).toBe(appB);
});

test('a malformed plan is refused with a clear error and changes nothing; a missing netns is named', async () => {
  const { rules, pod } = lab();
  await rules.apply(pod, plan);
  const good = await rules.read(pod);
  await expect(
    rules.apply(pod, { ...plan, iptables: { ipv4: '*nat\n-A OUTPUT -j REDIRECT --to-ports 1\nCOMMIT\n' } }),
  ).rejects.toThrow(/line 2/);
  await expect(
    rules.apply(pod, {
      ...plan,
      iptables: { ipv4: '*nat\n:OWN - [0:0]\n-A OWN -m frobnicate -j ACCEPT\n-A OUTPUT -j OWN\nCOMMIT\n' },
    }),
  ).rejects.toThrow(/frobnicate/);
  expect(await rules.read(pod)).toEqual(good);
  await expect(rules.apply(netnsId('pod-gone'), plan)).rejects.toThrow('network namespace pod-gone does not exist');
});

test("exclusive apply replaces the plan's tables whole (an ACCEPT inserted ahead of the hook goes, outbound is captured again) and empties the others", async () => {
  const { k, rules, pod, proxy, appB } = lab();
  await rules.apply(pod, plan);
  k.iptablesRestore('pod-a', 4, '*nat\n-I OUTPUT 1 -j ACCEPT\nCOMMIT\n*security\n-A OUTPUT -j ACCEPT\nCOMMIT\n', {
    noflush: true,
  });
  expect(k.connect(k.socket('pod-a', 'tcp', 4, APP), '10.244.1.6', 8080).listener).toBe(appB);
  // merge (upstream) keeps what is not its own chains and hooks
  await rules.apply(pod, plan);
  expect((await rules.read(pod)).iptables.ipv4).toContain('-A OUTPUT -j ACCEPT\n-A OUTPUT -j ISTIO_OUTPUT');
  await rules.apply(pod, plan, 'exclusive');
  const s = await rules.read(pod);
  expect(s.iptables.ipv4).not.toContain('-A OUTPUT -j ACCEPT\n-A OUTPUT -j ISTIO_OUTPUT');
  // the security table (which the plan does not use) is emptied, not left with the app's rule
  expect(s.iptables.ipv4).not.toMatch(/\*security\n[^*]*-A OUTPUT -j ACCEPT/);
  expect(k.connect(k.socket('pod-a', 'tcp', 4, APP), '10.244.1.6', 8080).listener).toBe(proxy.outbound);
});
