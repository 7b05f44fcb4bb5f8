/**
 * The deployed components on kind: the agent's installer chains our plugin into kindnet's
 * conflist on every node, an ambient pod gets the redirection annotation, and a pod outside the
 * mesh is untouched. Runs only with KIND=1, Docker and kind (tests/worlds.ts); in CI see
 * the kind job of .github/workflows/ci.yaml.
 */
import { test, expect } from '@playwright/test';
import { execa } from 'execa';
import { kindWorld } from '../worlds.js';
import { kindWorldFactory } from '../../e2e/kind/kind-world.js';

const w = kindWorld();
test.skip(!w.available, w.reason);

test('installed on every node: kindnet conflist chains ambient-lab-cni; ambient pods are enrolled, others untouched', async () => {
  const world = await kindWorldFactory.create({
    nodes: 2,
    profile: 'upstream',
    kernelVersion: '6.1',
    ipv6: false,
    dnsCapture: false,
    seed: 1,
  });
  try {
    for (const node of world.nodes) {
      const { stdout } = await execa('docker', ['exec', node, 'cat', '/etc/cni/net.d/10-kindnet.conflist']);
      const types = (JSON.parse(stdout) as { plugins: Array<{ type: string }> }).plugins.map((p) => p.type);
      expect(types.at(-1), node).toBe('ambient-lab-cni');
    }
    await world.createNamespace('mesh', { 'istio.io/dataplane-mode': 'ambient' });
    await world.createNamespace('plain');
    const app = { uid: 1000, caps: [], tcpPorts: [8080] } as const;
    const a = await world.createPod({ namespace: 'mesh', name: 'a', app });
    const b = await world.createPod({ namespace: 'plain', name: 'b', app });
    expect(a.started).toBe(true);
    expect(b.started).toBe(true);
    await expect
      .poll(async () => (await world.pods()).find((p) => p.name === 'a')?.annotation, { timeout: 60_000 })
      .toBe('enabled');
    expect((await world.pods()).find((p) => p.name === 'b')?.annotation).toBeUndefined();
  } finally {
    await world.close();
  }
});
