/**
 * Positive controls: every property must find a counterexample in a deliberately broken world
 * (a rule removed from the plan the agents apply, a component down with a rule missing) or on a
 * deliberately lying observation (a proxy log that allows what the policy denies, an annotation
 * that claims enrollment). A property that stays silent here could not fail.
 */
import { test, expect } from '@playwright/test';
import type { RedirectionPlan } from '../../../impl/host/netns-rules.js';
import { createSimWorld } from '../../../scenarios/worlds/sim-world.js';
import {
  checkConnection,
  checkState,
  type ClusterContext,
  type PropertyName,
} from '../../../scenarios/properties/index.js';
import {
  buildTopology,
  APP_PORT,
  ATTACKER,
  FRIEND,
  SINK,
  VICTIM,
  VICTIM_POLICY,
  MESH_NS,
} from '../../../scenarios/attacks/topology.js';
import { threat } from '../../../scenarios/threats/threats.js';
import type { ConnectOptions, Destination, PodObservation, Source } from '../../../scenarios/world.js';

function dropRule(id: string) {
  return (plan: RedirectionPlan): RedirectionPlan => {
    const lines = (plan.iptables.ipv4 ?? '').split('\n');
    const at = lines.findIndex((l) => l.startsWith(`# ${id}`));
    if (at < 0) throw new Error(`no rule ${id} in the plan`);
    lines.splice(at, 2);
    return { ...plan, iptables: { ...plan.iptables, ipv4: lines.join('\n') } };
  };
}

async function brokenWorld(ruleId: string) {
  const world = await createSimWorld(
    { nodes: 2, profile: 'strict', kernelVersion: '6.1', ipv6: false, dnsCapture: true, seed: 3 },
    { mutatePlan: dropRule(ruleId) },
  );
  const state = await buildTopology(world, threat('app-nonroot'), {
    profile: 'strict',
    dnsCapture: true,
    kubeletUid: 0,
  });
  const attempt = async (from: Source, to: Destination, opts: ConnectOptions = {}) => {
    const result = await world.connect(from, to, opts);
    return checkConnection({ ...(await state.context(world, true)), from, to, opts, result });
  };
  return { world, state, attempt };
}

const props = (vs: readonly { property: PropertyName }[]): PropertyName[] =>
  [...new Set(vs.map((v) => v.property))].sort();

test('outbound capture: without the outbound redirect, an app reaches a pod outside the mesh directly', async () => {
  const { world, attempt } = await brokenWorld('nat/out/redirect-outbound');
  try {
    const v = await attempt({ kind: 'pod', pod: ATTACKER }, { kind: 'pod', pod: SINK, port: APP_PORT });
    expect(props(v)).toContain('outbound-capture');
  } finally {
    await world.close();
  }
});

test('inbound capture and authorization: without the inbound redirect, a denied peer reaches the victim app', async () => {
  const { world, attempt } = await brokenWorld('mangle/prert/tproxy-inbound');
  try {
    const v = await attempt({ kind: 'outside' }, { kind: 'pod', pod: VICTIM, port: APP_PORT });
    expect(props(v)).toEqual(expect.arrayContaining(['inbound-capture', 'authorization']));
  } finally {
    await world.close();
  }
});

test('fail closed: with the proxy down and the outbound redirect missing, enrolled traffic bypasses', async () => {
  const { world, state, attempt } = await brokenWorld('nat/out/redirect-outbound');
  try {
    await state.setComponent(world, 'proxy', world.nodes[0]!, 'down');
    const v = await attempt({ kind: 'pod', pod: ATTACKER }, { kind: 'pod', pod: SINK, port: APP_PORT });
    expect(props(v)).toContain('fail-closed');
  } finally {
    await world.close();
  }
});

test('the healthy strict world: the same attempts violate nothing (the controls above are not noise)', async () => {
  const world = await createSimWorld({
    nodes: 2,
    profile: 'strict',
    kernelVersion: '6.1',
    ipv6: false,
    dnsCapture: true,
    seed: 3,
  });
  try {
    const state = await buildTopology(world, threat('app-nonroot'), {
      profile: 'strict',
      dnsCapture: true,
      kubeletUid: 0,
    });
    for (const [from, to] of [
      [
        { kind: 'pod', pod: ATTACKER },
        { kind: 'pod', pod: SINK, port: APP_PORT },
      ],
      [{ kind: 'outside' }, { kind: 'pod', pod: VICTIM, port: APP_PORT }],
      [
        { kind: 'pod', pod: FRIEND },
        { kind: 'pod', pod: VICTIM, port: APP_PORT },
      ],
    ] as [Source, Destination][]) {
      const result = await world.connect(from, to, {});
      expect(checkConnection({ ...(await state.context(world, true)), from, to, opts: {}, result })).toEqual([]);
    }
    expect(checkState(await world.pods(), await state.context(world, true))).toEqual([]);
  } finally {
    await world.close();
  }
});

