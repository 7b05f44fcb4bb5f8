/**
 * The enrollment configuration shared by the CNI plugin and the node agent: upstream istio-cni's
 * enablement selectors (Helm `ambient.enablementSelectors`), the excluded namespaces and the
 * mesh's own pods, their defaults, the settings a deployment chooses, and validation. The
 * decision made from it is in enrollment.ts.
 */
import { DATAPLANE_MODE } from './labels.js';
import { validateSelector, type LabelSelector } from './label-selector.js';

export interface EnablementSelector {
  readonly podSelector?: LabelSelector;
  readonly namespaceSelector?: LabelSelector;
}

/** Upstream's defaults (Helm `ambient.enablementSelectors`). */
const DEFAULT_ENABLEMENT_SELECTORS: readonly EnablementSelector[] = [
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

/** This repository's deployment (deploy/base): its namespace and its DaemonSets' pod name prefixes. */
export const DEPLOYMENT_ENROLLMENT_SETTINGS: EnrollmentSettings = {
  excludeNamespaces: ['kube-system'],
  systemNamespace: 'ambient-lab-system',
  ownPodPrefixes: ['ambient-lab-agent-', 'ambient-lab-proxy-'],
};

/** The enrollment config of a deployment's settings, with upstream's enablement selectors. */
export function enrollmentConfigOf(s: EnrollmentSettings): EnrollmentConfig {
  return {
    selectors: DEFAULT_ENABLEMENT_SELECTORS,
    excludeNamespaces: [...s.excludeNamespaces],
    systemNamespace: s.systemNamespace,
    ownPodPrefixes: [...s.ownPodPrefixes],
  };
}

export function validateEnrollmentConfig(c: EnrollmentConfig): void {
  c.selectors.forEach((s, i) => {
    if (s.podSelector) validateSelector(s.podSelector, `enablementSelectors[${i}].podSelector`);
    if (s.namespaceSelector) validateSelector(s.namespaceSelector, `enablementSelectors[${i}].namespaceSelector`);
  });
}
