/**
 * The World on the simulator: the real CNI plugin, node agent and node proxy on every node,
 * observed through the World interface only (plus the sim's extras where a test needs them).
 */
import { test, expect } from '@playwright/test';
import { createSimWorld, type SimMeshWorld, type SimWorldExtras } from '../../../scenarios/worlds/sim-world.js';
import type { AppSpec, ConnectResult, PodObservation, PodRef, WorldOptions } from '../../../scenarios/world.js';

const AMBIENT = { 'istio.io/dataplane-mode': 'ambient' };
const APP: AppSpec = { uid: 1000, caps: [], tcpPorts: [8080] };
const BASE: WorldOptions = {
  nodes: 2,
  profile: 'upstream',
  kernelVersion: '6.1',
  ipv6: false,
  dnsCapture: false,
  seed: 1,
};

const a: PodRef = { namespace: 'mesh', name: 'a' };
const b: PodRef = { namespace: 'mesh', name: 'b' };
const p: PodRef = { namespace: 'plain', name: 'p' };
const q: PodRef = { namespace: 'plain', name: 'q' };

/** mesh/a on node-0 (sa-a), mesh/b on node-1 (sa-b), plain/p on node-0, plain/q on node-1. */
async function cluster(opts: Partial<WorldOptions> = {}, extras: SimWorldExtras = {}): Promise<SimMeshWorld> {
  const w = await createSimWorld({ ...BASE, ...opts }, extras);
  await w.createNamespace('mesh', AMBIENT);
  await w.createNamespace('plain');
  await w.createPod({ ...a, node: 'node-0', serviceAccount: 'sa-a', app: APP });
  await w.createPod({ ...b, node: 'node-1', serviceAccount: 'sa-b', app: { ...APP, udpPorts: [5353] } });
  await w.createPod({ ...p, node: 'node-0', app: APP });
  await w.createPod({ ...q, node: 'node-1', app: { ...APP, udpPorts: [5353] } });
  return w;
}

function obs(all: readonly PodObservation[], ref: PodRef): PodObservation {
  const o = all.find((x) => x.namespace === ref.namespace && x.name === ref.name);
  if (!o) throw new Error(`no observation of ${ref.namespace}/${ref.name}`);
  return o;
}

const deliveredTo = (r: ConnectResult, ref: PodRef): boolean =>
  r.deliveries.some((d) => d.pod.namespace === ref.namespace && d.pod.name === ref.name);

test('liveness: enrolled pods on two nodes reach each other over HBONE with their identities; pods outside the mesh are reached directly', async () => {
  const w = await cluster();
  const pods = await w.pods();
  for (const ref of [a, b])
    expect(obs(pods, ref)).toMatchObject({ started: true, annotation: 'enabled', redirected: true, served: true });
  for (const ref of [p, q])
    expect(obs(pods, ref)).toMatchObject({ started: true, annotation: undefined, redirected: false, served: false });

  const r = await w.connect({ kind: 'pod', pod: a }, { kind: 'pod', pod: b, port: 8080 });
  expect(r.outcome).toBe('established');
  expect(r.acceptedBy).toBe('proxy-outbound');
  // Delivered by b's own node proxy, from inside b's netns (what inbound capture requires).
  expect(r.deliveries).toEqual([
    {
      pod: b,
      port: 8080,
      peer: expect.stringMatching(/^10\.244\.0\.\d+:\d+$/),
      viaProxy: true,
      proxyNode: 'node-1',
      proxyFor: b,
    },
  ]);
  expect(r.deliveries[0]!.peer.split(':')[0]).toBe(obs(pods, a).ips[0]);
  const out = r.proxyLog.find((e) => e.event === 'forwarded' && e.direction === 'outbound');
  const inb = r.proxyLog.find((e) => e.event === 'forwarded' && e.direction === 'inbound-hbone');
  expect(out).toMatchObject({
    node: 'node-0',
    pod: a,
    srcIdentity: 'spiffe://cluster.local/ns/mesh/sa/sa-a',
    dstIdentity: 'spiffe://cluster.local/ns/mesh/sa/sa-b',
  });
  expect(inb).toMatchObject({
    node: 'node-1',
    pod: b,
    srcIdentity: 'spiffe://cluster.local/ns/mesh/sa/sa-a',
    dstIdentity: 'spiffe://cluster.local/ns/mesh/sa/sa-b',
    allowed: true,
  });

  const direct = await w.connect({ kind: 'pod', pod: p }, { kind: 'pod', pod: q, port: 8080 });
  expect(direct).toMatchObject({ outcome: 'established', acceptedBy: 'app', acceptedIn: q, proxyLog: [] });
  expect(direct.deliveries).toEqual([
    { pod: q, port: 8080, peer: expect.stringContaining(`${obs(pods, p).ips[0]}:`), viaProxy: false },
  ]);

  const udp = await w.connect(
    { kind: 'pod', pod: p },
    { kind: 'pod', pod: q, port: 5353 },
    { proto: 'udp', payload: 'x' },
  );
  expect(udp).toMatchObject({ outcome: 'delivered', acceptedBy: 'app', acceptedIn: q });
  expect(deliveredTo(udp, q)).toBe(true);
  await w.close();
});