// ---- lying observations (no world can be made to lie on demand; the checks read these fields)

function ctxWith(pods: PodObservation[]): ClusterContext {
  return {
    mesh: { profile: 'strict', dnsCapture: true },
    pods,
    namespaces: { [MESH_NS]: { 'istio.io/dataplane-mode': 'ambient' } },
    specs: { 'mesh/victim': { tcpPorts: [APP_PORT] } },
    components: { 'node-0': { agent: 'up', proxy: 'up' } },
    policies: [VICTIM_POLICY],
    quiescent: true,
  };
}
const victimObs = (o: Partial<PodObservation>): PodObservation => ({
  ...VICTIM,
  uid: 'u1',
  node: 'node-0',
  labels: { app: 'victim' },
  phase: 'Running',
  started: true,
  hostNetwork: false,
  ips: ['10.244.0.5'],
  annotation: 'enabled',
  redirected: true,
  served: true,
  ...o,
});

test('convergence: an annotation that says enabled on a pod without redirection is caught; the truthful one is not', () => {
  expect(props(checkState([victimObs({ redirected: false })], ctxWith([])))).toEqual(['convergence']);
  expect(props(checkState([victimObs({ annotation: undefined })], ctxWith([])))).toEqual(['convergence']);
  expect(checkState([victimObs({})], ctxWith([]))).toEqual([]);
});

test('authorization: a proxy that allows what the policy denies is caught by the reference policy oracle', () => {
  const pods = [victimObs({})];
  const result = {
    outcome: 'established' as const,
    acceptedBy: 'proxy-inbound' as const,
    acceptedIn: VICTIM,
    deliveries: [
      {
        pod: VICTIM,
        port: APP_PORT,
        peer: '203.0.113.10:40000',
        viaProxy: true,
        proxyNode: 'node-0',
        proxyFor: VICTIM,
      },
    ],
    proxyLog: [
      {
        node: 'node-0',
        pod: VICTIM,
        event: 'forwarded' as const,
        direction: 'inbound-plaintext' as const,
        srcIdentity: undefined,
        dstIdentity: undefined,
        allowed: true,
        reason: 'allow-all (broken)',
      },
    ],
  };
  const v = checkConnection({
    ...ctxWith(pods),
    from: { kind: 'outside' },
    to: { kind: 'pod', pod: VICTIM, port: APP_PORT },
    opts: {},
    result,
  });
  expect(props(v)).toEqual(['authorization']);
  // The same delivery with the policy removed is fine.
  expect(
    checkConnection({
      ...ctxWith(pods),
      policies: [],
      from: { kind: 'outside' },
      to: { kind: 'pod', pod: VICTIM, port: APP_PORT },
      opts: {},
      result,
    }),
  ).toEqual([]);
});

test('liveness: a proxy that presents the wrong identity, or a connection that is not delivered, is caught', () => {
  const friend = victimObs({ ...FRIEND, uid: 'u2', labels: { app: 'friend' }, ips: ['10.244.1.5'], node: 'node-0' });
  const pods = [victimObs({}), friend];
  const ctx = {
    ...ctxWith(pods),
    specs: { 'mesh/victim': { tcpPorts: [APP_PORT] }, 'mesh/friend': { serviceAccount: 'friend' } },
  };
  const ok = {
    outcome: 'established' as const,
    acceptedBy: 'proxy-outbound' as const,
    acceptedIn: FRIEND,
    deliveries: [
      { pod: VICTIM, port: APP_PORT, peer: '10.244.1.5:40000', viaProxy: true, proxyNode: 'node-0', proxyFor: VICTIM },
    ],
    proxyLog: [
      {
        node: 'node-0',
        pod: VICTIM,
        event: 'forwarded' as const,
        direction: 'inbound-hbone' as const,
        srcIdentity: 'spiffe://cluster.local/ns/mesh/sa/friend',
        dstIdentity: undefined,
        allowed: true,
        reason: 'allowed',
      },
    ],
  };
  const at = (result: typeof ok | Record<string, unknown>) =>
    checkConnection({
      ...ctx,
      from: { kind: 'pod', pod: FRIEND },
      to: { kind: 'pod', pod: VICTIM, port: APP_PORT },
      opts: {},
      result: result as typeof ok,
    });
  expect(at(ok)).toEqual([]);
  expect(
    props(at({ ...ok, proxyLog: [{ ...ok.proxyLog[0]!, srcIdentity: 'spiffe://cluster.local/ns/mesh/sa/attacker' }] })),
  ).toEqual(['identity', 'liveness']); // friend does not hold the attacker's identity either
  expect(props(at({ ...ok, outcome: 'refused', acceptedBy: undefined, deliveries: [], proxyLog: [] }))).toEqual([
    'liveness',
  ]);
});

