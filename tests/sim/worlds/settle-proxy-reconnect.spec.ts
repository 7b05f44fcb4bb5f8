/**
 * settle() waits for a running proxy to reconnect to its running agent. While the agent was down
 * the proxy's ZDS reconnect backoff grew (capped at 15 s, as upstream ztunnel) past settle's quiet
 * window; returning early showed pods served but annotated `pending` — a harness artefact the
 * convergence property reported (history found by `ambient-lab check`, replayed here).
 */
import { test, expect } from '@playwright/test';
import { createSimWorld } from '../../../scenarios/worlds/sim-world.js';

test('after an agent outage, settle returns only once the proxy is back on ZDS and annotations are truthful', async () => {
  const w = await createSimWorld({
    nodes: 2,
    profile: 'upstream',
    kernelVersion: '6.1',
    ipv6: true,
    dnsCapture: false,
    seed: 5,
  });
  try {
    await w.createNamespace('ambient-a', { 'istio.io/dataplane-mode': 'ambient' });
    await w.createNamespace('plain', {});
    const app = { uid: 1000, caps: [], tcpPorts: [8080] };
    await w.createPod({ namespace: 'ambient-a', name: 'p0', node: 'node-0', app });
    await w.createPod({ namespace: 'plain', name: 'p1', node: 'node-1', app });
    await w.createPod({ namespace: 'ambient-a', name: 'p2', node: 'node-1', app });
    await w.settle();
    await w.stop('agent', 'node-1');
    await w.createPod({ namespace: 'ambient-a', name: 'p3', app });
    await w.restart('agent', 'node-1');
    await w.settle();
    for (const p of await w.pods()) {
      if (p.namespace !== 'ambient-a' || !p.started) continue;
      expect({ pod: p.name, redirected: p.redirected, served: p.served, annotation: p.annotation }).toEqual({
        pod: p.name,
        redirected: true,
        served: true,
        annotation: 'enabled',
      });
    }
  } finally {
    await w.close();
  }
});
