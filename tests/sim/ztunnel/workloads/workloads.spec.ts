/** Workload discovery over the sim API: identity, enrolled flag, updates, deletes, IP reuse. */
import { test, expect } from '@playwright/test';
import { ApiStore } from '../../../../sim/kube/store.js';
import { SimKubeApi } from '../../../../sim/kube/sim-kube-api.js';
import { VirtualClock } from '../../../../sim/time/virtual-clock.js';
import { SeededRandom } from '../../../../sim/time/seeded-random.js';
import { MemoryLogger } from '../../../../sim/log/memory-logger.js';
import { WorkloadIndex, type Pod } from '../../../../impl/ztunnel/workloads.js';
import { WorkloadWatcher } from '../../../../impl/ztunnel/workloads-watch.js';

const flush = (): Promise<void> => new Promise((r) => setImmediate(r));

async function world() {
  const clock = new VirtualClock();
  const api = new ApiStore({ clock, random: new SeededRandom(3) });
  for (const name of ['app', 'other']) api.create('Namespace', { metadata: { name } });
  const kube = new SimKubeApi(api, clock);
  const index = new WorkloadIndex({ trustDomain: 'cluster.local' });
  const watcher = new WorkloadWatcher({ kube, clock, log: new MemoryLogger(), index });
  const run = async (): Promise<void> => {
    for (let i = 0; i < 100; i++) {
      await flush();
      if (!clock.fireNext()) break;
    }
    await flush();
  };
  return { clock, api, index, watcher, run };
}

function pod(
  name: string,
  opts: {
    ns?: string;
    ip?: string;
    sa?: string;
    enrolled?: string;
    hostNetwork?: boolean;
    node?: string;
    labels?: Record<string, string>;
  } = {},
): Pod {
  return {
    metadata: {
      name,
      namespace: opts.ns ?? 'app',
      labels: opts.labels ?? { app: name },
      ...(opts.enrolled ? { annotations: { 'ambient.istio.io/redirection': opts.enrolled } } : {}),
    },
    spec: {
      nodeName: opts.node ?? 'node-1',
      containers: [{ name: 'c', image: 'app' }],
      ...(opts.sa ? { serviceAccountName: opts.sa } : {}),
      ...(opts.hostNetwork ? { hostNetwork: true } : {}),
    },
  };
}

/** Sets status like the kubelet does: phase and IPs through the status subresource. */
function setStatus(api: ApiStore, name: string, status: { phase: string; ip?: string }, ns = 'app'): void {
  api.patch(
    'Pod',
    name,
    ns,
    { status: { phase: status.phase, ...(status.ip ? { podIP: status.ip, podIPs: [{ ip: status.ip }] } : {}) } },
    'status',
  );
}

test('a running pod becomes a workload with identity, labels, node and IPs', async () => {
  const w = await world();
  const created = w.api.create('Pod', pod('server', { sa: 'server-sa' }));
  setStatus(w.api, 'server', { phase: 'Running', ip: '10.244.1.10' });
  w.watcher.start();
  await w.run();
  expect(w.index.synced).toBe(true);
  const wl = w.index.byIp('10.244.1.10');
  expect(wl).toMatchObject({
    uid: created.metadata!.uid,
    name: 'server',
    namespace: 'app',
    serviceAccount: 'server-sa',
    labels: { app: 'server' },
    node: 'node-1',
    ips: ['10.244.1.10'],
    enrolled: false,
    pending: false,
    hostNetwork: false,
    identity: { trustDomain: 'cluster.local', namespace: 'app', serviceAccount: 'server-sa' },
    spiffe: 'spiffe://cluster.local/ns/app/sa/server-sa',
  });
  expect(w.index.byUid(created.metadata!.uid!)?.name).toBe('server');
  expect(w.index.byIp('::ffff:10.244.1.10')?.name).toBe('server');
  w.watcher.stop();
});

test('service account defaults to "default"', async () => {
  const w = await world();
  w.api.create('Pod', pod('p'));
  setStatus(w.api, 'p', { phase: 'Running', ip: '10.244.1.11' });
  w.watcher.start();
  await w.run();
  expect(w.index.byIp('10.244.1.11')?.spiffe).toBe('spiffe://cluster.local/ns/app/sa/default');
  w.watcher.stop();
});

test('not synced before the first list; lookups follow adds, IP assignment and deletes', async () => {
  const w = await world();
  expect(w.index.synced).toBe(false);
  w.watcher.start();
  await w.run();
  let changes = 0;
  w.index.onChange(() => {
    changes++;
  });
  w.api.create('Pod', pod('a'));
  await w.run();
  expect(w.index.all().map((x) => x.name)).toEqual(['a']);
  expect(w.index.byIp('10.244.1.20')).toBeUndefined();
  setStatus(w.api, 'a', { phase: 'Running', ip: '10.244.1.20' });
  await w.run();
  expect(w.index.byIp('10.244.1.20')?.name).toBe('a');
  w.api.delete('Pod', 'a', 'app');
  await w.run();
  expect(w.index.byIp('10.244.1.20')).toBeUndefined();
  expect(w.index.all()).toEqual([]);
  expect(changes).toBe(3);
  w.watcher.stop();
});

