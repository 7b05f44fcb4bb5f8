/**
 * Issue 20 on the real kernel, at the NetnsRules adapter and the rule builder:
 * - a pod netns whose lo has IPv6 disabled: the Linux adapter reads it (per namespace), the full
 *   v6 plan is refused by the kernel ("IPv6 is disabled on nexthop device") and leaves nothing,
 *   the plan built for such a lo applies;
 * - leftovers: after a plan of other settings, apply + remove(leftovers) leaves exactly what a
 *   fresh namespace holds after the new plan alone (both families, every table, ip rules, routes).
 */
import { test, expect } from '@playwright/test';
import { netnsWorld } from '../../worlds.js';
import { withCluster } from '../../../e2e/netns/cluster.js';
import { execIn, ipIn } from '../../../e2e/netns/ip.js';
import { netnsId } from '../../../impl/api/ids.js';
import { port } from '../../../impl/api/ports.js';
import { LinuxNetnsRules } from '../../../impl/linux/netns-rules.js';
import { buildInpodPlan, type InpodOptions } from '../../../impl/node-agent/rule-builder.js';
import { drift, leftovers } from '../../../impl/node-agent/plan-drift.js';

const w = netnsWorld();
test.skip(!w.available, w.reason);

const rules = new LinuxNetnsRules();
const base = { ingressMode: false, virtualInterfaces: [] };
const upstream = (o: { ipv6: boolean; dnsCapture: boolean; loIpv6Disabled?: boolean }): InpodOptions => ({
  ...base,
  ...o,
  profile: 'upstream',
});
const strict = (o: { ipv6: boolean; dnsCapture: boolean; loIpv6Disabled?: boolean }): InpodOptions => ({
  ...base,
  ...o,
  profile: 'strict',
  proxyUid: 1337,
  probePorts: [port(8080)],
});

test('lo with IPv6 disabled: read per namespace; the full v6 plan is refused and leaves nothing; the plan without the v6 route applies', async () => {
  await withCluster({ nodes: 1 }, async (c) => {
    const a = await c.addPod('node-0', 'a');
    const b = await c.addPod('node-0', 'b');
    await execIn(a.netns, ['sysctl', '-q', '-w', 'net.ipv6.conf.lo.disable_ipv6=1']);
    const id = netnsId(a.netnsPath);
    expect(await rules.loopbackIpv6Disabled(id)).toBe(true);
    expect(await rules.loopbackIpv6Disabled(netnsId(b.netnsPath))).toBe(false);

    const before = await rules.read(id);
    await expect(rules.apply(id, buildInpodPlan(upstream({ ipv6: true, dnsCapture: true })))).rejects.toThrow(
      /IPv6 is disabled on nexthop device/,
    );
    expect(await rules.read(id)).toEqual(before);

    // What the agent does (apply, then remove what an earlier plan left): strict, then upstream.
    for (const o of [
      strict({ ipv6: true, dnsCapture: true, loIpv6Disabled: true }),
      upstream({ ipv6: true, dnsCapture: true, loIpv6Disabled: true }),
    ]) {
      const plan = buildInpodPlan(o);
      await rules.apply(id, plan);
      const left = leftovers(await rules.read(id), plan);
      if (left) await rules.remove(id, left);
      const s = await rules.read(id);
      expect(drift(s, plan)).toEqual([]);
      expect(s.routes.map((r) => r.family)).toEqual(['ipv4']);
      expect(await ipIn(a.netns, ['-6', 'route', 'show', 'table', '100'])).toBe('');
    }
    // upstream keeps the v6 capture rules and the v6 fwmark rule (upstream skips only the route).
    expect(await execIn(a.netns, ['ip6tables-save', '-t', 'nat'])).toContain(
      '-A ISTIO_OUTPUT ! -d ::1/128 -p tcp -m mark ! --mark 0x539/0xfff -j REDIRECT --to-ports 15001',
    );
    expect(await ipIn(a.netns, ['-6', 'rule', 'show'])).toContain('fwmark 0x111/0xfff lookup 100');
    expect(await execIn(a.netns, ['ip6tables-save', '-t', 'filter'])).not.toContain('ISTIO');
  });
});

const transitions: { name: string; from: InpodOptions; to: InpodOptions }[] = [
  {
    name: 'DNS capture on → off',
    from: upstream({ ipv6: false, dnsCapture: true }),
    to: upstream({ ipv6: false, dnsCapture: false }),
  },
  {
    name: 'IPv6 capture on → off',
    from: upstream({ ipv6: true, dnsCapture: true }),
    to: upstream({ ipv6: false, dnsCapture: true }),
  },
  {
    name: 'strict (IPv6, DNS) → upstream (neither)',
    from: strict({ ipv6: true, dnsCapture: true }),
    to: upstream({ ipv6: false, dnsCapture: false }),
  },
  {
    name: 'upstream (IPv6, DNS) → strict (neither)',
    from: upstream({ ipv6: true, dnsCapture: true }),
    to: strict({ ipv6: false, dnsCapture: false }),
  },
];

test('after a plan of other settings, apply + remove(leftovers) leaves exactly what a fresh namespace holds after the new plan', async () => {
  await withCluster({ nodes: 1 }, async (c) => {
    for (const [i, t] of transitions.entries()) {
      const old = await c.addPod('node-0', `o${i}`);
      const fresh = await c.addPod('node-0', `f${i}`);
      // A rule that is not ours stays throughout.
      await execIn(
        old.netns,
        ['iptables-restore', '--noflush'],
        '*raw\n-A OUTPUT -p udp -m udp --dport 9 -j ACCEPT\nCOMMIT\n',
      );
      await execIn(
        fresh.netns,
        ['iptables-restore', '--noflush'],
        '*raw\n-A OUTPUT -p udp -m udp --dport 9 -j ACCEPT\nCOMMIT\n',
      );
      const id = netnsId(old.netnsPath);
      const next = buildInpodPlan(t.to);
      await rules.apply(id, buildInpodPlan(t.from));
      await rules.apply(id, next);
      const mid = await rules.read(id);
      const left = leftovers(mid, next);
      expect(left, t.name).toBeDefined();
      expect(drift(mid, next).length, t.name).toBeGreaterThan(0);
      await rules.remove(id, left!);

      await rules.apply(netnsId(fresh.netnsPath), next);
      const want = await rules.read(netnsId(fresh.netnsPath));
      const got = await rules.read(id);
      expect(got, t.name).toEqual(want);
      expect(drift(got, next), t.name).toEqual([]);
      expect(leftovers(got, next), t.name).toBeUndefined();
      expect(await execIn(old.netns, ['iptables-save', '-t', 'raw']), t.name).toContain(
        '-A OUTPUT -p udp -m udp --dport 9 -j ACCEPT',
      );
    }
  });
});
