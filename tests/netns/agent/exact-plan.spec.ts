/**
 * Issue 20 with the real agent process and the real CNI chain:
 * - a pod whose sandbox has IPv6 disabled on lo, with IPv6 capture on, is enrolled (its ADD
 *   failed and was retried without end: "IPv6 is disabled on nexthop device"); the v6 capture
 *   rules and fwmark rule are there, the v6 local route is not; a normal pod gets the route;
 * - an agent restarted with DNS capture turned off removes the raw table's chains and the DNS
 *   redirects from a running pod: its namespace then holds what a new pod's does.
 */
import { test, expect } from '@playwright/test';
import { NetnsWorld, netnsWorldFactory } from '../../../e2e/netns/world.js';
import { NetnsLab } from '../../../e2e/netns/world-lab.js';
import { execIn, ipIn } from '../../../e2e/netns/ip.js';
import { netnsId } from '../../../impl/api/ids.js';
import { LinuxNetnsRules } from '../../../impl/linux/netns-rules.js';

const avail = netnsWorldFactory.available();
test.skip(!avail.ok, avail.reason);
test.setTimeout(180_000);

const rules = new LinuxNetnsRules();
const app = { uid: 1000, caps: [], tcpPorts: [8080] };

function netnsOf(w: NetnsWorld, key: string): string {
  const ns = w.lab.state.pods[key]?.netns;
  if (ns === undefined) throw new Error(`pod ${key} has no sandbox`);
  return ns;
}

/**
 * A one-node upstream lab with IPv6 capture on v4-only pods, and pod mesh/a made with IPv6
 * disabled on its loopback; `fn` runs once a is enrolled. v4-only pods: with a v6 pod address the
 * bridge plugin's IPAM step turns IPv6 on lo back on. IPv6 capture on a v4 cluster is upstream's
 * default, and nodes may disable IPv6 in new namespaces.
 */
async function withV6OffLoopbackPod(
  dnsCapture: boolean,
  fn: (w: NetnsWorld, a: string) => Promise<void>,
): Promise<void> {
  const lab = await NetnsLab.create({
    nodes: 1,
    profile: 'upstream',
    ipv6: false,
    captureIpv6: true,
    dnsCapture,
    proxyDns: dnsCapture,
    stateRoot: '/run/ambient-lab/worlds',
  });
  const w = new NetnsWorld(lab, {
    nodes: 1,
    profile: 'upstream',
    kernelVersion: '6.1',
    ipv6: false,
    dnsCapture,
    seed: 1,
  });
  try {
    await w.createNamespace('mesh', { 'istio.io/dataplane-mode': 'ambient' });
    const p = await w.lab.createPod({
      namespace: 'mesh',
      name: 'a',
      node: 'node-0',
      ...app,
      sysctls: { 'net.ipv6.conf.lo.disable_ipv6': '1' },
    });
    expect(p.error).toBeUndefined();
    await w.createPod({ namespace: 'mesh', name: 'b', app });
    await w.settle();
    for (const o of await w.pods())
      expect(o, o.name).toMatchObject({ started: true, annotation: 'enabled', redirected: true });
    const a = netnsOf(w, 'mesh/a');
    expect((await execIn(a, ['cat', '/proc/sys/net/ipv6/conf/lo/disable_ipv6'])).trim()).toBe('1');
    await fn(w, a);
  } finally {
    await w.close();
  }
}

test('IPv6 capture on (v4-only pods), a sandbox with IPv6 disabled on lo: enrolled, v6 rules and fwmark rule, no v6 local route', async () => {
  await withV6OffLoopbackPod(false, async (w, a) => {
    expect(await execIn(a, ['ip6tables-save', '-t', 'nat'])).toContain(
      '-A ISTIO_OUTPUT ! -d ::1/128 -p tcp -m mark ! --mark 0x539/0xfff -j REDIRECT --to-ports 15001',
    );
    expect(await ipIn(a, ['-6', 'rule', 'show'])).toContain('fwmark 0x111/0xfff lookup 100');
    expect(await ipIn(a, ['-6', 'route', 'show', 'table', '100'])).toBe('');
    expect(await ipIn(netnsOf(w, 'mesh/b'), ['-6', 'route', 'show', 'table', '100'])).toContain('local default dev lo');
  });
});

test('DNS capture on, a sandbox with IPv6 disabled on lo: enrolled (the proxy once refused it, EADDRNOTAVAIL on ::1:15053), its DNS served on 127.0.0.1 only, as upstream ztunnel does', async () => {
  await withV6OffLoopbackPod(true, async (w, a) => {
    const listening = await execIn(a, ['ss', '-Hlnu', 'sport', '=', ':15053']);
    expect(listening).toContain('127.0.0.1:15053');
    expect(listening).not.toContain('[::1]:15053');
    // A pod with IPv6 on its loopback gets both.
    expect(await execIn(netnsOf(w, 'mesh/b'), ['ss', '-Hlnu', 'sport', '=', ':15053'])).toContain('[::1]:15053');
  });
});

test('agent restart with DNS capture turned off: the running pod loses the raw chains and DNS redirects, as a new pod has none', async () => {
  const w = (await netnsWorldFactory.create({
    nodes: 1,
    profile: 'upstream',
    kernelVersion: '6.1',
    ipv6: false,
    dnsCapture: true,
    seed: 1,
  })) as NetnsWorld;
  try {
    await w.createNamespace('mesh', { 'istio.io/dataplane-mode': 'ambient' });
    await w.createPod({ namespace: 'mesh', name: 'a', app });
    const a = netnsOf(w, 'mesh/a');
    expect(await execIn(a, ['iptables-save', '-t', 'raw'])).toContain('-A OUTPUT -j ISTIO_OUTPUT');
    expect(await execIn(a, ['iptables-save', '-t', 'nat'])).toContain('--to-ports 15053');

    await w.stop('agent', 'node-0');
    w.lab.applyDeployment({ dnsCapture: false }); // deploy/components/dns-capture-off
    await w.start('agent', 'node-0');
    await expect
      .poll(async () => execIn(a, ['iptables-save']), { timeout: 90_000 })
      .not.toContain('ISTIO_PRERT -p udp');
    await expect.poll(async () => execIn(a, ['iptables-save']), { timeout: 30_000 }).not.toContain('15053');
    expect(await execIn(a, ['iptables-save', '-t', 'raw'])).not.toContain('ISTIO');

    await w.createPod({ namespace: 'mesh', name: 'b', app });
    await w.settle();
    for (const o of await w.pods()) expect(o, o.name).toMatchObject({ annotation: 'enabled', redirected: true });
    const after = await rules.read(netnsId(`/run/netns/${a}`));
    expect(after).toEqual(await rules.read(netnsId(`/run/netns/${netnsOf(w, 'mesh/b')}`)));
  } finally {
    await w.close();
  }
});