test('enrolled and pending follow the redirection annotation: only "enabled" and "pending" exactly', async () => {
  const w = await world();
  const state = () => {
    const wl = w.index.byIp('10.244.1.30');
    return { enrolled: wl?.enrolled, pending: wl?.pending };
  };
  w.api.create('Pod', pod('a', { enrolled: 'pending' }));
  setStatus(w.api, 'a', { phase: 'Running', ip: '10.244.1.30' });
  w.watcher.start();
  await w.run();
  expect(state()).toEqual({ enrolled: false, pending: true });
  w.api.patch('Pod', 'a', 'app', { metadata: { annotations: { 'ambient.istio.io/redirection': 'enabled' } } });
  await w.run();
  expect(state()).toEqual({ enrolled: true, pending: false });
  w.api.patch('Pod', 'a', 'app', { metadata: { annotations: { 'ambient.istio.io/redirection': 'Enabled' } } });
  await w.run();
  expect(state()).toEqual({ enrolled: false, pending: false });
  w.api.patch('Pod', 'a', 'app', { metadata: { annotations: { 'ambient.istio.io/redirection': 'Pending' } } });
  await w.run();
  expect(state()).toEqual({ enrolled: false, pending: false });
  w.api.patch('Pod', 'a', 'app', { metadata: { annotations: { 'ambient.istio.io/redirection': null } } });
  await w.run();
  expect(state()).toEqual({ enrolled: false, pending: false });
  w.watcher.stop();
});

test('terminal pods are removed', async () => {
  const w = await world();
  w.api.create('Pod', pod('job'));
  setStatus(w.api, 'job', { phase: 'Running', ip: '10.244.1.40' });
  w.watcher.start();
  await w.run();
  expect(w.index.byIp('10.244.1.40')?.name).toBe('job');
  setStatus(w.api, 'job', { phase: 'Succeeded' });
  await w.run();
  expect(w.index.byIp('10.244.1.40')).toBeUndefined();
  expect(w.index.all()).toEqual([]);
  w.watcher.stop();
});

test('IP reuse: a finished pod never shadows the new owner; two live claimants resolve to the newer, then fall back', async () => {
  const w = await world();
  w.api.create('Pod', pod('old'));
  setStatus(w.api, 'old', { phase: 'Running', ip: '10.244.1.50' });
  w.watcher.start();
  await w.run();
  // the new pod gets the IP before the old pod's delete is seen
  w.api.create('Pod', pod('new', { enrolled: 'enabled' }));
  setStatus(w.api, 'new', { phase: 'Running', ip: '10.244.1.50' });
  await w.run();
  expect(w.index.byIp('10.244.1.50')?.name).toBe('new');
  // an unrelated update of the old pod does not take the IP back
  w.api.patch('Pod', 'old', 'app', { metadata: { labels: { app: 'old', v: '2' } } });
  await w.run();
  expect(w.index.byIp('10.244.1.50')?.name).toBe('new');
  w.api.delete('Pod', 'new', 'app');
  await w.run();
  expect(w.index.byIp('10.244.1.50')?.name).toBe('old');
  setStatus(w.api, 'old', { phase: 'Failed' });
  await w.run();
  expect(w.index.byIp('10.244.1.50')).toBeUndefined();
  w.watcher.stop();
});

test('hostNetwork pods do not own their (node) IP', async () => {
  const w = await world();
  w.api.create('Pod', pod('agent', { hostNetwork: true }));
  setStatus(w.api, 'agent', { phase: 'Running', ip: '192.0.2.10' });
  const server = w.api.create('Pod', pod('server', { ns: 'other' }));
  w.watcher.start();
  await w.run();
  expect(w.index.byIp('192.0.2.10')).toBeUndefined();
  expect(w.index.all().find((x) => x.name === 'agent')?.hostNetwork).toBe(true);
  expect(w.index.byUid(server.metadata!.uid!)?.namespace).toBe('other');
  w.watcher.stop();
});

test('a Pod list failure is retried on the clock; the index stays unsynced meanwhile', async () => {
  const w = await world();
  w.api.create('Pod', pod('a'));
  setStatus(w.api, 'a', { phase: 'Running', ip: '10.244.1.60' });
  w.api.failNext({ n: 1, code: 500, match: (r) => r.kind === 'Pod' && r.verb === 'list' });
  w.watcher.start();
  await flush();
  await flush();
  expect(w.index.synced).toBe(false);
  await w.run();
  expect(w.index.synced).toBe(true);
  expect(w.index.byIp('10.244.1.60')?.name).toBe('a');
  w.watcher.stop();
});

test('the index rejects a malformed trust domain', () => {
  expect(() => new WorkloadIndex({ trustDomain: 'bad/td' })).toThrow(/invalid trust domain/);
});