// ---- inbound capture needs the destination's OWN node proxy (not any proxy)

test('inbound capture: a delivery made by another node\'s proxy (or a proxy acting for another pod, or an unnamed one) is caught; the old "any proxy" rule passed all of them', () => {
  const friend = victimObs({ ...FRIEND, uid: 'u2', labels: { app: 'friend' }, ips: ['10.244.1.5'], node: 'node-1' });
  const pods = [victimObs({}), friend];
  const ctx = {
    ...ctxWith(pods),
    policies: [],
    components: {
      'node-0': { agent: 'up' as const, proxy: 'up' as const },
      'node-1': { agent: 'up' as const, proxy: 'up' as const },
    },
  };
  const own = {
    pod: VICTIM,
    port: APP_PORT,
    peer: '10.244.1.5:40000',
    viaProxy: true,
    proxyNode: 'node-0',
    proxyFor: VICTIM,
  };
  const at = (d: Record<string, unknown>) => {
    const result = {
      outcome: 'established' as const,
      acceptedBy: 'proxy-outbound' as const,
      acceptedIn: FRIEND,
      deliveries: [d as unknown as typeof own],
      proxyLog: [],
    };
    return checkConnection({
      ...ctx,
      from: { kind: 'pod', pod: FRIEND },
      to: { kind: 'pod', pod: VICTIM, port: APP_PORT },
      opts: {},
      result,
    }).filter((v) => v.property === 'inbound-capture');
  };
  expect(at(own)).toEqual([]);
  // Every broken delivery below says viaProxy: true — all the old property looked at.
  const { proxyFor: _pf, ...ownNoFor } = own;
  void _pf;
  expect(at(ownNoFor)).toEqual([]); // a world that cannot tell the pod is judged on the node alone
  expect(at({ ...own, proxyNode: 'node-1', proxyFor: FRIEND }).map((v) => v.message)).toEqual([
    expect.stringContaining("the node proxy of node-1 made the connection, not the one of the pod's node node-0"),
  ]);
  expect(at({ ...own, proxyFor: ATTACKER }).map((v) => v.message)).toEqual([
    expect.stringContaining('on behalf of mesh/attacker'),
  ]);
  const { proxyNode: _pn, ...unnamed } = own;
  void _pn;
  expect(at(unnamed).map((v) => v.message)).toEqual([expect.stringContaining('did not report which node proxy')]);
});

// Upstream: its nat REDIRECT feeds the capability-less squatter; strict's TPROXY would drop the leg.
test('inbound capture, in a broken world: after a port hijack (upstream), a mesh peer\'s plaintext leg from its own node proxy lands on the app\'s 15006 — caught as the wrong proxy (the old "any proxy" rule saw a proxied delivery and passed it)', async () => {
  const world = await createSimWorld({
    nodes: 2,
    profile: 'upstream',
    kernelVersion: '6.1',
    ipv6: false,
    dnsCapture: true,
    seed: 3,
  });
  try {
    const state = await buildTopology(world, threat('app-nonroot'), {
      profile: 'upstream',
      dnsCapture: true,
      kubeletUid: 0,
    });
    const n0 = world.nodes[0]!;
    await state.setComponent(world, 'proxy', n0, 'down');
    for (const port of [15001, 15006])
      expect(await world.appExec(ATTACKER, { kind: 'listen', port })).toEqual({ ok: true });
    await state.setComponent(world, 'proxy', n0, 'up');
    await world.settle();
    const from: Source = { kind: 'pod', pod: FRIEND };
    const to: Destination = { kind: 'pod', pod: ATTACKER, port: APP_PORT };
    const result = await world.connect(from, to, {});
    const hijacked = result.deliveries.filter((d) => d.pod.name === ATTACKER.name);
    expect(hijacked.length).toBeGreaterThan(0);
    // What the old rule read: a proxy made it, so it passed.
    expect(hijacked.every((d) => d.viaProxy)).toBe(true);
    expect(hijacked.map((d) => d.proxyNode)).toEqual(hijacked.map(() => world.nodes[1]));
    const v = checkConnection({ ...(await state.context(world, true)), from, to, opts: {}, result }).filter(
      (x) => x.property === 'inbound-capture',
    );
    expect(v.map((x) => x.message)).toEqual([
      expect.stringMatching(/mesh\/attacker:15006 .* through the wrong proxy: the node proxy of node-1/),
    ]);
  } finally {
    await world.close();
  }
});

