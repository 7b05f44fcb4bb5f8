/**
 * The node agent: keeps every pod on its node that belongs in the mesh under the node proxy, and
 * every other pod untouched — through CNI events (new sandboxes), informers (live label changes,
 * deletes, terminal phases), start-up reconstruction and periodic repair.
 *
 * Enrolling a pod (in this order, each step idempotent):
 *   1. redirection rules into the pod's netns (NetnsRules port);
 *   2. the pod to the proxy over ZDS, with its netns — wait for the ack;
 *   3. the pod's IPs into the host probe set;
 *   4. annotation ambient.istio.io/redirection=enabled (status subresource).
 * When the proxy is missing or nacks, the pod is annotated `pending` and retried; a CNI ADD in
 * that state fails (fail closed), so the pod's containers do not start unprotected.
 *
 * Beyond upstream (docs/bypass-classes.md): hostile annotation values are refused before any rule text
 * exists; the ZDS peer must run as an allowed uid; the repair loop finds drifted rules, lost
 * namespaces (reboot without drain) and missing proxy state, and fixes them; the status
 * annotation is only `enabled` while rules and proxy ack both hold.
 */
import type { NetnsId, PodUid } from '../api/ids.js';
import { netnsId, podUid } from '../api/ids.js';
import { podIps } from '../api/pod-ips.js';
import { port } from '../api/ports.js';
import type { Profile } from '../api/profile.js';
import {
  AnnotationError,
  REDIRECTION_STATUS,
  parsePodRedirectionAnnotations,
  parsePodRedirectionAnnotationsUpstream,
} from '../api/annotations.js';
import type { PluginEvent, PluginEventReply } from '../api/plugin-event.js';
import { PLUGIN_EVENT_MAX_BYTES } from '../api/plugin-event.js';
import type { Clock, TimerHandle } from '../host/clock.js';
import type { Informer, KubeApi, KubeObjectOf } from '../host/kube.js';
import { isKubeApiError } from '../host/kube.js';
import type { Logger } from '../host/log.js';
import type { Metrics } from '../host/metrics.js';
import type { NetnsFinder } from '../host/netns-finder.js';
import type { HostIpSets } from '../host/ipsets.js';
import type { IpFamily, NetnsRules, RedirectionPlan } from '../host/netns-rules.js';
import type { PluginEventServer, PluginEventTransport } from '../host/plugin-events.js';
import type { ZdsTransport } from '../host/zds-transport.js';
import { decideEnrollment, isTerminalPhase } from '../api/enrollment.js';
import type { EnrollmentConfig } from '../api/enrollment-config.js';
import { selectorMatches } from '../api/label-selector.js';
import { buildInpodRules, inpodCommonOptions, renderInpodPlan, type InpodOptions } from './rule-builder.js';
import { hostProbeNftPlan, inpodNftPlan } from './nftables/profile-nft.js';
import { nftDrift, nftListingOf, type NftListing } from './nftables/nft-drift.js';
import type { Backend } from '../api/backend.js';
import { drift, leftovers, universe } from './plan-drift.js';
import { foreignRules } from './foreign-rules.js';
import { describeFlow, escapedFlows, type EscapedFlow } from './escaped-flows.js';
import type { PodFlows } from '../host/pod-flows.js';
import { DEFAULT_PROBE_SNAT } from './rule-builder.js';
import { address, type Cidr } from './rule-ir.js';
import { buildHostProbeRules, renderHostProbePlan, PROBE_SET } from './host-probe-rules.js';
import { probePorts } from './probe-ports.js';
import { fieldsRunningAs } from './proxy-uid-pods.js';
import { probeSetSteps, type ProbeSetClaim, type ProbeSetMember } from './probe-set-sync.js';
import { RetryableError, WorkQueue } from './work-queue.js';
import { ZdsSendError, ZdsServer, type ZdsSnapshotEntry } from './zds-server.js';

type Pod = KubeObjectOf<'Pod'>;
type Namespace = KubeObjectOf<'Namespace'>;

export interface NodeAgentConfig {
  readonly nodeName: string;
  readonly profile: Profile;
  readonly ipv6: boolean;
  readonly dnsCapture: boolean;
  readonly enrollment: EnrollmentConfig;
  /** strict profile: uid of the node proxy (owner of the marked sockets). */
  readonly proxyUid: number;
  /** strict profile: uid of the kubelet (owner of probe sockets on the host). */
  readonly kubeletUid: number;
  /** Uids a ZDS client may run as. */
  readonly allowedProxyUids: readonly number[];
  readonly pluginEventAddress: string;
  readonly zdsAddress: string;
  /** The node's own network namespace, where the host probe rules go. */
  readonly hostNetns: NetnsId;
  readonly repairIntervalMs: number;
  readonly zdsAckTimeoutMs?: number;
  /** Trust domain for workload identities (sent to the proxy). */
  readonly trustDomain?: string;
  /** Host probe SNAT addresses (upstream HOST_PROBE_SNAT_IP / _IPV6); absent = upstream's defaults. Host and in-pod rules use the same. */
  readonly probeSnat?: Readonly<Record<IpFamily, Cidr>>;
  /** Which kernel interface writes the rules; absent = iptables (upstream's default). */
  readonly backend?: Backend;
}

interface NodeAgentDeps {
  readonly kube: KubeApi;
  readonly rules: NetnsRules;
  /** The TCP connections of a pod's namespace: strict ends those that escaped while it was drifted. */
  readonly flows: PodFlows;
  readonly finder: NetnsFinder;
  readonly ipsets: HostIpSets;
  readonly pluginEvents: PluginEventTransport;
  readonly zdsTransport: ZdsTransport;
  readonly clock: Clock;
  readonly log: Logger;
  readonly metrics: Metrics;
  /**
   * Optional rewrite of each in-pod plan before it is applied (and remembered as the plan the
   * repair loop verifies). Identity by default; mutation testing weakens the rules through it.
   */
  readonly planTransform?: (
    plan: RedirectionPlan,
    pod: { readonly namespace: string; readonly name: string },
  ) => RedirectionPlan;
  /**
   * The CNI plugin's install state on this node (install-check.ts). When given, the agent is
   * ready only while the plugin is installed and chained, as upstream's readiness; absent (a
   * world whose runtime has no conf dir to read), readiness is the agent's own.
   */
  readonly installCheck?: {
    start(): Promise<void>;
    stop(): void;
    readonly state: { readonly installed: boolean; readonly detail: string };
  };
}

/** What the agent holds for a pod it has (or is putting) in the mesh. */
interface MeshPod {
  readonly uid: PodUid;
  readonly name: string;
  readonly namespace: string;
  serviceAccount: string;
  ips: string[];
  netns: NetnsId | undefined;
  plan: RedirectionPlan | undefined;
  /** nftables backend: the plan's tables as listed right after this agent applied it (drift is a different listing). */
  nftApplied: NftListing | undefined;
  /** Rules applied in `netns`. */
  rulesApplied: boolean;
  /** The proxy acknowledged the pod with this netns. */
  proxyAcked: boolean;
  /** The annotation value we last wrote. */
  annotated: 'pending' | 'enabled' | undefined;
  /** Clock time at which this agent last applied the plan or found it intact (start of its last read). */
  intactAt: number | undefined;
  /** A repair pass found the rules differ from the plan; cleared once repaired and reported. */
  drifted: Drift | undefined;
  /**
   * Strict: the connections the pod's netns held when this agent first applied the plan there
   * have been ended where uncaptured (sweepAtEnrollment); until then the next pass retries it.
   */
  swept: boolean;
  /** The ingress-mode annotation of the last plan (inbound not captured). */
  inboundUncaptured: boolean;
  /** Clock time this agent began enrolling the pod, until the proxy first acknowledges it (enrollment histogram). */
  enrollingSince: number | undefined;
}

