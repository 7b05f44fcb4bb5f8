/**
 * Agent process restart on the real kernel: the restarted agent finds the pod's netns again from
 * /proc (the app process's AMBIENT_LAB_POD_UID marker, verified by the pod IP — see
 * impl/linux/netns-finder-proc.ts), re-asserts its rules and hands the pod to the proxy; the pod
 * stays enabled and served. With the proxy stopped, the enrolled pod's outbound TCP fails
 * instead of bypassing (fail closed); with the proxy back, it is captured again.
 */
import { test, expect } from '@playwright/test';
import { netnsWorldFactory, type NetnsWorld } from '../../../e2e/netns/world.js';
import { podUidFromCgroup } from '../../../impl/linux/netns-finder-proc.js';

const avail = netnsWorldFactory.available();
test.skip(!avail.ok, avail.reason);
test.setTimeout(120_000);

test('cgroup pod UID conventions: cgroupfs and systemd drivers', () => {
  expect(podUidFromCgroup('0::/kubepods/burstable/pod0c1f3e9a-7d2b-4c55-9f0e-1a2b3c4d5e6f/abc123\n')).toBe(
    '0c1f3e9a-7d2b-4c55-9f0e-1a2b3c4d5e6f',
  );
  expect(
    podUidFromCgroup(
      '0::/kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-pod0c1f3e9a_7d2b_4c55_9f0e_1a2b3c4d5e6f.slice/cri-containerd-1.scope\n',
    ),
  ).toBe('0c1f3e9a-7d2b-4c55-9f0e-1a2b3c4d5e6f');
  expect(podUidFromCgroup('0::/user.slice/user-1000.slice/session-3.scope\n')).toBeUndefined();
});

test('agent restart keeps the pod enrolled (netns found from /proc); proxy down fails closed; proxy back captures again', async () => {
  const w = (await netnsWorldFactory.create({
    nodes: 1,
    profile: 'upstream',
    kernelVersion: '6.1',
    ipv6: false,
    dnsCapture: false,
    seed: 1,
  })) as NetnsWorld;
  try {
    await w.createNamespace('mesh', { 'istio.io/dataplane-mode': 'ambient' });
    await w.createPod({ namespace: 'mesh', name: 'a', app: { uid: 1000, caps: [], tcpPorts: [8080] } });
    await w.createPod({ namespace: 'mesh', name: 'b', app: { uid: 1000, caps: [], tcpPorts: [8080] } });
    const a = { namespace: 'mesh', name: 'a' };
    const b = { kind: 'pod' as const, pod: { namespace: 'mesh', name: 'b' }, port: 8080 };
    // Both sandboxes made before the restart: a sandbox refused at first (a loaded machine) would be
    // made again by the kubelet's retry, and its netns would then come from that ADD, not from /proc.
    await w.settle();
    for (const p of await w.pods())
      expect(p, JSON.stringify(w.lastSettle)).toMatchObject({ started: true, redirected: true, served: true });
    const sandboxes = Object.values(w.lab.state.pods).map((p) => p.netns);

    await w.restart('agent', 'node-0');
    // The proxy reconnects to the new agent after its ZDS backoff (up to 15 s, longer on a loaded machine: 30 s was missed once in CI).
    const podA = async (): Promise<unknown> =>
      ((await w.lab.componentStatus('agent', 'node-0')).status?.['pods'] as { name: string }[] | undefined)?.find(
        (p) => p.name === 'a',
      );
    await expect.poll(podA, { timeout: 90_000 }).toMatchObject({ acked: true });
    // After a restart the netns comes from the /proc finder: a handle on the agent's own fd.
    expect(await podA()).toMatchObject({ rules: true, netns: expect.stringMatching(/^\/proc\/\d+\/fd\/\d+$/) });
    expect(
      Object.values(w.lab.state.pods).map((p) => p.netns),
      'no sandbox was made again',
    ).toEqual(sandboxes);
    await w.settle();
    for (const p of await w.pods()) expect(p).toMatchObject({ annotation: 'enabled', redirected: true, served: true });

    await w.stop('proxy', 'node-0');
    const closed = await w.connect({ kind: 'pod', pod: a }, b);
    expect(closed.outcome).not.toBe('established');
    expect(closed.deliveries).toEqual([]);

    await w.start('proxy', 'node-0');
    await w.settle();
    const open = await w.connect({ kind: 'pod', pod: a }, b);
    expect(open).toMatchObject({ outcome: 'established', acceptedBy: 'proxy-outbound' });
    expect(open.deliveries).toEqual([
      expect.objectContaining({ pod: { namespace: 'mesh', name: 'b' }, viaProxy: true }),
    ]);
  } finally {
    await w.close();
  }
});
