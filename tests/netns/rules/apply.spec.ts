/**
 * The Linux NetnsRules adapter on the real kernel, with the upstream in-pod ruleset as the plan:
 * what it installs is visible to the kernel's own tools, applying twice changes nothing, the
 * REDIRECT really captures a pod's outbound TCP (v4 and v6), remove restores the original state,
 * and rules that are not the plan's survive both.
 */
import { test, expect } from '@playwright/test';
import { netnsWorld } from '../../worlds.js';
import { withCluster } from '../../../e2e/netns/cluster.js';
import { execIn, ipIn } from '../../../e2e/netns/ip.js';
import { acceptedBy, connectFrom, startListener } from '../../../e2e/netns/tcp-probe.js';
import { netnsId } from '../../../impl/api/ids.js';
import { LinuxNetnsRules } from '../../../impl/linux/netns-rules.js';
import { rootSnapshot } from '../../../e2e/netns/root-snapshot.js';
import { SAVED_OUTBOUND_REDIRECT_V4, UPSTREAM_INPOD_PLAN } from './upstream-inpod-plan.js';

const w = netnsWorld();
test.skip(!w.available, w.reason);

const rules = new LinuxNetnsRules();

function count(haystack: string, line: string): number {
  return haystack.split('\n').filter((l) => l === line).length;
}

test('apply installs the plan where the kernel tools see it; apply again is a no-op; remove restores the original state', async () => {
  const rootBefore = await rootSnapshot();
  await withCluster({ nodes: 1 }, async (c) => {
    const pod = await c.addPod('node-0', 'a');
    const id = netnsId(pod.netnsPath);
    const original = await rules.read(id);
    expect(original).toEqual({ iptables: { ipv4: '', ipv6: '' }, rules: [], routes: [] });

    await rules.apply(id, UPSTREAM_INPOD_PLAN);
    // Checked with the kernel tools directly, not only through the adapter's read().
    const save4 = await execIn(pod.netns, ['iptables-save']);
    const save6 = await execIn(pod.netns, ['ip6tables-save']);
    expect(count(save4, SAVED_OUTBOUND_REDIRECT_V4)).toBe(1);
    expect(count(save4, '-A PREROUTING -j ISTIO_PRERT')).toBe(3); // mangle, nat, raw
    expect(save4).toContain('-A ISTIO_PRERT -m mark --mark 0x539/0xfff -j CONNMARK --set-xmark 0x111/0xfff');
    expect(save6).toContain(
      '-A ISTIO_OUTPUT ! -d ::1/128 -p tcp -m mark ! --mark 0x539/0xfff -j REDIRECT --to-ports 15001',
    );
    expect(await ipIn(pod.netns, ['rule', 'show'])).toContain('32764:\tfrom all fwmark 0x111/0xfff lookup 100');
    expect(await ipIn(pod.netns, ['-6', 'rule', 'show'])).toContain('32764:\tfrom all fwmark 0x111/0xfff lookup 100');
    expect(await ipIn(pod.netns, ['route', 'show', 'table', '100'])).toContain('local default dev lo');
    expect(await ipIn(pod.netns, ['-6', 'route', 'show', 'table', '100'])).toContain('local default dev lo');

    const applied = await rules.read(id);
    expect(applied.rules).toEqual(UPSTREAM_INPOD_PLAN.rules);
    expect(applied.routes).toEqual(UPSTREAM_INPOD_PLAN.routes);
    expect(count(applied.iptables.ipv4, SAVED_OUTBOUND_REDIRECT_V4)).toBe(1);

    await rules.apply(id, UPSTREAM_INPOD_PLAN);
    expect(await rules.read(id)).toEqual(applied);
    expect(count(await execIn(pod.netns, ['iptables-save']), '-A PREROUTING -j ISTIO_PRERT')).toBe(3);

    await rules.remove(id, UPSTREAM_INPOD_PLAN);
    expect(await rules.read(id)).toEqual(original);
    expect(await execIn(pod.netns, ['iptables-save'])).not.toContain('ISTIO');
    expect(await ipIn(pod.netns, ['rule', 'show'])).not.toContain('fwmark');
    await rules.remove(id, UPSTREAM_INPOD_PLAN); // absent: fine
    expect(await rules.read(id)).toEqual(original);
    // The root namespace never saw any of it, even while the rules were in place.
    await rules.apply(id, UPSTREAM_INPOD_PLAN);
    expect(await rootSnapshot()).toEqual(rootBefore);
  });
  expect(await rootSnapshot()).toEqual(rootBefore);
});

