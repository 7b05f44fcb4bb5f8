/**
 * The kind World end to end (e2e/kind/kind-world.ts): enrolled pods reach each other through the
 * node proxy (first hop proxy-outbound, delivery via the proxy), the node shows the redirection
 * and the proxy serves the pods' current netns; fail closed with the proxy stopped on the
 * source's node; recovery after start; a pod outside the mesh is untouched.
 * Runs only with KIND=1, Docker and kind (tests/worlds.ts says why it is skipped otherwise); in
 * CI, the kind job of .github/workflows/ci.yaml.
 */
import { test, expect } from '@playwright/test';
import { kindWorld } from '../worlds.js';
import { kindWorldFactory } from '../../e2e/kind/kind-world.js';

const w = kindWorld();
test.skip(!w.available, w.reason);

test('mesh traffic goes through the proxy; fail closed with the proxy stopped; recovers on start; plain pods untouched', async () => {
  const world = await kindWorldFactory.create({
    nodes: 2,
    profile: 'upstream',
    kernelVersion: '6.1',
    ipv6: false,
    dnsCapture: false,
    seed: 2,
  });
  try {
    const [n1, n2] = world.nodes;
    await world.createNamespace('mesh', { 'istio.io/dataplane-mode': 'ambient' });
    await world.createNamespace('plain');
    const app = { uid: 1000, caps: [], tcpPorts: [8080] } as const;
    await world.createPod({ namespace: 'mesh', name: 'a', node: n1!, app });
    await world.createPod({ namespace: 'mesh', name: 'b', node: n2!, app });
    await world.createPod({ namespace: 'plain', name: 'p', node: n1!, app });
    await expect
      .poll(
        async () => (await world.pods()).filter((p) => p.namespace === 'mesh').map((p) => [p.redirected, p.served]),
        { timeout: 90_000 },
      )
      .toEqual([
        [true, true],
        [true, true],
      ]);
    expect((await world.pods()).find((p) => p.name === 'p')).toMatchObject({ redirected: false, served: false });

    const a = { kind: 'pod', pod: { namespace: 'mesh', name: 'a' } } as const;
    const toB = { kind: 'pod', pod: { namespace: 'mesh', name: 'b' }, port: 8080 } as const;
    const ok = await world.connect(a, toB);
    expect(ok).toMatchObject({
      outcome: 'established',
      acceptedBy: 'proxy-outbound',
      acceptedIn: { namespace: 'mesh', name: 'a' },
    });
    expect(ok.deliveries).toEqual([expect.objectContaining({ pod: { namespace: 'mesh', name: 'b' }, viaProxy: true })]);

    await world.stop('proxy', n1!);
    const down = await world.connect(a, toB);
    expect(down.deliveries).toEqual([]);
    expect(['refused', 'timeout']).toContain(down.outcome);

    await world.start('proxy', n1!);
    await expect.poll(async () => (await world.connect(a, toB)).deliveries.length, { timeout: 90_000 }).toBe(1);

    const plain = await world.connect({ kind: 'pod', pod: { namespace: 'plain', name: 'p' } }, toB);
    expect(plain.acceptedBy).not.toBe('proxy-outbound');
  } finally {
    await world.close();
  }
});
