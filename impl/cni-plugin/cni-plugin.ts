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
  CniError,
  CniErrorCode,
  cidrAddress,
  execFailure,
  execSuccess,
  parseCniEnv,
  parseNetConf,
  type CniEnv,
  type CniExecOutput,
  type CniExecRequest,
  type CniNetConf,
  type CniPlugin,
} from '../api/cni.js';
import type { PluginEvent } from '../api/plugin-event.js';
import type { Clock } from '../host/clock.js';
import type { KubeApi } from '../host/kube.js';
import { PluginEventTransportError, type PluginEventTransport } from '../host/plugin-events.js';
import type { Logger } from '../host/log.js';
import { decideEnrollment } from '../api/enrollment.js';
import { PLUGIN_TYPE, SUPPORTED_VERSIONS, parsePluginConfig, type PluginConfig } from '../api/cni-plugin-config.js';
import { isKubeApiError } from '../host/kube.js';

interface CniPluginDeps {
  /** Open the Kubernetes API (only `get` is used) from the plugin's kubeconfig; may throw. */
  openKube(kubeconfig: string): Pick<KubeApi, 'get'>;
  readonly events: PluginEventTransport;
  readonly clock: Clock;
  readonly log: Logger;
}

function fail(code: number, msg: string, details?: string): never {
  throw new CniError(code, msg, details);
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
        fail(
          CniErrorCode.IncompatibleVersion,
          `${PLUGIN_TYPE} does not support CNI version ${version}`,
          `supported: ${SUPPORTED_VERSIONS.join(', ')}`,
        );
      }
      const config = parsePluginConfig(conf);
      switch (env.command) {
        case 'ADD':
          return await this.add(env, conf, config);
        case 'CHECK':
          return await this.check(env, conf, config);
        case 'DEL':
          // Teardown is the agent's job (pod delete / terminal phase via its informer); DEL must
          // succeed even when everything is already gone.
          return { exitCode: 0, stdout: '', stderr: '' };
        default:
          fail(
            CniErrorCode.InvalidEnvironment,
            `${PLUGIN_TYPE} does not implement ${env.command}`,
            `it supports spec versions up to 1.0.0`,
          );
      }
    } catch (e) {
      const err =
        e instanceof CniError
          ? e
          : new CniError(
              CniErrorCode.IoFailure,
              `${PLUGIN_TYPE}: internal error`,
              e instanceof Error ? e.message : String(e),
            );
      this.deps.log.error('cni command failed', { code: err.code, error: err.msg, details: err.details });
      return execFailure(err, version);
    }
  }

  /** Is this sandbox's pod one the agent must handle? Returns the event to send, or undefined. */
  private async eligibility(
    env: CniEnv,
    conf: CniNetConf,
    config: PluginConfig,
    kind: PluginEvent['kind'],
  ): Promise<PluginEvent | undefined> {
    const podName = cniArg(env, 'K8S_POD_NAME');
    const podNamespace = cniArg(env, 'K8S_POD_NAMESPACE');
    if (!podName || !podNamespace) return undefined; // not a Kubernetes pod sandbox
    const e = config.enrollment;
    if (podNamespace === e.systemNamespace && e.ownPodPrefixes.some((p) => podName.startsWith(p))) return undefined;
    if (e.excludeNamespaces.includes(podNamespace)) return undefined;
    if (!conf.prevResult) {
      fail(
        CniErrorCode.InvalidNetworkConfig,
        `${PLUGIN_TYPE} must be chained after a primary plugin`,
        'no prevResult in the configuration',
      );
    }
    let kube: Pick<KubeApi, 'get'>;
    try {
      kube = this.deps.openKube(config.kubeconfig);
    } catch (err) {
      fail(
        CniErrorCode.TryAgainLater,
        `${PLUGIN_TYPE}: cannot open the Kubernetes API from ${config.kubeconfig}`,
        (err as Error).message,
      );
    }
    let lastError = '';
    for (let attempt = 1; attempt <= config.apiAttempts; attempt++) {
      try {
        const pod = await kube.get('Pod', podName, podNamespace);
        const ns = await kube.get('Namespace', podNamespace);
        const decision = decideEnrollment(
          {
            name: podName,
            namespace: podNamespace,
            labels: pod.metadata?.labels,
            annotations: pod.metadata?.annotations,
            hostNetwork: pod.spec?.hostNetwork === true,
            phase: pod.status?.phase,
          },
          ns.metadata?.labels ?? {},
          e,
        );
        this.deps.log.info('enrollment decision', {
          pod: `${podNamespace}/${podName}`,
          enroll: decision.enroll,
          reason: decision.reason,
        });
        if (!decision.enroll) return undefined;
        const ips = (conf.prevResult.ips ?? []).map((ip) => cidrAddress(ip.address));
        if (ips.length === 0)
          fail(
            CniErrorCode.InvalidNetworkConfig,
            `${PLUGIN_TYPE}: the primary plugin's result has no IP addresses for ${podNamespace}/${podName}`,
          );
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
    return fail(
      CniErrorCode.TryAgainLater,
      `${PLUGIN_TYPE}: cannot decide whether ${podNamespace}/${podName} belongs in the mesh`,
      `the Kubernetes API failed ${config.apiAttempts} time(s); last error: ${lastError}`,
    );
  }

  private async askAgent(event: PluginEvent, config: PluginConfig): Promise<void> {
    let reply;
    try {
      reply = await this.deps.events.send(config.agentSocket, event, config.agentTimeoutMs);
    } catch (err) {
      const why = err instanceof PluginEventTransportError ? `${err.reason}: ${err.message}` : (err as Error).message;
      fail(CniErrorCode.TryAgainLater, `${PLUGIN_TYPE}: cannot reach the node agent at ${config.agentSocket}`, why);
    }
    if (!reply.ok)
      fail(
        CniErrorCode.TryAgainLater,
        `${PLUGIN_TYPE}: the node agent could not enroll ${event.podNamespace}/${event.podName}`,
        reply.error,
      );
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