/** A drift the repair loop found, until its repair is reported (and, under strict, its escaped flows ended). */
interface Drift {
  /** When this agent last knew the plan intact; undefined when it never did (rules read back after a restart). */
  readonly intactAt: number | undefined;
  readonly foundAt: number;
  /** drift() and, under strict, foreignRules() lines. */
  readonly differences: readonly string[];
  /** foreignRules() lines: what was in the plan's tables that the plan does not put there. */
  readonly foreign: readonly string[];
  /** When the plan was applied again; set by enroll(). */
  repairedAt: number | undefined;
}

/** Upper bounds (ms) of the bypass-window histogram: sub-second races up to several repair intervals. */
const WINDOW_BUCKETS_S = [0.1, 0.25, 0.5, 1, 2, 5, 10, 15, 30, 60, 300];
/** Latencies of the agent's own steps (CNI ADD, reconcile, enrollment, ZDS round trip), seconds. */
const LATENCY_BUCKETS_S = [0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30];

interface AgentHealth {
  readonly live: boolean;
  readonly ready: boolean;
  readonly detail: string;
}

class NotEligible extends Error {}

/** Strict: a pod declares the proxy's uid (proxy-uid-pods.ts); not retryable — the spec must change. */
class RunsAsProxyUid extends Error {}

/**
 * The in-pod rules could not be applied. Not retryable, as upstream (its NonRetryableAdd for a
 * CreateInpodRules failure): the reply says so and the queue does not retry it at once. Unlike
 * upstream, the pod stays in the mesh map without rules, so the repair loop tries again each
 * interval (a failure from a passing cause, e.g. a held xtables lock, then heals).
 */
class RulesApplyError extends Error {}

export class NodeAgent {
  private readonly log: Logger;
  private readonly mesh = new Map<PodUid, MeshPod>();
  /** Pods whose delete event reconcile has not handled yet: the last object the informer saw. */
  private readonly deleted = new Map<PodUid, Pod>();
  private readonly queue: WorkQueue;
  private readonly zds: ZdsServer;
  private podInformer: Informer<Pod> | undefined;
  private nsInformer: Informer<Namespace> | undefined;
  private pluginServer: PluginEventServer | undefined;
  private repairTimer: TimerHandle | undefined;
  private started = false;
  private readonly warned = new Set<string>();
  private stopped = false;
  /** Repair passes begun and finished (status: a harness waits for a whole pass after a change). */
  private readonly repairPasses = { started: 0, completed: 0 };
  /** The last repair pass asked for: the next one starts after it (repair()). */
  private repairTail: Promise<void> = Promise.resolve();
  /** The probe-set sync in progress (one at a time). */
  private probeSync: Promise<void> | undefined;
  private readonly m;

  constructor(
    private readonly config: NodeAgentConfig,
    private readonly deps: NodeAgentDeps,
  ) {
    this.log = deps.log.child({ component: 'node-agent', node: config.nodeName });
    this.queue = new WorkQueue(deps.clock, (key) => this.reconcile(key), {
      initialBackoffMs: 5,
      maxBackoffMs: 5000,
      onError: (key, err, retry) => {
        this.m.reconcileErrors.inc({ retry: String(retry) });
        this.log.warn('reconcile failed', { pod: key, error: (err as Error).message, retry });
        this.eventForKey(key, retry ? 'MeshEnrollmentPending' : 'MeshEnrollmentFailed', (err as Error).message);
      },
    });
    this.zds = new ZdsServer({
      transport: deps.zdsTransport,
      address: config.zdsAddress,
      clock: deps.clock,
      log: deps.log,
      allowedUids: config.allowedProxyUids,
      snapshot: () => this.snapshot(),
      ...(config.zdsAckTimeoutMs !== undefined ? { ackTimeoutMs: config.zdsAckTimeoutMs } : {}),
      onRoundTrip: (request, result, ms) => this.m.zdsRoundTrip.observe(ms / 1000, { request, result }),
    });
    this.zds.on((e) => {
      if (e.type === 'connected' || e.type === 'disconnected') this.m.proxyConnections.set(this.zds.connectionCount());
      if (e.type === 'disconnected' && !this.zds.connected()) {
        // Without a proxy nobody holds the pods' listeners; the next proxy gets a snapshot.
        for (const p of this.mesh.values()) p.proxyAcked = false;
      } else if (e.type === 'nack' && e.uid !== undefined && e.origin !== 'caller') {
        // Only nacks nobody awaits (snapshot, resync) queue the pod. A nack of enroll()'s own Add
        // already fails that reconcile, which the queue retries with backoff; queueing it here as
        // well re-ran it at once (a fresh event overrides the backoff): an add/nack hot loop,
        // every ~2 ms, for a pod whose listeners cannot bind (found by ambient-lab check).
        const p = this.mesh.get(e.uid);
        if (p) {
          p.proxyAcked = false;
          this.queue.enqueue(this.keyOf(p));
        }
      } else if (e.type === 'connected' || e.type === 'snapshot-sent') {
        this.log.info(`proxy ${e.type}`, { connection: e.connection });
        for (const p of this.mesh.values())
          if (!p.proxyAcked || p.annotated !== 'enabled') this.queue.enqueue(this.keyOf(p));
      }
    });
    this.m = {
      reconcileErrors: deps.metrics.counter('ambient_lab_agent_reconcile_errors_total', 'Failed reconciliations', [
        'retry',
      ]),
      // upstream istio-cni's name and label: 200 when the event was handled, 500 when it failed
      pluginRequests: deps.metrics.counter(
        'istio_cni_plugin_requests_total',
        'The total number of CNI plugin requests handled by the node agent.',
        ['response_code'],
      ),
      pluginDuration: deps.metrics.histogram(
        'ambient_lab_agent_cni_event_duration_seconds',
        'Time from a CNI plugin event (ADD, CHECK) arriving to its reply',
        LATENCY_BUCKETS_S,
        ['kind', 'result'],
      ),
      reconcileEvents: deps.metrics.counter(
        'nodeagent_reconcile_events_total',
        'The total number of node agent reconcile events.',
        ['type'],
      ),
      reconcileDuration: deps.metrics.histogram(
        'ambient_lab_agent_reconcile_duration_seconds',
        "One pod's reconcile: from taking it off the queue to its desired state (or the error)",
        LATENCY_BUCKETS_S,
        ['result'],
      ),
      enrollment: deps.metrics.histogram(
        'ambient_lab_agent_enrollment_duration_seconds',
        'From the agent beginning to enroll a pod to the node proxy acknowledging it',
        LATENCY_BUCKETS_S,
      ),
      zdsRoundTrip: deps.metrics.histogram(
        'ambient_lab_agent_zds_round_trip_seconds',
        'A ZDS request to the node proxy: from sent to its ack, nack or timeout',
        LATENCY_BUCKETS_S,
        ['request', 'result'],
      ),
      proxyConnections: deps.metrics.gauge('ztunnel_connected', 'number of connections to ztunnel'),
      enrolled: deps.metrics.gauge('ambient_lab_agent_enrolled_pods', 'Pods with redirection enabled'),
      repairs: deps.metrics.counter('ambient_lab_agent_repairs_total', 'Drift found and fixed by the repair loop', [
        'what',
      ]),
      driftWindow: deps.metrics.histogram(
        'ambient_lab_agent_drift_window_seconds',
        "Upper bound of each repaired drift's bypass window: from the last time the agent knew the plan intact to the re-apply",
        WINDOW_BUCKETS_S,
      ),
      flowsEnded: deps.metrics.counter(
        'ambient_lab_agent_escaped_flows_ended_total',
        'TCP connections that escaped capture while the rules were drifted, ended after the repair (strict)',
      ),
    };
  }

