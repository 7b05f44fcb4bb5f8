/**
 * Service-account tokens in the sim API (sim/kube/token-authority.ts) and TokenReview through
 * every adapter of the Kube port: the sim's in-process one, and client-node over the HTTP facade.
 * A bound token is valid until it expires, only while its pod exists with the same uid, and only
 * for the audiences it was minted for. The mesh CA's decisions (impl/mesh-ca/) then run on the
 * answer: the node proxy's token gets its own node's identities, and nothing of another node.
 */
import { test, expect } from '@playwright/test';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { KubeConfig } from '@kubernetes/client-node';
import { ApiStore } from '../../../sim/kube/store.js';
import { API_AUDIENCE } from '../../../sim/kube/token-authority.js';
import { SimKubeApi } from '../../../sim/kube/sim-kube-api.js';
import { facadeKubeconfig, startKubeApiFacade } from '../../../sim/kube/http-facade.js';
import { VirtualClock } from '../../../sim/time/virtual-clock.js';
import { ClientNodeKubeApi } from '../../../impl/linux/kube-client-node.js';
import { isKubeApiError, type KubeApi } from '../../../impl/host/kube.js';
import { callerFromTokenReview } from '../../../impl/mesh-ca/caller.js';
import { authorizeImpersonation, podFacts } from '../../../impl/mesh-ca/node-authorizer.js';
import { clusterApi } from '../mesh-ca/harness.js';

function world(): { clock: VirtualClock; store: ApiStore; api: SimKubeApi } {
  const clock = new VirtualClock();
  const { store } = clusterApi(clock);
  return { clock, store, api: new SimKubeApi(store, clock) };
}

function proxyToken(store: ApiStore, audiences = ['istio-ca'], expirationSeconds = 3600): string {
  const p = store.get('Pod', 'proxy-node-0', 'ambient-lab-system');
  return store.tokens.issue({
    namespace: 'ambient-lab-system',
    serviceAccount: 'ambient-lab-proxy',
    pod: { name: 'proxy-node-0', uid: p.metadata!.uid!, node: 'node-0' },
    audiences,
    expirationSeconds,
  });
}

test('a bound token is reviewed as its pod-bound service account, for its audiences, until it expires', async () => {
  const { clock, store, api } = world();
  const token = proxyToken(store);
  const ok = await api.reviewToken(token, ['istio-ca']);
  expect(ok).toMatchObject({
    authenticated: true,
    audiences: ['istio-ca'],
    user: {
      username: 'system:serviceaccount:ambient-lab-system:ambient-lab-proxy',
      extra: {
        'authentication.kubernetes.io/pod-name': ['proxy-node-0'],
        'authentication.kubernetes.io/node-name': ['node-0'],
      },
    },
  });
  // Another audience, or the API's own (none asked), is not this token's.
  expect(await api.reviewToken(token, ['other'])).toMatchObject({
    authenticated: false,
    error: expect.stringMatching(/token audiences \["istio-ca"\] is invalid for the target audiences \["other"\]/),
  });
  expect((await api.reviewToken(token, [])).authenticated).toBe(false);
  expect((await api.reviewToken(proxyToken(store, []), [])).audiences).toEqual([API_AUDIENCE]);
  expect(await api.reviewToken('sim-sa-token.forged', ['istio-ca'])).toMatchObject({
    authenticated: false,
    error: 'invalid bearer token',
  });
  clock.advance(3600 * 1000);
  expect(await api.reviewToken(token, ['istio-ca'])).toMatchObject({
    authenticated: false,
    error: expect.stringMatching(/token has expired/),
  });
  expect(() => proxyToken(store, ['istio-ca'], 60)).toThrow(/less than 10 minutes/);
});

test('a token is dead once its pod is gone, and stays dead for a pod re-created under the same name', async () => {
  const { store, api } = world();
  const token = proxyToken(store);
  const old = store.get('Pod', 'proxy-node-0', 'ambient-lab-system');
  store.delete('Pod', 'proxy-node-0', 'ambient-lab-system');
  expect((await api.reviewToken(token, ['istio-ca'])).error).toMatch(/pods "proxy-node-0" not found/);
  store.create('Pod', { ...old, metadata: { name: 'proxy-node-0', namespace: 'ambient-lab-system' } });
  expect((await api.reviewToken(token, ['istio-ca'])).error).toMatch(/does not match the UID in record/);
});

