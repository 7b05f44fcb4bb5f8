/**
 * The kubelet + runtime model in a SimWorld: informer-driven sandboxes, CNI before containers,
 * status through the status subresource, credentials from securityContext, probes from the
 * host netns, deletion, and a failing chained plugin keeping a pod from starting (with the
 * Event, the DEL after the failed ADD, and retries with backoff on the virtual clock).
 */
import { test, expect } from '@playwright/test';
import { CniError, CniErrorCode } from '../../../impl/api/cni.js';
import { SimWorld } from '../../../sim/world/world.js';
import { FakeChainedPlugin } from '../../../sim/cni/plugins.js';

async function world(opts: Partial<ConstructorParameters<typeof SimWorld>[0]> = {}): Promise<SimWorld> {
  const w = new SimWorld({ seed: 7, nodes: 2, recordCni: true, ...opts });
  await w.start();
  await w.createNamespace('app');
  return w;
}

test('a pod bound to a node gets a sandbox from that node only, CNI before containers, and Running status with the CNI addresses', async () => {
  const w = await world();
  const created = await w.createPod({ namespace: 'app', name: 'web', nodeName: 'node-1' });
  expect(created.status?.phase ?? 'Pending').toBe('Pending');
  const pod = await w.waitForRunning('app', 'web');
  const uid = pod.metadata!.uid!;
  expect(pod.status?.podIPs).toEqual([{ ip: '10.244.1.2' }, { ip: 'fd00:10:244:1::2' }]);
  expect(pod.status?.hostIP).toBe('192.0.2.11');
  expect(pod.status?.conditions?.find((c) => c.type === 'Ready')?.status).toBe('True');
  expect(w.node('node-0').kubelet!.sandbox(uid)).toBeUndefined();
  const sb = w.node('node-1').kubelet!.sandbox(uid)!;
  expect(w.kernel.hasNetns(sb.netns)).toBe(true);
  // Order: loopback ADD, primary ADD, then containers.
  const kinds = w.history
    .filter((h) => h.text.includes(sb.sandboxId) || h.text.includes('app/web'))
    .map((h) => h.text.split(' ').slice(0, 4).join(' '));
  expect(kinds.indexOf('cni-loopback ADD #0 loopback')).toBeLessThan(kinds.indexOf('sim-pod-network ADD #0 bridge'));
  expect(kinds.findIndex((k) => k.includes('containers-started'))).toBeGreaterThan(
    kinds.indexOf('sim-pod-network ADD #0 bridge'),
  );
  // The app listens on its declared port in the pod netns, reachable from the other node's pods.
  const client = await w.createPod({ namespace: 'app', name: 'client', nodeName: 'node-0' });
  await w.waitForRunning('app', 'client');
  const c = w.node('node-0').kubelet!.container(client.metadata!.uid!);
  expect(c.connectTcp('10.244.1.2', 8080).outcome).toBe('established');
  expect(c.connectTcp('fd00:10:244:1::2', 8080).outcome).toBe('established');
  expect(c.connectTcp('10.244.1.2', 9999).outcome).toBe('refused');
});

test('containers run with the securityContext identity: uid, gid, capabilities added and dropped; non-root gets none', async () => {
  const w = await world();
  await w.createPod({
    namespace: 'app',
    name: 'ids',
    nodeName: 'node-0',
    securityContext: { runAsUser: 1337, runAsGroup: 1337 },
    containers: [
      {
        name: 'root-admin',
        image: 'x',
        securityContext: { runAsUser: 0, capabilities: { add: ['NET_ADMIN'], drop: ['NET_RAW'] } },
      },
      { name: 'dropped', image: 'x', securityContext: { runAsUser: 0, capabilities: { drop: ['ALL'] } } },
      { name: 'app', image: 'x', securityContext: { capabilities: { add: ['NET_ADMIN'] } } },
    ],
  });
  const pod = await w.waitForRunning('app', 'ids');
  const kl = w.node('node-0').kubelet!;
  const uid = pod.metadata!.uid!;
  const admin = kl.container(uid, 'root-admin');
  expect([admin.creds.uid, [...admin.creds.caps].sort()]).toEqual([0, ['NET_ADMIN', 'NET_BIND_SERVICE']]);
  expect([...kl.container(uid, 'dropped').creds.caps]).toEqual([]);
  const app = kl.container(uid, 'app');
  expect([app.creds.uid, app.creds.gid, app.creds.caps.size]).toEqual([1337, 1337, 0]);
  // The kernel holds them to it: only the admin container may set SO_MARK.
  expect(() => w.kernel.setsockopt(app.socket('tcp', 4), 'SO_MARK', 1)).toThrow(/EPERM/);
  w.kernel.setsockopt(admin.socket('tcp', 4), 'SO_MARK', 1);
  expect(app.netns).toBe(kl.sandbox(uid)!.netns);
});

