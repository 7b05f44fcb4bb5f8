/**
 * The names a workload is reported under in telemetry, as Istio derives them, so dashboards
 * built for Istio group our series the same way:
 *   workloadNameOf(pod)       — the controller a generated pod belongs to: a ReplicaSet whose
 *                               name ends in the pod's pod-template-hash stands for its
 *                               Deployment, a Job named `<name>-<8..10 digits>` for its CronJob,
 *                               any other controller for itself; a pod without a generated name
 *                               or a controller for itself (istio/istio pkg/kube/util.go,
 *                               GetDeployMetaFromPod).
 *   canonicalService(labels, workload) — service.istio.io/canonical-name, else
 *                               app.kubernetes.io/name, else app, else the workload name;
 *   canonicalRevision(labels) — service.istio.io/canonical-revision, else
 *                               app.kubernetes.io/version, else version, else "latest".
 */
import type { KubeObjectOf } from '../host/kube.js';

type Pod = KubeObjectOf<'Pod'>;

const CRON_JOB = /^(.+)-\d{8,10}$/;

export function workloadNameOf(pod: Pod): string {
  const name = pod.metadata?.name ?? '';
  if (!pod.metadata?.generateName) return name;
  const owner = pod.metadata.ownerReferences?.find((r) => r.controller === true);
  if (!owner) return name;
  const hash = pod.metadata.labels?.['pod-template-hash'];
  if (owner.kind === 'ReplicaSet' && hash && owner.name.endsWith(`-${hash}`))
    return owner.name.slice(0, -(hash.length + 1));
  if (owner.kind === 'Job') return CRON_JOB.exec(owner.name)?.[1] ?? owner.name;
  return owner.name;
}

export function canonicalService(labels: Readonly<Record<string, string>>, workloadName: string): string {
  return labels['service.istio.io/canonical-name'] || labels['app.kubernetes.io/name'] || labels['app'] || workloadName;
}

export function canonicalRevision(labels: Readonly<Record<string, string>>): string {
  return (
    labels['service.istio.io/canonical-revision'] ||
    labels['app.kubernetes.io/version'] ||
    labels['version'] ||
    'latest'
  );
}
