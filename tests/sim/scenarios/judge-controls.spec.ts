/**
 * Positive controls for the judges themselves (issue 16, "search power"): hand-made
 * observations a broken world or a broken mesh could report — an established connection with no
 * first hop, a first hop of 'other' (a host socket or stray listener), a delivery that skipped
 * the proxy, a pod whose CNI ADD the agent refused running unredirected — must each be reported
 * as a violation by the property that owns it. Before this change an attempt at an enrolled pod
 * with no first hop, or one taken by 'other' without a delivery, passed inbound capture and
 * authorization silently, and an outbound attempt with no first hop passed when a proxy made a
 * delivery. Each case is paired with its captured neighbour, which must stay clean.
 */
import { test, expect } from '@playwright/test';
import {
  checkConnection,
  checkState,
  type ClusterContext,
  type ConnectionContext,
  type PropertyName,
} from '../../../scenarios/properties/index.js';
import type { ConnectResult, Delivery, PodObservation, PodRef } from '../../../scenarios/world.js';

const VICTIM: PodRef = { namespace: 'mesh', name: 'victim' };
const CLIENT: PodRef = { namespace: 'mesh', name: 'client' };
const PORT = 8080;

const obs = (ref: PodRef, o: Partial<PodObservation> = {}): PodObservation => ({
  ...ref,
  uid: `uid-${ref.name}`,
  node: 'node-0',
  labels: {},
  phase: 'Running',
  started: true,
  hostNetwork: false,
  ips: [ref.name === 'victim' ? '10.244.0.5' : '10.244.0.6'],
  annotation: 'enabled',
  redirected: true,
  served: true,
  ...o,
});

function cluster(o: Partial<ClusterContext> = {}): ClusterContext {
  return {
    mesh: { profile: 'strict', dnsCapture: true },
    pods: [obs(VICTIM), obs(CLIENT)],
    namespaces: { mesh: { 'istio.io/dataplane-mode': 'ambient' } },
    specs: { 'mesh/victim': { tcpPorts: [PORT] }, 'mesh/client': { tcpPorts: [PORT] } },
    components: { 'node-0': { agent: 'up', proxy: 'up' }, 'node-1': { agent: 'up', proxy: 'up' } },
    policies: [],
    quiescent: true,
    ...o,
  };
}

const ALLOWED_LOG = [
  {
    node: 'node-0',
    pod: VICTIM,
    event: 'forwarded' as const,
    direction: 'inbound-plaintext' as const,
    srcIdentity: undefined,
    dstIdentity: undefined,
    allowed: true,
    reason: 'test',
  },
];
const VIA_OWN_PROXY: Delivery = {
  pod: VICTIM,
  port: PORT,
  peer: '203.0.113.10:40000',
  viaProxy: true,
  proxyNode: 'node-0',
  proxyFor: VICTIM,
};
const DIRECT: Delivery = { pod: VICTIM, port: PORT, peer: '203.0.113.10:40000', viaProxy: false };

const result = (o: Partial<ConnectResult>): ConnectResult => ({
  outcome: 'established',
  acceptedBy: undefined,
  deliveries: [],
  proxyLog: [],
  ...o,
});

function fromOutside(
  r: ConnectResult,
  to: ConnectionContext['to'] = { kind: 'pod', pod: VICTIM, port: PORT },
  ctx = cluster(),
): ConnectionContext {
  return { ...ctx, from: { kind: 'outside' }, to, opts: { proto: 'tcp' }, result: r };
}
function fromClient(r: ConnectResult, ctx = cluster()): ConnectionContext {
  return {
    ...ctx,
    from: { kind: 'pod', pod: CLIENT },
    to: { kind: 'ip', ip: '192.0.2.10', port: PORT },
    opts: { proto: 'tcp' },
    result: r,
  };
}

const props = (c: ConnectionContext): PropertyName[] => [...new Set(checkConnection(c).map((v) => v.property))].sort();

test('control: the captured inbound attempt (own proxy first, allowed, delivered via the proxy) is clean', () => {
  expect(
    props(
      fromOutside(
        result({ acceptedBy: 'proxy-inbound', acceptedIn: VICTIM, deliveries: [VIA_OWN_PROXY], proxyLog: ALLOWED_LOG }),
      ),
    ),
  ).toEqual([]);
});

test('inbound: established with no first hop is an inbound-capture and authorization violation', () => {
  const c = fromOutside(result({ acceptedBy: undefined }));
  expect(props(c)).toEqual(['authorization', 'inbound-capture']);
  expect(checkConnection(c).find((v) => v.property === 'inbound-capture')?.message).toMatch(/no first hop/);
  // Also when the attempt named the pod by address (Destination 'ip').
  expect(props(fromOutside(result({ acceptedBy: undefined }), { kind: 'ip', ip: '10.244.0.5', port: PORT }))).toEqual([
    'authorization',
    'inbound-capture',
  ]);
});

