/**
 * The CNI plugin through the exec protocol, in virtual time: pass-through for pods that are not
 * ours, the add event for ambient pods, and fail-closed ADD in every failure mode.
 */
import { test, expect } from '@playwright/test';
import { AmbientCniPlugin } from '../../../impl/cni-plugin/cni-plugin.js';
import { PLUGIN_TYPE } from '../../../impl/api/cni-plugin-config.js';
import { cniEnv, k8sCniArgs, CniErrorCode, type CniExecOutput } from '../../../impl/api/cni.js';
import type { PluginEvent, PluginEventReply } from '../../../impl/api/plugin-event.js';
import { ApiStore } from '../../../sim/kube/store.js';
import { SimKubeApi } from '../../../sim/kube/sim-kube-api.js';
import { VirtualClock } from '../../../sim/time/virtual-clock.js';
import { SeededRandom } from '../../../sim/time/seeded-random.js';
import { settle } from '../../../sim/time/settle.js';
import { SimPluginEventTransport } from '../../../sim/transport/plugin-events.js';
import { MemoryLogger } from '../../../sim/log/memory-logger.js';

const SOCK = '/var/run/ambient-lab/plugin-events.sock';
const prevResult = {
  cniVersion: '1.0.0',
  interfaces: [{ name: 'eth0', sandbox: '/var/run/netns/cni-1' }],
  ips: [{ address: '10.244.1.5/24', gateway: '10.244.1.1', interface: 0 }],
};

function setup(opts: { agent?: (e: PluginEvent) => Promise<PluginEventReply>; kubeBroken?: boolean } = {}) {
  const clock = new VirtualClock();
  const store = new ApiStore({ clock, random: new SeededRandom(1) });
  const kube = new SimKubeApi(store, clock);
  const events = new SimPluginEventTransport(clock);
  const log = new MemoryLogger();
  const agentCalls: PluginEvent[] = [];
  if (opts.agent !== null) {
    void events.serve(
      SOCK,
      async (e) => {
        agentCalls.push(e);
        return opts.agent ? opts.agent(e) : { ok: true, status: 'enabled' };
      },
      { maxBodyBytes: 16384, requestTimeoutMs: 5000 },
    );
  }
  const plugin = new AmbientCniPlugin({
    openKube: () => {
      if (opts.kubeBroken) throw new Error('kubeconfig missing');
      return kube;
    },
    events,
    clock,
    log,
  });
  const mkNs = (name: string, labels: Record<string, string> = {}) =>
    store.create('Namespace', { metadata: { name, labels } });
  const mkPod = (ns: string, name: string, labels: Record<string, string> = {}, extra: object = {}) =>
    store.create('Pod', {
      metadata: { name, namespace: ns, labels },
      spec: { nodeName: 'node-1', containers: [{ name: 'c', image: 'app' }], ...extra },
    });
  const conf = (over: object = {}) =>
    JSON.stringify({
      cniVersion: '1.0.0',
      name: 'k8s-pod-network',
      type: PLUGIN_TYPE,
      agentSocket: SOCK,
      kubeconfig: '/etc/cni/net.d/ambient-lab-kubeconfig',
      apiAttempts: 3,
      apiRetryDelayMs: 500,
      agentTimeoutMs: 2000,
      prevResult,
      ...over,
    });
  const run = (
    command: 'ADD' | 'DEL' | 'CHECK' | 'VERSION',
    ns: string,
    name: string,
    stdin = conf(),
    envOver: Record<string, string> = {},
  ): Promise<CniExecOutput> =>
    settle(
      clock,
      plugin.exec({
        env: {
          ...cniEnv({
            command,
            containerId: 'sandbox1',
            netns: '/var/run/netns/cni-1',
            ifname: 'eth0',
            args: k8sCniArgs({ namespace: ns, name, uid: 'uid-1' }, 'sandbox1'),
            path: ['/opt/cni/bin'],
          }),
          ...envOver,
        },
        stdin,
      }),
    );
  return { clock, store, events, log, agentCalls, mkNs, mkPod, conf, run };
}

const errorOf = (o: CniExecOutput): { code: number; msg: string; details?: string } => {
  expect(o.exitCode).not.toBe(0);
  return JSON.parse(o.stdout) as { code: number; msg: string; details?: string };
};

test('ADD for a pod outside the mesh passes prevResult through without asking the agent', async () => {
  const w = setup();
  w.mkNs('shop');
  w.mkPod('shop', 'web');
  const out = await w.run('ADD', 'shop', 'web');
  expect(out.exitCode).toBe(0);
  expect(JSON.parse(out.stdout)).toEqual(prevResult);
  expect(w.agentCalls).toEqual([]);
});