  // ------------------------------------------------------------------ lifecycle

  /** Start-up: host rules, informers synced, state rebuilt, proxy channel and plugin socket open. */
  async start(): Promise<void> {
    await this.deps.installCheck?.start();
    await this.installHostRules();
    this.nsInformer = this.deps.kube.informer('Namespace');
    this.podInformer = this.deps.kube.informer('Pod', { fieldSelector: `spec.nodeName=${this.config.nodeName}` });
    const onPod = (p: Pod): void => {
      if (this.started) this.queue.enqueue(this.keyOfPod(p));
    };
    this.podInformer.on('add', (p: Pod) => {
      this.m.reconcileEvents.inc({ type: 'add' });
      onPod(p);
    });
    this.podInformer.on('update', (p: Pod) => {
      this.m.reconcileEvents.inc({ type: 'update' });
      onPod(p);
    });
    this.podInformer.on('delete', (p: Pod) => {
      this.m.reconcileEvents.inc({ type: 'delete' });
      // Kept for reconcile: the cache no longer has the pod, and the agent may never have held it.
      const uid = p.metadata?.uid;
      if (uid) this.deleted.set(podUid(uid), p);
      this.queue.enqueue(this.keyOfPod(p));
    });
    const onNs = (ns: Namespace): void => {
      if (!this.started) return;
      for (const p of this.podInformer?.list(ns.metadata?.name) ?? []) this.queue.enqueue(this.keyOfPod(p));
    };
    this.nsInformer.on('add', onNs);
    this.nsInformer.on('update', onNs);
    for (const inf of [this.nsInformer, this.podInformer] as Informer<unknown>[]) {
      inf.on('error', (err: unknown) => {
        // client-node semantics: an informer stops on error; restart it after a pause.
        this.log.warn('informer error; restarting', { error: err instanceof Error ? err.message : String(err) });
        this.deps.clock.setTimer(1000, () => {
          if (!this.stopped) void inf.start();
        });
      });
    }
    await this.nsInformer.start();
    await this.podInformer.start();
    await this.rebuild();
    await this.zds.start();
    this.pluginServer = await this.deps.pluginEvents.serve(
      this.config.pluginEventAddress,
      (e) => this.onPluginEvent(e),
      {
        maxBodyBytes: PLUGIN_EVENT_MAX_BYTES,
        requestTimeoutMs: 5000,
      },
    );
    this.started = true;
    for (const p of this.podInformer.list()) this.queue.enqueue(this.keyOfPod(p));
    // Members of pods deleted, or re-addressed, while no agent ran (reboot, restart) go now.
    await this.syncProbeSets().catch((err: unknown) => {
      this.log.warn('host probe ipset sync at start-up failed; the repair loop retries', {
        error: (err as Error).message,
      });
    });
    this.scheduleRepair();
    this.log.info('node agent started', { pods: this.mesh.size });
  }

  /** Stop serving; in-pod rules stay in place (an upgrade must not unprotect running pods). */
  async stop(): Promise<void> {
    this.stopped = true;
    this.started = false;
    this.repairTimer?.cancel();
    this.deps.installCheck?.stop();
    this.queue.stop();
    this.podInformer?.stop();
    this.nsInformer?.stop();
    await this.pluginServer?.close();
    await this.zds.stop();
  }

  health(): AgentHealth {
    if (!this.started) return { live: !this.stopped, ready: false, detail: this.stopped ? 'stopped' : 'starting' };
    const pending = [...this.mesh.values()].filter((p) => !p.proxyAcked).length;
    const install = this.deps.installCheck?.state;
    return {
      live: true,
      ready: install?.installed ?? true,
      detail: `${install ? `${install.detail}; ` : ''}${this.mesh.size} pod(s) in the mesh, ${pending} pending; proxy ${this.zds.connected() ? 'connected' : 'not connected'}`,
    };
  }

  /** For tests and `status`: what the agent believes about each mesh pod. */
  meshPods(): readonly {
    uid: string;
    namespace: string;
    name: string;
    netns: string | undefined;
    rules: boolean;
    acked: boolean;
    annotated: string | undefined;
  }[] {
    return [...this.mesh.values()].map((p) => ({
      uid: p.uid,
      namespace: p.namespace,
      name: p.name,
      netns: p.netns,
      rules: p.rulesApplied,
      acked: p.proxyAcked,
      annotated: p.annotated,
    }));
  }

  proxyConnected(): boolean {
    return this.zds.connected();
  }

  /**
   * For `status` and a harness deciding the agent has settled on observed state, not on a quiet
   * period: its work queue (runs in progress, keys waiting for a retry with their failure counts),
   * its repair passes begun and finished, and the resourceVersion of every object its informers
   * hold (pods of this node by namespace/name, namespaces by name) — compared with the API, this
   * says whether the agent has seen every change yet.
   */
  progress(): {
    queue: { inFlight: number; retrying: { key: string; failures: number }[] };
    repairs: { started: number; completed: number };
    caches: { pods: Record<string, string>; namespaces: Record<string, string> } | undefined;
  } {
    const versions = (
      objs: readonly { metadata?: { namespace?: string; name?: string; resourceVersion?: string } }[],
    ): Record<string, string> =>
      Object.fromEntries(
        objs.map((o) => [
          o.metadata?.namespace ? `${o.metadata.namespace}/${o.metadata.name ?? ''}` : (o.metadata?.name ?? ''),
          o.metadata?.resourceVersion ?? '',
        ]),
      );
    return {
      queue: this.queue.state(),
      repairs: { ...this.repairPasses },
      caches:
        this.started && this.podInformer && this.nsInformer
          ? { pods: versions(this.podInformer.list()), namespaces: versions(this.nsInformer.list()) }
          : undefined,
    };
  }

  // ------------------------------------------------------------------ host side

  private async installHostRules(): Promise<void> {
    const snat = this.config.probeSnat ? { probeSnat: this.config.probeSnat } : {};
    const ir =
      this.config.profile === 'strict'
        ? buildHostProbeRules({
            profile: 'strict',
            ipv6: this.config.ipv6,
            kubeletUid: this.config.kubeletUid,
            ...snat,
          })
        : buildHostProbeRules({ profile: 'upstream', ipv6: this.config.ipv6, ...snat });
    for (const s of ir.ipsets) await this.deps.ipsets.ensure({ name: s.name, family: s.family });
    await this.deps.rules.apply(
      this.config.hostNetns,
      this.backend() === 'nftables'
        ? hostProbeNftPlan(ir, {
            kubeletUid: this.config.kubeletUid,
            ...(this.config.probeSnat ? { probeSnat: this.config.probeSnat } : {}),
          })
        : renderHostProbePlan(ir),
    );
  }

  // ------------------------------------------------------------------ CNI events

  private pluginDone(kind: PluginEvent['kind'], result: 'ok' | 'error', receivedAt: number): void {
    this.m.pluginRequests.inc({ response_code: result === 'ok' ? '200' : '500' });
    this.m.pluginDuration.observe((this.deps.clock.now() - receivedAt) / 1000, { kind, result });
  }

