/**
 * World reuse in `check` (scenarios/model/world-pool.ts): a sim world reset after a history that
 * touched everything a history can undo digests equal to its post-prelude self and behaves like
 * it; the digest sees what a reset did not undo; and a cell run with reuse reaches the same
 * verdict as one with a fresh world per history, with most histories on reused worlds.
 */
import { test, expect } from '@playwright/test';
import { createSimWorld, type SimMeshWorld } from '../../../scenarios/worlds/sim-world.js';
import type { PodSpec, WorldFactory } from '../../../scenarios/world.js';
import { runCell } from '../../../scenarios/model/run-cell.js';
import { defaultCatalog } from '../../../scenarios/model/catalog.js';
import { loadFactory } from '../../../scenarios/model/worlds.js';
import type { ResetBaseline } from '../../../scenarios/worlds/sim-world.js';

const MODE = 'istio.io/dataplane-mode';
const app = { uid: 0, caps: ['NET_ADMIN', 'NET_RAW'] as const, tcpPorts: [8080, 9090], udpPorts: [5353] };

/** The check's prelude, by hand: an ambient and a plain namespace, three pods over two nodes. */
async function preludeWorld(): Promise<{ world: SimMeshWorld; baseline: ResetBaseline; digest: string }> {
  const world = await createSimWorld({
    nodes: 2,
    profile: 'strict',
    kernelVersion: '6.1',
    ipv6: true,
    dnsCapture: false,
    seed: 11,
  });
  const [n0, n1] = world.nodes as [string, string];
  const namespaces = { 'ambient-a': { [MODE]: 'ambient' }, plain: {} };
  const pods: PodSpec[] = [
    { namespace: 'ambient-a', name: 'p0', node: n0, labels: {}, annotations: {}, app: { ...app, caps: [...app.caps] } },
    { namespace: 'plain', name: 'p1', node: n1, labels: {}, annotations: {}, app: { ...app, caps: [...app.caps] } },
    { namespace: 'ambient-a', name: 'p2', node: n1, labels: {}, annotations: {}, app: { ...app, caps: [...app.caps] } },
  ];
  for (const [n, l] of Object.entries(namespaces)) await world.createNamespace(n, l);
  for (const p of pods) await world.createPod(p);
  await world.settle();
  return { world, baseline: { namespaces, pods }, digest: world.stateDigest() };
}

const p0 = { namespace: 'ambient-a', name: 'p0' };
const p1 = { namespace: 'plain', name: 'p1' };

test('a reset undoes a history (labels, pods, namespaces, policies, stopped components) and digests equal to the post-prelude world', async () => {
  const { world, baseline, digest } = await preludeWorld();
  try {
    const [n0, n1] = world.nodes as [string, string];
    await world.createNamespace('ambient-b', { [MODE]: 'ambient' });
    await world.createPod({ namespace: 'ambient-b', name: 'p3', app: { ...app, caps: [] } });
    await world.labelPod(p0, { [MODE]: 'none' });
    await world.labelNamespace('plain', { [MODE]: 'ambient' });
    await world.applyPolicy({
      metadata: { namespace: 'ambient-a', name: 'deny' },
      spec: { action: 'DENY', rules: [{}] },
    });
    await world.deletePod(p1);
    await world.stop('proxy', n1);
    await world.stop('agent', n0);
    await world.connect({ kind: 'pod', pod: p0 }, { kind: 'ip', ip: '203.0.113.10', port: 80 }, { proto: 'udp' });
    await world.settle();
    expect(world.stateDigest()).not.toBe(digest);

    await world.resetTo(baseline);
    expect(world.stateDigest()).toBe(digest);
    // And it behaves as after the prelude: p1 (plain, recreated) reaches p0 (ambient) through p0's node proxy.
    const r = await world.connect({ kind: 'pod', pod: p1 }, { kind: 'pod', pod: p0, port: 8080 });
    expect(r.outcome).toBe('established');
    expect(r.deliveries.map((d) => [d.pod.name, d.viaProxy])).toEqual([['p0', true]]);
    const pods = await world.pods();
    expect(pods.map((p) => `${p.namespace}/${p.name}:${String(p.redirected)}`).sort()).toEqual([
      'ambient-a/p0:true',
      'ambient-a/p2:true',
      'plain/p1:false',
    ]);
  } finally {
    await world.close();
  }
});

