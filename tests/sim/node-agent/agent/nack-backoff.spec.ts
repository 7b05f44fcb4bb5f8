/**
 * A pod the proxy cannot serve (its listeners cannot bind: the app holds the proxy ports) is
 * nacked on every ZDS Add. The agent must retry it on its backoff schedule — not re-send the Add
 * as soon as the nack arrives — and the pod stays fail-closed meanwhile: rules in place,
 * annotation `pending`, never `enabled`. Found by `ambient-lab check` (port-hijack phase: about
 * 6,000 add/nack rounds in one 12 s settle window).
 */
import { test, expect } from '@playwright/test';
import { AgentWorld } from './harness.js';

const AMBIENT = { 'istio.io/dataplane-mode': 'ambient' };
/** The agent's work-queue backoff (node-agent.ts): 5 ms doubling, capped at 5 s. */
const INITIAL_MS = 5;
const MAX_MS = 5000;

/** Retries a backoff of INITIAL_MS doubling to MAX_MS can make within `windowMs`. */
function backoffBound(windowMs: number): number {
  let n = 0;
  let t = 0;
  for (let d = INITIAL_MS; t <= windowMs; d = Math.min(MAX_MS, d * 2)) {
    t += d;
    n++;
  }
  return n;
}

test('a nacked pod is retried with capped exponential backoff, not in a hot loop, and stays fail-closed', async () => {
  const w = new AgentWorld();
  await w.namespace('shop', AMBIENT);
  await w.startAgent();
  w.startProxy();
  await w.run(100);
  const { pod, netns } = await w.pod('shop', 'web');
  await w.run(100);
  expect(await w.annotation('shop', 'web')).toBe('enabled');
  // The proxy restarts while the app holds its ports: the new proxy nacks every Add of the pod.
  w.stopProxy();
  await w.run(100);
  w.proxyNack = 'listen tcp 0.0.0.0:15006: address already in use';
  w.startProxy();
  const adds0 = w.proxyAddsSeen;
  const windowMs = 12_000;
  await w.run(windowMs);
  const rounds = w.proxyAddsSeen - adds0;
  // One snapshot Add per connection plus the backoff's retries (one extra for a fresh event).
  const bound = backoffBound(windowMs) + w.proxyConnects + 2;
  expect(
    rounds,
    `${rounds} add/nack rounds in ${windowMs} ms of virtual time (backoff allows ${bound})`,
  ).toBeLessThanOrEqual(bound);
  expect(rounds).toBeGreaterThan(1); // it does keep trying
  // The proxy keeps its connection (a nack is not a protocol error): no reconnect storm.
  expect(w.proxyConnects).toBeLessThanOrEqual(2);
  // Fail closed: the rules stay, the pod is not claimed enabled, the proxy does not serve it.
  expect(w.rulesIn(netns)).toBe(true);
  expect(await w.annotation('shop', 'web')).toBe('pending');
  expect(w.proxyPods.has(pod.metadata!.uid!)).toBe(false);
  expect(await w.truthful()).toEqual([]);
  // Once the ports are free, the next retry (at most the cap away) enrolls it again.
  w.proxyNack = undefined;
  await w.run(MAX_MS + 1000);
  expect(w.proxyPods.get(pod.metadata!.uid!)).toBe(netns);
  expect(await w.annotation('shop', 'web')).toBe('enabled');
});
