/**
 * The agent with the nftables backend (deploy/components/backend-nftables, `--backend nftables`)
 * on the real kernel, both profiles: pods are enrolled with nftables tables only (no iptables
 * chain of ours in the pod), outbound and inbound go through the node proxy, mesh traffic is
 * HBONE, the node's probe set (an nftables set) holds the pod's address, and a rule someone puts
 * ahead of the capture is drift the repair loop takes away.
 */
import { test, expect } from '@playwright/test';
import { execIn } from '../../../e2e/netns/ip.js';
import { insertedTableText, type PodRef } from '../../../scenarios/world.js';
import { nftTool } from '../../worlds.js';
import { MESH, skipUnlessSuiteWorldAvailable, withNetnsWorld } from './fixture.js';

skipUnlessSuiteWorldAvailable();
const t = nftTool();
test.skip(!t.available, t.reason);
test.setTimeout(600_000);

const a: PodRef = { namespace: 'mesh', name: 'a' };
const b: PodRef = { namespace: 'mesh', name: 'b' };
const q: PodRef = { namespace: 'plain', name: 'q' };
const app = { uid: 1000, caps: [], tcpPorts: [8080] };

/** The nat table and the chain the outbound capture is in, per profile (upstream's names; strict's IR names). */
const NAT = {
  upstream: { family: 'inet', table: 'istio-ambient-nat', chain: 'istio-output' },
  strict: { family: 'ip', table: 'istio-ambient-nat', chain: 'ISTIO_OUTPUT' },
} as const;

for (const profile of ['upstream', 'strict'] as const) {
  test(`${profile}, nftables backend: enrolled with nftables only; captured both ways; probe set in nftables; drift repaired`, async () => {
    await withNetnsWorld({ profile, rulesBackend: 'nftables' }, async (w) => {
      await w.createNamespace('mesh', MESH);
      await w.createNamespace('plain');
      await w.createPod({ ...a, node: 'node-0', app });
      await w.createPod({ ...b, node: 'node-1', app });
      await w.createPod({ ...q, node: 'node-1', app });
      await w.settle();
      const pods = await w.pods();
      for (const p of [a, b])
        expect(pods.find((x) => x.name === p.name)).toMatchObject({
          annotation: 'enabled',
          redirected: true,
          served: true,
        });

      const netns = w.lab.state.pods['mesh/a']!.netns!;
      const tables = await execIn(netns, ['nft', 'list', 'tables']);
      expect(tables).toContain(`table ${NAT[profile].family} istio-ambient-nat`);
      expect(await execIn(netns, ['iptables-save'])).not.toContain('ISTIO_');

      const out = await w.connect({ kind: 'pod', pod: a }, { kind: 'pod', pod: q, port: 8080 });
      expect(out.acceptedBy, out.trace).toBe('proxy-outbound');
      const inbound = await w.connect({ kind: 'pod', pod: q }, { kind: 'pod', pod: a, port: 8080 });
      expect(inbound.acceptedBy, inbound.trace).toBe('proxy-inbound');
      // a raw SYN from outside (AF_PACKET): attributed by conntrack (upstream's REDIRECT) or by the
      // TPROXY rule's counter (strict), read from nftables here
      const raw = await w.connect(
        { kind: 'outside' },
        { kind: 'pod', pod: a, port: 8080 },
        { proto: 'tcp', raw: true },
      );
      expect(raw.trace).toContain('SYN-ACK from listener port 15006');
      expect(raw.acceptedBy, raw.trace).toBe('proxy-inbound');
      const mesh = await w.connect({ kind: 'pod', pod: a }, { kind: 'pod', pod: b, port: 8080 });
      expect(
        mesh.deliveries.some((d) => d.pod.name === 'b' && d.viaProxy),
        mesh.trace,
      ).toBe(true);

      const node0 = w.lab.state.nodes.find((n) => n.name === 'node-0')!.netns;
      const setFamily = profile === 'upstream' ? 'inet' : 'ip';
      const aIp = pods.find((x) => x.name === 'a')!.ips[0]!;
      expect(
        await execIn(node0, ['nft', 'list', 'set', setFamily, 'istio-ambient-nat', 'istio-inpod-probes-v4']),
      ).toContain(aIp);
      expect(await execIn(node0, ['ipset', 'list', '-n'])).not.toContain('istio-inpod-probes');

      // Drift: an ACCEPT ahead of the outbound capture; the repair loop (2 s in the lab) re-applies.
      const n = NAT[profile];
      const listing = (): Promise<string> => execIn(netns, ['nft', '-s', 'list', 'table', n.family, n.table]);
      const before = await listing();
      await execIn(netns, ['nft', 'insert', 'rule', n.family, n.table, n.chain, 'accept']);
      expect(await listing()).not.toBe(before);
      const deadline = Date.now() + 30_000;
      while ((await listing()) !== before && Date.now() < deadline) await new Promise((r) => setTimeout(r, 500));
      expect(await listing(), 'the repair loop re-applied the plan').toBe(before);
      const again = await w.connect({ kind: 'pod', pod: a }, { kind: 'pod', pod: q, port: 8080 });
      expect(again.acceptedBy, again.trace).toBe('proxy-outbound');
    });
  });
}

test('strict, iptables backend: a foreign nftables table that untracks TCP is removed by the repair loop (the pod is captured again)', async () => {
  await withNetnsWorld({ profile: 'strict' }, async (w) => {
    await w.createNamespace('mesh', MESH);
    await w.createNamespace('plain');
    await w.createPod({ ...a, node: 'node-0', app });
    await w.createPod({ ...q, node: 'node-1', app });
    await w.settle();
    const netns = w.lab.state.pods['mesh/a']!.netns!;
    await execIn(netns, ['nft', '-f', '-'], insertedTableText('notrack-tcp'));
    expect(await execIn(netns, ['nft', 'list', 'tables'])).toContain('table inet app-tamper');
    const deadline = Date.now() + 30_000;
    while ((await execIn(netns, ['nft', 'list', 'tables'])).includes('app-tamper') && Date.now() < deadline)
      await new Promise((r) => setTimeout(r, 500));
    expect(await execIn(netns, ['nft', 'list', 'tables']), 'the repair loop deleted the foreign table').not.toContain(
      'app-tamper',
    );
    const out = await w.connect({ kind: 'pod', pod: a }, { kind: 'pod', pod: q, port: 8080 });
    expect(out.acceptedBy, out.trace).toBe('proxy-outbound');
  });
});
