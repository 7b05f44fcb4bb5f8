/**
 * Which pods belong in the mesh: upstream istio-cni's enablement selectors and hard exclusions
 * (Helm `ambient.enablementSelectors`), as one pure decision used by the CNI plugin and the node
 * agent's informer path and reconciliation alike, so the three can never disagree. The
 * configuration it decides from is in enrollment-config.ts.
 *
 * Order: hard exclusions first (host network, sidecar-injected, excluded namespace, the agent's
 * and the proxy's own pods), then the selectors (any entry matching enrolls). With the default
 * selectors the pod label wins in both directions: `none` opts out inside an ambient namespace,
 * `ambient` opts in anywhere.
 */
import { SIDECAR_STATUS } from './annotations.js';
import { selectorMatches, type Labels } from './label-selector.js';
import type { EnrollmentConfig } from './enrollment-config.js';

/** What enrollment needs to know about a pod; a subset of the Pod object. */
export interface PodFacts {
  readonly name: string;
  readonly namespace: string;
  readonly labels: Labels;
  readonly annotations: Labels;
  readonly hostNetwork: boolean;
  readonly phase: string | undefined;
}

type EnrollmentDecision =
  | { readonly enroll: true; readonly reason: string }
  | { readonly enroll: false; readonly reason: string; readonly hard: boolean };

export function isTerminalPhase(phase: string | undefined): boolean {
  return phase === 'Succeeded' || phase === 'Failed';
}

/**
 * Should this pod be in the mesh? `namespaceLabels` undefined means the namespace is unknown;
 * callers that cannot read the namespace must not call this (fail closed upstream of here).
 */
export function decideEnrollment(pod: PodFacts, namespaceLabels: Labels, config: EnrollmentConfig): EnrollmentDecision {
  if (pod.hostNetwork)
    return {
      enroll: false,
      hard: true,
      reason: 'hostNetwork pods share the node network namespace and are never enrolled',
    };
  if (pod.annotations?.[SIDECAR_STATUS] !== undefined)
    return { enroll: false, hard: true, reason: `sidecar-injected (${SIDECAR_STATUS} present)` };
  if (config.excludeNamespaces.includes(pod.namespace))
    return { enroll: false, hard: true, reason: `namespace ${pod.namespace} is excluded` };
  if (pod.namespace === config.systemNamespace && config.ownPodPrefixes.some((p) => pod.name.startsWith(p))) {
    return { enroll: false, hard: true, reason: 'a mesh component pod (node agent or proxy) is never enrolled' };
  }
  if (isTerminalPhase(pod.phase)) return { enroll: false, hard: true, reason: `pod is in terminal phase ${pod.phase}` };
  for (const [i, s] of config.selectors.entries()) {
    if (selectorMatches(s.podSelector, pod.labels) && selectorMatches(s.namespaceSelector, namespaceLabels)) {
      return { enroll: true, reason: `matches enablement selector ${i}` };
    }
  }
  return { enroll: false, hard: false, reason: 'matches no enablement selector' };
}
