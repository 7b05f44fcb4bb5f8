/** The HTTP facade exercised with @kubernetes/client-node 1.4.0 itself (loopback only). */
import { test, expect } from '@playwright/test';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import {
  ApiException,
  AppsV1Api,
  CoreV1Api,
  CustomObjectsApi,
  KubeConfig,
  PatchStrategy,
  makeInformer,
  setHeaderOptions,
  type V1DaemonSet,
  type V1Pod,
} from '@kubernetes/client-node';
import { ApiStore } from '../../../sim/kube/store.js';
import { facadeKubeconfig, startKubeApiFacade, type KubeApiFacade } from '../../../sim/kube/http-facade.js';
import { SystemClock } from '../../../impl/linux/clock.js';
import { SeededRandom } from '../../../sim/time/seeded-random.js';
import { ClientNodeKubeApi } from '../../../impl/linux/kube-client-node.js';
import { isKubeApiError } from '../../../impl/host/kube.js';

let store: ApiStore;
let facade: KubeApiFacade;
let kc: KubeConfig;
let dir: string;

test.beforeEach(async () => {
  store = new ApiStore({ clock: new SystemClock(), random: new SeededRandom(3) });
  store.create('Namespace', { metadata: { name: 'default' } });
  facade = await startKubeApiFacade(store);
  dir = mkdtempSync(join(tmpdir(), 'al-kube-'));
  kc = new KubeConfig();
  facadeKubeconfig(facade.url, join(dir, 'kubeconfig'));
  kc.loadFromFile(join(dir, 'kubeconfig'));
});
test.afterEach(async () => {
  await facade.close();
  rmSync(dir, { recursive: true, force: true });
});

const body = (name: string, labels: Record<string, string> = {}): V1Pod => ({
  apiVersion: 'v1',
  kind: 'Pod',
  metadata: { name, namespace: 'default', labels },
  spec: { containers: [{ name: 'app', image: 'app:1' }] },
});

async function status(p: Promise<unknown>): Promise<number | undefined> {
  try {
    await p;
  } catch (e) {
    if (e instanceof ApiException) return e.code;
    throw e;
  }
  return undefined;
}

test('kubeconfig: http server with insecure-skip-tls-verify, loaded by client-node', () => {
  expect(kc.getCurrentCluster()?.server).toBe(facade.url);
  expect(kc.getCurrentCluster()?.skipTLSVerify).toBe(true);
  expect(facade.url).toMatch(/^http:\/\/127\.0\.0\.1:\d+$/);
});

test('create, get, list with selectors, delete through CoreV1Api', async () => {
  const core = kc.makeApiClient(CoreV1Api);
  const created = await core.createNamespacedPod({ namespace: 'default', body: body('a', { app: 'web' }) });
  expect(created.metadata?.uid).toBeTruthy();
  expect(created.status?.phase).toBe('Pending');
  await core.createNamespacedPod({ namespace: 'default', body: body('b', { app: 'db' }) });
  const got = await core.readNamespacedPod({ name: 'a', namespace: 'default' });
  expect(got.metadata?.resourceVersion).toBe(created.metadata?.resourceVersion);
  const web = await core.listNamespacedPod({ namespace: 'default', labelSelector: 'app in (web)' });
  expect(web.items.map((p) => p.metadata?.name)).toEqual(['a']);
  expect(web.metadata?.resourceVersion).toBe(store.resourceVersion());
  const all = await core.listPodForAllNamespaces({ fieldSelector: 'metadata.name=b' });
  expect(all.items.map((p) => p.metadata?.name)).toEqual(['b']);
  await core.deleteNamespacedPod({ name: 'a', namespace: 'default' });
  expect(await status(core.readNamespacedPod({ name: 'a', namespace: 'default' }))).toBe(404);
});

