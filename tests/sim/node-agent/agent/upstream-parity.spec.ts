/**
 * Node-agent behaviours checked against upstream istio-cni's own unit tests (their names are in
 * the titles; istio/istio cni/pkg/nodeagent, cni/pkg/util). Each failed here before the fix that
 * the test names.
 */
import { test, expect } from '@playwright/test';
import { AgentWorld, NODE } from './harness.js';

const AMBIENT = { 'istio.io/dataplane-mode': 'ambient' };

async function enrolledWorld(): Promise<{ w: AgentWorld; netns: string; uid: string }> {
  const w = new AgentWorld();
  await w.namespace('shop', AMBIENT);
  await w.startAgent();
  w.startProxy();
  await w.run(100);
  const { cni, netns, pod } = await w.pod('shop', 'web');
  expect(cni.exitCode, cni.stdout).toBe(0);
  await w.run(100);
  expect(await w.annotation('shop', 'web')).toBe('enabled');
  return { w, netns, uid: pod.metadata!.uid! };
}

test('TestInformerExistingPodRemovalRetriesOnFailure: a removal that fails once is retried until the pod is out of the mesh', async () => {
  const { w, netns, uid } = await enrolledWorld();
  w.rules.failNext = { op: 'remove', message: 'iptables-restore: resource busy' };
  await w.labelNamespace('shop', { 'istio.io/dataplane-mode': null });
  await w.run(50);
  // The first attempt failed: the rules are still there.
  expect(w.log.entries.some((r) => r.msg === 'reconcile failed' && String(r.fields['error']).includes('resource busy') && r.fields['retry'] === true)).toBe(true);
  await w.run(2000);
  expect(w.rulesIn(netns)).toBe(false);
  expect(w.proxyPods.has(uid)).toBe(false);
  expect(await w.annotation('shop', 'web')).toBeUndefined();
  expect(await w.truthful()).toEqual([]);
});

test('TestInformerJobPodRemovalRetriesOnErrorEvenIfPodTerminal: a finished pod whose removal fails is still removed', async () => {
  const { w, netns, uid } = await enrolledWorld();
  w.rules.failNext = { op: 'remove', message: 'iptables-restore: resource busy' };
  await w.store.patch('Pod', 'web', 'shop', { status: { phase: 'Succeeded' } }, 'status');
  await w.run(2000);
  expect(w.rulesIn(netns)).toBe(false);
  expect(w.proxyPods.has(uid)).toBe(false);
});

test('TestInformerExistingPodAddedWhenNsLabeled: a running pod with only status.podIP is enrolled when its namespace is labelled', async () => {
  const w = new AgentWorld();
  await w.namespace('plain');
  await w.startAgent();
  w.startProxy();
  await w.run(100);
  const pod = await w.store.create('Pod', {
    metadata: { name: 'db', namespace: 'plain' },
    spec: { nodeName: NODE, containers: [{ name: 'app', image: 'app' }] },
  });
  const { netns, ip } = w.sandbox(pod.metadata!.uid!);
  // Only the singular field, as some clients and older API servers report it.
  await w.store.patch('Pod', 'db', 'plain', { status: { phase: 'Running', podIP: ip } }, 'status');
  await w.run(100);
  expect(w.rulesIn(netns)).toBe(false);
  await w.labelNamespace('plain', AMBIENT);
  await w.run(500);
  expect(w.rulesIn(netns)).toBe(true);
  expect(w.proxyPods.get(pod.metadata!.uid!)).toBe(netns);
  expect(await w.annotation('plain', 'db')).toBe('enabled');
});
