/**
 * Where the agent and proxy take their API credentials from (impl/linux/kube-client-node.ts
 * kubeConfigSource/loadKubeConfig): --kubeconfig, else $KUBECONFIG, else the pod's service
 * account — and never client-node's silent http://localhost:8080 fallback. The manifests rely on
 * the in-cluster branch (tests/sim/manifests/manifests.spec.ts: no kubeconfig init containers).
 */
import { test, expect } from '@playwright/test';
import { kubeConfigSource, loadKubeConfig, SERVICE_ACCOUNT_TOKEN } from '../../../impl/linux/kube-client-node.js';

const inPod = { KUBERNETES_SERVICE_HOST: '10.96.0.1', KUBERNETES_SERVICE_PORT: '443' };
const tokenMounted = (f: string): boolean => f === SERVICE_ACCOUNT_TOKEN;
const noFiles = (): boolean => false;

test('precedence: --kubeconfig, then the first $KUBECONFIG entry, then the service account', () => {
  expect(kubeConfigSource('/etc/k.yaml', { ...inPod, KUBECONFIG: '/x' }, tokenMounted)).toEqual({
    kind: 'file',
    path: '/etc/k.yaml',
  });
  expect(kubeConfigSource(undefined, { ...inPod, KUBECONFIG: ':/a:/b' }, tokenMounted)).toEqual({
    kind: 'file',
    path: '/a',
  });
  expect(kubeConfigSource(undefined, inPod, tokenMounted)).toEqual({ kind: 'in-cluster' });
});

test('no credentials is a start-up error naming what is missing, not a localhost:8080 client', () => {
  expect(() => kubeConfigSource(undefined, inPod, noFiles)).toThrow(
    new RegExp(`--kubeconfig.*missing ${SERVICE_ACCOUNT_TOKEN.replace(/\//g, '\\/')}`),
  );
  expect(() => kubeConfigSource(undefined, { KUBERNETES_SERVICE_HOST: '10.96.0.1' }, tokenMounted)).toThrow(
    /missing KUBERNETES_SERVICE_PORT\)/,
  );
  expect(() => kubeConfigSource(undefined, {}, noFiles)).toThrow(
    /KUBERNETES_SERVICE_HOST, KUBERNETES_SERVICE_PORT, \/var\/run\/secrets/,
  );
});

test('in-cluster: the service host (IPv6 bracketed) over https, the CA and a token FILE (re-read on rotation)', () => {
  const saved = { h: process.env['KUBERNETES_SERVICE_HOST'], p: process.env['KUBERNETES_SERVICE_PORT'] };
  try {
    for (const [host, server] of [
      ['10.96.0.1', 'https://10.96.0.1:443'],
      ['fd00:10:96::1', 'https://[fd00:10:96::1]:443'],
    ] as const) {
      process.env['KUBERNETES_SERVICE_HOST'] = host;
      process.env['KUBERNETES_SERVICE_PORT'] = '443';
      const kc = loadKubeConfig({ kind: 'in-cluster' });
      expect(kc.getCurrentCluster()).toMatchObject({
        server,
        caFile: '/var/run/secrets/kubernetes.io/serviceaccount/ca.crt',
        skipTLSVerify: false,
      });
      expect(kc.getCurrentUser()?.authProvider).toEqual({
        name: 'tokenFile',
        config: { tokenFile: SERVICE_ACCOUNT_TOKEN },
      });
    }
  } finally {
    for (const [k, v] of [
      ['KUBERNETES_SERVICE_HOST', saved.h],
      ['KUBERNETES_SERVICE_PORT', saved.p],
    ] as const) {
      if (v === undefined) delete process.env[k];
      else process.env[k] = v;
    }
  }
});