// ---- identity: a delivery authorized under an identity the sender does not hold

test("identity: a delivery authorized as friend for a host process is caught, unless it is root on the node of a friend pod (the node holds its pods' identities)", () => {
  const friendId = 'spiffe://cluster.local/ns/mesh/sa/friend';
  const friend = victimObs({ ...FRIEND, uid: 'u2', labels: { app: 'friend' }, ips: ['10.244.1.5'], node: 'node-1' });
  const ctx = {
    ...ctxWith([victimObs({}), friend]),
    specs: { 'mesh/victim': { tcpPorts: [APP_PORT] }, 'mesh/friend': { serviceAccount: 'friend' } },
    policies: [],
  };
  const result = (srcIdentity: string | undefined) => ({
    outcome: 'established' as const,
    acceptedBy: 'proxy-hbone' as const,
    acceptedIn: VICTIM,
    deliveries: [
      { pod: VICTIM, port: APP_PORT, peer: '10.244.0.9:40000', viaProxy: true, proxyNode: 'node-0', proxyFor: VICTIM },
    ],
    proxyLog: [
      {
        node: 'node-0',
        pod: VICTIM,
        event: 'forwarded' as const,
        direction: 'inbound-hbone' as const,
        srcIdentity,
        dstIdentity: undefined,
        allowed: true,
        reason: 'allowed',
      },
    ],
  });
  const from = (node: string, uid: number) => ({ kind: 'host' as const, node, uid, caps: [] });
  const at = (src: ReturnType<typeof from>, id: string | undefined) =>
    props(
      checkConnection({
        ...ctx,
        from: src,
        to: { kind: 'pod', pod: VICTIM, port: APP_PORT },
        opts: {},
        result: result(id),
      }),
    ).filter((p) => p === 'identity');
  expect(at(from('node-0', 0), friendId)).toEqual(['identity']); // root on node-0; friend runs on node-1
  expect(at(from('node-1', 0), friendId)).toEqual([]); // root on friend's node holds what its proxy holds
  expect(at(from('node-1', 1000), friendId)).toEqual(['identity']); // not root: holds nothing
  expect(at(from('node-0', 0), 'spiffe://cluster.local/ns/mesh/sa/default')).toEqual([]); // the victim's own node
  expect(at(from('node-0', 0), undefined)).toEqual([]); // plaintext carries no identity
});

test("identity, in a broken world: a CA that skips the node check gives root on the victim's node friend's certificate, and the victim lets it in as friend — caught; the same attempt in the healthy world is refused by the CA", async () => {
  const run = async (caIgnoresNodes: boolean) => {
    const world = await createSimWorld(
      { nodes: 2, profile: 'strict', kernelVersion: '6.1', ipv6: false, dnsCapture: true, seed: 3 },
      { caIgnoresNodes },
    );
    try {
      const state = await buildTopology(world, threat('host-root'), {
        profile: 'strict',
        dnsCapture: true,
        kubeletUid: 0,
      });
      await state.applyPolicy(world, VICTIM_POLICY);
      await world.settle();
      const to = { kind: 'pod' as const, pod: VICTIM, port: APP_PORT };
      const result = await world.forgedHbone('node-0', 'spiffe://cluster.local/ns/mesh/sa/friend', 'node-token', to);
      const from = { kind: 'host' as const, node: 'node-0', uid: 0, caps: [] };
      const found = checkConnection({ ...(await state.context(world, true)), from, to, opts: {}, result });
      return { result, found: props(found) };
    } finally {
      await world.close();
    }
  };
  const broken = await run(true);
  expect(broken.result.certificate.kind).toBe('issued');
  expect(broken.result.deliveries.map((d) => d.pod.name)).toEqual(['victim']);
  expect(broken.found).toEqual(['authorization', 'identity']);
  const healthy = await run(false);
  expect(healthy.result.certificate).toEqual({ kind: 'refused', detail: 'request authenticate failure' });
  expect(healthy.result.deliveries).toEqual([]);
  expect(healthy.found).toEqual([]);
});
