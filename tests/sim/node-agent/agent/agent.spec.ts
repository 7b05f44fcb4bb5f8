/**
 * The node agent in the sim: enrollment transitions, fail-closed CNI ADD, restarts of the agent
 * and the proxy, node reboot repair — with the status annotation checked against reality after
 * every step (AgentWorld.truthful).
 */
import { test, expect } from '@playwright/test';
import { AgentWorld } from './harness.js';
import type { Profile } from '../../../../impl/api/profile.js';
import { simNetnsPath } from '../../../../sim/kernel/netns.js';

const AMBIENT = { 'istio.io/dataplane-mode': 'ambient' };
const NONE = { 'istio.io/dataplane-mode': 'none' };

async function world(opts: { proxy?: boolean; profile?: Profile } = {}): Promise<AgentWorld> {
  const w = new AgentWorld(opts.profile);
  await w.namespace('shop', AMBIENT);
  await w.namespace('plain');
  await w.startAgent();
  if (opts.proxy ?? true) {
    w.startProxy();
    await w.run(100);
  }
  return w;
}

test('a new pod in an ambient namespace is enrolled at CNI ADD: rules, proxy, annotation enabled', async () => {
  const w = await world();
  const { cni, netns, pod } = await w.pod('shop', 'web');
  expect(cni.exitCode, cni.stdout).toBe(0);
  expect(w.rulesIn(netns)).toBe(true);
  expect(w.proxyPods.get(pod.metadata!.uid!)).toBe(netns);
  await w.run(100);
  expect(await w.annotation('shop', 'web')).toBe('enabled');
  expect(await w.truthful()).toEqual([]);
});

test('a pod outside the mesh is untouched', async () => {
  const w = await world();
  const { cni, netns, pod } = await w.pod('plain', 'db');
  expect(cni.exitCode).toBe(0);
  await w.run(100);
  expect(w.rulesIn(netns)).toBe(false);
  expect(w.proxyPods.has(pod.metadata!.uid!)).toBe(false);
  expect(await w.annotation('plain', 'db')).toBeUndefined();
});

test('fail closed: with no proxy connected the CNI ADD fails, the pod is pending, and it is enabled once the proxy arrives', async () => {
  const w = await world({ proxy: false });
  const { cni, pod } = await w.pod('shop', 'web');
  expect(cni.exitCode).toBe(1);
  expect(JSON.parse(cni.stdout).details).toMatch(/node proxy has not taken pod shop\/web/);
  expect(await w.annotation('shop', 'web')).toBe('pending');
  expect(await w.truthful()).toEqual([]);
  await w.run(100);
  const events = (await w.store.list('Event', { namespace: 'shop' })).items;
  expect(
    events.some(
      (e) =>
        e.reason === 'MeshEnrollmentFailed' &&
        e.type === 'Warning' &&
        (e.message ?? '').includes('node proxy has not taken'),
    ),
  ).toBe(true);
  w.startProxy();
  await w.run(3000);
  expect(w.proxyPods.has(pod.metadata!.uid!)).toBe(true);
  expect(await w.annotation('shop', 'web')).toBe('enabled');
  expect(await w.truthful()).toEqual([]);
});

test('fail closed: the proxy refuses the pod (nack) — ADD fails and nothing claims redirection', async () => {
  const w = await world();
  w.proxyNack = 'cannot open listeners';
  const { cni } = await w.pod('shop', 'web');
  expect(cni.exitCode).toBe(1);
  expect(JSON.parse(cni.stdout).details).toContain('cannot open listeners');
  expect(await w.annotation('shop', 'web')).toBe('pending');
  expect(await w.truthful()).toEqual([]);
});

test('fail closed: rule application fails — ADD fails, no annotation', async () => {
  const w = await world();
  w.rules.failNext = { op: 'apply', message: 'iptables-restore: line 3 failed' };
  const { cni } = await w.pod('shop', 'web');
  expect(cni.exitCode).toBe(1);
  expect(JSON.parse(cni.stdout).details).toContain('iptables-restore: line 3 failed');
  await w.run(100);
  expect(await w.truthful()).toEqual([]);
});

test('strict, fail closed: a hostile annotation value never reaches rule text and the ADD fails', async () => {
  const w = await world({ profile: 'strict' });
  const { cni, netns } = await w.pod('shop', 'evil', {
    annotations: { 'istio.io/reroute-virtual-interfaces': 'eth0 -j ACCEPT\n-A OUTPUT' },
  });
  expect(cni.exitCode).toBe(1);
  expect(JSON.parse(cni.stdout).details).toContain('istio.io/reroute-virtual-interfaces');
  expect(w.kernel.iptablesSave(netns, 4)).not.toContain('ACCEPT\n-A OUTPUT');
  expect(w.rulesIn(netns)).toBe(false);
});