test('outbound capture: a mesh pod connecting to a pod outside the mesh is accepted by its proxy, which passes it through', async () => {
  const w = await cluster();
  const r = await w.connect({ kind: 'pod', pod: a }, { kind: 'pod', pod: q, port: 8080 });
  expect(r).toMatchObject({ outcome: 'established', acceptedBy: 'proxy-outbound', acceptedIn: a });
  expect(r.deliveries).toHaveLength(1);
  expect(r.deliveries[0]).toMatchObject({ pod: q, viaProxy: true });
  expect(
    r.proxyLog.some((e) => e.event === 'forwarded' && e.direction === 'outbound' && e.dstIdentity === undefined),
  ).toBe(true);
  // Nothing listens on 9999 at q: the proxy took the connection, the upstream leg failed.
  const refused = await w.connect({ kind: 'pod', pod: a }, { kind: 'pod', pod: q, port: 9999 });
  expect(refused.acceptedBy).toBe('proxy-outbound');
  expect(refused.deliveries).toEqual([]);
  expect(refused.proxyLog.some((e) => e.event === 'error' && e.direction === 'outbound')).toBe(true);
  await w.close();
});

test('inbound capture: plaintext from a pod outside the mesh is accepted by the destination proxy and delivered by it', async () => {
  const w = await cluster();
  const pods = await w.pods();
  const r = await w.connect({ kind: 'pod', pod: q }, { kind: 'pod', pod: a, port: 8080 });
  expect(r).toMatchObject({ outcome: 'established', acceptedBy: 'proxy-inbound', acceptedIn: a });
  expect(r.deliveries).toEqual([
    {
      pod: a,
      port: 8080,
      peer: expect.stringContaining(`${obs(pods, q).ips[0]}:`),
      viaProxy: true,
      proxyNode: obs(pods, a).node,
      proxyFor: a,
    },
  ]);
  expect(r.proxyLog).toContainEqual(
    expect.objectContaining({
      node: 'node-0',
      pod: a,
      event: 'forwarded',
      direction: 'inbound-plaintext',
      allowed: true,
    }),
  );
  // The outside client too.
  const o = await w.connect({ kind: 'outside' }, { kind: 'pod', pod: b, port: 8080 });
  expect(o).toMatchObject({ acceptedBy: 'proxy-inbound', acceptedIn: b });
  expect(o.deliveries.every((d) => d.viaProxy)).toBe(true);
  await w.close();
});