test('ADD for an ambient pod sends the add event with netns and IPs and succeeds only on the agent answer', async () => {
  const w = setup();
  w.mkNs('shop', { 'istio.io/dataplane-mode': 'ambient' });
  w.mkPod('shop', 'web');
  const out = await w.run('ADD', 'shop', 'web');
  expect(out.exitCode, out.stdout).toBe(0);
  expect(JSON.parse(out.stdout)).toEqual(prevResult);
  expect(w.agentCalls).toEqual([
    {
      kind: 'add',
      netns: '/var/run/netns/cni-1',
      podName: 'web',
      podNamespace: 'shop',
      podUid: 'uid-1',
      containerId: 'sandbox1',
      ips: ['10.244.1.5'],
    },
  ]);
});

test('fail closed: the agent socket is missing', async () => {
  const w = setup({ agent: undefined });
  await w.events.serve('/elsewhere.sock', async () => ({ ok: true, status: 'enabled' }), {
    maxBodyBytes: 1,
    requestTimeoutMs: 1,
  });
  w.mkNs('shop', { 'istio.io/dataplane-mode': 'ambient' });
  w.mkPod('shop', 'web');
  const e = errorOf(await w.run('ADD', 'shop', 'web', w.conf({ agentSocket: '/nope.sock' })));
  expect(e.code).toBe(CniErrorCode.TryAgainLater);
  expect(e.msg).toContain('cannot reach the node agent');
});

test('fail closed: the agent is too slow (timeout)', async () => {
  const w = setup({ agent: () => new Promise(() => undefined) });
  w.mkNs('shop', { 'istio.io/dataplane-mode': 'ambient' });
  w.mkPod('shop', 'web');
  const e = errorOf(await w.run('ADD', 'shop', 'web'));
  expect(e.details).toContain('timeout');
  expect(w.clock.now()).toBeGreaterThanOrEqual(2000);
});

test('fail closed: the agent answers with an error (e.g. no proxy connected)', async () => {
  const w = setup({ agent: async () => ({ ok: false, error: 'no proxy connection', retryable: true }) });
  w.mkNs('shop', { 'istio.io/dataplane-mode': 'ambient' });
  w.mkPod('shop', 'web');
  const e = errorOf(await w.run('ADD', 'shop', 'web'));
  expect(e.msg).toContain('could not enroll shop/web');
  expect(e.details).toBe('no proxy connection');
});

test('fail closed: the API server is unreachable — bounded retries, then fail, never "assume not ambient"', async () => {
  const w = setup();
  w.mkNs('shop', { 'istio.io/dataplane-mode': 'ambient' });
  w.mkPod('shop', 'web');
  w.store.failNext({ n: 100, code: 503 });
  const e = errorOf(await w.run('ADD', 'shop', 'web'));
  expect(e.code).toBe(CniErrorCode.TryAgainLater);
  expect(e.msg).toContain('cannot decide whether shop/web belongs in the mesh');
  expect(e.details).toContain('3 time(s)');
  expect(w.clock.now()).toBe(1000); // two waits of 500 ms between three attempts
  expect(w.agentCalls).toEqual([]);
});

test('a transient API error is retried and then the pod is enrolled', async () => {
  const w = setup();
  w.mkNs('shop', { 'istio.io/dataplane-mode': 'ambient' });
  w.mkPod('shop', 'web');
  w.store.failNext({ n: 2, code: 500 });
  const out = await w.run('ADD', 'shop', 'web');
  expect(out.exitCode, out.stdout).toBe(0);
  expect(w.agentCalls).toHaveLength(1);
});

test('fail closed: the kubeconfig cannot be opened', async () => {
  const w = setup({ kubeBroken: true });
  const e = errorOf(await w.run('ADD', 'shop', 'web'));
  expect(e.msg).toContain('cannot open the Kubernetes API');
});

test('fail closed: a pod the API does not know (404) is not treated as "not ambient"', async () => {
  const w = setup();
  w.mkNs('shop', { 'istio.io/dataplane-mode': 'ambient' });
  const e = errorOf(await w.run('ADD', 'shop', 'ghost'));
  expect(e.details).toContain('not found');
});

test('excluded namespaces and the mesh components own pods are skipped without an API call', async () => {
  const w = setup({ kubeBroken: true });
  expect((await w.run('ADD', 'kube-system', 'coredns-1')).exitCode).toBe(0);
  expect((await w.run('ADD', 'istio-system', 'ztunnel-abc')).exitCode).toBe(0);
  expect((await w.run('ADD', 'istio-system', 'istio-cni-node-xyz')).exitCode).toBe(0);
});

