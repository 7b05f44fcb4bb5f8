/**
 * WorldOptions.meshV6 on the sim: a dual-stack cluster whose mesh installs only v4 rules
 * (upstream `ambient.ipv6: false`). Ambient pods still enroll (their v6 address stays out of the
 * host probe ipset, which does not exist without v6 capture — the agent used to fail the
 * enrollment on it); v4 is captured; v6 is not captured in upstream and blocked in strict.
 */
import { test, expect } from '@playwright/test';
import { createSimWorld } from '../../../scenarios/worlds/sim-world.js';
import type { PodRef, Profile } from '../../../scenarios/world.js';

const a: PodRef = { namespace: 'mesh', name: 'a' };
const q: PodRef = { namespace: 'plain', name: 'q' };

async function cluster(profile: Profile) {
  const w = await createSimWorld({
    nodes: 2,
    profile,
    kernelVersion: '6.1',
    ipv6: true,
    meshV6: false,
    dnsCapture: false,
    seed: 9,
  });
  await w.createNamespace('mesh', { 'istio.io/dataplane-mode': 'ambient' });
  await w.createNamespace('plain');
  const oa = await w.createPod({ ...a, node: 'node-0', app: { uid: 1000, caps: [], tcpPorts: [8080] } });
  await w.createPod({ ...q, node: 'node-1', app: { uid: 1000, caps: [], tcpPorts: [8080] } });
  return { w, oa };
}

for (const profile of ['upstream', 'strict'] as const) {
  test(`${profile}: dual-stack pods enroll with a v4-only mesh; v4 is captured both ways`, async () => {
    const { w, oa } = await cluster(profile);
    try {
      expect(oa.ips.some((ip) => ip.includes(':'))).toBe(true);
      expect(oa).toMatchObject({ started: true, redirected: true, served: true, annotation: 'enabled' });
      expect(w.log.entries.filter((e) => /ipset/.test(`${e.msg} ${JSON.stringify(e.fields)}`))).toEqual([]);
      expect(
        (await w.connect({ kind: 'pod', pod: a }, { kind: 'pod', pod: q, port: 8080 }, { family: 4 })).acceptedBy,
      ).toBe('proxy-outbound');
      expect(
        (await w.connect({ kind: 'pod', pod: q }, { kind: 'pod', pod: a, port: 8080 }, { family: 4 })).acceptedBy,
      ).toBe('proxy-inbound');
      // The v4 rules only: the pod netns has no v6 redirect.
      const ns = w.sim.nodes[0]!.disk.sandboxes.get(oa.uid)!.netns;
      expect(w.sim.kernel.iptablesSave(ns, 6)).not.toContain('--to-ports 15001');
    } finally {
      await w.close();
    }
  });
}

test('upstream: v6 skips the v4-only mesh both ways (B7)', async () => {
  const { w } = await cluster('upstream');
  try {
    const out = await w.connect({ kind: 'pod', pod: a }, { kind: 'pod', pod: q, port: 8080 }, { family: 6 });
    expect(out).toMatchObject({ outcome: 'established', acceptedBy: 'app', acceptedIn: q });
    const inn = await w.connect({ kind: 'pod', pod: q }, { kind: 'pod', pod: a, port: 8080 }, { family: 6 });
    expect(inn).toMatchObject({ outcome: 'established', acceptedBy: 'app', acceptedIn: a });
    expect(inn.deliveries).toEqual([expect.objectContaining({ pod: a, viaProxy: false })]);
  } finally {
    await w.close();
  }
});

test('strict: v6 is blocked in a v4-only mesh (ipv6-always block ruleset)', async () => {
  const { w } = await cluster('strict');
  try {
    const out = await w.connect({ kind: 'pod', pod: a }, { kind: 'pod', pod: q, port: 8080 }, { family: 6 });
    expect(out.deliveries).toEqual([]);
    expect(out.outcome).not.toBe('established');
    const inn = await w.connect({ kind: 'pod', pod: q }, { kind: 'pod', pod: a, port: 8080 }, { family: 6 });
    expect(inn.deliveries).toEqual([]);
  } finally {
    await w.close();
  }
});

test('meshV6 true in a v4-only cluster is refused with a clear error', async () => {
  await expect(
    createSimWorld({
      nodes: 1,
      profile: 'strict',
      kernelVersion: '6.1',
      ipv6: false,
      meshV6: true,
      dnsCapture: false,
      seed: 1,
    }),
  ).rejects.toThrow(/meshV6 needs ipv6/);
});
