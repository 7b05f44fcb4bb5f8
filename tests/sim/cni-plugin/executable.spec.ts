/**
 * The real CNI plugin executable, run as a runtime runs it (env + stdin → stdout + exit code),
 * against the API facade and the real plugin-event transport on loopback / a Unix socket.
 */
import { test, expect } from '@playwright/test';
import { spawn } from 'node:child_process';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { ApiStore } from '../../../sim/kube/store.js';
import { startKubeApiFacade, facadeKubeconfig, type KubeApiFacade } from '../../../sim/kube/http-facade.js';
import { SystemClock } from '../../../impl/linux/clock.js';
import { SystemRandom } from '../../../impl/linux/random.js';
import { HttpPluginEventTransport } from '../../../impl/linux/plugin-events-http.js';
import { LiteKubeReader } from '../../../impl/linux/kube-reader.js';
import { isKubeApiError } from '../../../impl/host/kube.js';
import { cniEnv, k8sCniArgs } from '../../../impl/api/cni.js';
import type { PluginEvent } from '../../../impl/api/plugin-event.js';

const repo = path.resolve(import.meta.dirname, '..', '..', '..');
const bin = path.join(repo, 'bin', 'ambient-lab-cni.js');

function runPlugin(
  env: Record<string, string>,
  stdin: string,
): Promise<{ code: number | null; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    const c = spawn(process.execPath, [bin], { env: { PATH: process.env['PATH'] ?? '', ...env } });
    let stdout = '';
    let stderr = '';
    c.stdout.on('data', (d) => (stdout += d));
    c.stderr.on('data', (d) => (stderr += d));
    c.on('exit', (code) => resolve({ code, stdout, stderr }));
    c.stdin.end(stdin);
  });
}

let dir: string;
let store: ApiStore;
let facade: KubeApiFacade;
let kubeconfig: string;

test.beforeAll(async () => {
  dir = fs.mkdtempSync(path.join(os.tmpdir(), 'al-cni-exec-'));
  store = new ApiStore({ clock: new SystemClock(), random: new SystemRandom() });
  await store.create('Namespace', { metadata: { name: 'shop', labels: { 'istio.io/dataplane-mode': 'ambient' } } });
  await store.create('Namespace', { metadata: { name: 'plain' } });
  await store.create('Pod', {
    metadata: { name: 'web', namespace: 'shop' },
    spec: { nodeName: 'n1', containers: [{ name: 'c', image: 'i' }] },
  });
  await store.create('Pod', {
    metadata: { name: 'db', namespace: 'plain' },
    spec: { nodeName: 'n1', containers: [{ name: 'c', image: 'i' }] },
  });
  facade = await startKubeApiFacade(store);
  kubeconfig = path.join(dir, 'kubeconfig');
  facadeKubeconfig(facade.url, kubeconfig);
});

test.afterAll(async () => {
  await facade.close();
  fs.rmSync(dir, { recursive: true, force: true });
});

const prevResult = { cniVersion: '1.0.0', ips: [{ address: '10.244.1.5/24' }] };
const conf = (sock: string): string =>
  JSON.stringify({
    cniVersion: '1.0.0',
    name: 'k8s',
    type: 'ambient-lab-cni',
    agentSocket: sock,
    kubeconfig,
    apiAttempts: 1,
    agentTimeoutMs: 2000,
    prevResult,
  });
const env = (ns: string, name: string): Record<string, string> =>
  cniEnv({
    command: 'ADD',
    containerId: 'c1',
    netns: '/var/run/netns/cni-1',
    ifname: 'eth0',
    args: k8sCniArgs({ namespace: ns, name, uid: 'u1' }, 'c1'),
    path: ['/opt/cni/bin'],
  });

test('the executable enrolls an ambient pod through the agent socket and prints prevResult', async () => {
  const sock = path.join(dir, 'ok', 'events.sock');
  const seen: PluginEvent[] = [];
  const server = await new HttpPluginEventTransport().serve(
    sock,
    async (e) => {
      seen.push(e);
      return { ok: true, status: 'enabled' };
    },
    { maxBodyBytes: 16384, requestTimeoutMs: 5000 },
  );
  try {
    const r = await runPlugin(env('shop', 'web'), conf(sock));
    expect(r.code, r.stdout + r.stderr).toBe(0);
    expect(JSON.parse(r.stdout)).toEqual(prevResult);
    expect(seen.map((e) => `${e.podNamespace}/${e.podName} ${e.ips.join(',')}`)).toEqual(['shop/web 10.244.1.5']);
    const plain = await runPlugin(env('plain', 'db'), conf(sock));
    expect(plain.code).toBe(0);
    expect(seen).toHaveLength(1);
  } finally {
    await server.close();
  }
});

test('the executable fails closed with the spec error JSON when no agent listens', async () => {
  const r = await runPlugin(env('shop', 'web'), conf(path.join(dir, 'none', 'events.sock')));
  expect(r.code).toBe(1);
  const err = JSON.parse(r.stdout) as { code: number; msg: string };
  expect(err.code).toBe(11);
  expect(err.msg).toContain('cannot reach the node agent');
  expect(r.stderr).toContain('"level":"error"'); // the failure is logged as JSON on stderr
});

test('LiteKubeReader reads pods and namespaces, maps 404 and unreachable servers to KubeApiError', async () => {
  const reader = new LiteKubeReader(kubeconfig);
  const pod = await reader.get('Pod', 'web', 'shop');
  expect(pod.metadata?.name).toBe('web');
  const ns = await reader.get('Namespace', 'shop');
  expect(ns.metadata?.labels?.['istio.io/dataplane-mode']).toBe('ambient');
  const missing = await reader.get('Pod', 'ghost', 'shop').catch((e: unknown) => e);
  expect(isKubeApiError(missing, 404)).toBe(true);
  const deadCfg = path.join(dir, 'dead-kubeconfig');
  facadeKubeconfig('http://127.0.0.1:1', deadCfg);
  const dead = await new LiteKubeReader(deadCfg).get('Namespace', 'shop').catch((e: unknown) => e);
  expect(isKubeApiError(dead, 503)).toBe(true);
  expect(() => new LiteKubeReader(path.join(dir, 'nope'))).toThrow(/ENOENT/);
});
