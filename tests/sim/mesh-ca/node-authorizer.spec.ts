/**
 * The mesh CA's caller and node authorization (impl/mesh-ca/): who a TokenReview answer names,
 * and whether that caller may have a certificate for an identity — only the node proxy's service
 * account, only for identities of pods on its own node (istiod's ClusterNodeAuthorizer).
 */
import { test, expect } from '@playwright/test';
import { callerFromTokenReview, type Caller } from '../../../impl/mesh-ca/caller.js';
import type { TokenReviewStatus } from '../../../impl/host/kube.js';
import {
  authorizeImpersonation,
  podFacts,
  type PodFacts,
  type PodView,
} from '../../../impl/mesh-ca/node-authorizer.js';
import { parseSpiffeId } from '../../../impl/api/identity.js';

const AUD = 'istio-ca';
const PROXY_SA = 'ambient-lab-system/ambient-lab-proxy';

function review(over: Partial<TokenReviewStatus> = {}, extra: Record<string, string[]> = {}): TokenReviewStatus {
  return {
    authenticated: true,
    audiences: [AUD],
    user: {
      username: 'system:serviceaccount:ambient-lab-system:ambient-lab-proxy',
      uid: 'sa-uid',
      extra: {
        'authentication.kubernetes.io/pod-name': ['proxy-node-0'],
        'authentication.kubernetes.io/pod-uid': ['uid-proxy-0'],
        ...extra,
      },
    },
    ...over,
  };
}

test('a TokenReview names the caller only for an authenticated, audience-scoped, pod-bound service-account token', () => {
  expect(callerFromTokenReview(review(), AUD)).toEqual({
    ok: true,
    caller: {
      namespace: 'ambient-lab-system',
      serviceAccount: 'ambient-lab-proxy',
      podName: 'proxy-node-0',
      podUid: 'uid-proxy-0',
      nodeName: undefined,
    },
  });
  const withNode = callerFromTokenReview(review({}, { 'authentication.kubernetes.io/node-name': ['node-0'] }), AUD);
  expect(withNode.ok && withNode.caller.nodeName).toBe('node-0');
  const refused: [string, TokenReviewStatus, RegExp][] = [
    [
      'expired or forged',
      review({ authenticated: false, error: 'token has expired' }),
      /not authenticated: token has expired/,
    ],
    ['another audience', review({ audiences: [] }), /not valid for audience "istio-ca"/],
    ['a user', review({ user: { username: 'alice', extra: {} } }), /"alice" is not a service account/],
    [
      'not bound to a pod',
      review({ user: { username: 'system:serviceaccount:ambient-lab-system:ambient-lab-proxy', extra: {} } }),
      /not bound to a pod/,
    ],
    ['two pod names', review({}, { 'authentication.kubernetes.io/pod-name': ['a', 'b'] }), /not bound to a pod/],
    ['no status at all', {}, /not authenticated/],
  ];
  for (const [why, status, reason] of refused) {
    const r = callerFromTokenReview(status, AUD);
    expect(r.ok, why).toBe(false);
    if (!r.ok) expect(r.reason, why).toMatch(reason);
  }
});

/** Pods of a two-node cluster: each node's proxy, and workloads. */
function cluster(extra: PodFacts[] = []): PodView {
  const pods: PodFacts[] = [
    pod('ambient-lab-system', 'proxy-node-0', 'ambient-lab-proxy', 'node-0', 'uid-proxy-0'),
    pod('ambient-lab-system', 'proxy-node-1', 'ambient-lab-proxy', 'node-1', 'uid-proxy-1'),
    pod('shop', 'web-0', 'web', 'node-0'),
    pod('shop', 'db-0', 'db', 'node-1'),
    { ...pod('shop', 'batch-0', 'batch', 'node-0'), phase: 'Failed' },
    ...extra,
  ];
  return {
    get: (ns, name) => pods.find((p) => p.namespace === ns && p.name === name),
    onNode: (node) => pods.filter((p) => p.nodeName === node),
  };
}

function pod(namespace: string, name: string, serviceAccount: string, nodeName: string, uid = `uid-${name}`): PodFacts {
  return { namespace, name, uid, serviceAccount, nodeName, phase: 'Running' };
}

