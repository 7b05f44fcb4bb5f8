/**
 * The ambient-lab CNI plugin, as a function of the exec protocol (environment + stdin in, exit
 * code + stdout out), so the sim's runtime and the real executable run the same code.
 *
 * It is chained after the primary plugin and does no networking itself. On ADD it decides
 * whether the pod belongs in the mesh and, if so, asks the node agent to put the pod's traffic
 * under the node proxy — and succeeds only when the agent answers that redirection is in place
 * and the proxy acknowledged the pod. Every failure on that path fails the ADD (fail closed):
 * agent missing, slow or failing, and eligibility that cannot be decided because the API
 * server is unreachable (bounded retries, then fail — never "assume not ambient").
 */
import {
  CniError, CniErrorCode, cidrAddress, execFailure, execSuccess, parseCniEnv, parseNetConf,
  type CniEnv, type CniExecOutput, type CniExecRequest, type CniNetConf, type CniPlugin,
} from '../api/cni.js';
import type { PluginEvent } from '../api/plugin-event.js';
import type { Clock } from '../host/clock.js';
import type { KubeApi } from '../host/kube.js';
import { PluginEventTransportError, type PluginEventTransport } from '../host/plugin-events.js';
import type { Logger } from '../host/log.js';
import { decideEnrollment } from '../api/enrollment.js';
import { DEFAULT_ENROLLMENT_CONFIG, validateEnrollmentConfig, type EnablementSelector, type EnrollmentConfig } from '../api/enrollment-config.js';
import { isKubeApiError } from '../host/kube.js';

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

export interface CniPluginDeps {
  /** Open the Kubernetes API (only `get` is used) from the plugin's kubeconfig; may throw. */
  openKube(kubeconfig: string): Pick<KubeApi, 'get'>;
  readonly events: PluginEventTransport;
  readonly clock: Clock;
  readonly log: Logger;
}

const DEFAULTS = { apiAttempts: 5, apiRetryDelayMs: 1000, agentTimeoutMs: 10_000 };

function fail(code: number, msg: string, details?: string): never {
  throw new CniError(code, msg, details);
}

