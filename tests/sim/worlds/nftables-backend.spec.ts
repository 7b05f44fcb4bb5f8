/**
 * The agent with the nftables backend in the simulator (the same agent and adapters' contract as
 * on Linux, tests/netns/world/nftables-backend.spec.ts): both profiles enroll pods with nftables
 * tables only, traffic goes through the node proxy both ways, the node's probe set is an
 * nftables set holding the pod's address, and a rule someone puts ahead of the capture is drift
 * the repair loop takes away. Under strict, a foreign table is removed too.
 */
import { test, expect } from '@playwright/test';
import { createSimWorld, type SimMeshWorld } from '../../../scenarios/worlds/sim-world.js';
import type { PodRef, Profile } from '../../../scenarios/world.js';

const a: PodRef = { namespace: 'mesh', name: 'a' };
const b: PodRef = { namespace: 'mesh', name: 'b' };
const q: PodRef = { namespace: 'plain', name: 'q' };
const app = { uid: 1000, caps: [], tcpPorts: [8080] };

const NAT = {
  upstream: { family: 'inet', table: 'istio-ambient-nat', chain: 'istio-output' },
  strict: { family: 'ip', table: 'istio-ambient-nat', chain: 'ISTIO_OUTPUT' },
} as const;

async function cluster(profile: Profile): Promise<SimMeshWorld> {
  const w = await createSimWorld({
    nodes: 2,
    profile,
    kernelVersion: '6.1',
    ipv6: true,
    dnsCapture: true,
    rulesBackend: 'nftables',
    seed: 3,
  });
  await w.createNamespace('mesh', { 'istio.io/dataplane-mode': 'ambient' });
  await w.createNamespace('plain');
  await w.createPod({ ...a, node: 'node-0', app });
  await w.createPod({ ...b, node: 'node-1', app });
  await w.createPod({ ...q, node: 'node-1', app });
  await w.settle();
  return w;
}

function netnsOf(w: SimMeshWorld, uid: string): string {
  for (const n of w.sim.nodes) {
    const rec = n.disk.sandboxes.get(uid);
    if (rec) return rec.netns;
  }
  throw new Error(`no sandbox for pod uid ${uid}`);
}

for (const profile of ['upstream', 'strict'] as const) {
  test(`${profile}, nftables backend: nftables only, captured both ways, probe set, drift repaired`, async () => {
    const w = await cluster(profile);
    try {
      const pods = await w.pods();
      const pa = pods.find((p) => p.name === 'a')!;
      for (const p of [a, b])
        expect(pods.find((x) => x.name === p.name)).toMatchObject({
          annotation: 'enabled',
          redirected: true,
          served: true,
        });
      const k = w.sim.kernel;
      const netns = netnsOf(w, pa.uid);
      expect(
        k
          .netns(netns)
          .nftables.tables()
          .map((t) => `${t.family} ${t.name}`),
      ).toContain(`${NAT[profile].family} istio-ambient-nat`);
      expect(k.iptablesSave(netns, 4)).not.toContain('ISTIO_');

      expect((await w.connect({ kind: 'pod', pod: a }, { kind: 'pod', pod: q, port: 8080 })).acceptedBy).toBe(
        'proxy-outbound',
      );
      expect((await w.connect({ kind: 'pod', pod: q }, { kind: 'pod', pod: a, port: 8080 })).acceptedBy).toBe(
        'proxy-inbound',
      );
      const mesh = await w.connect({ kind: 'pod', pod: a }, { kind: 'pod', pod: b, port: 8080 });
      expect(mesh.deliveries.some((d) => d.pod.name === 'b' && d.viaProxy)).toBe(true);

      const host = w.sim.nodes.find((n) => n.name === 'node-0')!.hostNetns;
      const setFamily = profile === 'upstream' ? 'inet' : 'ip';
      expect(k.netns(host).nftables.elements(setFamily, 'istio-ambient-nat', 'istio-inpod-probes-v4')).toContain(
        pa.ips.find((ip) => !ip.includes(':')),
      );
      expect(k.ipsetsOf(host).names()).not.toContain('istio-inpod-probes-v4');

      // Drift: an accept ahead of the outbound capture bypasses it until the repair loop re-applies.
      const n = NAT[profile];
      const before = k.netns(netns).nftables.list(n.family, n.table);
      k.netns(netns).nftables.apply(`insert rule ${n.family} ${n.table} ${n.chain} accept\n`);
      expect((await w.connect({ kind: 'pod', pod: a }, { kind: 'pod', pod: q, port: 8080 })).acceptedBy).toBe('app');
      await w.settle();
      expect(k.netns(netns).nftables.list(n.family, n.table)).toBe(before);
      expect((await w.connect({ kind: 'pod', pod: a }, { kind: 'pod', pod: q, port: 8080 })).acceptedBy).toBe(
        'proxy-outbound',
      );

      // A foreign table: strict owns the whole ruleset and removes it; upstream leaves it.
      k.netns(netns).nftables.apply('add table ip app\n');
      await w.settle();
      expect(k.netns(netns).nftables.hasTable('ip', 'app')).toBe(profile === 'upstream');
    } finally {
      await w.close();
    }
  });
}
