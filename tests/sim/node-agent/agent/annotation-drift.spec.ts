/**
 * The status annotation converges to the truth even when the API's value drifts from what the
 * agent remembers writing (issue #8: a pod served and redirected stayed `pending`). The agent used
 * to trust its memory: once it believed it wrote `enabled`, reconcile returned early and the
 * repair loop never looked at the API, so a lost, raced or overwritten status write stuck.
 */
import { test, expect } from '@playwright/test';
import { AgentWorld } from './harness.js';
import { REDIRECTION_STATUS } from '../../../../impl/api/annotations.js';

const AMBIENT = { 'istio.io/dataplane-mode': 'ambient' };

async function enrolled(): Promise<AgentWorld> {
  const w = new AgentWorld();
  await w.namespace('shop', AMBIENT);
  await w.startAgent();
  w.startProxy();
  await w.run(100);
  const { cni } = await w.pod('shop', 'web');
  expect(cni.exitCode, cni.stdout).toBe(0);
  await w.run(100);
  expect(await w.annotation('shop', 'web')).toBe('enabled');
  return w;
}

async function overwrite(w: AgentWorld, value: string | null): Promise<void> {
  await w.store.patch('Pod', 'web', 'shop', { metadata: { annotations: { [REDIRECTION_STATUS]: value } } }, 'status');
}

for (const [what, value] of [
  ['set to pending', 'pending'],
  ['removed', null],
  ['set to garbage', 'bogus'],
] as const) {
  test(`an enrolled pod whose status annotation is ${what} behind the agent's back gets enabled back`, async () => {
    const w = await enrolled();
    await overwrite(w, value);
    expect(await w.annotation('shop', 'web')).toBe(value ?? undefined);
    await w.run(1000);
    expect(await w.annotation('shop', 'web')).toBe('enabled');
    expect(await w.truthful()).toEqual([]);
    expect(w.agent!.meshPods().map((p) => p.annotated)).toEqual(['enabled']);
  });
}

test('issue #8 timeline: agent restart while the proxy sits in its reconnect backoff — pending until the proxy is back, then enabled', async () => {
  const w = await enrolled();
  const uid = (await w.store.get('Pod', 'web', 'shop')).metadata!.uid!;
  await w.stopAgent();
  await w.run(12_000); // the proxy's reconnect backoff grows toward its 15 s cap meanwhile
  await w.startAgent();
  await w.run(6_000); // one sim-world settle window: shorter than the proxy's next retry
  // The proxy kept the pod across the disconnect (it is still served), but this agent has no
  // ack for it yet; the contract says pending until one arrives. This is the state the check's
  // settle() sampled in issue #8: transient, not stuck.
  expect(w.proxyPods.has(uid)).toBe(true);
  expect(w.agent!.proxyConnected()).toBe(false);
  expect(await w.annotation('shop', 'web')).toBe('pending');
  await w.run(20_000); // past the longest reconnect wait (15 s + 20% jitter)
  expect(w.agent!.proxyConnected()).toBe(true);
  expect(await w.annotation('shop', 'web')).toBe('enabled');
  expect(await w.truthful()).toEqual([]);
});