test('upstream: a hostile annotation value is ignored (never in rule text), the pod is captured and a Warning says so', async () => {
  const w = await world({ profile: 'upstream' });
  const { cni, netns } = await w.pod('shop', 'evil', {
    annotations: { 'istio.io/reroute-virtual-interfaces': 'eth0 -j ACCEPT\n-A OUTPUT, tun0' },
  });
  expect(cni.exitCode, cni.stdout).toBe(0);
  await w.run(100);
  const text = w.kernel.iptablesSave(netns, 4);
  expect(text).not.toContain('-j ACCEPT\n-A OUTPUT');
  expect(text).not.toMatch(/-i eth0/);
  expect(text).toContain('-A ISTIO_PRERT -i tun0 -p tcp -j REDIRECT --to-ports 15001');
  expect(w.rulesIn(netns)).toBe(true);
  expect(await w.annotation('shop', 'evil')).toBe('enabled');
  const events = (await w.store.list('Event', { namespace: 'shop' })).items.filter(
    (e) => e.reason === 'InvalidMeshAnnotation',
  );
  expect(events).toHaveLength(1);
  expect(events[0]!.message).toContain('istio.io/reroute-virtual-interfaces');
  expect(events[0]!.message).toContain('"eth0 -j ACCEPT\\n-A OUTPUT"');
});

test('live enrollment: labelling the namespace enrolls a running pod; unlabelling removes it', async () => {
  const w = await world();
  await w.namespace('late');
  const { netns, pod } = await w.pod('late', 'api');
  await w.run(100);
  expect(w.rulesIn(netns)).toBe(false);
  await w.labelNamespace('late', AMBIENT);
  await w.run(1000);
  expect(w.rulesIn(netns)).toBe(true);
  expect(w.proxyPods.get(pod.metadata!.uid!)).toBe(netns);
  expect(await w.annotation('late', 'api')).toBe('enabled');
  await w.labelNamespace('late', { 'istio.io/dataplane-mode': null });
  await w.run(1000);
  expect(w.rulesIn(netns)).toBe(false);
  expect(w.proxyPods.has(pod.metadata!.uid!)).toBe(false);
  expect(await w.annotation('late', 'api')).toBeUndefined();
  expect(await w.truthful()).toEqual([]);
});

test('label precedence live: pod label none opts out of an ambient namespace, ambient opts back in', async () => {
  const w = await world();
  const { netns } = await w.pod('shop', 'web');
  await w.run(100);
  await w.labelPod('shop', 'web', NONE);
  await w.run(1000);
  expect(w.rulesIn(netns)).toBe(false);
  expect(await w.annotation('shop', 'web')).toBeUndefined();
  await w.labelPod('shop', 'web', AMBIENT);
  await w.run(1000);
  expect(w.rulesIn(netns)).toBe(true);
  expect(await w.annotation('shop', 'web')).toBe('enabled');
  expect(await w.truthful()).toEqual([]);
});

test('pod delete and terminal phase remove the pod from the proxy and the probe set', async () => {
  const w = await world();
  const a = await w.pod('shop', 'job');
  const b = await w.pod('shop', 'web');
  await w.run(100);
  const set = () =>
    w.kernel
      .ipsetsOf('host-node-1')
      .entries('istio-inpod-probes-v4')
      .map((e) => e.text.replace('/32', ''));
  expect(set().sort()).toEqual([a.ip, b.ip].sort());
  w.store.patch('Pod', 'job', 'shop', { status: { phase: 'Succeeded' } }, 'status');
  w.store.delete('Pod', 'web', 'shop');
  await w.run(1000);
  expect(w.proxyPods.size).toBe(0);
  expect(set()).toEqual([]);
  expect(await w.annotation('shop', 'job')).toBeUndefined(); // a finished pod is no longer redirected, and says so
});

