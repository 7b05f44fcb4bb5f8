/**
 * The CNI plugin's identity and configuration, shared by the plugin (impl/cni-plugin) and the
 * installer that writes its conflist entry (impl/node-agent/install.ts): its type name, the CNI
 * versions it speaks, its own fields in the conflist entry, and their parsing and validation.
 */
import { CniError, CniErrorCode, type CniNetConf } from './cni.js';
import {
  DEFAULT_ENROLLMENT_CONFIG,
  validateEnrollmentConfig,
  type EnablementSelector,
  type EnrollmentConfig,
} from './enrollment-config.js';

export const PLUGIN_TYPE = 'ambient-lab-cni';
export const SUPPORTED_VERSIONS = ['0.3.0', '0.3.1', '0.4.0', '1.0.0'] as const;

/** The plugin's own fields in its conflist entry. */
export interface PluginConfig {
  /** Address of the node agent's plugin-event socket. */
  readonly agentSocket: string;
  /** Kubeconfig the plugin uses to read the pod and its namespace. */
  readonly kubeconfig: string;
  readonly enrollment: EnrollmentConfig;
  /** Attempts at reading the pod/namespace before failing the ADD. */
  readonly apiAttempts: number;
  readonly apiRetryDelayMs: number;
  /** How long to wait for the agent's answer (rules applied + proxy ack). */
  readonly agentTimeoutMs: number;
}

const DEFAULTS = { apiAttempts: 5, apiRetryDelayMs: 1000, agentTimeoutMs: 10_000 };

function fail(code: number, msg: string, details?: string): never {
  throw new CniError(code, msg, details);
}

function str(v: unknown, key: string, dflt?: string): string {
  if (v === undefined && dflt !== undefined) return dflt;
  if (typeof v !== 'string' || v === '')
    fail(CniErrorCode.InvalidNetworkConfig, `${PLUGIN_TYPE}: "${key}" must be a non-empty string`);
  return v;
}

function int(v: unknown, key: string, dflt: number, min: number, max: number): number {
  if (v === undefined) return dflt;
  if (typeof v !== 'number' || !Number.isInteger(v) || v < min || v > max) {
    fail(CniErrorCode.InvalidNetworkConfig, `${PLUGIN_TYPE}: "${key}" must be an integer in ${min}..${max}`);
  }
  return v;
}

function strList(v: unknown, key: string, dflt: readonly string[]): readonly string[] {
  if (v === undefined) return dflt;
  if (!Array.isArray(v) || !v.every((x) => typeof x === 'string' && /^[a-z0-9]([-a-z0-9]*[a-z0-9])?$/.test(x))) {
    fail(CniErrorCode.InvalidNetworkConfig, `${PLUGIN_TYPE}: "${key}" must be a list of namespace names`);
  }
  return v as string[];
}

/** Read and validate the plugin's fields from its configuration. Throws CniError 7. */
export function parsePluginConfig(conf: CniNetConf): PluginConfig {
  const known = new Set([
    'type',
    'name',
    'cniVersion',
    'prevResult',
    'runtimeConfig',
    'capabilities',
    'args',
    'agentSocket',
    'kubeconfig',
    'excludeNamespaces',
    'systemNamespace',
    'ownPodPrefixes',
    'enablementSelectors',
    'apiAttempts',
    'apiRetryDelayMs',
    'agentTimeoutMs',
    'logLevel',
  ]);
  for (const k of Object.keys(conf)) {
    if (!known.has(k))
      fail(CniErrorCode.InvalidNetworkConfig, `${PLUGIN_TYPE}: unknown configuration field ${JSON.stringify(k)}`);
  }
  const enrollment: EnrollmentConfig = {
    selectors: (conf['enablementSelectors'] as EnablementSelector[] | undefined) ?? DEFAULT_ENROLLMENT_CONFIG.selectors,
    excludeNamespaces: strList(
      conf['excludeNamespaces'],
      'excludeNamespaces',
      DEFAULT_ENROLLMENT_CONFIG.excludeNamespaces,
    ),
    systemNamespace: str(conf['systemNamespace'], 'systemNamespace', DEFAULT_ENROLLMENT_CONFIG.systemNamespace),
    ownPodPrefixes: (conf['ownPodPrefixes'] as string[] | undefined) ?? DEFAULT_ENROLLMENT_CONFIG.ownPodPrefixes,
  };
  try {
    if (!Array.isArray(enrollment.selectors) || !Array.isArray(enrollment.ownPodPrefixes))
      throw new Error('enablementSelectors and ownPodPrefixes must be lists');
    validateEnrollmentConfig(enrollment);
  } catch (e) {
    fail(CniErrorCode.InvalidNetworkConfig, `${PLUGIN_TYPE}: invalid enrollment configuration`, (e as Error).message);
  }
  return {
    agentSocket: str(conf['agentSocket'], 'agentSocket'),
    kubeconfig: str(conf['kubeconfig'], 'kubeconfig'),
    enrollment,
    apiAttempts: int(conf['apiAttempts'], 'apiAttempts', DEFAULTS.apiAttempts, 1, 60),
    apiRetryDelayMs: int(conf['apiRetryDelayMs'], 'apiRetryDelayMs', DEFAULTS.apiRetryDelayMs, 0, 60_000),
    agentTimeoutMs: int(conf['agentTimeoutMs'], 'agentTimeoutMs', DEFAULTS.agentTimeoutMs, 100, 120_000),
  };
}