test('merge patch of an annotation, and of status via /status; strategic merge is applied as merge', async () => {
  const core = kc.makeApiClient(CoreV1Api);
  await core.createNamespacedPod({ namespace: 'default', body: body('a') });
  const merge = setHeaderOptions('Content-Type', PatchStrategy.MergePatch);
  const annotated = await core.patchNamespacedPod(
    {
      name: 'a',
      namespace: 'default',
      body: { metadata: { annotations: { 'ambient.istio.io/redirection': 'enabled' } }, status: { phase: 'Failed' } },
    },
    merge,
  );
  expect(annotated.metadata?.annotations).toEqual({ 'ambient.istio.io/redirection': 'enabled' });
  expect(annotated.status?.phase).toBe('Pending'); // .status ignored on the object
  const running = await core.patchNamespacedPodStatus(
    { name: 'a', namespace: 'default', body: { status: { phase: 'Running', podIPs: [{ ip: '10.244.1.7' }] } } },
    merge,
  );
  expect(running.status?.phase).toBe('Running');
  expect(running.status?.podIPs).toEqual([{ ip: '10.244.1.7' }]);
  const smp = await core.patchNamespacedPod(
    { name: 'a', namespace: 'default', body: { metadata: { annotations: { 'ambient.istio.io/redirection': null } } } },
    setHeaderOptions('Content-Type', PatchStrategy.StrategicMergePatch),
  );
  expect(smp.metadata?.annotations ?? {}).toEqual({});
  expect(
    await status(
      core.patchNamespacedPod(
        { name: 'a', namespace: 'default', body: [{ op: 'add', path: '/x', value: 1 }] },
        setHeaderOptions('Content-Type', PatchStrategy.JsonPatch),
      ),
    ),
  ).toBe(415);
});

test('404, 409 and 422 surface as client-node ApiException with the Status', async () => {
  const core = kc.makeApiClient(CoreV1Api);
  expect(await status(core.readNamespacedPod({ name: 'missing', namespace: 'default' }))).toBe(404);
  await core.createNamespacedPod({ namespace: 'default', body: body('a') });
  expect(await status(core.createNamespacedPod({ namespace: 'default', body: body('a') }))).toBe(409);
  const stale = await core.readNamespacedPod({ name: 'a', namespace: 'default' });
  await core.patchNamespacedPod(
    { name: 'a', namespace: 'default', body: { metadata: { labels: { v: '1' } } } },
    setHeaderOptions('Content-Type', PatchStrategy.MergePatch),
  );
  expect(await status(core.replaceNamespacedPod({ name: 'a', namespace: 'default', body: stale }))).toBe(409);
  expect(
    await status(
      core.createNamespacedPod({
        namespace: 'default',
        body: {
          ...body('b'),
          spec: { containers: [{ name: 'c', securityContext: { runAsUser: 'x' as unknown as number } }] },
        },
      }),
    ),
  ).toBe(422);
  // The port adapter turns them into KubeApiError with the Status reason and message.
  const api = new ClientNodeKubeApi(kc);
  const err = await api.get('Pod', 'missing', 'default').catch((e: unknown) => e);
  expect(isKubeApiError(err, 404)).toBe(true);
  expect((err as Error).message).toContain('pods "missing" not found');
  const conflict = await api.create('Pod', body('a') as never).catch((e: unknown) => e);
  expect(isKubeApiError(conflict, 409) && conflict.reason).toBe('AlreadyExists');
});

test('makeInformer (client-node ListWatch) lists and watches through the facade', async () => {
  const core = kc.makeApiClient(CoreV1Api);
  await core.createNamespacedPod({ namespace: 'default', body: body('a') });
  const inf = makeInformer(kc, '/api/v1/namespaces/default/pods', () =>
    core.listNamespacedPod({ namespace: 'default' }),
  );
  const seen: string[] = [];
  inf.on('add', (p) => seen.push(`add:${p.metadata?.name}`));
  inf.on('update', (p) => seen.push(`update:${p.metadata?.name}:${p.status?.phase}`));
  inf.on('delete', (p) => seen.push(`delete:${p.metadata?.name}`));
  await inf.start();
  expect(facade.openWatches()).toBe(1);
  await core.createNamespacedPod({ namespace: 'default', body: body('b') });
  await core.patchNamespacedPodStatus(
    { name: 'b', namespace: 'default', body: { status: { phase: 'Running' } } },
    setHeaderOptions('Content-Type', PatchStrategy.MergePatch),
  );
  await core.deleteNamespacedPod({ name: 'a', namespace: 'default' });
  await expect.poll(() => seen.length).toBe(4);
  expect(seen).toEqual(['add:a', 'add:b', 'update:b:Running', 'delete:a']);
  await inf.stop();
});

test('AuthorizationPolicy through CustomObjectsApi; discovery endpoints answer', async () => {
  const custom = kc.makeApiClient(CustomObjectsApi);
  const created = (await custom.createNamespacedCustomObject({
    group: 'security.istio.io',
    version: 'v1',
    namespace: 'default',
    plural: 'authorizationpolicies',
    body: {
      apiVersion: 'security.istio.io/v1',
      kind: 'AuthorizationPolicy',
      metadata: { name: 'deny-all' },
      spec: { action: 'DENY', rules: [{}] },
    },
  })) as { metadata: { namespace: string } };
  expect(created.metadata.namespace).toBe('default');
  const list = (await custom.listClusterCustomObject({
    group: 'security.istio.io',
    version: 'v1',
    plural: 'authorizationpolicies',
  })) as { items: unknown[] };
  expect(list.items).toHaveLength(1);
  const disc = (await (await fetch(`${facade.url}/apis/security.istio.io/v1`)).json()) as {
    resources: { name: string; namespaced: boolean }[];
  };
  expect(disc.resources.find((r) => r.name === 'authorizationpolicies')?.namespaced).toBe(true);
  const groups = (await (await fetch(`${facade.url}/apis`)).json()) as { groups: { name: string }[] };
  expect(groups.groups.map((g) => g.name).sort()).toEqual(['apiextensions.k8s.io', 'apps', 'security.istio.io']);
});