  private async onPluginEvent(e: PluginEvent): Promise<PluginEventReply> {
    const receivedAt = this.deps.clock.now();
    try {
      if (e.kind === 'check') {
        const p = [...this.mesh.values()].find((x) => x.namespace === e.podNamespace && x.name === e.podName);
        if (!p || !p.rulesApplied || !p.proxyAcked)
          throw new Error(
            `pod ${e.podNamespace}/${e.podName} is not fully enrolled (rules ${p?.rulesApplied ?? false}, proxy ack ${p?.proxyAcked ?? false})`,
          );
        const state = await this.deps.rules.read(p.netns!);
        if (!this.planPresent(p.plan!, state.iptables.ipv4)) throw new Error(`redirection rules missing in ${p.netns}`);
        this.pluginDone(e.kind, 'ok', receivedAt);
        return { ok: true, status: 'enabled' };
      }
      const pod = await this.podFromCache(e.podNamespace, e.podName);
      if (e.podUid !== undefined && pod.metadata?.uid !== e.podUid) {
        throw new RetryableError(
          `pod ${e.podNamespace}/${e.podName} has uid ${pod.metadata?.uid}, the sandbox is for ${e.podUid}; the agent's view is stale`,
        );
      }
      await this.enroll(pod, e.ips, netnsId(e.netns));
      this.pluginDone(e.kind, 'ok', receivedAt);
      return { ok: true, status: 'enabled' };
    } catch (err) {
      this.pluginDone(e.kind, 'error', receivedAt);
      const msg = err instanceof Error ? err.message : String(err);
      this.log.warn('plugin event failed', { pod: `${e.podNamespace}/${e.podName}`, kind: e.kind, error: msg });
      const pod = this.podInformer?.get(e.podName, e.podNamespace);
      if (pod && e.kind === 'add')
        void this.warn(
          pod,
          'MeshEnrollmentFailed',
          `sandbox not admitted to the mesh (the pod will not start until this succeeds): ${msg}`,
        );
      return {
        ok: false,
        error: msg,
        retryable: !(
          err instanceof NotEligible ||
          err instanceof AnnotationError ||
          err instanceof RulesApplyError ||
          err instanceof RunsAsProxyUid
        ),
      };
    }
  }

  /** The informer cache may lag the API by a moment when the sandbox is created. */
  private async podFromCache(namespace: string, name: string): Promise<Pod> {
    for (let i = 0; i < 10; i++) {
      const p = this.podInformer?.get(name, namespace);
      if (p) return p;
      await this.deps.clock.sleep(10);
    }
    throw new RetryableError(`pod ${namespace}/${name} is not in the agent's cache of node ${this.config.nodeName}`);
  }

  // ------------------------------------------------------------------ reconcile

  private keyOfPod(p: Pod): string {
    return `${p.metadata?.namespace}/${p.metadata?.name}/${p.metadata?.uid}`;
  }

  private keyOf(p: MeshPod): string {
    return `${p.namespace}/${p.name}/${p.uid}`;
  }

  private nsLabels(namespace: string): Readonly<Record<string, string>> | undefined {
    const ns = this.nsInformer?.get(namespace);
    return ns ? (ns.metadata?.labels ?? {}) : undefined;
  }

  private decide(pod: Pod): { enroll: boolean; reason: string; nsKnown: boolean } {
    const namespace = pod.metadata?.namespace ?? '';
    const labels = this.nsLabels(namespace);
    const d = decideEnrollment(
      {
        name: pod.metadata?.name ?? '',
        namespace,
        labels: pod.metadata?.labels,
        annotations: pod.metadata?.annotations,
        hostNetwork: pod.spec?.hostNetwork === true,
        phase: pod.status?.phase,
      },
      labels ?? {},
      this.config.enrollment,
    );
    return { ...d, nsKnown: labels !== undefined };
  }

  /** reconcileOnce, timed (the reconcile histogram). */
  private async reconcile(key: string): Promise<void> {
    const t = this.deps.clock.now();
    let result: 'ok' | 'error' = 'error';
    try {
      await this.reconcileOnce(key);
      result = 'ok';
    } finally {
      this.m.reconcileDuration.observe((this.deps.clock.now() - t) / 1000, { result });
    }
  }

  /** Bring one pod to its desired state. Key: namespace/name/uid. */
  private async reconcileOnce(key: string): Promise<void> {
    const [namespace, name, uidText] = key.split('/') as [string, string, string];
    const uid = podUid(uidText);
    const pod = this.podInformer?.get(name, namespace);
    const current = this.mesh.get(uid);
    if (!pod || pod.metadata?.uid !== uidText) {
      const gone = this.deleted.get(uid);
      if (current) await this.retryRemoval(current, { podGone: true });
      else if (gone) await this.removeUncached(gone);
      this.deleted.delete(uid);
      return;
    }
    this.deleted.delete(uid);
    const d = this.decide(pod);
    if (!d.enroll) {
      if (current) await this.retryRemoval(current, { podGone: false });
      else if (pod.metadata?.annotations?.[REDIRECTION_STATUS] !== undefined && !isTerminalPhase(pod.status?.phase)) {
        // A stale annotation (e.g. from a crashed agent) must not claim redirection.
        await this.annotate(pod, undefined);
      }
      return;
    }
    const ips = podIps(pod);
    // What the API holds wins over what we remember writing: a lost, raced or overwritten status
    // write is then rewritten by enroll() instead of skipped by the early return below.
    if (current) this.adoptApiStatus(current, pod);
    if (current?.rulesApplied && current.proxyAcked && current.annotated === 'enabled' && !current.drifted) return;
    if (ips.length === 0 && !current) return; // no sandbox networking yet: the CNI ADD will come
    // The API's pod IPs are authoritative here (a new sandbox after a reboot has new ones).
    await this.enroll(pod, ips.length > 0 ? ips : (current?.ips ?? []), current?.netns, 'running');
  }