const CFG = { trustDomain: 'cluster.local', trustedNodeAccounts: new Set([PROXY_SA]) };
const proxy0: Caller = {
  namespace: 'ambient-lab-system',
  serviceAccount: 'ambient-lab-proxy',
  podName: 'proxy-node-0',
  podUid: 'uid-proxy-0',
  nodeName: undefined,
};

test("the node proxy gets identities of its own node's pods, and nothing else", () => {
  // positive: a pod of shop/web runs on node-0
  expect(authorizeImpersonation(CFG, cluster(), proxy0, 'spiffe://cluster.local/ns/shop/sa/web')).toEqual({
    ok: true,
    identity: { trustDomain: 'cluster.local', namespace: 'shop', serviceAccount: 'web' },
    node: 'node-0',
  });
  const denied: [string, Caller, string, RegExp][] = [
    // the threat: a compromised node asks for a pod of another node
    ['another node', proxy0, 'spiffe://cluster.local/ns/shop/sa/db', /no pod of shop\/db runs on node node-0/],
    [
      'only a failed pod',
      proxy0,
      'spiffe://cluster.local/ns/shop/sa/batch',
      /no pod of shop\/batch runs on node node-0/,
    ],
    ['no such account', proxy0, 'spiffe://cluster.local/ns/kube-system/sa/admin', /no pod of kube-system\/admin/],
    [
      'a workload asking for another',
      { ...proxy0, namespace: 'shop', serviceAccount: 'web', podName: 'web-0', podUid: 'uid-web-0' },
      'spiffe://cluster.local/ns/shop/sa/web',
      /caller shop\/web .* is not allowed to ask for other identities/,
    ],
    [
      'another trust domain',
      proxy0,
      'spiffe://evil.example/ns/shop/sa/web',
      /not in this CA's trust domain cluster.local/,
    ],
    ['not a SPIFFE ID', proxy0, 'spiffe://cluster.local/ns/shop/sa/web/extra', /is not a SPIFFE ID/],
    [
      'a replayed token of a re-created pod',
      { ...proxy0, podUid: 'uid-old' },
      'spiffe://cluster.local/ns/shop/sa/web',
      /now uid uid-proxy-0, not the token's uid-old/,
    ],
    [
      'a token of a pod that is gone',
      { ...proxy0, podName: 'proxy-node-9' },
      'spiffe://cluster.local/ns/shop/sa/web',
      /does not exist/,
    ],
    [
      'a token bound to another node',
      { ...proxy0, nodeName: 'node-1' },
      'spiffe://cluster.local/ns/shop/sa/web',
      /bound to node node-1, its pod runs on node-0/,
    ],
  ];
  for (const [why, caller, requested, reason] of denied) {
    const r = authorizeImpersonation(CFG, cluster(), caller, requested);
    expect(r.ok, why).toBe(false);
    if (!r.ok) expect(r.reason, why).toMatch(reason);
  }
  // A pod that moves to node-0 makes its identity available there.
  const moved = cluster([pod('shop', 'db-1', 'db', 'node-0')]);
  expect(authorizeImpersonation(CFG, moved, proxy0, 'spiffe://cluster.local/ns/shop/sa/db').ok).toBe(true);
});

test('podFacts reads what node authorization needs from an API pod; SPIFFE IDs parse strictly', () => {
  expect(
    podFacts({
      metadata: { namespace: 'shop', name: 'web-0', uid: 'u1' },
      spec: { serviceAccountName: 'web', nodeName: 'node-0', containers: [] },
      status: { phase: 'Running' },
    }),
  ).toEqual({
    namespace: 'shop',
    name: 'web-0',
    uid: 'u1',
    serviceAccount: 'web',
    nodeName: 'node-0',
    phase: 'Running',
  });
  expect(parseSpiffeId('spiffe://cluster.local/ns/shop/sa/web')).toEqual({
    trustDomain: 'cluster.local',
    namespace: 'shop',
    serviceAccount: 'web',
  });
  for (const bad of [
    'spiffe://cluster.local/ns/Shop/sa/web',
    'spiffe://cluster.local/ns/shop/sa/',
    'spiffe://cluster.local:443/ns/shop/sa/web',
    'https://cluster.local/ns/shop/sa/web',
    'spiffe://cluster.local/ns/shop/sa/web?x=1',
    'spiffe://cluster.local/sa/web/ns/shop',
  ])
    expect(parseSpiffeId(bad), bad).toBeUndefined();
});
