/**
 * Node-agent behaviours checked against upstream istio-cni's own unit tests (their names are in
 * the titles; istio/istio cni/pkg/nodeagent, cni/pkg/util). Each failed here before the fix that
 * the test names.
 */
import { test, expect } from '@playwright/test';
import { AgentWorld, AGENT_SOCK, NODE } from './harness.js';
import { settle } from '../../../../sim/time/settle.js';
import { simNetnsPath } from '../../../../sim/kernel/netns.js';
import type { PluginEventReply } from '../../../../impl/api/plugin-event.js';
import { PROBE_SET } from '../../../../impl/node-agent/host-probe-rules.js';

const AMBIENT = { 'istio.io/dataplane-mode': 'ambient' };

async function members(w: AgentWorld): Promise<{ ip: string; comment: string }[]> {
  return [...(await w.ipsets.list(PROBE_SET.ipv4))];
}

async function enrolledPod(): Promise<{ w: AgentWorld; netns: string; uid: string; ip: string }> {
  const w = new AgentWorld();
  await w.namespace('shop', AMBIENT);
  await w.startAgent();
  w.startProxy();
  await w.run(100);
  const { cni, netns, pod, ip } = await w.pod('shop', 'web');
  expect(cni.exitCode, cni.stdout).toBe(0);
  await w.run(100);
  expect(await w.annotation('shop', 'web')).toBe('enabled');
  return { w, netns, ip, uid: pod.metadata!.uid! };
}

test('TestInformerExistingPodRemovalRetriesOnFailure: a removal that fails once is retried until the pod is out of the mesh', async () => {
  const { w, netns, uid } = await enrolledPod();
  w.rules.failNext = { op: 'remove', message: 'iptables-restore: resource busy' };
  await w.labelNamespace('shop', { 'istio.io/dataplane-mode': null });
  await w.run(50);
  // The first attempt failed: the rules are still there.
  expect(
    w.log.entries.some(
      (r) =>
        r.msg === 'reconcile failed' &&
        String(r.fields['error']).includes('resource busy') &&
        r.fields['retry'] === true,
    ),
  ).toBe(true);
  await w.run(2000);
  expect(w.rulesIn(netns)).toBe(false);
  expect(w.proxyPods.has(uid)).toBe(false);
  expect(await w.annotation('shop', 'web')).toBeUndefined();
  expect(await w.truthful()).toEqual([]);
});

