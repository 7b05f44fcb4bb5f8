/**
 * The carve-outs ingress-mode, pending-enrollment and policy-propagation are narrow: on
 * hand-built observations (what a world could report), each lets through exactly the traffic
 * its doc names, and every neighbouring case — another protocol, another value, a settled
 * cluster, a pod observed redirected, a proxy that did not allow — is still a violation.
 */
import { test, expect } from '@playwright/test';
import {
  checkConnection,
  inboundCarveOut,
  INGRESS_MODE,
  PENDING_ENROLLMENT,
  ALL_CARVE_OUTS,
  type ClusterContext,
  type ConnectionContext,
  type PropertyName,
} from '../../../scenarios/properties/index.js';
import type { ConnectResult, Delivery, PodObservation, PolicyObject } from '../../../scenarios/world.js';

const VICTIM = { namespace: 'mesh', name: 'victim' };
const SINK = { namespace: 'plain', name: 'sink' };
const PORT = 8080;
const BYPASS = 'ambient.istio.io/bypass-inbound-capture';

const obs = (o: Partial<PodObservation> = {}): PodObservation => ({
  ...VICTIM,
  uid: 'u1',
  node: 'node-0',
  labels: {},
  phase: 'Running',
  started: true,
  hostNetwork: false,
  ips: ['10.244.0.5'],
  annotation: 'enabled',
  redirected: true,
  served: true,
  ...o,
});
const sink = obs({
  ...SINK,
  uid: 'u2',
  ips: ['10.244.1.9'],
  node: 'node-1',
  annotation: undefined,
  redirected: false,
  served: false,
});

const DENY_ALL: PolicyObject = { metadata: { namespace: 'mesh', name: 'deny' }, spec: { action: 'DENY', rules: [{}] } };

function cluster(o: Partial<ClusterContext> & { annotations?: Record<string, string> } = {}): ClusterContext {
  const { annotations, ...rest } = o;
  return {
    mesh: { profile: 'strict', dnsCapture: true },
    pods: [obs(), sink],
    namespaces: { mesh: { 'istio.io/dataplane-mode': 'ambient' }, plain: {} },
    specs: {
      'mesh/victim': { tcpPorts: [PORT], ...(annotations ? { annotations } : {}) },
      'plain/sink': { tcpPorts: [PORT] },
    },
    components: { 'node-0': { agent: 'up', proxy: 'up' }, 'node-1': { agent: 'up', proxy: 'up' } },
    policies: [],
    quiescent: true,
    ...rest,
  };
}

const DIRECT: Delivery = { pod: VICTIM, port: PORT, peer: '203.0.113.10:40000', viaProxy: false };
const OWN_PROXY: Delivery = {
  pod: VICTIM,
  port: PORT,
  peer: '203.0.113.10:40000',
  viaProxy: true,
  proxyNode: 'node-0',
  proxyFor: VICTIM,
};

function inbound(d: Delivery, proxyAllowed?: boolean): ConnectResult {
  return {
    outcome: 'established',
    acceptedBy: d.viaProxy ? 'proxy-inbound' : 'app',
    acceptedIn: VICTIM,
    deliveries: [d],
    proxyLog:
      proxyAllowed === undefined
        ? []
        : [
            {
              node: 'node-0',
              pod: VICTIM,
              event: 'forwarded',
              direction: 'inbound-plaintext',
              srcIdentity: undefined,
              dstIdentity: undefined,
              allowed: proxyAllowed,
              reason: 'test',
            },
          ],
  };
}

function fromOutside(
  ctx: ClusterContext,
  result: ConnectResult,
  extra: Partial<ConnectionContext> = {},
): ConnectionContext {
  return {
    ...ctx,
    from: { kind: 'outside' },
    to: { kind: 'pod', pod: VICTIM, port: PORT },
    opts: { proto: 'tcp' },
    result,
    ...extra,
  };
}

const props = (c: ConnectionContext): PropertyName[] => [...new Set(checkConnection(c).map((v) => v.property))].sort();

test('every carve-out is listed once, by name, with a doc', () => {
  const names = ALL_CARVE_OUTS.map((c) => c.name);
  expect(new Set(names).size).toBe(names.length);
  expect(names).toEqual(expect.arrayContaining(['ingress-mode', 'pending-enrollment', 'policy-propagation']));
  for (const c of ALL_CARVE_OUTS) expect(c.doc.length).toBeGreaterThan(40);
});

