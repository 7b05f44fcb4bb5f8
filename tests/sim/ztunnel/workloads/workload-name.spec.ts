/**
 * The names telemetry reports a workload under (impl/ztunnel/workload-name.ts), as Istio derives
 * them: the Deployment behind a ReplicaSet's pod, the CronJob behind a Job's, the controller
 * otherwise, the pod itself without a generated name; canonical service and revision labels.
 */
import { test, expect } from '@playwright/test';
import type { KubeObjectOf } from '../../../../impl/host/kube.js';
import { canonicalRevision, canonicalService, workloadNameOf } from '../../../../impl/ztunnel/workload-name.js';

type Pod = KubeObjectOf<'Pod'>;
const owned = (
  name: string,
  kind: string,
  owner: string,
  labels: Record<string, string> = {},
  controller = true,
): Pod => ({
  metadata: {
    name,
    generateName: `${owner}-`,
    labels,
    ownerReferences: [{ apiVersion: 'apps/v1', kind, name: owner, uid: 'u1', controller }],
  },
});

test('workload names: Deployment, CronJob, other controllers, bare pods', () => {
  expect(workloadNameOf(owned('web-5d8c7f-x2k9q', 'ReplicaSet', 'web-5d8c7f', { 'pod-template-hash': '5d8c7f' }))).toBe(
    'web',
  );
  // a ReplicaSet whose name does not end in the hash is reported as itself
  expect(workloadNameOf(owned('rs-x2k9q', 'ReplicaSet', 'rs', { 'pod-template-hash': '5d8c7f' }))).toBe('rs');
  expect(workloadNameOf(owned('backup-28473920-abcde', 'Job', 'backup-28473920'))).toBe('backup');
  expect(workloadNameOf(owned('migrate-abcde', 'Job', 'migrate'))).toBe('migrate');
  expect(workloadNameOf(owned('db-0', 'StatefulSet', 'db'))).toBe('db');
  expect(workloadNameOf(owned('agent-abcde', 'DaemonSet', 'agent'))).toBe('agent');
  // an owner that is not the controller, or no generated name: the pod's own name
  expect(workloadNameOf(owned('web-5d8c7f-x2k9q', 'ReplicaSet', 'web-5d8c7f', {}, false))).toBe('web-5d8c7f-x2k9q');
  expect(workloadNameOf({ metadata: { name: 'standalone' } })).toBe('standalone');
});

test('canonical service and revision follow the Istio label order, with the workload name and "latest" as fallbacks', () => {
  expect(
    canonicalService({ 'service.istio.io/canonical-name': 'a', 'app.kubernetes.io/name': 'b', app: 'c' }, 'w'),
  ).toBe('a');
  expect(canonicalService({ 'app.kubernetes.io/name': 'b', app: 'c' }, 'w')).toBe('b');
  expect(canonicalService({ app: 'c' }, 'w')).toBe('c');
  expect(canonicalService({}, 'w')).toBe('w');
  expect(
    canonicalRevision({ 'service.istio.io/canonical-revision': '1', 'app.kubernetes.io/version': '2', version: '3' }),
  ).toBe('1');
  expect(canonicalRevision({ 'app.kubernetes.io/version': '2', version: '3' })).toBe('2');
  expect(canonicalRevision({ version: '3' })).toBe('3');
  expect(canonicalRevision({})).toBe('latest');
});