test('inbound: a first hop of "other" (a host socket, a stray listener) without a delivery is a violation', () => {
  for (const acceptedIn of [VICTIM, { node: 'node-0' }]) {
    const c = fromOutside(result({ acceptedBy: 'other', acceptedIn }));
    expect(props(c), JSON.stringify(acceptedIn)).toEqual(['authorization', 'inbound-capture']);
    expect(checkConnection(c)[0]?.message).toMatch(/first hop was other/);
  }
});

test('inbound: a delivery that skipped the proxy is a violation; the same pod outside the mesh is not judged', () => {
  expect(props(fromOutside(result({ acceptedBy: 'app', acceptedIn: VICTIM, deliveries: [DIRECT] })))).toEqual([
    'authorization',
    'inbound-capture',
  ]);
  const unenrolled = cluster({
    pods: [obs(VICTIM, { annotation: undefined, redirected: false, served: false }), obs(CLIENT)],
    namespaces: { mesh: {} },
  });
  expect(props(fromOutside(result({ acceptedBy: 'other', acceptedIn: VICTIM }), undefined, unenrolled))).toEqual([]);
  expect(props(fromOutside(result({ acceptedBy: undefined }), undefined, unenrolled))).toEqual([]);
});

test('inbound: failed attempts have no first hop to judge', () => {
  for (const outcome of ['refused', 'timeout', 'unreachable', 'not-delivered', 'error'] as const) {
    expect(props(fromOutside(result({ outcome, acceptedBy: undefined }))), outcome).toEqual([]);
  }
});

test('inbound: with the proxy down the same observations are fail-closed violations too', () => {
  const down = cluster({
    components: { 'node-0': { agent: 'up', proxy: 'down' }, 'node-1': { agent: 'up', proxy: 'up' } },
  });
  expect(props(fromOutside(result({ acceptedBy: 'other', acceptedIn: VICTIM }), undefined, down))).toEqual([
    'authorization',
    'fail-closed',
    'inbound-capture',
  ]);
  expect(props(fromOutside(result({ acceptedBy: undefined }), undefined, down))).toEqual([
    'authorization',
    'fail-closed',
    'inbound-capture',
  ]);
});

test('outbound: the captured attempt (own proxy first) is clean', () => {
  expect(props(fromClient(result({ acceptedBy: 'proxy-outbound', acceptedIn: CLIENT })))).toEqual([]);
});

test('outbound: established with no first hop is uncaptured, even when a proxy made a delivery later', () => {
  expect(props(fromClient(result({ acceptedBy: undefined })))).toEqual(['outbound-capture']);
  const proxied: Delivery = { ...VIA_OWN_PROXY, peer: '10.244.0.6:40000' };
  // Before this change this passed: the deliveries were via a proxy and no first hop was checked.
  const c = fromClient(result({ acceptedBy: undefined, deliveries: [proxied], proxyLog: ALLOWED_LOG }));
  expect(props(c)).toContain('outbound-capture');
  expect(checkConnection(c).find((v) => v.property === 'outbound-capture')?.message).toMatch(/no first hop/);
});

test('outbound: a first hop of "other" (a host socket) or the app is a violation; a delivery not via a proxy too', () => {
  expect(props(fromClient(result({ acceptedBy: 'other', acceptedIn: { node: 'node-0' } })))).toEqual([
    'outbound-capture',
  ]);
  expect(props(fromClient(result({ acceptedBy: 'proxy-outbound', acceptedIn: VICTIM })))).toEqual(['outbound-capture']);
  const udp: ConnectionContext = {
    ...fromClient(result({ outcome: 'delivered', acceptedBy: undefined, deliveries: [DIRECT] })),
    opts: { proto: 'udp' },
  };
  expect(props(udp)).toEqual(expect.arrayContaining(['outbound-capture']));
});

test('fail-closed: a selected pod whose CNI ADD the agent refused must not run unredirected; redirected, not started or unselected is fine', () => {
  const refused = new Set(['uid-victim']);
  const running = obs(VICTIM, { annotation: undefined, redirected: false, served: false });
  const ctx = cluster({ pods: [running, obs(CLIENT)], addRefusedByAgent: refused, quiescent: false });
  const v = checkState(ctx.pods, ctx, { only: ['fail-closed'] });
  expect(v.map((x) => x.property)).toEqual(['fail-closed']);
  expect(v[0]?.message).toMatch(/CNI ADD refused by the node agent/);
  for (const pod of [obs(VICTIM), obs(VICTIM, { started: false, redirected: false })]) {
    expect(checkState([pod], { ...ctx, pods: [pod] }, { only: ['fail-closed'] })).toEqual([]);
  }
  const unselected = { ...ctx, namespaces: { mesh: {} } };
  expect(checkState([running], unselected, { only: ['fail-closed'] })).toEqual([]);
  // Without the fact the same pod is not judged by fail-closed (convergence owns a settled cluster).
  expect(checkState([running], { ...ctx, addRefusedByAgent: new Set() }, { only: ['fail-closed'] })).toEqual([]);
});