test('TestInformerJobPodRemovalRetriesOnErrorEvenIfPodTerminal: a finished pod whose removal fails is still removed', async () => {
  const { w, netns, uid } = await enrolledPod();
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

test('TestMeshDataplaneSyncHostIPSetsSkipsPruneIfSnapshotIncomplete: a mesh pod read without addresses after a restart keeps its probe member', async () => {
  const { w, ip, uid } = await enrolledPod();
  expect(await members(w)).toEqual([{ ip, comment: uid }]);
  await w.stopAgent();
  // The API now reports the running pod without addresses (cold cache, status not yet written).
  await w.store.patch('Pod', 'web', 'shop', { status: { podIP: null, podIPs: null } }, 'status');
  await w.startAgent();
  await w.run(200);
  await w.agent!.repair();
  expect(await members(w)).toEqual([{ ip, comment: uid }]);
  expect(w.log.entries.some((e) => e.msg.startsWith('host probe ipset prune skipped'))).toBe(true);
});

test('TestMeshDataplaneSyncHostIPSetsIgnoresPodIPAddErrorAndContinues: one member that cannot be added does not stop the others', async () => {
  const { w, ip: ip1 } = await enrolledPod();
  const second = await w.pod('shop', 'api');
  await w.run(100);
  expect(await w.annotation('shop', 'api')).toBe('enabled');
  // Both members lost (e.g. the set was re-created); the first one's add now fails.
  for (const m of await members(w)) await w.ipsets.remove(PROBE_SET.ipv4, m.ip, m.comment);
  w.failIpsetAdds.add(ip1);
  await w.agent!.repair();
  expect(await members(w)).toEqual([{ ip: second.ip, comment: second.pod.metadata!.uid! }]);
  expect(
    w.log.entries.some((e) => e.msg.startsWith('cannot add a host probe ipset member') && e.fields['ip'] === ip1),
  ).toBe(true);
  w.failIpsetAdds.clear();
  await w.agent!.repair();
  expect((await members(w)).map((m) => m.ip).sort()).toEqual([ip1, second.ip].sort());
});

/** A pod object with a sandbox, and the agent's reply to its CNI ADD event, sent as the plugin sends it. */
async function addEvent(w: AgentWorld, name: string): Promise<{ reply: PluginEventReply; uid: string; netns: string }> {
  const pod = await w.store.create('Pod', {
    metadata: { name, namespace: 'shop' },
    spec: { nodeName: NODE, containers: [{ name: 'app', image: 'app' }] },
  });
  const uid = pod.metadata!.uid!;
  const { netns, ip } = w.sandbox(uid);
  await w.run(50);
  const reply = await settle(
    w.clock,
    w.events.send(
      AGENT_SOCK,
      {
        kind: 'add',
        netns: simNetnsPath(netns),
        podName: name,
        podNamespace: 'shop',
        podUid: uid,
        containerId: `sb-${netns}`,
        ips: [ip],
      },
      5000,
    ),
  );
  return { reply, uid, netns };
}

test('TestDoesntReturnRetryableErrorOnIptablesFail: a rule application failure is answered not retryable, and the proxy is never asked', async () => {
  const w = new AgentWorld();
  await w.namespace('shop', AMBIENT);
  await w.startAgent();
  w.startProxy();
  await w.run(100);
  w.rules.failNext = { op: 'apply', message: 'iptables-restore: line 7 failed' };
  const { reply, netns } = await addEvent(w, 'web');
  expect(reply).toMatchObject({ ok: false, retryable: false });
  expect(reply.ok === false && reply.error).toContain('line 7 failed');
  expect(w.proxyAddsSeen).toBe(0);
  expect(w.rulesIn(netns)).toBe(false);
});

test('TestReturnsRetryableErrorOnZtunnelFail: a proxy that refuses the pod is answered retryable, after the rules are in', async () => {
  const w = new AgentWorld();
  await w.namespace('shop', AMBIENT);
  await w.startAgent();
  w.startProxy();
  await w.run(100);
  w.proxyNack = 'cannot bind 15001';
  const { reply, netns } = await addEvent(w, 'web');
  expect(reply).toMatchObject({ ok: false, retryable: true });
  expect(w.proxyAddsSeen).toBeGreaterThan(0);
  expect(w.rulesIn(netns)).toBe(true);
});

test('TestInformerStillHandlesDeleteEventIfPodNotActuallyPresentAnymore: the delete of an enrolled-annotated pod the agent does not hold removes its probe member and tells the proxy, without waiting for the periodic sync', async () => {
  const w = new AgentWorld();
  await w.namespace('plain');
  await w.startAgent();
  w.startProxy();
  await w.run(100);
  const pod = await w.store.create('Pod', {
    metadata: { name: 'old', namespace: 'plain' },
    spec: { nodeName: NODE, containers: [{ name: 'app', image: 'app' }] },
  });
  const uid = pod.metadata!.uid!;
  await w.run(50);
  // An earlier agent enrolled it (its member is still in the set); the annotation arrives and the
  // pod is deleted before this agent reconciles either event: the queue sees only the delete.
  await w.ipsets.add(PROBE_SET.ipv4, '10.244.1.77', uid);
  await w.store.patch(
    'Pod',
    'old',
    'plain',
    { metadata: { annotations: { 'ambient.istio.io/redirection': 'enabled' } }, status: { podIP: '10.244.1.77' } },
    'status',
  );
  await w.store.delete('Pod', 'old', 'plain');
  await w.run(200); // far less than the 10 s repair interval that would prune the member anyway
  expect(await members(w)).toEqual([]);
  expect(w.proxyDelsSeen).toContain(uid);
  expect(
    w.log.entries.some((e) => e.msg.startsWith('deleted pod removed from the mesh (not held by this agent)')),
  ).toBe(true);
});

test('TestInformerPodDeleteInExcludedNsHandledIfEnrolled: the same in an excluded namespace; a deleted pod that was neither enrolled nor selected is left alone', async () => {
  const w = new AgentWorld();
  await w.namespace('kube-system', AMBIENT); // excluded by the default configuration
  await w.namespace('plain');
  await w.startAgent();
  w.startProxy();
  await w.run(100);
  for (const [ns, name, ip, annotated] of [
    ['kube-system', 'enrolled', '10.244.1.78', true],
    ['plain', 'bystander', '10.244.1.79', false],
  ] as const) {
    const pod = await w.store.create('Pod', {
      metadata: { name, namespace: ns },
      spec: { nodeName: NODE, containers: [{ name: 'app', image: 'app' }] },
    });
    await w.run(50);
    await w.ipsets.add(PROBE_SET.ipv4, ip, pod.metadata!.uid!);
    await w.store.patch(
      'Pod',
      name,
      ns,
      {
        metadata: { annotations: annotated ? { 'ambient.istio.io/redirection': 'enabled' } : {} },
        status: { podIP: ip },
      },
      'status',
    );
    await w.store.delete('Pod', name, ns);
  }
  await w.run(200);
  expect((await members(w)).map((m) => m.ip)).toEqual(['10.244.1.79']);
});