  /** Steps 1-4 above; throws RetryableError when the proxy has not acknowledged yet. */
  /**
   * Annotations are read as the profile says (impl/api/annotations.ts): `upstream` ignores what it
   * cannot parse, with a Warning Event. Under `strict`, `stage` says whether the pod's containers
   * may already run: at a CNI ADD ('sandbox') an invalid
   * annotation fails the ADD, so the pod does not start until it is fixed; for a running pod
   * ('running', e.g. its namespace was just labelled) refusing would leave it selected but
   * unprotected, so its invalid annotations are ignored — full capture, the safe default — and a
   * Warning Event says so.
   */
  private async enroll(
    pod: Pod,
    ips: readonly string[],
    knownNetns: NetnsId | undefined,
    stage: 'sandbox' | 'running' = 'sandbox',
  ): Promise<void> {
    const uid = podUid(pod.metadata?.uid ?? '');
    const d = this.decide(pod);
    if (!d.enroll)
      throw new NotEligible(
        `pod ${pod.metadata?.namespace}/${pod.metadata?.name} is not eligible for the mesh: ${d.reason}`,
      );
    if (this.config.profile === 'strict') {
      const fields = fieldsRunningAs(pod, this.config.proxyUid);
      if (fields.length > 0) {
        const msg = `pod ${pod.metadata?.namespace}/${pod.metadata?.name} runs as the node proxy's uid ${this.config.proxyUid} (${fields.join(', ')}): under the strict profile only the proxy may own marked sockets; run the pod as another uid`;
        // A sandbox is refused (its containers do not start); a running pod cannot be refused
        // without leaving it unprotected, so it is captured and a Warning Event says why it is not safe.
        if (stage === 'sandbox') throw new RunsAsProxyUid(msg);
        if (!this.warned.has(`${uid}|${msg}`)) {
          this.warned.add(`${uid}|${msg}`);
          await this.warn(pod, 'PodRunsAsProxyUid', msg);
        }
      }
    }
    // Validate annotations before anything: a hostile value must never reach rule text.
    let ann;
    if (this.config.profile === 'upstream') {
      // Upstream's reading (lenient: what it cannot parse is ignored, never an error).
      const r = parsePodRedirectionAnnotationsUpstream(pod.metadata?.annotations);
      ann = r.annotations;
      if (r.ignored.length > 0) {
        // Once per pod and message: enroll() runs again on every retry and repair.
        const msg = r.ignored.map((i) => `pod annotation ${i.annotation}: value ${i.shown} ${i.why}`).join('; ');
        if (!this.warned.has(`${uid}|${msg}`)) {
          this.warned.add(`${uid}|${msg}`);
          await this.warn(pod, 'InvalidMeshAnnotation', msg);
        }
      }
    } else {
      try {
        ann = parsePodRedirectionAnnotations(pod.metadata?.annotations);
      } catch (err) {
        if (!(err instanceof AnnotationError) || stage === 'sandbox') throw err;
        ann = parsePodRedirectionAnnotations({});
        await this.warn(
          pod,
          'InvalidMeshAnnotation',
          `${err.message}; the pod is captured with default settings until the annotation is fixed`,
        );
      }
    }
    let p = this.mesh.get(uid);
    if (!p) {
      p = {
        uid,
        name: pod.metadata?.name ?? '',
        namespace: pod.metadata?.namespace ?? '',
        serviceAccount: pod.spec?.serviceAccountName ?? 'default',
        ips: [...ips],
        netns: knownNetns,
        plan: undefined,
        nftApplied: undefined,
        rulesApplied: false,
        proxyAcked: false,
        annotated: undefined,
        intactAt: undefined,
        drifted: undefined,
        swept: false,
        inboundUncaptured: false,
        enrollingSince: this.deps.clock.now(),
      };
      this.mesh.set(uid, p);
    }
    if (knownNetns !== undefined && knownNetns !== p.netns) {
      // A new sandbox (restart, reboot): its namespace replaces the old one.
      p.netns = knownNetns;
      p.rulesApplied = false;
      p.proxyAcked = false;
      this.forgetNetns(p);
    }
    if (p.ips.join() !== ips.join()) {
      for (const ip of p.ips)
        if (!ips.includes(ip))
          await this.deps.ipsets.remove(ip.includes(':') ? PROBE_SET.ipv6 : PROBE_SET.ipv4, ip, uid);
      p.ips = [...ips];
    }
    if (p.netns === undefined || !(await this.deps.finder.exists(p.netns))) {
      p.netns = await this.deps.finder.find(uid, p.ips);
      p.rulesApplied = false;
      p.proxyAcked = false;
      this.forgetNetns(p);
      if (p.netns === undefined)
        throw new RetryableError(`no network namespace found for pod ${p.namespace}/${p.name} (uid ${uid})`);
    }
    // The plan depends on the pod's namespace as well as its annotations: with IPv6 disabled on its
    // lo the v6 return route cannot exist, and adding it failed every ADD (upstream skips it too).
    const loIpv6Disabled = this.config.ipv6 ? await this.deps.rules.loopbackIpv6Disabled(p.netns) : false;
    const common = inpodCommonOptions(
      ann,
      {
        ipv6: this.config.ipv6,
        dnsCapture: this.config.dnsCapture,
        ...(this.config.probeSnat ? { probeSnat: this.config.probeSnat } : {}),
      },
      loIpv6Disabled,
    );
    const options: InpodOptions =
      this.config.profile === 'strict'
        ? { ...common, profile: 'strict', proxyUid: this.config.proxyUid, probePorts: probePorts(pod).map(port) }
        : { ...common, profile: 'upstream' };
    const ir = buildInpodRules(options);
    const built = this.backend() === 'nftables' ? inpodNftPlan(options, ir) : renderInpodPlan(ir);
    const plan = this.deps.planTransform
      ? this.deps.planTransform(built, { namespace: pod.metadata?.namespace ?? '', name: pod.metadata?.name ?? '' })
      : built;
    if (!p.rulesApplied || JSON.stringify(p.plan) !== JSON.stringify(plan)) {
      const t = this.deps.clock.now();
      try {
        p.nftApplied = await this.applyExactly(p.netns, plan);
      } catch (err) {
        throw new RulesApplyError(
          `cannot apply the redirection rules of pod ${p.namespace}/${p.name} in ${p.netns}: ${err instanceof Error ? err.message : String(err)}`,
        );
      }
      p.plan = plan;
      p.rulesApplied = true;
      p.inboundUncaptured = ann.bypassInboundCapture;
      p.intactAt = t;
      if (p.drifted && p.drifted.repairedAt === undefined) p.drifted.repairedAt = this.deps.clock.now();
    }
    if (this.exclusive() && !p.swept) await this.sweepAtEnrollment(p, p.netns);
    if (p.drifted?.repairedAt !== undefined) await this.reportDriftRepair(p, p.netns, p.drifted);
    if (!p.proxyAcked) {
      try {
        await this.zds.addWorkload(
          uid,
          { name: p.name, namespace: p.namespace, serviceAccount: p.serviceAccount },
          p.netns,
        );
        p.proxyAcked = true;
        if (p.enrollingSince !== undefined) {
          this.m.enrollment.observe((this.deps.clock.now() - p.enrollingSince) / 1000);
          p.enrollingSince = undefined;
          this.log.info('pod enrolled', {
            pod: `${p.namespace}/${p.name}`,
            uid: p.uid,
            netns: p.netns,
            ips: p.ips,
            profile: this.config.profile,
          });
        }
      } catch (err) {
        if (p.annotated !== 'pending') {
          await this.annotate(pod, 'pending');
          p.annotated = 'pending';
        }
        const why = err instanceof ZdsSendError ? `${err.reason}: ${err.message}` : (err as Error).message;
        throw new RetryableError(`the node proxy has not taken pod ${p.namespace}/${p.name}: ${why}`);
      }
    }
    for (const ip of this.probeIps(p.ips))
      await this.deps.ipsets.add(ip.includes(':') ? PROBE_SET.ipv6 : PROBE_SET.ipv4, ip, uid);
    if (p.annotated !== 'enabled') {
      await this.annotate(pod, 'enabled');
      p.annotated = 'enabled';
    }
    this.m.enrolled.set([...this.mesh.values()].filter((x) => x.annotated === 'enabled').length);
  }

  /**
   * The pod IPs the host probe ipsets hold: with IPv6 capture off there are no v6 host probe
   * rules and no v6 set, so a dual-stack pod's v6 address is left out (it used to fail the
   * enrollment: "ipset istio-inpod-probes-v6 does not exist").
   */
  private probeIps(ips: readonly string[]): string[] {
    return ips.filter((ip) => this.config.ipv6 || !ip.includes(':'));
  }

  /**
   * A removal that fails (the rules cannot be removed, the API refuses the annotation patch) is
   * retried with backoff like an enrollment, as upstream does: dropped, it left a pod that should
   * be out of the mesh redirected, served and annotated `enabled` — and the repair loop, which
   * checks mesh pods for health, saw nothing wrong with it.
   */
  private async retryRemoval(p: MeshPod, opts: { podGone: boolean }): Promise<void> {
    try {
      await this.unenroll(p, opts);
    } catch (err) {
      if (err instanceof RetryableError) throw err;
      throw new RetryableError(
        `removing pod ${p.namespace}/${p.name} from the mesh failed: ${err instanceof Error ? err.message : String(err)}`,
      );
    }
  }