test('readiness probes are TCP connects from the node netns: Ready follows whether the port answers', async () => {
  const w = await world();
  await w.createPod({ namespace: 'app', name: 'probed', nodeName: 'node-0', readinessTcpPort: 9090 }); // the app listens on 8080 only
  const pod = await w.waitForRunning('app', 'probed');
  const ready = async (): Promise<string | undefined> =>
    (await w.getPod('app', 'probed')).status?.conditions?.find((c) => c.type === 'Ready')?.status;
  await w.runFor(1000);
  expect(await ready()).toBe('False');
  const kl = w.node('node-0').kubelet!;
  const probe = kl.probeTcp(pod.status!.podIP!, 9090);
  expect(probe.outcome).toBe('refused');
  kl.container(pod.metadata!.uid!).listenTcp(9090);
  await w.runFor(10_000);
  expect(await ready()).toBe('True');
  expect(w.history.some((h) => h.text.includes('probe app/probed 10.244.0.2:9090 ok'))).toBe(true);
});

test('a hostNetwork pod runs in the node netns with the node addresses and no CNI call', async () => {
  const w = await world();
  const pod = await w.createPod({ namespace: 'app', name: 'agent', nodeName: 'node-0', hostNetwork: true });
  const running = await w.waitForRunning('app', 'agent');
  expect(running.status?.podIPs).toEqual([{ ip: '192.0.2.10' }, { ip: 'fd00:192::10' }]);
  expect(w.history.filter((h) => h.kind === 'cni')).toEqual([]);
  expect(w.node('node-0').kubelet!.container(pod.metadata!.uid!).netns).toBe('node-0');
});

test('deleting a pod stops its containers, runs DEL (reverse order) and removes the netns and its address', async () => {
  const w = await world();
  const pod = await w.createPod({ namespace: 'app', name: 'gone', nodeName: 'node-0' });
  await w.waitForRunning('app', 'gone');
  const node = w.node('node-0');
  const sb = node.kubelet!.sandbox(pod.metadata!.uid!)!;
  const app = node.kubelet!.container(pod.metadata!.uid!);
  expect(node.disk.ipam.allocatedCount('sim-pod-network')).toBe(2);
  await w.deletePod('app', 'gone');
  await w.runToQuiescence();
  expect(w.kernel.hasNetns(sb.netns)).toBe(false);
  expect(app.running).toBe(false);
  expect(node.disk.ipam.allocatedCount('sim-pod-network')).toBe(0);
  expect(node.disk.cniCache.size).toBe(0);
  const dels = w.history.filter((h) => h.kind === 'cni' && h.text.includes(' DEL ')).map((h) => h.text.split(' ')[0]);
  expect(dels).toEqual(['sim-pod-network', 'cni-loopback']);
  expect([...w.kernel.netns('node-0').links.keys()]).toEqual(['lo', 'eth0', 'cni0']); // no pod veth left
});

test('a failing chained plugin keeps the pod Pending with FailedCreatePodSandBox, DEL follows each failed ADD, retries back off, and the pod starts once the plugin recovers', async () => {
  const w = await world({ backoff: { initialMs: 10_000, maxMs: 40_000 } });
  const node = w.node('node-0');
  const agent = new FakeChainedPlugin((cmd) =>
    cmd === 'ADD'
      ? new CniError(CniErrorCode.TryAgainLater, 'failed to contact node agent', 'connection refused')
      : undefined,
  );
  node.chainPlugin({ type: 'ambient-fake' }, agent);
  const pod = await w.createPod({ namespace: 'app', name: 'mesh', nodeName: 'node-0' });
  const uid = pod.metadata!.uid!;
  await w.runFor(75_000);
  // Attempts at t=0, 10s, 30s, 70s (backoff 10, 20, 40, capped at 40).
  const adds = w.history.filter((h) => h.kind === 'cni' && h.text.includes('ADD #1 ambient-fake')).map((h) => h.t);
  expect(adds).toEqual([0, 10_000, 30_000, 70_000]);
  expect(agent.calls.DEL).toBe(4);
  expect((await w.getPod('app', 'mesh')).status?.phase ?? 'Pending').toBe('Pending');
  expect(node.kubelet!.sandbox(uid)).toBeUndefined(); // no sandbox, so no containers
  expect(w.kernel.netnsNames().filter((n) => n.startsWith('cni-'))).toEqual([]);
  expect(node.disk.ipam.allocatedCount('sim-pod-network')).toBe(0);
  const events = w.eventsFor('app', 'mesh');
  expect(events.length).toBe(4);
  expect(events[0]!.reason).toBe('FailedCreatePodSandBox');
  expect(events[0]!.type).toBe('Warning');
  expect(events[0]!.message).toContain(
    'plugin type="ambient-fake" name="sim-pod-network" failed (add): failed to contact node agent: connection refused (CNI error code 11)',
  );
  agent.fail = undefined;
  const running = await w.waitForRunning('app', 'mesh');
  expect(running.status?.podIP).toMatch(/^10\.244\.0\./);
  expect(w.clock.now()).toBe(110_000); // the next retry after 70 s + 40 s
  expect(node.kubelet!.container(uid).running).toBe(true);
});
