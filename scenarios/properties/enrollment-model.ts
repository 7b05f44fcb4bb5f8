/**
 * Reference model of who the mesh should enroll (upstream's selectors and exclusions), written from the documented
 * precedence and NOT from impl/api/enrollment.ts, so the convergence oracle is independent
 * of the code under test:
 *
 * 1. never: hostNetwork pods, sidecar-injected pods (sidecar.istio.io/status), excluded
 *    namespaces (kube-system by default), terminal pods (Succeeded/Failed);
 * 2. the pod label wins in both directions: `istio.io/dataplane-mode=ambient` enrolls in any
 *    namespace, `=none` opts out even in an ambient namespace;
 * 3. otherwise the namespace label `ambient` enrolls every pod whose label is not `none`
 *    (an unrecognised pod value matches `NotIn [none]`).
 */
import type { PodObservation } from '../world.js';

const LABEL = 'istio.io/dataplane-mode';
const SIDECAR_STATUS = 'sidecar.istio.io/status';

interface SelectionInput {
  readonly namespace: string;
  readonly labels: Readonly<Record<string, string>>;
  readonly namespaceLabels: Readonly<Record<string, string>> | undefined;
  readonly hostNetwork: boolean;
  readonly phase: string;
  readonly annotations?: Readonly<Record<string, string>>;
  readonly excludedNamespaces: readonly string[];
}

interface Selection {
  readonly selected: boolean;
  readonly why: string;
}

export function referenceSelects(p: SelectionInput): Selection {
  if (p.hostNetwork) return { selected: false, why: 'hostNetwork pods are never enrolled' };
  if (p.annotations?.[SIDECAR_STATUS] !== undefined)
    return { selected: false, why: 'sidecar-injected pods are never enrolled' };
  if (p.excludedNamespaces.includes(p.namespace))
    return { selected: false, why: `namespace ${p.namespace} is excluded` };
  if (p.phase === 'Succeeded' || p.phase === 'Failed') return { selected: false, why: `terminal phase ${p.phase}` };
  const podMode = p.labels[LABEL];
  if (podMode === 'ambient') return { selected: true, why: 'pod label ambient' };
  if (podMode === 'none') return { selected: false, why: 'pod label none' };
  if (p.namespaceLabels?.[LABEL] === 'ambient') return { selected: true, why: 'namespace label ambient' };
  return { selected: false, why: 'neither the pod nor its namespace asks for ambient' };
}

export function selectionOf(
  pod: PodObservation,
  ctx: {
    readonly namespaces: Readonly<Record<string, Readonly<Record<string, string>>>>;
    readonly specs: Readonly<Record<string, { readonly annotations?: Readonly<Record<string, string>> }>>;
    readonly mesh: { readonly excludedNamespaces?: readonly string[] };
  },
): Selection {
  const annotations = ctx.specs[`${pod.namespace}/${pod.name}`]?.annotations;
  return referenceSelects({
    namespace: pod.namespace,
    labels: pod.labels,
    namespaceLabels: ctx.namespaces[pod.namespace],
    hostNetwork: pod.hostNetwork,
    phase: pod.phase,
    excludedNamespaces: ctx.mesh.excludedNamespaces ?? ['kube-system'],
    ...(annotations ? { annotations } : {}),
  });
}