test('ingress mode: direct TCP to a pod annotated exactly "true" is the named carve-out; without the annotation it is an inbound and authorization violation', () => {
  const ingress = fromOutside(cluster({ annotations: { [BYPASS]: 'true' } }), inbound(DIRECT));
  expect(inboundCarveOut(ingress, obs(), PORT, DIRECT)).toBe(INGRESS_MODE);
  expect(props(ingress)).toEqual([]);
  // The same with a proxy down is not a fail-closed violation either (inbound is not captured by design).
  expect(
    props({ ...ingress, components: { ...ingress.components, 'node-0': { agent: 'up', proxy: 'down' } } }),
  ).toEqual([]);
  expect(props(fromOutside(cluster(), inbound(DIRECT)))).toEqual(['authorization', 'inbound-capture']);
});

test('ingress mode is narrow: UDP, other values, invalid or virtual-interface companions, and what its own proxy delivers without allowing are still violations', () => {
  const udp = fromOutside(cluster({ annotations: { [BYPASS]: 'true' } }), inbound(DIRECT), { opts: { proto: 'udp' } });
  expect(props(udp)).toEqual(['authorization', 'inbound-capture']);
  const refused: Record<string, string>[] = [
    { [BYPASS]: 'True' },
    { [BYPASS]: 'true ' },
    { [BYPASS]: 'false' },
    { [BYPASS]: 'true', 'ambient.istio.io/dns-capture': 'off' },
    { [BYPASS]: 'true', 'istio.io/reroute-virtual-interfaces': 'eth0,lo' },
    { [BYPASS]: 'true', 'istio.io/reroute-virtual-interfaces': 'tun0' },
  ];
  for (const annotations of refused) {
    expect(props(fromOutside(cluster({ annotations }), inbound(DIRECT))), JSON.stringify(annotations)).toEqual([
      'authorization',
      'inbound-capture',
    ]);
  }
  expect(
    props(
      fromOutside(
        cluster({ annotations: { [BYPASS]: 'true', 'ambient.istio.io/dns-capture': 'false' } }),
        inbound(DIRECT),
      ),
    ),
  ).toEqual([]);
  // Through its own proxy: authorization is still required (inbound HBONE is still policed).
  const proxied = fromOutside(
    cluster({ annotations: { [BYPASS]: 'true' }, policies: [DENY_ALL] }),
    inbound(OWN_PROXY, true),
  );
  expect(inboundCarveOut(proxied, obs(), PORT, OWN_PROXY)).toBeUndefined();
  expect(props(proxied)).toEqual(['authorization']);
  expect(props(fromOutside(cluster({ annotations: { [BYPASS]: 'true' } }), inbound(OWN_PROXY)))).toEqual([
    'authorization',
  ]);
});

test('ingress mode under the upstream profile is read as upstream reads it (strconv.ParseBool; an unparsable DNS value ignored); a virtual-interface list still voids it', () => {
  const up = (annotations: Record<string, string>) =>
    props(fromOutside(cluster({ annotations, mesh: { profile: 'upstream', dnsCapture: true } }), inbound(DIRECT)));
  for (const v of ['true', 'True', 'TRUE', 't', '1']) expect(up({ [BYPASS]: v }), v).toEqual([]);
  expect(up({ [BYPASS]: 'true', 'ambient.istio.io/dns-capture': 'off' })).toEqual([]);
  for (const v of ['yes', ' true', 'false', '0'])
    expect(up({ [BYPASS]: v }), v).toEqual(['authorization', 'inbound-capture']);
  expect(up({ [BYPASS]: 'True', 'istio.io/reroute-virtual-interfaces': 'tun0' })).toEqual([
    'authorization',
    'inbound-capture',
  ]);
});

test('ingress mode leaves outbound capture alone: the ingress-mode pod reaching another app directly is an outbound violation', () => {
  const result: ConnectResult = {
    outcome: 'established',
    acceptedBy: 'app',
    acceptedIn: SINK,
    deliveries: [{ pod: SINK, port: PORT, peer: '10.244.0.5:40000', viaProxy: false }],
    proxyLog: [],
  };
  const c: ConnectionContext = {
    ...cluster({ annotations: { [BYPASS]: 'true' } }),
    from: { kind: 'pod', pod: VICTIM },
    to: { kind: 'pod', pod: SINK, port: PORT },
    opts: {},
    result,
  };
  expect(props(c)).toEqual(['outbound-capture']);
});