test('hostNetwork and sidecar-injected pods in an ambient namespace are passed through', async () => {
  const w = setup();
  w.mkNs('shop', { 'istio.io/dataplane-mode': 'ambient' });
  w.mkPod('shop', 'host', {}, { hostNetwork: true });
  expect((await w.run('ADD', 'shop', 'host')).exitCode).toBe(0);
  expect(w.agentCalls).toEqual([]);
});

test('DEL always succeeds with no output, even with nothing to clean up', async () => {
  const w = setup({ kubeBroken: true });
  const out = await w.run('DEL', 'shop', 'web');
  expect(out).toEqual({ exitCode: 0, stdout: '', stderr: '' });
});

test('CHECK asks the agent for ambient pods and fails when the agent reports a problem', async () => {
  let healthy = true;
  const w = setup({
    agent: async (e) =>
      e.kind === 'check' && !healthy
        ? { ok: false, error: 'rules missing', retryable: false }
        : { ok: true, status: 'enabled' },
  });
  w.mkNs('shop', { 'istio.io/dataplane-mode': 'ambient' });
  w.mkPod('shop', 'web');
  expect((await w.run('CHECK', 'shop', 'web')).exitCode).toBe(0);
  healthy = false;
  expect(errorOf(await w.run('CHECK', 'shop', 'web')).details).toBe('rules missing');
});

test('VERSION reports the supported spec versions', async () => {
  const w = setup();
  const out = await w.run('VERSION', 'shop', 'web', '{}');
  expect(JSON.parse(out.stdout)).toEqual({
    cniVersion: '1.0.0',
    supportedVersions: ['0.3.0', '0.3.1', '0.4.0', '1.0.0'],
  });
});

const badInputs: ReadonlyArray<[string, string, Record<string, string>, number, RegExp]> = [
  ['stdin is not JSON', '{not json', {}, CniErrorCode.DecodeFailure, /not JSON/],
  [
    'unknown configuration field',
    JSON.stringify({
      cniVersion: '1.0.0',
      name: 'n',
      type: PLUGIN_TYPE,
      agentSocket: SOCK,
      kubeconfig: 'k',
      prevResult,
      bogus: 1,
    }),
    {},
    CniErrorCode.InvalidNetworkConfig,
    /unknown configuration field "bogus"/,
  ],
  [
    'missing agentSocket',
    JSON.stringify({ cniVersion: '1.0.0', name: 'n', type: PLUGIN_TYPE, kubeconfig: 'k', prevResult }),
    {},
    CniErrorCode.InvalidNetworkConfig,
    /agentSocket/,
  ],
  [
    'unsupported version',
    JSON.stringify({ cniVersion: '0.2.0', name: 'n', type: PLUGIN_TYPE, agentSocket: SOCK, kubeconfig: 'k' }),
    {},
    CniErrorCode.IncompatibleVersion,
    /does not support CNI version 0.2.0/,
  ],
  [
    'bad enablement selector',
    JSON.stringify({
      cniVersion: '1.0.0',
      name: 'n',
      type: PLUGIN_TYPE,
      agentSocket: SOCK,
      kubeconfig: 'k',
      prevResult,
      enablementSelectors: [{ podSelector: { matchExpressions: [{ key: 'a', operator: 'Near' }] } }],
    }),
    {},
    CniErrorCode.InvalidNetworkConfig,
    /unknown operator/,
  ],
  ['CNI_COMMAND missing', '{}', { CNI_COMMAND: '' }, CniErrorCode.InvalidEnvironment, /CNI_COMMAND/],
  ['bad CNI_CONTAINERID', '{}', { CNI_CONTAINERID: '../etc' }, CniErrorCode.InvalidEnvironment, /CNI_CONTAINERID/],
];
for (const [name, stdin, env, code, msg] of badInputs) {
  test(`malformed input gives the spec error JSON: ${name}`, async () => {
    const w = setup();
    const e = errorOf(await w.run('ADD', 'shop', 'web', stdin, env));
    expect(e.code).toBe(code);
    expect(`${e.msg} ${e.details ?? ''}`).toMatch(msg);
  });
}

test('ADD for an ambient pod without prevResult fails: the plugin must be chained', async () => {
  const w = setup();
  w.mkNs('shop', { 'istio.io/dataplane-mode': 'ambient' });
  w.mkPod('shop', 'web');
  const e = errorOf(await w.run('ADD', 'shop', 'web', w.conf({ prevResult: undefined })));
  expect(e.msg).toContain('must be chained');
});