function str(v: unknown, key: string, dflt?: string): string {
  if (v === undefined && dflt !== undefined) return dflt;
  if (typeof v !== 'string' || v === '') fail(CniErrorCode.InvalidNetworkConfig, `${PLUGIN_TYPE}: "${key}" must be a non-empty string`);
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
  const known = new Set(['type', 'name', 'cniVersion', 'prevResult', 'runtimeConfig', 'capabilities', 'args', 'agentSocket', 'kubeconfig',
    'excludeNamespaces', 'systemNamespace', 'ownPodPrefixes', 'enablementSelectors', 'apiAttempts', 'apiRetryDelayMs', 'agentTimeoutMs', 'logLevel']);
  for (const k of Object.keys(conf)) {
    if (!known.has(k)) fail(CniErrorCode.InvalidNetworkConfig, `${PLUGIN_TYPE}: unknown configuration field ${JSON.stringify(k)}`);
  }
  const enrollment: EnrollmentConfig = {
    selectors: (conf['enablementSelectors'] as EnablementSelector[] | undefined) ?? DEFAULT_ENROLLMENT_CONFIG.selectors,
    excludeNamespaces: strList(conf['excludeNamespaces'], 'excludeNamespaces', DEFAULT_ENROLLMENT_CONFIG.excludeNamespaces),
    systemNamespace: str(conf['systemNamespace'], 'systemNamespace', DEFAULT_ENROLLMENT_CONFIG.systemNamespace),
    ownPodPrefixes: (conf['ownPodPrefixes'] as string[] | undefined) ?? DEFAULT_ENROLLMENT_CONFIG.ownPodPrefixes,
  };
  try {
    if (!Array.isArray(enrollment.selectors) || !Array.isArray(enrollment.ownPodPrefixes)) throw new Error('enablementSelectors and ownPodPrefixes must be lists');
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

function cniArg(env: CniEnv, key: string): string | undefined {
  for (const [k, v] of env.args) if (k === key) return v;
  return undefined;
}

export class AmbientCniPlugin implements CniPlugin {
  constructor(private readonly deps: CniPluginDeps) {}

  async exec(req: CniExecRequest): Promise<CniExecOutput> {
    let version = '1.0.0';
    try {
      const env = parseCniEnv(req.env);
      if (env.command === 'VERSION') {
        return execSuccess({ cniVersion: '1.0.0', supportedVersions: [...SUPPORTED_VERSIONS] });
      }
      const conf = parseNetConf(req.stdin);
      version = conf.cniVersion;
      if (!(SUPPORTED_VERSIONS as readonly string[]).includes(version)) {
        fail(CniErrorCode.IncompatibleVersion, `${PLUGIN_TYPE} does not support CNI version ${version}`, `supported: ${SUPPORTED_VERSIONS.join(', ')}`);
      }
      const config = parsePluginConfig(conf);
      switch (env.command) {
        case 'ADD': return await this.add(env, conf, config);
        case 'CHECK': return await this.check(env, conf, config);
        case 'DEL':
          // Teardown is the agent's job (pod delete / terminal phase via its informer); DEL must
          // succeed even when everything is already gone.
          return { exitCode: 0, stdout: '', stderr: '' };
        default:
          fail(CniErrorCode.InvalidEnvironment, `${PLUGIN_TYPE} does not implement ${env.command}`, `it supports spec versions up to 1.0.0`);
      }
    } catch (e) {
      const err = e instanceof CniError ? e : new CniError(CniErrorCode.IoFailure, `${PLUGIN_TYPE}: internal error`, e instanceof Error ? e.message : String(e));
      this.deps.log.error('cni command failed', { code: err.code, error: err.msg, details: err.details });
      return execFailure(err, version);
    }
  }

  /** Is this sandbox's pod one the agent must handle? Returns the event to send, or undefined. */
  private async eligibility(env: CniEnv, conf: CniNetConf, config: PluginConfig, kind: PluginEvent['kind']): Promise<PluginEvent | undefined> {
    const podName = cniArg(env, 'K8S_POD_NAME');
    const podNamespace = cniArg(env, 'K8S_POD_NAMESPACE');
    if (!podName || !podNamespace) return undefined; // not a Kubernetes pod sandbox
    const e = config.enrollment;
    if (podNamespace === e.systemNamespace && e.ownPodPrefixes.some((p) => podName.startsWith(p))) return undefined;
    if (e.excludeNamespaces.includes(podNamespace)) return undefined;
    if (!conf.prevResult) {
      fail(CniErrorCode.InvalidNetworkConfig, `${PLUGIN_TYPE} must be chained after a primary plugin`, 'no prevResult in the configuration');
    }
    let kube: Pick<KubeApi, 'get'>;
    try {
      kube = this.deps.openKube(config.kubeconfig);
    } catch (err) {
      fail(CniErrorCode.TryAgainLater, `${PLUGIN_TYPE}: cannot open the Kubernetes API from ${config.kubeconfig}`, (err as Error).message);
    }
    let lastError = '';
    for (let attempt = 1; attempt <= config.apiAttempts; attempt++) {
      try {
        const pod = await kube.get('Pod', podName, podNamespace);
        const ns = await kube.get('Namespace', podNamespace);
        const decision = decideEnrollment({
          name: podName,
          namespace: podNamespace,
          labels: pod.metadata?.labels,
          annotations: pod.metadata?.annotations,
          hostNetwork: pod.spec?.hostNetwork === true,
          phase: pod.status?.phase,
        }, ns.metadata?.labels ?? {}, e);
        this.deps.log.info('enrollment decision', { pod: `${podNamespace}/${podName}`, enroll: decision.enroll, reason: decision.reason });
        if (!decision.enroll) return undefined;
        const ips = (conf.prevResult.ips ?? []).map((ip) => cidrAddress(ip.address));
        if (ips.length === 0) fail(CniErrorCode.InvalidNetworkConfig, `${PLUGIN_TYPE}: the primary plugin's result has no IP addresses for ${podNamespace}/${podName}`);
        return {
          kind,
          netns: env.netns ?? fail(CniErrorCode.InvalidEnvironment, 'CNI_NETNS is required'),
          podName,
          podNamespace,
          podUid: cniArg(env, 'K8S_POD_UID'),
          containerId: env.containerId ?? fail(CniErrorCode.InvalidEnvironment, 'CNI_CONTAINERID is required'),
          ips,
        };
      } catch (err) {
        if (err instanceof CniError) throw err;
        if (isKubeApiError(err, 404)) {
          // The pod object must exist before its sandbox is created; a 404 is not a "no".
          lastError = `pod or namespace not found: ${(err as Error).message}`;
        } else lastError = (err as Error).message;
        this.deps.log.warn('cannot read pod/namespace; retrying', { attempt, error: lastError });
        if (attempt < config.apiAttempts) await this.deps.clock.sleep(config.apiRetryDelayMs);
      }
    }
    // Never "assume not ambient": an unknown answer must not start the pod unprotected.
    return fail(CniErrorCode.TryAgainLater, `${PLUGIN_TYPE}: cannot decide whether ${podNamespace}/${podName} belongs in the mesh`,
      `the Kubernetes API failed ${config.apiAttempts} time(s); last error: ${lastError}`);
  }

  private async askAgent(event: PluginEvent, config: PluginConfig): Promise<void> {
    let reply;
    try {
      reply = await this.deps.events.send(config.agentSocket, event, config.agentTimeoutMs);
    } catch (err) {
      const why = err instanceof PluginEventTransportError ? `${err.reason}: ${err.message}` : (err as Error).message;
      fail(CniErrorCode.TryAgainLater, `${PLUGIN_TYPE}: cannot reach the node agent at ${config.agentSocket}`, why);
    }
    if (!reply.ok) fail(CniErrorCode.TryAgainLater, `${PLUGIN_TYPE}: the node agent could not enroll ${event.podNamespace}/${event.podName}`, reply.error);
  }

  private async add(env: CniEnv, conf: CniNetConf, config: PluginConfig): Promise<CniExecOutput> {
    const event = await this.eligibility(env, conf, config, 'add');
    if (event) await this.askAgent(event, config);
    // Chained plugins pass the previous result through unchanged.
    return execSuccess(conf.prevResult ?? { cniVersion: conf.cniVersion });
  }

  private async check(env: CniEnv, conf: CniNetConf, config: PluginConfig): Promise<CniExecOutput> {
    const event = await this.eligibility(env, conf, config, 'check');
    if (event) await this.askAgent(event, config);
    return { exitCode: 0, stdout: '', stderr: '' };
  }
}