test('an AuthorizationPolicy DENY takes effect at the destination proxy, and deleting it restores access', async () => {
  const w = await cluster();
  const pods = await w.pods();
  await w.applyPolicy({
    apiVersion: 'security.istio.io/v1',
    kind: 'AuthorizationPolicy',
    metadata: { namespace: 'mesh', name: 'deny-p' },
    spec: { action: 'DENY', rules: [{ from: [{ source: { ipBlocks: [`${obs(pods, p).ips[0]}/32`] } }] }] },
  });
  await w.settle();
  const denied = await w.connect({ kind: 'pod', pod: p }, { kind: 'pod', pod: b, port: 8080 });
  expect(denied.acceptedBy).toBe('proxy-inbound');
  expect(denied.deliveries).toEqual([]);
  expect(denied.proxyLog).toContainEqual(
    expect.objectContaining({
      pod: b,
      event: 'denied',
      allowed: false,
      reason: expect.stringContaining('mesh/deny-p'),
    }),
  );
  // Others are unaffected.
  expect(deliveredTo(await w.connect({ kind: 'pod', pod: q }, { kind: 'pod', pod: b, port: 8080 }), b)).toBe(true);
  await w.deletePolicy('mesh', 'deny-p');
  await w.settle();
  expect(deliveredTo(await w.connect({ kind: 'pod', pod: p }, { kind: 'pod', pod: b, port: 8080 }), b)).toBe(true);
  await w.close();
});

test('fail closed: with the agent stopped a new ambient pod does not start; it starts, enrolled, once the agent is back', async () => {
  const w = await cluster();
  await w.stop('agent', 'node-1');
  const c = await w.createPod({ namespace: 'mesh', name: 'c', node: 'node-1', app: APP });
  expect(c.started).toBe(false);
  expect(c.redirected).toBe(false);
  // A pod outside the mesh on the same node is not held back.
  const d = await w.createPod({ namespace: 'plain', name: 'd', node: 'node-1', app: APP });
  expect(d.started).toBe(true);
  await w.start('agent', 'node-1');
  await w.settle();
  expect(obs(await w.pods(), c)).toMatchObject({
    started: true,
    annotation: 'enabled',
    redirected: true,
    served: true,
  });
  await w.close();
});

test('fail closed: with the proxy stopped, enrolled traffic fails instead of reaching the app directly; a start restores it', async () => {
  const w = await cluster();
  await w.stop('proxy', 'node-1');
  await w.settle();
  const pods = await w.pods();
  expect(obs(pods, b)).toMatchObject({ redirected: true, served: false });
  for (const from of [a, p, q]) {
    const r = await w.connect({ kind: 'pod', pod: from }, { kind: 'pod', pod: b, port: 8080 });
    expect(deliveredTo(r, b), `${from.name} -> b`).toBe(false);
  }
  const out = await w.connect({ kind: 'pod', pod: b }, { kind: 'pod', pod: q, port: 8080 });
  expect(out.outcome).not.toBe('established');
  expect(out.deliveries).toEqual([]);
  await w.start('proxy', 'node-1');
  await w.settle();
  expect(obs(await w.pods(), b).served).toBe(true);
  expect(deliveredTo(await w.connect({ kind: 'pod', pod: a }, { kind: 'pod', pod: b, port: 8080 }), b)).toBe(true);
  await w.close();
});

test('proxy restart hands over without a gap: traffic keeps going through a proxy', async () => {
  const w = await cluster();
  await w.restart('proxy', 'node-0');
  const r = await w.connect({ kind: 'pod', pod: q }, { kind: 'pod', pod: a, port: 8080 });
  expect(r.acceptedBy).toBe('proxy-inbound');
  expect(r.deliveries).toEqual([expect.objectContaining({ pod: a, viaProxy: true })]);
  await w.settle();
  expect(obs(await w.pods(), a).served).toBe(true);
  await w.close();
});

test('reboot: pods come back in new namespaces, redirected and served, and traffic flows through the proxies', async () => {
  const w = await cluster();
  const before = obs(await w.pods(), a);
  await w.rebootNode('node-0');
  await w.settle();
  const after = obs(await w.pods(), a);
  expect(after).toMatchObject({
    uid: before.uid,
    started: true,
    annotation: 'enabled',
    redirected: true,
    served: true,
  });
  expect(obs(await w.pods(), p)).toMatchObject({ started: true, redirected: false });
  const r = await w.connect({ kind: 'pod', pod: a }, { kind: 'pod', pod: b, port: 8080 });
  expect(r.acceptedBy).toBe('proxy-outbound');
  expect(deliveredTo(r, b)).toBe(true);
  await w.close();
});