test("the applied REDIRECT captures the pod's outbound TCP on 15001 (v4 and v6); after remove it goes direct again", async () => {
  await withCluster({ nodes: 2 }, async (c) => {
    const a = await c.addPod('node-0', 'a');
    const b = await c.addPod('node-0', 'b');
    const d = await c.addPod('node-1', 'd');
    const id = netnsId(a.netnsPath);
    const app4 = await startListener(c, d.netns, '0.0.0.0', 8080, 'app-d');
    const app6 = await startListener(c, d.netns, '::', 8080, 'app-d6');
    const appB = await startListener(c, b.netns, '0.0.0.0', 8080, 'app-b');
    const proxy4 = await startListener(c, a.netns, '0.0.0.0', 15001, 'proxy');
    const proxy6 = await startListener(c, a.netns, '::', 15001, 'proxy6');

    // Control: without rules the connection reaches the app.
    expect(await connectFrom(c, a.netns, d.ipv4!, 8080)).toBe('app-d 10.244.1.2 8080');

    await rules.apply(id, UPSTREAM_INPOD_PLAN);
    // Local-out REDIRECT rewrites the destination to the loopback address, port 15001.
    expect(await connectFrom(c, a.netns, d.ipv4!, 8080)).toBe('proxy 127.0.0.1 15001');
    expect(await connectFrom(c, a.netns, b.ipv4!, 8080)).toBe('proxy 127.0.0.1 15001');
    expect(await connectFrom(c, a.netns, d.ipv6!, 8080)).toBe('proxy6 ::1 15001');
    // The captured connections keep the pod's own address as source.
    expect(acceptedBy(proxy4).map((x) => x.remote)).toEqual(['10.244.0.2', '10.244.0.2']);
    expect(acceptedBy(proxy6).map((x) => x.remote)).toEqual(['fd00:10:244::2']);
    // Pods without rules are untouched: b still reaches d directly.
    expect(await connectFrom(c, b.netns, d.ipv4!, 8080)).toBe('app-d 10.244.1.2 8080');

    await rules.remove(id, UPSTREAM_INPOD_PLAN);
    expect(await connectFrom(c, a.netns, d.ipv6!, 8080)).toBe('app-d6 fd00:10:244:1::2 8080');
    expect(await connectFrom(c, a.netns, d.ipv4!, 8080)).toBe('app-d 10.244.1.2 8080');
    expect(acceptedBy(app4).map((x) => x.remote)).toEqual(['10.244.0.2', '10.244.0.3', '10.244.0.2']);
    expect(acceptedBy(app6).map((x) => x.remote)).toEqual(['fd00:10:244::2']);
    expect(acceptedBy(appB)).toEqual([]);
  });
});

test("rules that are not the plan's survive apply, re-apply and remove; a /proc/PID/ns/net handle works like a /run/netns path", async () => {
  await withCluster({ nodes: 1 }, async (c) => {
    const pod = await c.addPod('node-0', 'a');
    const foreign =
      '*nat\n:OTHER - [0:0]\n-A OUTPUT -p udp -m udp --dport 9 -j ACCEPT\n-A OUTPUT -j OTHER\n-A OTHER -p tcp -m tcp --dport 7 -j RETURN\nCOMMIT\n';
    await execIn(pod.netns, ['iptables-restore', '--noflush'], foreign);
    await ipIn(pod.netns, ['rule', 'add', 'fwmark', '0x5', 'lookup', '105', 'pref', '32000']);
    // A process inside the pod gives the other handle form.
    const holder = await startListener(c, pod.netns, '127.0.0.1', 9000, 'holder');
    const id = netnsId(`/proc/${holder.pid}/ns/net`);
    const before = await rules.read(id);
    expect(before.rules).toHaveLength(1);

    await rules.apply(id, UPSTREAM_INPOD_PLAN);
    await rules.apply(id, UPSTREAM_INPOD_PLAN);
    const mid = await execIn(pod.netns, ['iptables-save', '-t', 'nat']);
    expect(count(mid, '-A OUTPUT -p udp -m udp --dport 9 -j ACCEPT')).toBe(1);
    expect(count(mid, '-A OTHER -p tcp -m tcp --dport 7 -j RETURN')).toBe(1);
    expect(count(mid, '-A OUTPUT -j ISTIO_OUTPUT')).toBe(1);
    await rules.remove(id, UPSTREAM_INPOD_PLAN);
    expect(await rules.read(id)).toEqual(before);
    expect(await rules.read(netnsId(pod.netnsPath))).toEqual(before);
  });
});