test('pending enrollment: a relabelled pod observed unredirected right before the attempt, before any settle, is the named carve-out — in and out; every neighbour is a violation', () => {
  const pending = cluster({ quiescent: false, relabelledSinceSettle: new Set(['mesh/victim']) });
  const before = [obs({ redirected: false, annotation: undefined, served: false }), sink];
  const c = fromOutside(pending, inbound(DIRECT), { podsBefore: before });
  expect(inboundCarveOut(c, obs(), PORT, DIRECT)).toBe(PENDING_ENROLLMENT);
  expect(props(c)).toEqual([]);
  const caught = ['authorization', 'inbound-capture'];
  expect(props({ ...c, podsBefore: [obs(), sink] })).toEqual(caught); // it was redirected already
  expect(props({ ...c, podsBefore: undefined } as ConnectionContext)).toEqual(caught); // nobody looked before
  expect(props({ ...c, quiescent: true })).toEqual(caught); // a settle closed the window
  expect(props({ ...c, relabelledSinceSettle: new Set(['mesh/other']) })).toEqual(caught); // nobody relabelled it
  // Outbound: the pending pod's own traffic before its rules exist.
  const out: ConnectionContext = {
    ...pending,
    podsBefore: before,
    from: { kind: 'pod', pod: VICTIM },
    to: { kind: 'pod', pod: SINK, port: PORT },
    opts: {},
    result: {
      outcome: 'established',
      acceptedBy: 'app',
      acceptedIn: SINK,
      deliveries: [{ pod: SINK, port: PORT, peer: '10.244.0.5:40000', viaProxy: false }],
      proxyLog: [],
    },
  };
  expect(props(out)).toEqual([]);
  expect(props({ ...out, quiescent: true })).toEqual(['outbound-capture']);
});

test('policy propagation: before a settle a delivery the previous policy set allows is not a violation; one every set since the settle denies is, and after a settle only the current set counts', () => {
  const allowedByProxy = inbound(OWN_PROXY, true);
  const changed = cluster({ quiescent: false, policies: [DENY_ALL], policySetsSinceSettle: [[], [DENY_ALL]] });
  expect(props(fromOutside(changed, allowedByProxy))).toEqual([]);
  expect(props(fromOutside({ ...changed, policySetsSinceSettle: [[DENY_ALL], [DENY_ALL]] }, allowedByProxy))).toEqual([
    'authorization',
  ]);
  expect(props(fromOutside({ ...changed, quiescent: true }, allowedByProxy))).toEqual(['authorization']);
  expect(props(fromOutside({ ...changed, policySetsSinceSettle: [] }, allowedByProxy))).toEqual(['authorization']);
});

test('virtual-interface-reroute: a pod whose owner reroutes its interfaces gets inbound under its own identity; another identity, another annotation set or another destination is still an identity violation', () => {
  const own = 'spiffe://cluster.local/ns/mesh/sa/default';
  const rerouted = (srcIdentity: string): ConnectResult => ({
    ...inbound(OWN_PROXY, true),
    acceptedBy: 'proxy-outbound',
    proxyLog: [
      {
        node: 'node-0',
        pod: VICTIM,
        event: 'forwarded',
        direction: 'inbound-hbone',
        srcIdentity,
        dstIdentity: undefined,
        allowed: true,
        reason: 'test',
      },
    ],
  });
  const identityOnly = (c: ConnectionContext): PropertyName[] => props(c).filter((p) => p === 'identity');
  const vif = cluster({ annotations: { 'istio.io/reroute-virtual-interfaces': 'eth0' } });
  expect(identityOnly(fromOutside(vif, rerouted(own)))).toEqual([]);
  expect(identityOnly(fromOutside(vif, rerouted('spiffe://cluster.local/ns/mesh/sa/friend')))).toEqual(['identity']);
  expect(identityOnly(fromOutside(cluster(), rerouted(own)))).toEqual(['identity']);
  // The same identity delivered to another pod (the sink) is not the owner's own inbound.
  const toSink: ConnectResult = {
    ...rerouted(own),
    deliveries: [{ ...OWN_PROXY, pod: SINK, proxyNode: 'node-1', proxyFor: SINK }],
    proxyLog: [{ ...rerouted(own).proxyLog[0]!, node: 'node-1', pod: SINK }],
  };
  expect(identityOnly(fromOutside(vif, toSink, { to: { kind: 'pod', pod: SINK, port: PORT } }))).toEqual(['identity']);
});