test('agent restart with pods running: rules stay, state is rebuilt, a new pod still enrolls', async () => {
  const w = await world();
  const a = await w.pod('shop', 'web');
  await w.run(100);
  await w.stopAgent();
  expect(w.rulesIn(a.netns)).toBe(true); // an upgrade must not unprotect running pods
  const during = await w.pod('shop', 'during'); // no agent: fail closed
  expect(during.cni.exitCode).toBe(1);
  await w.startAgent();
  await w.run(3000);
  expect(w.agent!.meshPods().map((p) => p.name)).toEqual(['web']);
  // The kubelet retries the failed sandbox; now it succeeds.
  const retry = await w.cniAdd(during.pod, simNetnsPath(during.netns), during.ip);
  expect(retry.exitCode, retry.stdout).toBe(0);
  expect(
    w
      .agent!.meshPods()
      .map((p) => p.name)
      .sort(),
  ).toEqual(['during', 'web']);
  const after = await w.pod('shop', 'after');
  expect(after.cni.exitCode, after.cni.stdout).toBe(0);
  await w.run(1000);
  expect(await w.truthful()).toEqual([]);
});

test('proxy disconnect and reconnect: the new proxy gets every enrolled pod in its snapshot', async () => {
  const w = await world();
  const a = await w.pod('shop', 'a');
  const b = await w.pod('shop', 'b');
  await w.run(100);
  w.stopProxy();
  await w.run(500);
  w.startProxy();
  await w.run(2000);
  expect(w.proxyPods.get(a.pod.metadata!.uid!)).toBe(a.netns);
  expect(w.proxyPods.get(b.pod.metadata!.uid!)).toBe(b.netns);
  expect(await w.truthful()).toEqual([]);
});

test('a rogue ZDS client with the wrong uid gets nothing', async () => {
  const w = await world({ proxy: false });
  w.startProxy(1000);
  await w.pod('shop', 'web');
  await w.run(1000);
  expect(w.proxyPods.size).toBe(0);
  expect(w.agent!.proxyConnected()).toBe(false);
});

test('node reboot without drain: the pod gets a new netns and the repair loop re-applies rules and proxy state', async () => {
  const w = await world();
  const { pod } = await w.pod('shop', 'web');
  await w.run(100);
  const fresh = await w.rebootSandbox(pod);
  expect(w.rulesIn(fresh.netns)).toBe(false);
  await w.run(15_000); // one repair interval
  expect(w.rulesIn(fresh.netns)).toBe(true);
  expect(w.proxyPods.get(pod.metadata!.uid!)).toBe(fresh.netns);
  expect(await w.truthful()).toEqual([]);
});

test('repair: rules flushed from a pod netns behind the agent back are restored', async () => {
  const w = await world();
  const { netns } = await w.pod('shop', 'web');
  await w.run(100);
  w.kernel.iptablesRestore(netns, 4, '*nat\nCOMMIT\n*mangle\nCOMMIT\n*raw\nCOMMIT\n');
  expect(w.rulesIn(netns)).toBe(false);
  await w.run(15_000);
  expect(w.rulesIn(netns)).toBe(true);
  expect(w.metrics.get('ambient_lab_agent_repairs_total', { what: 'rules' })).toBeGreaterThan(0);
});

test('a pod opted out while the agent was down loses its rules when the agent returns (found by check)', async () => {
  const w = await world();
  const { netns } = await w.pod('shop', 'web');
  await w.run(100);
  expect(w.rulesIn(netns)).toBe(true);
  await w.stopAgent();
  await w.labelPod('shop', 'web', NONE);
  await w.startAgent();
  await w.run(3000);
  expect(w.rulesIn(netns)).toBe(false);
  expect(await w.annotation('shop', 'web')).toBeUndefined();
  expect(await w.truthful()).toEqual([]);
});

test('strict: a running pod selected later despite an invalid annotation is captured with defaults and warned about (found by check)', async () => {
  const w = await world({ profile: 'strict' });
  await w.namespace('late');
  const { netns, pod } = await w.pod('late', 'api', {
    annotations: { 'istio.io/reroute-virtual-interfaces': 'eth0,lo' },
  });
  await w.run(100);
  expect(w.rulesIn(netns)).toBe(false);
  await w.labelNamespace('late', AMBIENT);
  await w.run(1000);
  expect(w.rulesIn(netns)).toBe(true);
  expect(w.proxyPods.get(pod.metadata!.uid!)).toBe(netns);
  expect(await w.annotation('late', 'api')).toBe('enabled');
  const events = (await w.store.list('Event', { namespace: 'late' })).items;
  expect(
    events.some(
      (e) => e.reason === 'InvalidMeshAnnotation' && (e.message ?? '').includes('istio.io/reroute-virtual-interfaces'),
    ),
  ).toBe(true);
});