test('the digest sees state a reset does not undo: a stray listener, flushed rules', async () => {
  const { world, digest } = await preludeWorld();
  try {
    expect(world.stateDigest()).toBe(digest);
    const listen = await world.appExec(p0, { kind: 'listen', port: 7777, reusePort: false });
    expect(listen.ok).toBe(true);
    await world.settle();
    const withListener = world.stateDigest();
    expect(withListener).not.toBe(digest);
    const flush = await world.appExec(p0, { kind: 'iptables-flush' });
    expect(flush.ok).toBe(true);
    expect(world.stateDigest()).not.toBe(withListener);
  } finally {
    await world.close();
  }
});

test('a cell with world reuse reaches the same verdict as with a fresh world per history, mostly on reused worlds', async () => {
  const c = defaultCatalog();
  const property = c.properties.find((p) => p.name === 'outbound-capture');
  const threat = c.threats.find((t) => t.id === 'app-nonroot');
  if (!property || !threat) throw new Error('catalog lacks outbound-capture or app-nonroot');
  expect(c.expected('outbound-capture', 'app-nonroot', 'strict', 'iptables')?.verdict).toBe('holds');
  const o = {
    factory: await loadFactory({ world: 'sim' }),
    runs: 30,
    seed: 99,
    nodes: 2,
    ipv6: true,
    dnsCapture: false,
    maxCommands: 8,
  };
  const reused = await runCell({ property, threat, profile: 'strict' }, o);
  const fresh = await runCell({ property, threat, profile: 'strict' }, { ...o, reuseWorlds: false });
  expect(fresh.status).toBe('holds');
  expect(reused.status).toBe('holds');
  expect(reused.runs).toBe(30);
  expect(reused.worlds?.reused ?? 0).toBeGreaterThan(15);
  expect((reused.worlds?.fresh ?? 0) + (reused.worlds?.reused ?? 0)).toBe(30);
  expect(fresh.worlds).toBeUndefined();
});

test('a violation that only a reused world shows (a reset that leaks, a digest that cannot see it) is a harness error, never a verdict', async () => {
  const c = defaultCatalog();
  const property = c.properties.find((p) => p.name === 'convergence');
  const threat = c.threats.find((t) => t.id === 'app-nonroot');
  if (!property || !threat) throw new Error('catalog lacks convergence or app-nonroot');
  expect(c.expected('convergence', 'app-nonroot', 'strict', 'iptables')?.verdict).toBe('holds');
  const base = await loadFactory({ world: 'sim' });
  // The broken reset stops every proxy behind the model's back, and its digest sees nothing.
  const leaky: WorldFactory = {
    ...base,
    create: async (opts) => {
      const w = (await base.create(opts)) as SimMeshWorld;
      return new Proxy(w, {
        get(target, key) {
          if (key === 'stateDigest') return () => 'blind';
          if (key === 'resetTo') {
            return async (b: ResetBaseline) => {
              await target.resetTo(b);
              for (const n of target.nodes) await target.stop('proxy', n);
            };
          }
          const v: unknown = Reflect.get(target, key, target);
          return typeof v === 'function' ? (v as (...a: unknown[]) => unknown).bind(target) : v;
        },
      });
    },
  };
  const r = await runCell(
    { property, threat, profile: 'strict' },
    { factory: leaky, runs: 25, seed: 5, nodes: 2, ipv6: false, dnsCapture: false, maxCommands: 8 },
  );
  expect(r.status).toBe('error');
  if (r.status !== 'error') return;
  expect(r.error).toContain('does not happen on a fresh world');
  expect(r.worlds?.reused ?? 0).toBeGreaterThan(0);
});