test('TokenReview over HTTP: client-node against the facade gets the same answers; an empty token is 422', async () => {
  const { store } = world();
  const facade = await startKubeApiFacade(store);
  const dir = mkdtempSync(join(tmpdir(), 'al-kube-'));
  try {
    const kc = new KubeConfig();
    facadeKubeconfig(facade.url, join(dir, 'kubeconfig'));
    kc.loadFromFile(join(dir, 'kubeconfig'));
    const api: KubeApi = new ClientNodeKubeApi(kc);
    const token = proxyToken(store);
    expect(await api.reviewToken(token, ['istio-ca'])).toEqual(store.tokens.review(token, ['istio-ca']));
    expect((await api.reviewToken(token, ['other'])).authenticated).toBe(false);
    const e = await api.reviewToken('', ['istio-ca']).then(
      () => undefined,
      (x: unknown) => x,
    );
    expect(isKubeApiError(e) && e.code).toBe(422);
  } finally {
    await facade.close();
    rmSync(dir, { recursive: true, force: true });
  }
});

test("the mesh CA's decisions on a review: the node proxy's token gets node-0's identities, not node-1's", async () => {
  const { store, api } = world();
  const review = await api.reviewToken(proxyToken(store), ['istio-ca']);
  const caller = callerFromTokenReview(review, 'istio-ca');
  expect(caller.ok).toBe(true);
  if (!caller.ok) return;
  const pods = store.list('Pod').items.map(podFacts);
  const view = {
    get: (ns: string, name: string) => pods.find((p) => p.namespace === ns && p.name === name),
    onNode: (node: string) => pods.filter((p) => p.nodeName === node),
  };
  const cfg = { trustDomain: 'cluster.local', trustedNodeAccounts: new Set(['ambient-lab-system/ambient-lab-proxy']) };
  expect(authorizeImpersonation(cfg, view, caller.caller, 'spiffe://cluster.local/ns/shop/sa/web').ok).toBe(true);
  const other = authorizeImpersonation(cfg, view, caller.caller, 'spiffe://cluster.local/ns/shop/sa/db');
  expect(other).toEqual({ ok: false, reason: 'no pod of shop/db runs on node node-0' });
});

test('TokenRequest over HTTP (as kubelet asks for a projected token): bound to an existing pod of that account, naming its node', async () => {
  const clock = new VirtualClock();
  const { store } = clusterApi(clock);
  const facade = await startKubeApiFacade(store);
  const post = async (path: string, body: unknown, method = 'POST') => {
    const r = await fetch(`${facade.url}${path}`, {
      method,
      headers: { 'content-type': 'application/json' },
      ...(method === 'POST' ? { body: JSON.stringify(body) } : {}),
    });
    return { status: r.status, body: (await r.json()) as { status?: { token?: string }; message?: string } };
  };
  const uid = store.list('Pod', { namespace: 'ambient-lab-system' }).items[0]!.metadata!.uid!;
  const path = '/api/v1/namespaces/ambient-lab-system/serviceaccounts/ambient-lab-proxy/token';
  const spec = (ref: Record<string, unknown>) => ({
    spec: { audiences: ['istio-ca'], expirationSeconds: 43200, boundObjectRef: { kind: 'Pod', ...ref } },
  });
  try {
    const ok = await post(path, spec({ name: 'proxy-node-0', uid }));
    expect(ok.status).toBe(201);
    const review = store.tokens.review(ok.body.status!.token!, ['istio-ca']);
    expect(review.authenticated).toBe(true);
    expect(review.user?.username).toBe('system:serviceaccount:ambient-lab-system:ambient-lab-proxy');
    expect(review.user?.extra?.['authentication.kubernetes.io/node-name']).toEqual(['node-0']);
    expect((await post(path, spec({ name: 'proxy-node-0', uid: 'other' }))).body.message).toMatch(/does not match/);
    expect((await post(path, spec({ name: 'gone' }))).status).toBe(404);
    // web-0 runs as shop/web: no proxy token bound to it
    const wrongSa = await post(
      '/api/v1/namespaces/shop/serviceaccounts/ambient-lab-proxy/token',
      spec({ name: 'web-0' }),
    );
    expect([wrongSa.status, wrongSa.body.message]).toEqual([422, expect.stringMatching(/runs as service account web/)]);
    expect(
      (await post(path, { spec: { expirationSeconds: 60, boundObjectRef: { kind: 'Pod', name: 'proxy-node-0' } } }))
        .status,
    ).toBe(422);
    expect((await post(path, undefined, 'GET')).status).toBe(405);
  } finally {
    await facade.close();
  }
});