  /**
   * A deleted pod the agent does not hold (it was enrolled by an earlier agent and not yet
   * rebuilt, or its enrollment state was dropped): as upstream, a pod that was annotated as
   * enrolled or pending, or that the selectors still select, is removed all the same — from the
   * proxy and from the host probe sets (by its uid) — instead of waiting for the next probe-set
   * sync and proxy snapshot (upstream TestInformerStillHandlesDeleteEventIfPodNotActuallyPresentAnymore,
   * TestInformerPodDeleteInExcludedNsHandledIfEnrolled). Its netns is gone with the pod.
   */
  private async removeUncached(pod: Pod): Promise<void> {
    const uid = podUid(pod.metadata?.uid ?? '');
    const ann = pod.metadata?.annotations?.[REDIRECTION_STATUS];
    const labels = this.nsLabels(pod.metadata?.namespace ?? '') ?? {};
    const selected = this.config.enrollment.selectors.some(
      (s) => selectorMatches(s.podSelector, pod.metadata?.labels) && selectorMatches(s.namespaceSelector, labels),
    );
    if (ann !== 'enabled' && ann !== 'pending' && !selected) return;
    try {
      for (const ip of this.probeIps(podIps(pod)))
        await this.deps.ipsets.remove(ip.includes(':') ? PROBE_SET.ipv6 : PROBE_SET.ipv4, ip, uid);
    } catch (err) {
      throw new RetryableError(
        `removing deleted pod ${pod.metadata?.namespace}/${pod.metadata?.name} from the host probe sets failed: ${(err as Error).message}`,
      );
    }
    if (this.zds.connected()) {
      try {
        await this.zds.delWorkload(uid);
      } catch (err) {
        // As in unenroll(): the proxy drops it at its next snapshot anyway.
        this.log.warn('proxy did not acknowledge removal', {
          pod: `${pod.metadata?.namespace}/${pod.metadata?.name}`,
          error: (err as Error).message,
        });
      }
    }
    this.log.info('deleted pod removed from the mesh (not held by this agent)', {
      pod: `${pod.metadata?.namespace}/${pod.metadata?.name}`,
      annotation: ann ?? '(none)',
      selected,
    });
  }

  private async unenroll(p: MeshPod, opts: { podGone: boolean }): Promise<void> {
    for (const ip of this.probeIps(p.ips))
      await this.deps.ipsets.remove(ip.includes(':') ? PROBE_SET.ipv6 : PROBE_SET.ipv4, ip, p.uid);
    // After an agent restart the applied plan is unknown (rulesApplied false, no plan) though the
    // rules are still in the netns; remove with a plan naming every chain this profile can own.
    if (p.netns && (await this.deps.finder.exists(p.netns))) {
      await this.deps.rules.remove(p.netns, p.plan && p.rulesApplied ? p.plan : this.removalPlan());
    }
    p.rulesApplied = false;
    try {
      await this.zds.delWorkload(p.uid);
    } catch (err) {
      // The proxy will not have it after its next snapshot either; log and go on.
      this.log.warn('proxy did not acknowledge removal', {
        pod: `${p.namespace}/${p.name}`,
        error: (err as Error).message,
      });
    }
    this.mesh.delete(p.uid);
    if (!opts.podGone) {
      const pod = this.podInformer?.get(p.name, p.namespace);
      if (pod) await this.annotate(pod, undefined);
    }
    this.m.enrolled.set([...this.mesh.values()].filter((x) => x.annotated === 'enabled').length);
    this.log.info('pod removed from the mesh', { pod: `${p.namespace}/${p.name}`, podGone: opts.podGone });
  }

  /**
   * Warn on the pod behind a queue key, at most once per reason and message (retries of the same
   * failure must not flood the API with Events).
   */
  private eventForKey(key: string, reason: string, message: string): void {
    const [namespace, name] = key.split('/');
    const pod = name && namespace ? this.podInformer?.get(name, namespace) : undefined;
    if (!pod) return;
    const k = `${key}|${reason}|${message}`;
    if (this.warned.has(k)) return;
    this.warned.add(k);
    if (this.warned.size > 10_000) this.warned.clear();
    void this.warn(pod, reason, message);
  }

  /** A Warning Event on the pod; failures to write it are logged, never fatal. */
  private async warn(pod: Pod, reason: string, message: string): Promise<void> {
    this.log.warn(message, { pod: `${pod.metadata?.namespace}/${pod.metadata?.name}`, reason });
    try {
      await this.deps.kube.createEvent({
        involvedObject: {
          kind: 'Pod',
          name: pod.metadata?.name ?? '',
          namespace: pod.metadata?.namespace ?? '',
          uid: pod.metadata?.uid ?? '',
        },
        type: 'Warning',
        reason,
        message: message.slice(0, 1024),
        component: 'ambient-lab-node-agent',
      });
    } catch (err) {
      this.log.warn('cannot write an Event', { error: (err as Error).message });
    }
  }

  /**
   * Take the status annotation the API (informer cache) holds for a mesh pod as `annotated`, so
   * the next enroll() writes the right value if they differ. `annotated` alone drifted from the
   * API when a write was lost or raced (CNI ADD and the queue enroll the same pod concurrently;
   * the later-landing patch wins, not the later-remembered value) or someone else edited the
   * annotation; reconcile then returned early on "enabled" and nothing ever rewrote it. A cache
   * that lags our own write only costs one repeated, idempotent patch. True when it differed.
   */
  private adoptApiStatus(p: MeshPod, pod: Pod): boolean {
    const raw = pod.metadata?.annotations?.[REDIRECTION_STATUS];
    const onApi = raw === 'enabled' || raw === 'pending' ? raw : undefined;
    if (p.annotated === onApi && raw === onApi) return false;
    this.log.info('status annotation differs from what the agent wrote; rewriting it', {
      pod: `${p.namespace}/${p.name}`,
      wrote: p.annotated ?? '(none)',
      onApi: raw ?? '(absent)',
    });
    p.annotated = onApi;
    return true;
  }

  private async annotate(pod: Pod, value: 'pending' | 'enabled' | undefined): Promise<void> {
    const name = pod.metadata?.name ?? '';
    const namespace = pod.metadata?.namespace ?? '';
    try {
      await this.deps.kube.patchStatus('Pod', name, namespace, {
        metadata: { annotations: { [REDIRECTION_STATUS]: value ?? null } },
      });
    } catch (err) {
      if (isKubeApiError(err, 404)) return; // pod gone: nothing left to annotate
      throw new RetryableError(
        `cannot write ${REDIRECTION_STATUS}=${value ?? '(removed)'} on ${namespace}/${name}: ${(err as Error).message}`,
      );
    }
  }

  /** A new namespace for the pod: what this agent knew about the old one's flows and drift no longer applies. */
  private forgetNetns(p: MeshPod): void {
    p.intactAt = undefined;
    p.drifted = undefined;
    p.swept = false;
  }