test('mark spoofing: an app without capabilities cannot set SO_MARK (error outcome); a root app with NET_ADMIN can', async () => {
  const w = await cluster();
  const r = await w.connect({ kind: 'pod', pod: a }, { kind: 'pod', pod: b, port: 8080 }, { mark: 0x539 });
  expect(r).toMatchObject({ outcome: 'error', acceptedBy: undefined, deliveries: [] });
  expect(r.error).toContain('SO_MARK');
  expect(r.error).toContain('EPERM');
  await w.createPod({
    namespace: 'mesh',
    name: 'root',
    node: 'node-0',
    app: { uid: 0, caps: ['NET_ADMIN'], tcpPorts: [] },
  });
  const spoof = await w.connect(
    { kind: 'pod', pod: { namespace: 'mesh', name: 'root' } },
    { kind: 'pod', pod: q, port: 8080 },
    { mark: 0x539 },
  );
  expect(spoof.outcome).toBe('established'); // the setsockopt succeeded; what it bypasses is for the attack catalog
  await w.close();
});

test('the plan hook: agents apply the transformed plan (here: no rules), so the pod is annotated but not redirected', async () => {
  const w = await cluster(
    {},
    { mutatePlan: (plan) => ({ ...plan, iptables: { ...plan.iptables, ipv4: '*nat\nCOMMIT\n' } }) },
  );
  expect(obs(await w.pods(), a)).toMatchObject({ annotation: 'enabled', redirected: false });
  const r = await w.connect({ kind: 'pod', pod: a }, { kind: 'pod', pod: q, port: 8080 });
  expect(r).toMatchObject({ acceptedBy: 'app', acceptedIn: q });
  expect(r.deliveries).toEqual([expect.objectContaining({ pod: q, viaProxy: false })]);
  await w.close();
});

test('raw packets need NET_RAW; traces are rendered when the world traces', async () => {
  const w = await cluster({}, { trace: true });
  const raw = await w.connect({ kind: 'pod', pod: p }, { kind: 'pod', pod: q, port: 8080 }, { raw: true });
  expect(raw).toMatchObject({ outcome: 'error', error: 'socket(AF_PACKET): EPERM' });
  await w.createPod({
    namespace: 'plain',
    name: 'raw',
    node: 'node-0',
    app: { uid: 0, caps: ['NET_RAW'], tcpPorts: [] },
  });
  const sent = await w.connect(
    { kind: 'pod', pod: { namespace: 'plain', name: 'raw' } },
    { kind: 'pod', pod: q, port: 8080 },
    { raw: true },
  );
  expect(sent).toMatchObject({ outcome: 'delivered', acceptedBy: 'app', acceptedIn: q });
  const t = await w.connect({ kind: 'pod', pod: a }, { kind: 'pod', pod: b, port: 8080 });
  expect(t.trace).toContain('REDIRECT');
  await w.close();
});

test('determinism: the same seed and history give the same observations', async () => {
  const run = async (): Promise<string> => {
    const w = await cluster({ seed: 42 });
    await w.createPod({ namespace: 'mesh', name: 'x', app: APP }); // node chosen by the seeded scheduler
    await w.rebootNode('node-1');
    await w.settle();
    const r1 = await w.connect(
      { kind: 'pod', pod: a },
      { kind: 'pod', pod: { namespace: 'mesh', name: 'x' }, port: 8080 },
    );
    const r2 = await w.connect({ kind: 'pod', pod: q }, { kind: 'pod', pod: b, port: 8080 });
    const out = JSON.stringify({ pods: await w.pods(), r1, r2 });
    await w.close();
    return out;
  };
  const first = await run();
  expect(await run()).toBe(first);
  expect(first).toContain('"uid"');
});
