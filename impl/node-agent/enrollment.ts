/**
 * Which pods belong in the mesh: upstream istio-cni's enablement selectors and hard exclusions
 * (Helm `ambient.enablementSelectors`), as one pure decision used by the CNI plugin, the informer path and
 * reconciliation alike, so the three can never disagree.
 *
 * Order: hard exclusions first (host network, sidecar-injected, excluded namespace, the agent's
 * and the proxy's own pods), then the selectors (any entry matching enrolls). With the default
 * selectors the pod label wins in both directions: `none` opts out inside an ambient namespace,
 * `ambient` opts in anywhere.
 */
import { DATAPLANE_MODE } from '../api/labels.js';
import { SIDECAR_STATUS } from '../api/annotations.js';
import { selectorMatches, validateSelector, type LabelSelector, type Labels } from '../api/label-selector.js';

export interface EnablementSelector {
  readonly podSelector?: LabelSelector;
  readonly namespaceSelector?: LabelSelector;
}

/** Upstream's defaults (Helm `ambient.enablementSelectors`). */
export const DEFAULT_ENABLEMENT_SELECTORS: readonly EnablementSelector[] = [
  { podSelector: { matchLabels: { [DATAPLANE_MODE]: 'ambient' } } },
  {
    podSelector: { matchExpressions: [{ key: DATAPLANE_MODE, operator: 'NotIn', values: ['none'] }] },
    namespaceSelector: { matchLabels: { [DATAPLANE_MODE]: 'ambient' } },
  },
];

export interface EnrollmentConfig {
  readonly selectors: readonly EnablementSelector[];
  /** Namespaces whose pods are never enrolled (Helm default: kube-system). */
  readonly excludeNamespaces: readonly string[];
  /** Namespace of the mesh's own components (node agent, proxy). */
  readonly systemNamespace: string;
  /** Pod name prefixes of the mesh's own components in the system namespace. */
  readonly ownPodPrefixes: readonly string[];
}

/** Upstream's names (istio-system, istio-cni-node, ztunnel): the sim worlds and the plugin's fallback. */
export const DEFAULT_ENROLLMENT_CONFIG: EnrollmentConfig = {
  selectors: DEFAULT_ENABLEMENT_SELECTORS,
  excludeNamespaces: ['kube-system'],
  systemNamespace: 'istio-system',
  ownPodPrefixes: ['istio-cni-node-', 'ztunnel-'],
};

/**
 * The settings of EnrollmentConfig that a deployment chooses, which the node agent and the CNI
 * plugin must share (the installer writes them into the plugin's configuration; the agent reads
 * the same flags): both components then decide enrollment from one configuration.
 */
export type EnrollmentSettings = Pick<EnrollmentConfig, 'excludeNamespaces' | 'systemNamespace' | 'ownPodPrefixes'>;

/** This repository's deployment (fixtures/manifests): its namespace and its DaemonSets' pod name prefixes. */
export const DEPLOYMENT_ENROLLMENT_SETTINGS: EnrollmentSettings = {
  excludeNamespaces: ['kube-system'],
  systemNamespace: 'ambient-lab-system',
  ownPodPrefixes: ['ambient-lab-agent-', 'ambient-lab-proxy-'],
};

/** The enrollment config of a deployment's settings, with upstream's enablement selectors. */
export function enrollmentConfigOf(s: EnrollmentSettings): EnrollmentConfig {
  return { selectors: DEFAULT_ENABLEMENT_SELECTORS, excludeNamespaces: [...s.excludeNamespaces], systemNamespace: s.systemNamespace, ownPodPrefixes: [...s.ownPodPrefixes] };
}

export function validateEnrollmentConfig(c: EnrollmentConfig): void {
  c.selectors.forEach((s, i) => {
    if (s.podSelector) validateSelector(s.podSelector, `enablementSelectors[${i}].podSelector`);
    if (s.namespaceSelector) validateSelector(s.namespaceSelector, `enablementSelectors[${i}].namespaceSelector`);
  });
}

/** What enrollment needs to know about a pod; a subset of the Pod object. */
export interface PodFacts {
  readonly name: string;
  readonly namespace: string;
  readonly labels: Labels;
  readonly annotations: Labels;
  readonly hostNetwork: boolean;
  readonly phase: string | undefined;
}

export type EnrollmentDecision =
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
  if (pod.hostNetwork) return { enroll: false, hard: true, reason: 'hostNetwork pods share the node network namespace and are never enrolled' };
  if (pod.annotations?.[SIDECAR_STATUS] !== undefined) return { enroll: false, hard: true, reason: `sidecar-injected (${SIDECAR_STATUS} present)` };
  if (config.excludeNamespaces.includes(pod.namespace)) return { enroll: false, hard: true, reason: `namespace ${pod.namespace} is excluded` };
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