  /**
   * Strict, once per netns after this agent's first apply there: end the connections the plan does
   * not capture. At enrollment those are connections the app opened before it: most are reset by
   * the kernel anyway (their next segment is picked up mid-stream and redirected, as upstream), but
   * one the namespace already tracked, or one whose segment passed while iptables-restore had
   * committed some tables and not nat yet, would go on uncaptured for as long as it lives. After an
   * agent restart they are whatever escaped while no agent watched. The proxy's sockets and captured
   * connections are never ended (escaped-flows.ts). A failure to list or end them is retried by
   * the queue (the rules are in place).
   */
  private async sweepAtEnrollment(p: MeshPod, netns: NetnsId): Promise<void> {
    let ended: EscapedFlow[];
    try {
      ended = await this.endEscaped(p, netns);
    } catch (err) {
      throw new RetryableError(
        `the rules of pod ${p.namespace}/${p.name} are applied, but ending the connections they do not capture failed: ${(err as Error).message}`,
      );
    }
    p.swept = true;
    if (ended.length === 0) return;
    this.m.flowsEnded.inc({}, ended.length);
    this.log.warn('uncaptured connections ended at enrollment', {
      pod: `${p.namespace}/${p.name}`,
      flowsEnded: ended.length,
      flows: ended.map((e) => `${describeFlow(e.flow)}: ${e.why}`).join('; '),
    });
  }

  /** The pod's connections the plan does not capture (escaped-flows.ts), ended; returns them. */
  private async endEscaped(p: MeshPod, netns: NetnsId): Promise<EscapedFlow[]> {
    const ended = escapedFlows(await this.deps.flows.list(netns), {
      proxyUid: this.config.proxyUid,
      podIps: p.ips,
      probeSources: Object.values(this.config.probeSnat ?? DEFAULT_PROBE_SNAT).map(address),
      inboundUncaptured: p.inboundUncaptured,
    });
    if (ended.length > 0)
      await this.deps.flows.end(
        netns,
        ended.map((e) => e.flow),
      );
    return ended;
  }

  /**
   * After a drift repair (the plan applied again): under strict, end the connections that escaped
   * capture while the rules were drifted (escaped-flows.ts; conntrack keeps their un-NATed entries,
   * so removing the rule alone leaves them uncaptured); in both profiles, report the repair with
   * an upper bound of the bypass window — from the last time this agent knew the plan intact to the
   * re-apply — as one log line and the drift-window histogram. A failure to list or end the flows
   * keeps the drift, so the queue retries the ending (the rules are already repaired).
   */
  private async reportDriftRepair(p: MeshPod, netns: NetnsId, d: Drift): Promise<void> {
    const repairedAt = d.repairedAt ?? this.deps.clock.now();
    let ended: EscapedFlow[] = [];
    if (this.exclusive()) {
      try {
        ended = await this.endEscaped(p, netns);
      } catch (err) {
        throw new RetryableError(
          `the rules of pod ${p.namespace}/${p.name} are repaired, but ending the connections that escaped while they were drifted failed: ${(err as Error).message}`,
        );
      }
    }
    p.drifted = undefined;
    const windowMs = d.intactAt === undefined ? undefined : Math.ceil(repairedAt - d.intactAt);
    if (windowMs !== undefined) this.m.driftWindow.observe(windowMs / 1000);
    if (ended.length > 0) this.m.flowsEnded.inc({}, ended.length);
    const tables = [...new Set(d.differences.map((l) => /^(ipv[46] \w+):/.exec(l)?.[1] ?? 'ip rules and routes'))];
    this.log.warn('drift repaired', {
      pod: `${p.namespace}/${p.name}`,
      tables: tables.join(', '),
      foreign: d.foreign.length > 0 ? d.foreign.join('; ') : 'none',
      differences: d.differences.slice(0, 5).join('; '),
      // Upper bound: the drift began after the last intact check, and ended with the re-apply.
      windowMs: windowMs ?? 'unknown (this agent never saw the plan intact)',
      flowsEnded: this.exclusive() ? ended.length : 'not ended (upstream profile)',
      flows: ended.map((e) => `${describeFlow(e.flow)}: ${e.why}`).join('; ') || 'none',
    });
  }

  /**
   * Strict owns the pod's tables its plan uses: applies replace them whole and anything foreign
   * there is drift. Upstream merges and only checks its own chains and hooks, as istio-cni.
   */
  private exclusive(): boolean {
    return this.config.profile === 'strict';
  }

  private backend(): Backend {
    return this.config.backend ?? 'iptables';
  }

  /**
   * A plan naming every own chain, ip rule and route any plan of either profile can hold: an
   * agent restarted with another profile or other settings still removes what its predecessor made.
   */
  private removalPlan(): RedirectionPlan {
    return universe();
  }

  /**
   * Make the namespace hold exactly `plan`: apply it (its own chains converge), then remove what
   * an earlier plan left that this one does not contain (another profile, DNS or IPv6 setting, an
   * agent before a restart). Apply comes first, so the pod is never without capture in between;
   * removing the old plan before applying the new one left a window with no rules at all.
   */
  private async applyExactly(netns: NetnsId, plan: RedirectionPlan): Promise<NftListing | undefined> {
    await this.deps.rules.apply(netns, plan, this.exclusive() ? 'exclusive' : 'merge');
    const state = await this.deps.rules.read(netns);
    const applied = nftListingOf(state, plan);
    const left = leftovers(state, plan);
    if (left === undefined) return applied;
    await this.deps.rules.remove(netns, left);
    this.log.info('removed redirection the current plan does not contain', {
      netns,
      chains: Object.values(left.iptables)
        .join('')
        .split('\n')
        .filter((l) => l.startsWith(':')).length,
      nftTables: left.nftables?.tables.length ?? 0,
      ipRules: left.rules.length,
      routes: left.routes.length,
    });
    return applied;
  }

  // ------------------------------------------------------------------ start-up and repair

  /** Rebuild the mesh from annotated pods; their netns is found again and rules re-asserted. */
  private async rebuild(): Promise<void> {
    for (const pod of this.podInformer?.list() ?? []) {
      const ann = pod.metadata?.annotations?.[REDIRECTION_STATUS];
      if (ann !== 'enabled' && ann !== 'pending') continue;
      if (isTerminalPhase(pod.status?.phase)) continue;
      const uid = podUid(pod.metadata?.uid ?? '');
      const ips = podIps(pod);
      const netns = ips.length > 0 ? await this.deps.finder.find(uid, ips) : undefined;
      this.mesh.set(uid, {
        uid,
        name: pod.metadata?.name ?? '',
        namespace: pod.metadata?.namespace ?? '',
        serviceAccount: pod.spec?.serviceAccountName ?? 'default',
        ips,
        netns,
        plan: undefined,
        nftApplied: undefined,
        rulesApplied: false,
        proxyAcked: false,
        annotated: ann,
        intactAt: undefined,
        drifted: undefined,
        swept: false,
        inboundUncaptured: false,
        enrollingSince: undefined,
      });
      // Rules and proxy state are re-asserted by the queue once started.
    }
  }

  private snapshot(): ZdsSnapshotEntry[] {
    const out: ZdsSnapshotEntry[] = [];
    for (const p of this.mesh.values()) {
      if (!p.rulesApplied || p.netns === undefined) continue;
      out.push({
        uid: p.uid,
        info: { name: p.name, namespace: p.namespace, serviceAccount: p.serviceAccount },
        netns: p.netns,
      });
      // The snapshot carries the pod; its ack arrives with the snapshot's.
      p.proxyAcked = true;
    }
    return out;
  }

  private scheduleRepair(): void {
    if (this.stopped || this.config.repairIntervalMs <= 0) return;
    this.repairTimer = this.deps.clock.setTimer(this.config.repairIntervalMs, () => {
      void this.repair().finally(() => this.scheduleRepair());
    });
  }

