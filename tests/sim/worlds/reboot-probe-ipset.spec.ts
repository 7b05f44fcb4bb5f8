/**
 * The host probe ipsets (istio-inpod-probes-v4/v6) after a node reboot: they must hold exactly
 * the current addresses of the node's enrolled pods. The probe SNAT carve-out is keyed on them,
 * so an old address left behind is a carve-out for whichever pod gets it next, and a missing new
 * one takes the carve-out from the pod's own kubelet probes. Found by `ambient-lab check` (its
 * world-pool digest rejected rebooted worlds whose sets still held old addresses).
 */
import { test, expect } from '@playwright/test';
import { createSimWorld, type SimMeshWorld } from '../../../scenarios/worlds/sim-world.js';
import type { PodRef } from '../../../scenarios/world.js';

const AMBIENT = { 'istio.io/dataplane-mode': 'ambient' };
const APP = { uid: 1000, caps: [], tcpPorts: [8080] };
const a: PodRef = { namespace: 'mesh', name: 'a' };
const b: PodRef = { namespace: 'mesh', name: 'b' };

/** Members of the node's probe sets (both families), address only, sorted. */
function members(w: SimMeshWorld, node: string): string[] {
  const host = w.sim.nodes.find((n) => n.name === node)!.hostNetns;
  const sets = w.sim.kernel.ipsetsOf(host);
  return ['istio-inpod-probes-v4', 'istio-inpod-probes-v6']
    .filter((s) => sets.names().includes(s))
    .flatMap((s) => sets.entries(s).map((e) => e.text.replace(/\/(32|128)$/, '')))
    .sort();
}

/** Current addresses of the node's pods annotated enabled (the agent's enrolled pods). */
async function enrolledIps(w: SimMeshWorld, node: string): Promise<string[]> {
  return (await w.pods())
    .filter((p) => p.node === node && p.annotation === 'enabled')
    .flatMap((p) => p.ips)
    .sort();
}

for (const ipv6 of [false, true]) {
  test(`reboot: the probe sets hold the pods' new addresses and none of the old (ipv6 ${ipv6})`, async () => {
    const w = await createSimWorld({
      nodes: 2,
      profile: 'strict',
      kernelVersion: '6.1',
      ipv6,
      dnsCapture: false,
      seed: 5,
    });
    try {
      await w.createNamespace('mesh', AMBIENT);
      await w.createPod({ ...a, node: 'node-0', app: APP });
      await w.createPod({ ...b, node: 'node-0', app: APP });
      await w.settle();
      const old = await enrolledIps(w, 'node-0');
      expect(old.length).toBe(ipv6 ? 4 : 2);
      expect(members(w, 'node-0')).toEqual(old);
      await w.rebootNode('node-0');
      await w.settle();
      const now = await enrolledIps(w, 'node-0');
      expect(now.length).toBe(old.length);
      expect(now.some((ip) => old.includes(ip))).toBe(false); // new sandboxes, new addresses
      expect(members(w, 'node-0')).toEqual(now);
    } finally {
      await w.close();
    }
  });
}

test('reboot while an opt-out is in flight: the pod starts outside the mesh with a new address; the old one leaves the set, and the new one joins when it opts back in', async () => {
  const w = await createSimWorld({
    nodes: 2,
    profile: 'strict',
    kernelVersion: '6.1',
    ipv6: true,
    dnsCapture: false,
    seed: 5,
  });
  try {
    await w.createNamespace('mesh', AMBIENT);
    await w.createPod({ ...a, node: 'node-0', app: APP });
    await w.settle();
    const old = await enrolledIps(w, 'node-0');
    expect(members(w, 'node-0')).toEqual(old);
    // The agent goes down with the node before it saw the opt-out: its memory of the old
    // addresses is gone, and the pod's new sandbox (outside the mesh) gets new ones.
    await w.labelPod(a, { 'istio.io/dataplane-mode': 'none' });
    await w.rebootNode('node-0');
    await w.settle();
    expect((await w.pods()).find((p) => p.name === 'a')!.annotation).toBeUndefined();
    expect(members(w, 'node-0')).toEqual([]);
    await w.labelPod(a, { 'istio.io/dataplane-mode': null });
    await w.settle();
    const now = await enrolledIps(w, 'node-0');
    expect(now.length).toBe(2);
    expect(now.some((ip) => old.includes(ip))).toBe(false);
    expect(members(w, 'node-0')).toEqual(now);
  } finally {
    await w.close();
  }
});

test('a pod deleted while its node agent is down leaves no member behind once the agent is back', async () => {
  const w = await createSimWorld({
    nodes: 2,
    profile: 'upstream',
    kernelVersion: '6.1',
    ipv6: false,
    dnsCapture: false,
    seed: 7,
  });
  try {
    await w.createNamespace('mesh', AMBIENT);
    await w.createPod({ ...a, node: 'node-0', app: APP });
    await w.createPod({ ...b, node: 'node-0', app: APP });
    await w.settle();
    await w.stop('agent', 'node-0');
    await w.deletePod(b);
    await w.settle();
    await w.start('agent', 'node-0');
    // The proxy's reconnect backoff grew while the agent was away (cap 15 s); restart it so the
    // pod is served within this settle.
    await w.restart('proxy', 'node-0');
    await w.settle();
    const now = await enrolledIps(w, 'node-0');
    expect(now.length).toBe(1);
    expect(members(w, 'node-0')).toEqual(now);
  } finally {
    await w.close();
  }
});