test('DaemonSets through AppsV1Api: create, read, list, delete; a deleted one reads as 404', async () => {
  const apps = kc.makeApiClient(AppsV1Api);
  const labels = { 'app.kubernetes.io/name': 'ambient-lab-agent' };
  const ds: V1DaemonSet = {
    apiVersion: 'apps/v1',
    kind: 'DaemonSet',
    metadata: { name: 'ambient-lab-agent', labels },
    spec: {
      selector: { matchLabels: labels },
      template: { metadata: { labels }, spec: { containers: [{ name: 'agent', image: 'ambient-lab/agent:dev' }] } },
    },
    status: { currentNumberScheduled: 9, desiredNumberScheduled: 9, numberMisscheduled: 0, numberReady: 9 },
  };
  const created = await apps.createNamespacedDaemonSet({ namespace: 'default', body: ds });
  expect(created.metadata?.uid).toBeTruthy();
  expect(created.status).toBeUndefined(); // a status subresource: the create's status is not taken
  // What the CNI installer asks at exit (cni-installer-main.ts ownerState).
  const got = await apps.readNamespacedDaemonSet({ name: 'ambient-lab-agent', namespace: 'default' });
  expect(got.metadata?.uid).toBe(created.metadata?.uid);
  expect(got.metadata?.deletionTimestamp).toBeUndefined();
  expect(got.spec?.template.spec?.containers.map((c) => c.name)).toEqual(['agent']);
  const all = await apps.listDaemonSetForAllNamespaces({ labelSelector: 'app.kubernetes.io/name=ambient-lab-agent' });
  expect(all.items.map((d) => d.metadata?.name)).toEqual(['ambient-lab-agent']);
  expect(await status(apps.createNamespacedDaemonSet({ namespace: 'default', body: ds }))).toBe(409);
  expect(
    await status(
      apps.createNamespacedDaemonSet({
        namespace: 'default',
        body: { ...ds, metadata: { name: 'b' }, spec: { ...ds.spec!, selector: undefined as never } },
      }),
    ),
  ).toBe(422); // spec.selector is required (the apps/v1 schema)
  await apps.deleteNamespacedDaemonSet({ name: 'ambient-lab-agent', namespace: 'default' });
  expect(await status(apps.readNamespacedDaemonSet({ name: 'ambient-lab-agent', namespace: 'default' }))).toBe(404);
  expect((await apps.listNamespacedDaemonSet({ namespace: 'default' })).items).toEqual([]);
  // The port adapter serves the kind too.
  const api = new ClientNodeKubeApi(kc);
  await api.create('DaemonSet', { ...created, metadata: { name: 'again', namespace: 'default', labels } } as never);
  expect((await api.get('DaemonSet', 'again', 'default')).metadata?.name).toBe('again');
  await api.delete('DaemonSet', 'again', 'default');
  expect(isKubeApiError(await api.get('DaemonSet', 'again', 'default').catch((e: unknown) => e), 404)).toBe(true);
  const disc = (await (await fetch(`${facade.url}/apis/apps/v1`)).json()) as {
    resources: { name: string; namespaced: boolean }[];
  };
  expect(disc.resources.map((r) => r.name)).toEqual(['daemonsets', 'daemonsets/status']);
});

test('Events through the port land as core/v1 Events with generated names', async () => {
  const api = new ClientNodeKubeApi(kc);
  await api.createEvent({
    involvedObject: { kind: 'Pod', name: 'a', namespace: 'default', uid: 'u1' },
    type: 'Warning',
    reason: 'FailedCreatePodSandBox',
    message: 'CNI ADD failed',
    component: 'kubelet',
  });
  const evs = store.list('Event', { namespace: 'default' }).items;
  expect(evs).toHaveLength(1);
  expect(evs[0]?.metadata?.name).toMatch(/^a\.[a-z0-9]{5}$/);
  expect(evs[0]?.reason).toBe('FailedCreatePodSandBox');
  expect(evs[0]?.involvedObject.uid).toBe('u1');
});