  /**
   * Verify every mesh pod still has its namespace, its rules and its proxy; queue what drifted.
   * One pass at a time: a pass asked for while another runs (the timer's, or an operator's through
   * the status socket) starts after it, since the running one may have read before the change the
   * caller wants checked. Resolves when this pass has finished.
   */
  repair(): Promise<void> {
    const pass = this.repairTail.then(async () => {
      this.repairPasses.started++;
      try {
        await this.repairPass();
      } finally {
        this.repairPasses.completed++;
      }
    });
    // The tail only orders passes; this pass's own outcome goes to its caller through `pass`.
    this.repairTail = pass.then(
      () => undefined,
      () => undefined,
    );
    return pass;
  }

  private async repairPass(): Promise<void> {
    for (const p of [...this.mesh.values()]) {
      try {
        if (p.netns === undefined || !(await this.deps.finder.exists(p.netns))) {
          this.m.repairs.inc({ what: 'netns' });
          p.netns = undefined;
          p.rulesApplied = false;
          p.proxyAcked = false;
          this.forgetNetns(p);
        } else if (p.plan && p.rulesApplied) {
          // Exactly the plan: a missing rule, an added one in an own chain, a leftover chain; under
          // strict also anything else in the plan's tables (an app's NET_ADMIN ACCEPT ahead of a hook).
          const readAt = this.deps.clock.now();
          const state = await this.deps.rules.read(p.netns);
          const foreign = this.exclusive() ? foreignRules(state, p.plan) : [];
          const diff = [
            ...drift(state, p.plan),
            ...foreign,
            ...nftDrift(state, p.plan, p.nftApplied, this.exclusive()),
          ];
          if (diff.length > 0) {
            // The first pass that sees it: the window began after the last intact check.
            p.drifted ??= {
              intactAt: p.intactAt,
              foundAt: readAt,
              differences: diff,
              foreign,
              repairedAt: undefined,
            };
            this.m.repairs.inc({ what: 'rules' });
            this.log.info('redirection differs from the plan; re-applying', {
              pod: `${p.namespace}/${p.name}`,
              differences: diff.slice(0, 5).join('; '),
            });
            p.rulesApplied = false;
          } else p.intactAt = readAt;
        }
        if (!p.proxyAcked && this.zds.connected()) this.m.repairs.inc({ what: 'proxy' });
        const pod = this.podInformer?.get(p.name, p.namespace);
        if (pod?.metadata?.uid === p.uid && this.adoptApiStatus(p, pod)) this.m.repairs.inc({ what: 'annotation' });
        if (!p.rulesApplied || !p.proxyAcked || p.annotated !== 'enabled' || p.drifted)
          this.queue.enqueue(this.keyOf(p));
      } catch (err) {
        this.log.warn('repair check failed', { pod: `${p.namespace}/${p.name}`, error: (err as Error).message });
        this.queue.enqueue(this.keyOf(p));
      }
    }
    try {
      await this.syncProbeSets();
    } catch (err) {
      this.log.warn('host probe ipset repair failed; the next pass retries', { error: (err as Error).message });
    }
  }

  /**
   * Make the host probe sets equal the mesh's pods: every fully enrolled pod's current addresses
   * owned by it, nothing else (a pending pod's own current addresses may stay). Per-pod add and
   * remove miss addresses the agent never learnt or forgot: a pod deleted while the agent was
   * down, a sandbox re-made with new addresses across a reboot or an agent restart, an address
   * claimed under a stale pod IP from the API. A stale member is a probe carve-out for whoever
   * gets that address next; a missing one takes the carve-out from the pod's own probes.
   */
  private syncProbeSets(): Promise<void> {
    // One at a time; a pass asked for during one runs after it (it may see newer state).
    const run = async (): Promise<void> => {
      for (const family of this.config.ipv6 ? (['ipv4', 'ipv6'] as const) : (['ipv4'] as const))
        await this.syncProbeSet(family);
    };
    const next = (this.probeSync ?? Promise.resolve()).then(run, run);
    this.probeSync = next;
    return next.finally(() => {
      if (this.probeSync === next) this.probeSync = undefined;
    });
  }

  private async syncProbeSet(family: 'ipv4' | 'ipv6'): Promise<void> {
    const set = PROBE_SET[family];
    const claims = (): ProbeSetClaim[] =>
      [...this.mesh.values()].map((p) => ({
        uid: p.uid,
        ips: this.probeIps(p.ips).filter((ip) => ip.includes(':') === (family === 'ipv6')),
        required: p.rulesApplied && p.proxyAcked && p.netns !== undefined,
      }));
    let members: readonly ProbeSetMember[];
    try {
      members = await this.deps.ipsets.list(set);
    } catch (err) {
      this.log.warn('cannot list a host probe ipset; the next repair pass retries', {
        set,
        error: (err as Error).message,
      });
      return;
    }
    const steps = probeSetSteps(members, claims());
    // A mesh pod known without any address (read from a cold cache after a restart) makes the
    // claims incomplete: its members would look stale and be pruned, taking the probe carve-out
    // from a pod that is still enrolled. As upstream, add what is known but prune nothing until
    // every mesh pod has its addresses (istio/istio SyncHostIPSetsSkipsPruneIfSnapshotIncomplete).
    const addressless = [...this.mesh.values()]
      .filter((p) => p.ips.length === 0)
      .map((p) => `${p.namespace}/${p.name}`);
    if (addressless.length > 0 && steps.remove.length > 0) {
      this.log.info('host probe ipset prune skipped: some mesh pods have no known address yet', {
        set,
        pods: addressless.join(', '),
        members: steps.remove.length,
      });
    }
    // Each step is re-checked against the mesh as it is now: enrollment may have run meanwhile.
    for (const m of addressless.length > 0 ? [] : steps.remove) {
      if (probeSetSteps([m], claims()).remove.length === 0) continue;
      await this.deps.ipsets.remove(set, m.ip, m.comment);
      this.m.repairs.inc({ what: 'probe-set' });
      this.log.info('removed a stale host probe ipset member', { set, ip: m.ip, pod: m.comment });
    }
    for (const a of steps.add) {
      const p = this.mesh.get(a.uid);
      if (!p || !(p.rulesApplied && p.proxyAcked) || !p.ips.includes(a.ip)) continue;
      try {
        await this.deps.ipsets.add(set, a.ip, a.uid);
      } catch (err) {
        // One member that cannot be added must not cost every other pod its carve-out; the next
        // repair pass tries it again (upstream: SyncHostIPSetsIgnoresPodIPAddErrorAndContinues).
        this.log.warn('cannot add a host probe ipset member; the next repair pass retries', {
          set,
          ip: a.ip,
          pod: `${p.namespace}/${p.name}`,
          error: (err as Error).message,
        });
        continue;
      }
      this.m.repairs.inc({ what: 'probe-set' });
      this.log.info('added a missing host probe ipset member', { set, ip: a.ip, pod: `${p.namespace}/${p.name}` });
    }
  }

  /** Every rule line of the plan for this family appears in the saved text (the CNI CHECK). */
  private planPresent(plan: RedirectionPlan, saved: string): boolean {
    const text = plan.iptables.ipv4;
    if (text === undefined) return true;
    const have = new Set(saved.split('\n').map((l) => l.trim()));
    return text
      .split('\n')
      .filter((l) => l.startsWith('-A ') || l.startsWith('-I '))
      .every((l) => have.has(l.replace(/^-I (\S+)( \d+)?/, '-A $1').trim()));
  }
}
