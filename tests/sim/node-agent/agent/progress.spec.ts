/**
 * The agent's progress report (NodeAgent.progress(), in its /status): what a harness reads to
 * decide the agent has settled on observed state instead of a quiet period — the work queue
 * (runs in progress; keys waiting for a retry with a failure count that grows per failed
 * attempt), repair passes begun and finished, and the resourceVersions its informers hold.
 */
import { test, expect } from '@playwright/test';
import { AgentWorld } from './harness.js';

const AMBIENT = { 'istio.io/dataplane-mode': 'ambient' };

/** An agent and a proxy, and pod shop/web enrolled. */
async function enrolledWeb(): Promise<{ w: AgentWorld; agent: Awaited<ReturnType<AgentWorld['startAgent']>> }> {
  const w = new AgentWorld();
  await w.namespace('shop', AMBIENT);
  const agent = await w.startAgent();
  w.startProxy();
  await w.run(100);
  await w.pod('shop', 'web');
  await w.run(100);
  return { w, agent };
}

test('progress: idle queue and current caches when enrolled; a retrying key whose failures grow while the proxy nacks; repair passes counted', async () => {
  const { w, agent } = await enrolledWeb();
  const idle = agent.progress();
  expect(idle.queue).toEqual({ inFlight: 0, retrying: [] });
  const pod = await w.kube.get('Pod', 'web', 'shop');
  const ns = await w.kube.get('Namespace', 'shop');
  // The caches hold exactly what the API holds now (the agent has seen every change).
  expect(idle.caches?.pods['shop/web']).toBe(pod.metadata?.resourceVersion);
  expect(idle.caches?.namespaces['shop']).toBe(ns.metadata?.resourceVersion);
  // A label change the agent has not processed yet shows as a version the cache does not hold.
  await w.kube.patchMerge('Namespace', 'shop', undefined, { metadata: { labels: { extra: 'x' } } });
  const nsNow = await w.kube.get('Namespace', 'shop');
  expect(nsNow.metadata?.resourceVersion).not.toBe(ns.metadata?.resourceVersion);
  await w.run(100);
  expect(agent.progress().caches?.namespaces['shop']).toBe(nsNow.metadata?.resourceVersion);

  // The proxy restarts and nacks: the pod's key waits for retries, its failure count growing.
  w.stopProxy();
  await w.run(100);
  w.proxyNack = 'listen tcp 0.0.0.0:15006: address already in use';
  w.startProxy();
  await w.run(200);
  const first = agent.progress().queue.retrying.find((r) => r.key.startsWith('shop/web/'));
  expect(first, JSON.stringify(agent.progress().queue)).toBeDefined();
  await w.run(6000);
  const later = agent.progress().queue.retrying.find((r) => r.key.startsWith('shop/web/'));
  expect(later?.failures).toBeGreaterThan(first!.failures);

  // Repair passes (every 10 s in this harness) are counted, begun and finished.
  const before = agent.progress().repairs;
  await w.run(10_500);
  const after = agent.progress().repairs;
  expect(after.completed).toBeGreaterThan(before.completed);
  expect(after.started).toBe(after.completed);
  // Ports free again: the retry succeeds and the queue is idle.
  w.proxyNack = undefined;
  await w.run(6000);
  expect(agent.progress().queue).toEqual({ inFlight: 0, retrying: [] });
});

test('repair passes run one at a time: a pass asked for while another runs begins after it has finished', async () => {
  const { w, agent } = await enrolledWeb();
  // Each pass reads the enrolled pod's rules once: what the counts are at that moment says
  // whether another pass was running beside it.
  const seen: { started: number; completed: number }[] = [];
  const read = w.rules.read.bind(w.rules);
  w.rules.read = (netns) => {
    seen.push(agent.progress().repairs);
    return read(netns);
  };
  const before = agent.progress().repairs;
  await Promise.all([agent.repair(), agent.repair()]);
  expect(seen).toEqual([
    { started: before.started + 1, completed: before.completed },
    { started: before.started + 2, completed: before.completed + 1 },
  ]);
  expect(agent.progress().repairs).toEqual({ started: before.started + 2, completed: before.completed + 2 });
});
