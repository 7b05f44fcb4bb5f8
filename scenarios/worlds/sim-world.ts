/**
 * The World (scenarios/world.ts) on the simulator: a SimWorld cluster (sim/world) with the real
 * reference implementation on every node — our CNI plugin chained after the primary network,
 * the node agent and the node proxy (impl/ztunnel with the real workload index, policy engine
 * and connection log) — all on virtual time, deterministic per seed.
 *
 *   const world = await createSimWorld({ nodes: 2, profile: 'strict', kernelVersion: '6.1', ipv6: false, dnsCapture: true, seed: 1 });
 *   await world.createNamespace('demo', { 'istio.io/dataplane-mode': 'ambient' });
 *   await world.createPod({ namespace: 'demo', name: 'a', app: { uid: 1000, caps: [], tcpPorts: [8080] } });
 *   const r = await world.connect({ kind: 'pod', pod: a }, { kind: 'pod', pod: b, port: 8080 });
 *
 * Attribution (attribution.ts): every kernel handshake during an attempt is recorded; the
 * first is the client's own (its listener is the first hop), the rest are legs the proxies
 * opened. A handshake whose listener is an app container's socket is a delivery; it was made by
 * a proxy when the connecting socket is a proxy's (label), whatever source address it spoofed.
 *
 * Lifecycle operations only do the operation (and drive its own promise on the virtual clock);
 * callers call settle() to let the cluster react, so races stay observable.
 */
import type { RedirectionPlan } from '../../impl/host/netns-rules.js';
import type { NodeAgentConfig } from '../../impl/node-agent/node-agent.js';
import { PLUGIN_TYPE } from '../../impl/api/cni-plugin-config.js';
import { AmbientCniPlugin } from '../../impl/cni-plugin/cni-plugin.js';
import { MemoryConnectionLogSink } from '../../impl/ztunnel/connection-log.js';
import { markValue } from '../../impl/api/marks.js';
import { REDIRECTION_STATUS } from '../../impl/api/annotations.js';
import { KubeApiError, type KubeApi, type KubeKind, type KubeObjectOf, type Wire } from '../../impl/host/kube.js';
import { ZdsClient, type ZdsWorkloadHandler } from '../../impl/ztunnel/zds-client.js';
import type { ConnectTcpOptions, SocketFailure, TcpConnection } from '../../impl/host/sockets.js';
import type { V1Container, V1Probe } from '@kubernetes/client-node';
import { SimWorld, OUTSIDE_NETNS, OUTSIDE_ADDRESS } from '../../sim/world/world.js';
import type { SimNode } from '../../sim/node/sim-node.js';
import { imageUser, type SimContainer } from '../../sim/node/container.js';
import { SimSockets, simConnectionOf } from '../../sim/kernel/sockets-adapter.js';
import { credentials, mayAdminNetwork, type Credentials } from '../../sim/kernel/process.js';
import { SimErrnoError } from '../../sim/kernel/errors.js';
import { fibLookup, isLocalAddress } from '../../sim/kernel/fib.js';
import { formatIp, parseIp, type Family } from '../../impl/api/ip/address.js';
import { formatSockAddr, type SimSocket } from '../../sim/kernel/socket.js';
import { renderTrace, type TraceEvent } from '../../sim/kernel/trace.js';
import type { ConnectResult as KernelConnect } from '../../sim/kernel/kernel.js';
import { SimHbone, SimMeshCa } from '../../sim/hbone/sim-hbone.js';
import { API_AUDIENCE } from '../../sim/kube/token-authority.js';
import { parseSpiffeId } from '../../impl/api/identity.js';
import { SimCaAuthority } from '../../sim/hbone/sim-ca.js';
import { storePodView } from '../../sim/kube/store-pod-view.js';
import { SeededRandom } from '../../sim/time/seeded-random.js';
import { runFor, settle as drive } from '../../sim/time/settle.js';
import { SimPluginEventTransport } from '../../sim/transport/plugin-events.js';
import { SimZdsNetwork } from '../../sim/zds/sim-zds-network.js';
import {
  insertedRuleText,
  insertedTableText,
  LAB_COMPONENT_LABEL,
  podKey,
  PROXY_POD,
  proxyPodName,
  type Acceptor,
  type AppAction,
  type AppExecResult,
  type AppSpec,
  type Component,
  type ConnectOptions,
  type ConnectResult,
  type Delivery,
  type Destination,
  type DriftRepair,
  type ForgedHboneResult,
  forgedWithoutConnection,
  type HeldConnection,
  IDENTITY_CREDENTIALS,
  type IdentityCredential,
  type PodObservation,
  type PodRef,
  type PodSpec,
  type PolicyObject,
  type ProxyLogEntry,
  type Source,
  type World,
  type WorldFactory,
  type WorldOptions,
  type ZdsClientAttempt,
  type AgentAddFault,
} from '../world.js';
import {
  NodeStack,
  PROXY_CONNECT_TIMEOUT_MS,
  REPAIR_INTERVAL_MS,
  TRUST_DOMAIN,
  pluginEventAddress,
  zdsAddress,
} from './sim/node-stack.js';
import {
  ConnectRecorder,
  appPodOf,
  isProbeSocket,
  isProxySocket,
  proxyAcceptor,
  proxyNodeOf,
} from './sim/attribution.js';
import { toProxyLogEntry } from './sim/proxy-log.js';
import { QuietLogger } from './sim/quiet-logger.js';
import { ComponentLifecycles } from './component-lifecycles.js';
import { KUBELET_SANDBOX_BACKOFF } from './kubelet-backoff.js';

type Pod = KubeObjectOf<'Pod'>;

export interface SimWorldExtras {
  /** Record packet traces and attach them to connect results (slower; default false). */
  readonly trace?: boolean;
  /** Rewrite each in-pod plan the agents apply (mutation testing; see NodeAgentDeps.planTransform). */
  readonly mutatePlan?: (
    plan: RedirectionPlan,
    pod: { readonly namespace: string; readonly name: string },
  ) => RedirectionPlan;
  /** Keep debug and info log entries too (default: warnings and errors only, for speed). */
  readonly verboseLog?: boolean;
  /** Override fields of every node agent's configuration. */
  readonly agentConfig?: Partial<NodeAgentConfig>;
  /**
   * Positive control: the mesh CA's pod view puts every pod on the caller's node, so node
   * authorization grants any identity of the mesh (a CA without the node check).
   */
  readonly caIgnoresNodes?: boolean;
}

/** API kinds whose writes settle() waits out (every kind but Event; see fingerprint()). */
const FINGERPRINT_KINDS = [
  'Namespace',
  'Pod',
  'ServiceAccount',
  'Node',
  'CustomResourceDefinition',
  'AuthorizationPolicy',
  'DaemonSet',
] as const satisfies readonly KubeKind[];
/** rebootNode: virtual time the kubelet runs (and tries the pods' sandboxes) before the agent and proxy are back. */
const REBOOT_DAEMONSETS_AFTER_MS = 2000;
/** settle(): quiet = no observable change over this much virtual time (> backoff, > repair period). */
/** A read that found nothing (404) is an answer; any other API failure is not, and propagates. */
function absentOn404(e: unknown): undefined {
  if (e instanceof KubeApiError && e.code === 404) return undefined;
  throw e;
}

const QUIET_MS = Math.max(KUBELET_SANDBOX_BACKOFF.maxMs, REPAIR_INTERVAL_MS) + 1000;
const SETTLE_MAX_STEPS = 20;
/** Virtual time an attempt runs after its first hop so proxies finish their upstream legs. */
const ATTEMPT_MS = PROXY_CONNECT_TIMEOUT_MS + 100;
/** The client's own connect timeout (a dropped SYN). */
const CLIENT_TIMEOUT_MS = 1000;
/** The node proxy's HBONE port in every pod netns (ztunnel's 15008). */
const HBONE_PORT = 15008;
const APP_CONTAINER = 'app';
/** What `iptables-restore` of empty tables leaves: every table the mesh writes, flushed. */
const EMPTY_TABLES = '*raw\nCOMMIT\n*mangle\nCOMMIT\n*nat\nCOMMIT\n*filter\nCOMMIT\n';

/** What one attempt kind reports before deliveries and the proxy log are added. */
type AttemptResult = Omit<ConnectResult, 'deliveries' | 'proxyLog'> & {
  readonly extraDeliveries?: Delivery[];
  readonly traceEvents?: readonly TraceEvent[];
};

interface Endpoint {
  readonly netns: string;
  readonly creds: Credentials;
  readonly label: string;
  /** Addresses of the source by family (for raw packets without sourceIp). */
  readonly ips: readonly string[];
}

export class SimMeshWorld implements World {
  readonly kind = 'sim' as const;
  readonly nodes: readonly string[];
  readonly sim: SimWorld;
  /** Warnings and errors of every component (everything with extras.verboseLog). */
  readonly log: QuietLogger;
  private readonly stacks: NodeStack[];
  private readonly recorder: ConnectRecorder;
  private readonly apps = new Map<string, AppSpec>();
  /** App containers whose world-opened sockets (UDP; TCP of hostNetwork apps) are open. */
  private readonly listenersReady = new WeakSet<SimContainer>();
  /** Listens that failed (hostNetwork port conflicts), as "<pod> tcp|udp <port>: <errno>" — reports and tests. */
  readonly failedListens: string[] = [];
  private nextRawPort = 40000;
  private readonly zdsNet: SimZdsNetwork;
  /** Nodes whose CNI plugin cannot reach the API (cniApiFault). */
  private readonly apiCutOff = new Set<string>();
  /** agentAddFault per node: the fault, and for netns-missing the netns that existed when it began (the rest are hidden). */
  private readonly agentFaults = new Map<
    string,
    { readonly fault: AgentAddFault; readonly visible: ReadonlySet<string> }
  >();
  private nextRoguePid = 9000;
  private readonly lifecycles = new ComponentLifecycles();
  /** The mesh components' own pods (proxy pods), by uid: not workloads. */
  private readonly proxyPodUids = new Set<string>();
  /** The mesh CA (its decision in-process, sim certificates) and the root every proxy trusts. */
  private readonly meshCa: SimCaAuthority;
  private readonly meshRoot: SimMeshCa;

  constructor(
    readonly options: WorldOptions,
    private readonly extras: SimWorldExtras = {},
  ) {
    this.log = new QuietLogger([], { verbose: extras.verboseLog ?? false, limit: 2000 });
    if (options.meshV6 === true && !options.ipv6)
      throw new Error(
        'sim world: meshV6 needs ipv6 (a mesh cannot capture IPv6 in a single-stack v4 cluster); set ipv6: true or drop meshV6',
      );
    this.sim = new SimWorld({
      seed: options.seed,
      nodes: options.nodes,
      ipv6: options.ipv6,
      kernelVersion: options.kernelVersion,
      trace: extras.trace ?? false,
      backoff: KUBELET_SANDBOX_BACKOFF,
    });
    this.nodes = this.sim.nodes.map((n) => n.name);
    this.recorder = new ConnectRecorder(this.sim.kernel);
    const clock = this.sim.clock;
    this.zdsNet = new SimZdsNetwork(clock);
    const events = new SimPluginEventTransport(clock);
    const meshRoot = new SimMeshCa(TRUST_DOMAIN);
    const meshCa = new SimCaAuthority({
      trustDomain: TRUST_DOMAIN,
      trustedNodeAccounts: new Set([`${PROXY_POD.namespace}/${PROXY_POD.serviceAccount}`]),
      kube: this.sim.api,
      pods: storePodView(this.sim.store, { ignoreNode: extras.caIgnoresNodes === true }),
      issuer: meshRoot,
      clock,
      log: this.log.child({ component: 'ca' }),
    });
    this.meshCa = meshCa;
    this.meshRoot = meshRoot;
    const shared = {
      kernel: this.sim.kernel,
      api: this.sim.api,
      clock,
      random: new SeededRandom(options.seed * 7 + 5),
      events,
      zds: this.zdsNet,
      meshCa,
      meshRoot,
      proxyToken: (node: string) => this.proxyToken(node),
      log: this.log,
      // The mesh's v6 switch (agent rules, proxy listeners); the cluster's stack is options.ipv6.
      profile: options.profile,
      ipv6: options.meshV6 ?? options.ipv6,
      dnsCapture: options.dnsCapture,
      ...(options.rulesBackend === 'nftables' ? { rulesBackend: options.rulesBackend } : {}),
      planTransform: extras.mutatePlan,
      agentConfig: extras.agentConfig,
      hiddenNetns: (node: string, netns: string): boolean => {
        const f = this.agentFaults.get(node);
        return f?.fault === 'netns-missing' && !f.visible.has(netns);
      },
    };
    // stale-pod: the ADD reaches the agent naming a pod uid its cache does not hold.
    events.faults.rewrite = (address, event) => {
      const node = this.nodes.find((n) => pluginEventAddress(n) === address);
      const f = node === undefined ? undefined : this.agentFaults.get(node);
      return f?.fault === 'stale-pod' && event.kind === 'add'
        ? { ...event, podUid: `${event.podUid ?? 'unknown'}-stale` }
        : event;
    };
    this.stacks = this.sim.nodes.map((n) => new NodeStack(shared, n, new MemoryConnectionLogSink()));
    for (const n of this.sim.nodes) {
      const plugin = new AmbientCniPlugin({
        openKube: () => this.pluginApi(n.name),
        events,
        clock,
        log: this.log.child({ component: 'cni', node: n.name }),
      });
      n.chainPlugin(
        {
          type: PLUGIN_TYPE,
          agentSocket: pluginEventAddress(n.name),
          kubeconfig: '/etc/cni/net.d/ambient-lab-kubeconfig',
          apiAttempts: 2,
          apiRetryDelayMs: 100,
          agentTimeoutMs: 5000,
        },
        plugin,
      );
    }
  }

  /** Start kubelets, the proxies' pods, agents and proxies, and settle. */
  async boot(): Promise<void> {
    await drive(this.sim.clock, this.sim.start());
    await drive(this.sim.clock, this.createProxyPods());
    for (const n of this.sim.store.list('Namespace').items) this.bootNamespaces.add(n.metadata?.name ?? '');
    for (const s of this.stacks) {
      await drive(this.sim.clock, s.startAgent());
      s.startProxy();
    }
    await this.settle();
  }

  /**
   * The proxy DaemonSet's pod on every node, as its controller would make it: the CA checks a
   * proxy's token against it (bound pod, service account, node). hostNetwork, so the kubelet
   * gives it no netns; left out of pods() (a mesh component, not a workload) and kept by resets.
   */
  private async createProxyPods(): Promise<void> {
    await this.sim.createNamespace(PROXY_POD.namespace);
    for (const node of this.nodes) {
      const pod = await this.sim.createPod({
        namespace: PROXY_POD.namespace,
        name: proxyPodName(node),
        nodeName: node,
        hostNetwork: true,
        serviceAccountName: PROXY_POD.serviceAccount,
        labels: { [LAB_COMPONENT_LABEL]: 'ambient-lab', 'app.kubernetes.io/name': 'ambient-lab-proxy' },
        containers: [{ name: 'proxy', image: 'ambient-lab/proxy:dev' }],
      });
      this.proxyPodUids.add(pod.metadata?.uid ?? '');
    }
  }

  /** A new token of `node`'s proxy pod as its projected volume carries it (audience istio-ca, 12 h). */
  private proxyToken(
    node: string,
    o: { readonly audience?: string; readonly expirationSeconds?: number } = {},
  ): string {
    const name = proxyPodName(node);
    const pod = this.sim.store
      .list('Pod', { namespace: PROXY_POD.namespace })
      .items.find((p) => p.metadata?.name === name);
    const uid = pod?.metadata?.uid;
    if (!uid)
      throw new Error(`sim world: no proxy pod ${PROXY_POD.namespace}/${name} to bind ${node}'s proxy token to`);
    return this.sim.store.tokens.issue({
      namespace: PROXY_POD.namespace,
      serviceAccount: PROXY_POD.serviceAccount,
      pod: { name, uid, node },
      audiences: [o.audience ?? PROXY_POD.tokenAudience],
      expirationSeconds: o.expirationSeconds ?? PROXY_POD.tokenSeconds,
    });
  }

  private stack(node: string): NodeStack {
    const s = this.stacks.find((x) => x.name === node);
    if (!s) throw new Error(`sim world: no node ${JSON.stringify(node)}; nodes are ${this.nodes.join(', ')}`);
    return s;
  }

  // ------------------------------------------------------------------ API objects

  async createNamespace(name: string, labels: Readonly<Record<string, string>> = {}): Promise<void> {
    await this.sim.createNamespace(name, { labels: { ...labels } });
  }

  async labelNamespace(name: string, labels: Readonly<Record<string, string | null>>): Promise<void> {
    await this.sim.api.patchMerge('Namespace', name, undefined, { metadata: { labels: { ...labels } } });
  }

  async createPod(spec: PodSpec): Promise<PodObservation> {
    const app = spec.app;
    const probes = app.probePorts ?? [];
    const probe = (port: number): Wire<V1Probe> => ({ tcpSocket: { port }, periodSeconds: 10 });
    // A hostNetwork app shares the node's ports with every other hostNetwork app: the world binds
    // its TCP ports itself (openAppListeners), so a conflict is a failed listen (EADDRINUSE,
    // logged), as for a real app that cannot bind, instead of an exception out of the kubelet.
    // An app whose uid comes from its image declares none (AppSpec.uidSource): the agent cannot see it.
    const fromImage = app.uidSource === 'image';
    const main: Wire<V1Container> = {
      name: APP_CONTAINER,
      image: fromImage ? `sim/app:user-${app.uid}` : 'sim/app',
      ...(spec.hostNetwork ? {} : { ports: app.tcpPorts.map((p) => ({ containerPort: p })) }),
      securityContext: {
        ...(fromImage ? {} : { runAsUser: app.uid, runAsGroup: app.uid }),
        capabilities: { drop: ['ALL'], add: [...app.caps] },
      },
      ...(probes[0] !== undefined ? { readinessProbe: probe(probes[0]) } : {}),
      ...(probes[1] !== undefined ? { livenessProbe: probe(probes[1]) } : {}),
      ...(probes[2] !== undefined ? { startupProbe: probe(probes[2]) } : {}),
    };
    // More probe ports than one container has probe kinds: declared on extra (socket-less) containers.
    const extra: Array<Wire<V1Container>> = probes.slice(3).map((p, i) => ({
      name: `probe-${i}`,
      image: fromImage ? `sim/probe:user-${app.uid}` : 'sim/probe',
      securityContext: { ...(fromImage ? {} : { runAsUser: app.uid }), capabilities: { drop: ['ALL'] } },
      livenessProbe: probe(p),
    }));
    this.apps.set(podKey(spec), app);
    await this.sim.createPod({
      namespace: spec.namespace,
      name: spec.name,
      ...(spec.node !== undefined ? { nodeName: spec.node } : {}),
      ...(spec.labels ? { labels: { ...spec.labels } } : {}),
      ...(spec.annotations ? { annotations: { ...spec.annotations } } : {}),
      ...(spec.hostNetwork ? { hostNetwork: true } : {}),
      ...(spec.serviceAccount ? { serviceAccountName: spec.serviceAccount } : {}),
      containers: [main, ...extra],
    });
    await this.settle();
    const obs = (await this.pods()).find((p) => p.namespace === spec.namespace && p.name === spec.name);
    if (!obs) throw new Error(`sim world: pod ${podKey(spec)} vanished right after creation`);
    return obs;
  }

  async labelPod(pod: PodRef, labels: Readonly<Record<string, string | null>>): Promise<void> {
    await this.sim.api.patchMerge('Pod', pod.name, pod.namespace, { metadata: { labels: { ...labels } } });
  }

  async deletePod(pod: PodRef): Promise<void> {
    await this.sim.deletePod(pod.namespace, pod.name);
    this.apps.delete(podKey(pod));
  }

  async applyPolicy(policy: PolicyObject): Promise<void> {
    const meta = policy['metadata'] as { name?: unknown; namespace?: unknown } | undefined;
    const name = meta?.name;
    const namespace = meta?.namespace;
    if (typeof name !== 'string' || typeof namespace !== 'string') {
      throw new Error('applyPolicy: the policy needs metadata.name and metadata.namespace (strings)');
    }
    const obj = {
      apiVersion: 'security.istio.io/v1',
      kind: 'AuthorizationPolicy',
      ...structuredClone(policy),
    } as unknown as KubeObjectOf<'AuthorizationPolicy'>;
    const old = await this.sim.api.get('AuthorizationPolicy', name, namespace).catch(absentOn404);
    if (old) {
      await this.sim.api.update('AuthorizationPolicy', {
        ...obj,
        metadata: { ...obj.metadata, resourceVersion: old.metadata?.resourceVersion },
      });
    } else {
      await this.sim.api.create('AuthorizationPolicy', obj);
    }
  }

  async deletePolicy(namespace: string, name: string): Promise<void> {
    await this.sim.api.delete('AuthorizationPolicy', name, namespace);
  }

  // ------------------------------------------------------------------ components and faults

  async stop(component: Component, node: string): Promise<void> {
    const s = this.stack(node);
    return this.lifecycles.run(node, [component], async () => {
      if (component === 'agent') await drive(this.sim.clock, s.stopAgent());
      else await drive(this.sim.clock, s.stopProxy('immediate'));
    });
  }

  async start(component: Component, node: string): Promise<void> {
    const s = this.stack(node);
    return this.lifecycles.run(node, [component], async () => {
      if (component === 'agent') await drive(this.sim.clock, s.startAgent());
      else if (!s.proxyRunning) s.startProxy();
    });
  }

  /**
   * Agent: stop, then start (in-pod rules stay meanwhile). Proxy: the new process starts while
   * the old one runs (both in the SO_REUSEPORT groups), then the old one drains and exits.
   */
  async restart(component: Component, node: string): Promise<void> {
    const s = this.stack(node);
    return this.lifecycles.run(node, [component], async () => {
      if (component === 'agent') {
        await drive(this.sim.clock, s.stopAgent());
        await drive(this.sim.clock, s.startAgent());
        return;
      }
      s.startProxy();
      await runFor(this.sim.clock, 200); // ZDS hello, snapshot, listeners of the new process
      await drive(this.sim.clock, s.retireOld());
    });
  }

  /**
   * Every process on the node dies (agent, proxy, pods); the node comes back. As after a real
   * reboot, the kubelet runs a while before the DaemonSet pods (agent, proxy) are up again: the
   * pods' new sandboxes get their CNI ADD while the agent is still down (fail closed: refused,
   * retried with backoff), then the agent and the proxy start.
   */
  async rebootNode(node: string): Promise<void> {
    const s = this.stack(node);
    return this.lifecycles.run(node, ['agent', 'proxy'], async () => {
      await drive(this.sim.clock, s.stopProxy('immediate'));
      await drive(this.sim.clock, s.stopAgent());
      await drive(this.sim.clock, s.node.reboot());
      await runFor(this.sim.clock, REBOOT_DAEMONSETS_AFTER_MS);
      await drive(this.sim.clock, s.startAgent());
      s.startProxy();
    });
  }

  async dropWatches(): Promise<void> {
    this.sim.store.dropWatches();
  }

  /** The API as the CNI plugin on `node` reaches it: refused while cniApiFault holds for the node. */
  private pluginApi(node: string): Pick<KubeApi, 'get'> {
    const get: KubeApi['get'] = (kind, name, namespace) =>
      this.apiCutOff.has(node)
        ? Promise.reject(
            new Error(
              `GET ${kind} ${namespace ?? ''}/${name}: connect ECONNREFUSED (sim fault: the API server is unreachable from the CNI plugin on ${node})`,
            ),
          )
        : this.sim.api.get(kind, name, namespace);
    return { get };
  }

  async cniApiFault(node: string, failing: boolean): Promise<void> {
    this.stack(node); // names the node or throws
    if (failing) this.apiCutOff.add(node);
    else this.apiCutOff.delete(node);
  }

  async agentAddFault(node: string, fault: AgentAddFault | undefined): Promise<void> {
    this.stack(node); // names the node or throws
    if (fault === undefined) this.agentFaults.delete(node);
    else this.agentFaults.set(node, { fault, visible: new Set(this.sim.kernel.netnsNames()) });
  }

  async nodeAddresses(): Promise<Readonly<Record<string, readonly string[]>>> {
    const out: Record<string, readonly string[]> = {};
    for (const n of this.sim.nodes) out[n.name] = [n.address.ipv4, ...(n.address.ipv6 ? [n.address.ipv6] : [])];
    return out;
  }

  /**
   * A process on the node (uid `uid`) speaks ZDS to the agent as the proxy would, for 500 ms of
   * virtual time: it is accepted when it gets ready (hello answered, snapshot done) or receives
   * any pod. Pod netns handles it receives are closed at once (it only counts them).
   */
  async zdsClient(node: string, uid: number): Promise<ZdsClientAttempt> {
    this.stack(node);
    let workloads = 0;
    const handler: ZdsWorkloadHandler = {
      onAdd: (_uid, _info, netns) => {
        workloads++;
        netns.close();
        return Promise.resolve();
      },
      onKeep: () => Promise.resolve(),
      onDel: () => Promise.resolve(),
      onSnapshotSent: () => Promise.resolve(),
    };
    const pid = this.nextRoguePid++;
    const client = new ZdsClient({
      transport: this.zdsNet.endpoint({ pid, uid, gid: uid }),
      address: zdsAddress(node),
      clock: this.sim.clock,
      random: new SeededRandom(this.options.seed * 11 + pid),
      log: this.log.child({ component: 'zds-client', node, uid }),
      handler,
    });
    const seen: string[] = [];
    let ready = false;
    client.on((e) => {
      if (e.type === 'ready') ready = true;
      if (seen.length < 3 && (e.type === 'disconnected' || e.type === 'connect-failed' || e.type === 'protocol-error'))
        seen.push(`${e.type}: ${'reason' in e ? e.reason : e.error}`);
    });
    client.start();
    await runFor(this.sim.clock, 500);
    await drive(this.sim.clock, client.stop());
    await runFor(this.sim.clock, 100);
    const accepted = ready || workloads > 0;
    return {
      accepted,
      workloads,
      detail: accepted
        ? `accepted as the node proxy on ${node}: ready ${ready}, ${workloads} pod netns handle(s) received`
        : `not accepted on ${node}: ${seen.join('; ') || 'no answer'}`,
    };
  }

  // ------------------------------------------------------------------ time

  /** Run virtual time until nothing observable changed for QUIET_MS (bounded). */
  async settle(): Promise<void> {
    let before = this.fingerprint();
    for (let i = 0; i < SETTLE_MAX_STEPS; i++) {
      await runFor(this.sim.clock, QUIET_MS);
      this.openAppListeners();
      const now = this.fingerprint();
      if (now === before && !this.proxyReconnecting()) return;
      before = now;
    }
  }

  /**
   * A running proxy not (yet) connected to its running agent is still converging, though nothing
   * settle fingerprints may change for a while: its ZDS reconnect backoff (up to 15 s, as upstream
   * ztunnel) is longer than the quiet window. Until it reconnects the agent truthfully reports its
   * pods pending while the proxy still serves them; settle waits that out (within the step cap).
   */
  private proxyReconnecting(): boolean {
    return this.stacks.some((s) => s.agent !== undefined && s.proxyRunning && !s.agent.proxyConnected());
  }

  /**
   * What settle watches: every API object but Events (uid and resourceVersion), sandboxes,
   * agents' and proxies' pod state. Events are left out: a pod stuck in sandbox backoff (CNI ADD
   * refused while its node agent is down, fail closed) writes one per retry and nothing else, so
   * with them such a world never looked quiet and every settle ran to the step cap (20 windows,
   * ~0.3 s of CPU each). A retry that succeeds changes the sandboxes and the pod, which count.
   */
  private fingerprint(): string {
    const parts: string[] = [];
    for (const kind of FINGERPRINT_KINDS) {
      for (const o of this.sim.store.listShared(kind).items)
        parts.push(`${o.metadata?.uid ?? ''}@${o.metadata?.resourceVersion ?? ''}`);
    }
    for (const s of this.stacks) {
      for (const r of s.node.disk.sandboxes.values())
        parts.push(`${r.podUid}:${r.netns}:${r.ready}:${r.containers.length}`);
      for (const uid of s.servedPods()) parts.push(`served ${uid}:${s.servedNetns(uid)}`);
      for (const m of s.agent?.meshPods() ?? [])
        parts.push(`mesh ${m.uid}:${m.netns}:${m.rules}:${m.acked}:${m.annotated}`);
    }
    return parts.join('|');
  }

  /**
   * Sockets the kubelet model does not open: UDP ports of every app, and TCP ports of
   * hostNetwork apps (which share the node's port space). A bind that fails is what a real app
   * sees — it logs and runs without that listener — never an exception out of settle().
   */
  private openAppListeners(): void {
    const k = this.sim.kernel;
    for (const s of this.stacks) {
      for (const rec of s.node.disk.sandboxes.values()) {
        const app = this.apps.get(podKey({ namespace: rec.namespace, name: rec.name }));
        const c = rec.containers.find((x) => x.ref.container === APP_CONTAINER);
        if (!app || !c || !c.running || this.listenersReady.has(c)) continue;
        const tcp = rec.hostNetwork ? app.tcpPorts : [];
        const udp = app.udpPorts ?? [];
        if (tcp.length === 0 && udp.length === 0) continue;
        this.listenersReady.add(c);
        const families = new Set(rec.ips.map((ip) => parseIp(ip).family));
        const open = (proto: 'tcp' | 'udp', port: number, f: Family): void => {
          const sock = c.socket(proto, f);
          try {
            if (f === 6) k.setsockopt(sock, 'IPV6_V6ONLY', true);
            k.bind(sock, f === 4 ? '0.0.0.0' : '::', port);
            if (proto === 'tcp') k.listen(sock);
          } catch (e) {
            k.close(sock);
            if (!(e instanceof SimErrnoError)) throw e;
            const what = `${rec.namespace}/${rec.name} ${proto} ${f === 6 ? '[::]' : '0.0.0.0'}:${port}: ${e.errno}`;
            this.failedListens.push(what);
            this.log.warn('app listener failed', {
              pod: `${rec.namespace}/${rec.name}`,
              proto,
              port,
              error: e.message,
            });
          }
        };
        for (const port of tcp) for (const f of families) open('tcp', port, f);
        for (const port of udp) for (const f of families) open('udp', port, f);
      }
    }
  }

  // ------------------------------------------------------------------ observation

  private podRecord(p: Pod): { node: SimNode | undefined; rec: ReturnType<SimNode['disk']['sandboxes']['get']> } {
    const nodeName = p.spec?.nodeName;
    const node = nodeName ? this.sim.nodes.find((n) => n.name === nodeName) : undefined;
    return { node, rec: node?.disk.sandboxes.get(p.metadata?.uid ?? '') };
  }

  async pods(): Promise<readonly PodObservation[]> {
    const out: PodObservation[] = [];
    for (const p of this.sim.store.list('Pod').items) {
      const uid = p.metadata?.uid ?? '';
      if (this.proxyPodUids.has(uid)) continue;
      const { node, rec } = this.podRecord(p);
      const hostNetwork = p.spec?.hostNetwork === true;
      const netns =
        rec && !hostNetwork && rec.netns !== '' && this.sim.kernel.hasNetns(rec.netns) ? rec.netns : undefined;
      const stack = node ? this.stack(node.name) : undefined;
      const servedNetns = stack?.servedNetns(uid);
      out.push({
        namespace: p.metadata?.namespace ?? '',
        name: p.metadata?.name ?? '',
        uid,
        node: node?.name ?? '',
        labels: { ...(p.metadata?.labels ?? {}) },
        phase: p.status?.phase ?? 'Pending',
        started: rec !== undefined && rec.ready && rec.containers.some((c) => c.running),
        hostNetwork,
        ips: (p.status?.podIPs ?? []).map((x) => x.ip).filter((x): x is string => typeof x === 'string'),
        annotation: p.metadata?.annotations?.[REDIRECTION_STATUS],
        redirected:
          netns !== undefined &&
          (this.sim.kernel.iptablesSave(netns, 4).includes('--to-ports 15001') ||
            /redirect to :15001\b/.test(this.sim.kernel.netns(netns).nftables.list())),
        served: netns !== undefined && servedNetns !== undefined && servedNetns.endsWith(`/${netns}`),
      });
    }
    return out;
  }

  /** Connection-log entries of every node since `marks` (lengths of the sinks). */
  private proxyLogSince(marks: readonly number[]): ProxyLogEntry[] {
    return this.stacks.flatMap((s, i) => s.sink.records.slice(marks[i]).map((r) => toProxyLogEntry(s.name, r)));
  }

  /** Pods made through this world (app container labels are matched against these). */
  private knownPod = (ref: PodRef): boolean => this.apps.has(podKey(ref));

  /** The pod whose sandbox netns is `netns`, if any. */
  private podOfNetns(netns: string): PodRef | undefined {
    for (const s of this.stacks) {
      for (const r of s.node.disk.sandboxes.values())
        if (r.netns === netns && netns !== '') return { namespace: r.namespace, name: r.name };
    }
    return undefined;
  }

  private classify(listener: SimSocket): { acceptedBy: Acceptor; acceptedIn: PodRef | { node: string } | undefined } {
    const where = (): PodRef | { node: string } | undefined => {
      const pod = this.podOfNetns(listener.netns);
      if (pod) return pod;
      return this.nodes.includes(listener.netns) ? { node: listener.netns } : undefined;
    };
    if (isProxySocket(listener)) return { acceptedBy: proxyAcceptor(listener.local?.port ?? 0), acceptedIn: where() };
    const app = appPodOf(listener, this.knownPod);
    if (app) return { acceptedBy: 'app', acceptedIn: app };
    return { acceptedBy: 'other', acceptedIn: where() };
  }

  private deliveriesOf(handshakes: readonly KernelConnect[]): { deliveries: Delivery[]; servers: SimSocket[] } {
    const deliveries: Delivery[] = [];
    const servers: SimSocket[] = [];
    for (const h of handshakes) {
      if (h.outcome !== 'established' || !h.listener || !h.server || isProbeSocket(h.client)) continue;
      const pod = appPodOf(h.listener, this.knownPod);
      if (!pod) continue;
      servers.push(h.server);
      const viaProxy = isProxySocket(h.client);
      const proxyFor = viaProxy ? this.podOfNetns(h.client.netns) : undefined;
      const proxyNode = viaProxy ? proxyNodeOf(h.client) : undefined;
      deliveries.push({
        pod,
        port: h.server.local?.port ?? 0,
        peer: h.server.remote ? formatSockAddr(h.server.remote) : '?',
        viaProxy,
        ...(proxyNode !== undefined ? { proxyNode } : {}),
        ...(proxyFor ? { proxyFor } : {}),
      });
    }
    return { deliveries, servers };
  }

  // ------------------------------------------------------------------ connections

  private async endpointOf(from: Source): Promise<Endpoint | string> {
    if (from.kind === 'outside') {
      return {
        netns: OUTSIDE_NETNS,
        creds: credentials(0, 0, ['NET_ADMIN', 'NET_RAW']),
        label: 'outside',
        ips: this.options.ipv6 ? [OUTSIDE_ADDRESS.ipv4, OUTSIDE_ADDRESS.ipv6] : [OUTSIDE_ADDRESS.ipv4],
      };
    }
    if (from.kind === 'host') {
      const n = this.stack(from.node).node;
      return {
        netns: n.hostNetns,
        creds: credentials(from.uid, from.uid, from.caps),
        label: `host@${n.name} uid ${from.uid}`,
        ips: [n.address.ipv4, ...(n.address.ipv6 ? [n.address.ipv6] : [])],
      };
    }
    const pod = await this.sim.api.get('Pod', from.pod.name, from.pod.namespace).catch(absentOn404);
    if (!pod) return `pod ${podKey(from.pod)} does not exist`;
    const { rec } = this.podRecord(pod);
    const c = rec?.containers.find((x) => x.ref.container === APP_CONTAINER && x.running);
    if (!rec || !c) return `pod ${podKey(from.pod)} has no running app container`;
    return {
      netns: c.netns,
      creds: c.creds,
      label: `${from.pod.namespace}/${from.pod.name}/${APP_CONTAINER}`,
      ips: rec.ips,
    };
  }

  private async destinationOf(to: Destination, family: Family): Promise<{ ip: string; port: number } | string> {
    if (to.kind === 'ip') return { ip: to.ip, port: to.port };
    const pod = await this.sim.api.get('Pod', to.pod.name, to.pod.namespace).catch(absentOn404);
    if (!pod) return `destination pod ${podKey(to.pod)} does not exist`;
    const ip = (pod.status?.podIPs ?? [])
      .map((x) => x.ip)
      .find((x): x is string => typeof x === 'string' && parseIp(x).family === family);
    if (!ip) return `destination pod ${podKey(to.pod)} has no IPv${family} address (yet)`;
    return { ip, port: to.port };
  }

  async connect(from: Source, to: Destination, opts: ConnectOptions = {}): Promise<ConnectResult> {
    const none = (error: string): ConnectResult => ({
      outcome: 'error',
      error,
      acceptedBy: undefined,
      deliveries: [],
      proxyLog: [],
    });
    // Address families are checked here, as the socket calls would: a v6 socket (or crafted v6
    // frame) cannot carry a v4 address, nor the reverse. The kernel model below assumes they agree.
    const familyOf = (ip: string): Family | undefined => {
      try {
        return parseIp(ip).family;
      } catch {
        return undefined;
      }
    };
    const dstFamily = to.kind === 'ip' ? familyOf(to.ip) : undefined;
    if (to.kind === 'ip' && dstFamily === undefined)
      return none(`connect: EINVAL — ${JSON.stringify(to.ip)} is not an IP address`);
    const family: Family = opts.family ?? dstFamily ?? 4;
    if (dstFamily !== undefined && dstFamily !== family) {
      return none(
        `${opts.raw ? 'sendto(AF_PACKET)' : 'connect'}: EAFNOSUPPORT — an IPv${family} ${opts.raw ? 'frame' : 'socket'} cannot go to the IPv${dstFamily} address ${to.kind === 'ip' ? to.ip : ''}`,
      );
    }
    if (opts.sourceIp !== undefined) {
      const sf = familyOf(opts.sourceIp);
      if (sf === undefined) return none(`bind: EINVAL — source ${JSON.stringify(opts.sourceIp)} is not an IP address`);
      if (sf !== family)
        return none(
          `bind: EAFNOSUPPORT — an IPv${family} ${opts.raw ? 'frame' : 'socket'} cannot use the IPv${sf} source ${opts.sourceIp}`,
        );
    }
    const src = await this.endpointOf(from);
    if (typeof src === 'string') return none(src);
    const dst = await this.destinationOf(to, family);
    if (typeof dst === 'string') return none(dst);
    if (opts.raw) return this.attempt(() => this.sendRaw(src, dst, family, opts));
    if ((opts.proto ?? 'tcp') === 'udp') return this.attempt(() => this.sendUdp(src, dst, family, opts));
    return this.attempt(() => this.connectTcp(src, dst, family, opts));
  }

  /**
   * Run one attempt with the handshake recorder on, and gather what it caused: the app
   * deliveries (the kernel's handshakes into app sockets), the proxies' log records, the trace.
   */
  private async attempt(run: () => Promise<AttemptResult>): Promise<ConnectResult> {
    const marks = this.stacks.map((s) => s.sink.records.length);
    this.recorder.begin();
    let partial: AttemptResult;
    let handshakes: KernelConnect[];
    try {
      partial = await run();
    } finally {
      handshakes = this.recorder.end();
    }
    const { deliveries, servers } = this.deliveriesOf(handshakes);
    if (servers.length > 0) {
      // The app read what came and closes: its FIN ends the proxy's relay (the kubelet's app
      // sockets are raw kernel sockets, so the proxy's adapter connection is told directly), and
      // the proxy's 'closed' records land in this attempt, not in a later one.
      for (const s of servers) {
        if (s.state !== 'closed' && this.sim.kernel.hasNetns(s.netns)) this.sim.kernel.close(s);
      }
      for (const h of handshakes)
        if (h.server && servers.includes(h.server)) simConnectionOf(this.sim.kernel, h.client)?.deliver({ done: true });
      await runFor(this.sim.clock, 0);
    }
    const traced = this.extras.trace
      ? [
          ...(partial.traceEvents ? [renderTrace(partial.traceEvents)] : []),
          ...handshakes.map(
            (h, i) =>
              `--- handshake ${i + 1}: ${h.client.describe()} -> ${h.outcome}${h.listener ? ` (${h.listener.describe()})` : ''}\n${renderTrace(h.trace)}`,
          ),
        ].join('\n')
      : undefined;
    const { extraDeliveries, traceEvents, ...rest } = partial;
    void traceEvents; // rendered above
    return {
      ...rest,
      deliveries: [...(extraDeliveries ?? []), ...deliveries],
      proxyLog: this.proxyLogSince(marks),
      ...(traced !== undefined ? { trace: traced } : {}),
    };
  }

  readonly forgeableCredentials = IDENTITY_CREDENTIALS;
  /** The root of a compromised node's own making (forgedHbone self-signed): no proxy trusts it. */
  private readonly attackerRoot = new SimMeshCa(TRUST_DOMAIN, 'self-signed-root');

  /**
   * World.forgedHbone: the certificate from the in-process CA (the same decision code as the CA
   * process) with the token the credential names, or from a root of the attacker's own; then the
   * sim HBONE client's handshake over a TCP connection from the node's host netns as uid 0 to
   * the destination pod's 15008.
   */
  async forgedHbone(
    node: string,
    identity: string,
    credential: IdentityCredential,
    to: Destination,
  ): Promise<ForgedHboneResult> {
    const src = await this.endpointOf({ kind: 'host', node, uid: 0, caps: [] });
    if (typeof src === 'string') throw new Error(`forgedHbone: ${src}`);
    // As connect(): a destination without an address now (deleted, or its sandbox being remade) is an outcome.
    const dst = await this.destinationOf(to, 4);
    if (typeof dst === 'string') return forgedWithoutConnection(dst, { kind: 'not-asked', detail: dst });
    const local = parseSpiffeId(identity);
    if (!local) throw new Error(`forgedHbone: ${JSON.stringify(identity)} is not a SPIFFE ID`);
    let cert: string | undefined;
    let certificate: ForgedHboneResult['certificate'];
    if (credential === 'self-signed') {
      cert = this.attackerRoot.issue(local);
      certificate = {
        kind: 'self-signed',
        detail: `issued by ${this.attackerRoot.name}, a root of the attacker's own`,
      };
    } else {
      const token = await this.forgedToken(node, credential);
      const answer = await drive(this.sim.clock, this.meshCa.request(token, identity));
      if (!answer.ok)
        return forgedWithoutConnection(`the mesh CA refused ${identity} (${credential}): ${answer.message}`, {
          kind: 'refused',
          detail: answer.message,
        });
      cert = answer.certificate;
      certificate = { kind: 'issued', detail: `the mesh CA issued ${identity} for the ${credential}` };
    }
    const forged = cert;
    const result = await this.attempt(async () => {
      const tcp = await this.tcpFirstHop(
        { ...src, label: `${src.label} (forged HBONE)` },
        {
          family: 4,
          dst: { family: 4, address: dst.ip, port: HBONE_PORT },
          timeoutMs: CLIENT_TIMEOUT_MS,
        },
      );
      if (!tcp.ok) return tcp.result;
      const { conn, hop } = tcp;
      const hbone = new SimHbone({
        ca: this.meshRoot,
        certificates: { certificateFor: () => Promise.resolve(forged) },
      });
      const tunnel = await drive(
        this.sim.clock,
        hbone.connect(conn, {
          local,
          expectedPeers: [],
          authority: { family: 4, address: dst.ip, port: dst.port },
        }),
      );
      if (!tunnel.ok) {
        await runFor(this.sim.clock, ATTEMPT_MS);
        return { outcome: 'refused', error: `HBONE: ${tunnel.message}`, ...hopFields(hop) };
      }
      await tunnel.value.write(Buffer.from('hello'));
      await runFor(this.sim.clock, ATTEMPT_MS);
      tunnel.value.close();
      await runFor(this.sim.clock, 0);
      return { outcome: 'established', ...hopFields(hop) };
    });
    return { ...result, certificate };
  }

  /** The token a compromised `node`'s root presents for `credential` (other than self-signed). */
  private async forgedToken(node: string, credential: Exclude<IdentityCredential, 'self-signed'>): Promise<string> {
    const other = this.nodes.find((n) => n !== node) ?? node;
    switch (credential) {
      case 'node-token':
        return this.proxyToken(node);
      case 'wrong-audience':
        return this.proxyToken(node, { audience: API_AUDIENCE });
      case 'expired-token': {
        // Taken from the other node's proxy pod and kept past its (shortest possible) life.
        const token = this.proxyToken(other, { expirationSeconds: 600 });
        await runFor(this.sim.clock, 601_000);
        return token;
      }
      case 'replayed-token':
        // Bound to a proxy pod of the other node that has since been replaced: same name, another uid.
        return this.sim.store.tokens.issue({
          namespace: PROXY_POD.namespace,
          serviceAccount: PROXY_POD.serviceAccount,
          pod: { name: proxyPodName(other), uid: `replaced-${proxyPodName(other)}`, node: other },
          audiences: [PROXY_POD.tokenAudience],
          expirationSeconds: PROXY_POD.tokenSeconds,
        });
    }
  }

  /**
   * World.holdConnection: one TCP handshake through the kernel model as the source (IPv4), kept
   * open — unlike connect(), whose attempt closes the app's server socket at once. send() is one
   * data segment (SimKernel.sendTcp); a socket the agent destroyed (SOCK_DESTROY) cannot send.
   */
  async holdConnection(from: Source, to: Destination): Promise<HeldConnection> {
    const src = await this.endpointOf(from);
    if (typeof src === 'string') throw new Error(`holdConnection: ${src}`);
    const dst = await this.destinationOf(to, 4);
    if (typeof dst === 'string') throw new Error(`holdConnection: ${dst}`);
    const k = this.sim.kernel;
    const s = k.socket(src.netns, 'tcp', 4, src.creds, `${src.label} (held)`);
    const r = k.connect(s, dst.ip, dst.port);
    await runFor(this.sim.clock, 0);
    const hop = r.outcome === 'established' && r.listener ? this.classify(r.listener) : { acceptedBy: undefined };
    const closeIfOpen = (x: SimSocket | undefined): void => {
      if (x && x.state !== 'closed' && k.hasNetns(x.netns)) k.close(x);
    };
    return {
      outcome: r.outcome === 'reset' ? 'refused' : r.outcome,
      acceptedBy: hop.acceptedBy,
      send: async () => {
        if (s.state !== 'established')
          return { delivered: false, detail: `the connection was ended (${s.describe()} is ${s.state})` };
        const sent = k.sendTcp(s, 'held');
        await runFor(this.sim.clock, 0);
        return {
          delivered: sent.delivered,
          detail: sent.delivered ? `delivered to ${r.server?.describe() ?? '?'}` : 'not delivered',
        };
      },
      close: async () => {
        closeIfOpen(s);
        closeIfOpen(r.server);
        await runFor(this.sim.clock, 0);
      },
    };
  }

  /** World.driftRepairs: the agents' `drift repaired` warnings (kept by the quiet logger). */
  async driftRepairs(): Promise<readonly DriftRepair[]> {
    return this.log.entries
      .filter((e) => e.msg === 'drift repaired')
      .map((e) => ({
        node: String(e.fields.node),
        pod: String(e.fields.pod),
        windowMs: typeof e.fields.windowMs === 'number' ? e.fields.windowMs : undefined,
        flowsEnded: typeof e.fields.flowsEnded === 'number' ? e.fields.flowsEnded : undefined,
        foreign: String(e.fields.foreign),
      }));
  }

  /**
   * The app acts on its own netns as itself (World.appExec). The flush is what
   * `iptables-restore` of empty tables does, gated by the capability check the kernel makes
   * (NET_ADMIN in the netns's user namespace); the listener is an ordinary app socket, so bind
   * conflicts (EADDRINUSE, SO_REUSEPORT only within one uid) are the kernel model's.
   */
  async appExec(pod: PodRef, action: AppAction): Promise<AppExecResult> {
    const ep = await this.endpointOf({ kind: 'pod', pod });
    if (typeof ep === 'string') return { ok: false, error: `appExec ${action.kind} in ${podKey(pod)}: ${ep}` };
    const k = this.sim.kernel;
    if (action.kind === 'iptables-flush' || action.kind === 'iptables-insert') {
      if (!mayAdminNetwork(ep.creds))
        return {
          ok: false,
          error: `iptables-restore: EPERM (uid ${ep.creds.uid} has no effective NET_ADMIN in ${podKey(pod)})`,
        };
      const insert = action.kind === 'iptables-insert';
      const text = insert ? insertedRuleText(action.rule) : EMPTY_TABLES;
      const families: Family[] = ep.ips.some((ip) => parseIp(ip).family === 6) ? [4, 6] : [4];
      for (const f of families) k.iptablesRestore(ep.netns, f, text, { noflush: insert, source: `app ${ep.label}` });
      await runFor(this.sim.clock, 0);
      return { ok: true };
    }
    if (action.kind === 'nft-flush' || action.kind === 'nft-insert') {
      if (!mayAdminNetwork(ep.creds))
        return {
          ok: false,
          error: `nft: EPERM (uid ${ep.creds.uid} has no effective NET_ADMIN in ${podKey(pod)})`,
        };
      const ns = k.netns(ep.netns);
      if (action.kind === 'nft-insert')
        ns.nftables.apply(insertedTableText(action.table), { source: `app ${ep.label}` });
      else {
        ns.nftables.flushRuleset();
        // The worlds run iptables-nft: its tables are part of the ruleset `nft flush ruleset` empties.
        for (const f of [4, 6] as const) k.iptablesRestore(ep.netns, f, EMPTY_TABLES, { source: `app ${ep.label}` });
      }
      await runFor(this.sim.clock, 0);
      return { ok: true };
    }
    const sock = k.socket(ep.netns, 'tcp', 4, ep.creds, ep.label);
    try {
      if (action.reusePort) k.setsockopt(sock, 'SO_REUSEPORT', true);
      if (action.transparent) k.setsockopt(sock, 'IP_TRANSPARENT', true);
      k.bind(sock, '0.0.0.0', action.port);
      k.listen(sock);
    } catch (e) {
      k.close(sock);
      if (e instanceof SimErrnoError) return { ok: false, error: `${e.message} (listen on port ${action.port})` };
      throw e;
    }
    return { ok: true };
  }

  /**
   * A TCP connect as `src` through the kernel model, with the first hop it reached; a connect
   * that failed is already the attempt's result (after the time an attempt runs).
   */
  private async tcpFirstHop(
    src: Endpoint,
    opts: ConnectTcpOptions,
  ): Promise<
    | {
        readonly ok: true;
        readonly conn: TcpConnection;
        readonly hop: { acceptedBy: Acceptor | undefined; acceptedIn: PodRef | { node: string } | undefined };
      }
    | { readonly ok: false; readonly result: AttemptResult }
  > {
    const sockets = new SimSockets({
      kernel: this.sim.kernel,
      owner: src.creds,
      defaultNetns: src.netns,
      label: src.label,
      clock: this.sim.clock,
    });
    const pending = sockets.connectTcp(opts);
    const first = this.recorder.current()[0]; // connect() handshakes synchronously inside connectTcp
    const res = await drive(this.sim.clock, pending);
    const hop =
      first?.outcome === 'established' && first.listener
        ? this.classify(first.listener)
        : { acceptedBy: undefined, acceptedIn: undefined };
    if (res.ok) return { ok: true, conn: res.value, hop };
    await runFor(this.sim.clock, ATTEMPT_MS);
    return {
      ok: false,
      result: {
        outcome: failureOutcome(res),
        ...(isSyscallError(res) ? { error: `${res.call}: ${res.errno}` } : {}),
        ...hopFields(hop),
      },
    };
  }

  private async connectTcp(
    src: Endpoint,
    dst: { ip: string; port: number },
    family: Family,
    opts: ConnectOptions,
  ): Promise<AttemptResult> {
    const k = this.sim.kernel;
    const transparent = opts.sourceIp !== undefined && !isLocalAddress(k.netns(src.netns), parseIp(opts.sourceIp));
    const tcp = await this.tcpFirstHop(src, {
      family,
      dst: { family, address: dst.ip, port: dst.port },
      timeoutMs: CLIENT_TIMEOUT_MS,
      ...(opts.mark !== undefined ? { mark: markValue(opts.mark) } : {}),
      ...(transparent ? { transparent: true } : {}),
      ...(opts.sourceIp !== undefined ? { src: { address: opts.sourceIp } } : {}),
    });
    if (!tcp.ok) return tcp.result;
    const { conn, hop } = tcp;
    await conn.write(Buffer.from(opts.payload ?? 'hello'));
    await runFor(this.sim.clock, ATTEMPT_MS);
    conn.close();
    await runFor(this.sim.clock, 0);
    return { outcome: 'established', ...hopFields(hop) };
  }

  private async sendUdp(
    src: Endpoint,
    dst: { ip: string; port: number },
    family: Family,
    opts: ConnectOptions,
  ): Promise<AttemptResult> {
    const k = this.sim.kernel;
    const s = k.socket(src.netns, 'udp', family, src.creds, src.label);
    try {
      if (opts.mark !== undefined) k.setsockopt(s, 'SO_MARK', opts.mark);
      if (opts.sourceIp !== undefined) {
        if (!isLocalAddress(k.netns(src.netns), parseIp(opts.sourceIp))) k.setsockopt(s, 'IP_TRANSPARENT', true);
        k.bind(s, opts.sourceIp, 0);
      }
    } catch (e) {
      k.close(s);
      if (e instanceof SimErrnoError)
        return {
          outcome: 'error',
          error: `${e.call}: ${e.errno}`,
          acceptedBy: undefined,
          extraDeliveries: [],
          traceEvents: [],
        };
      throw e;
    }
    const r = k.sendUdp(s, dst.ip, dst.port, opts.payload ?? 'hello');
    k.close(s);
    const extraDeliveries: Delivery[] = [];
    let hop: { acceptedBy: Acceptor | undefined; acceptedIn: PodRef | { node: string } | undefined } = {
      acceptedBy: undefined,
      acceptedIn: undefined,
    };
    if (r.outcome === 'delivered' && r.socket) {
      hop = this.classify(r.socket);
      r.socket.inbox.length = 0;
      const app = appPodOf(r.socket, this.knownPod);
      if (app)
        extraDeliveries.push({
          pod: app,
          port: r.to?.port ?? dst.port,
          peer: r.from ? formatSockAddr(r.from) : '?',
          viaProxy: isProxySocket(s),
        });
    }
    await runFor(this.sim.clock, 0);
    return {
      outcome: r.outcome === 'delivered' ? 'delivered' : 'not-delivered',
      ...hopFields(hop),
      extraDeliveries,
      traceEvents: r.trace,
    };
  }

  private async sendRaw(
    src: Endpoint,
    dst: { ip: string; port: number },
    family: Family,
    opts: ConnectOptions,
  ): Promise<AttemptResult> {
    const k = this.sim.kernel;
    const ns = k.netns(src.netns);
    const srcIp = opts.sourceIp ?? src.ips.find((ip) => parseIp(ip).family === family);
    if (!srcIp)
      return {
        outcome: 'error',
        error: `no IPv${family} source address for a raw packet`,
        acceptedBy: undefined,
        extraDeliveries: [],
        traceEvents: [],
      };
    // AF_PACKET skips routing, but the crafted frame still needs the right device and next hop.
    const route = fibLookup(ns, {
      family,
      src: undefined,
      dst: parseIp(dst.ip),
      mark: 0,
      iif: undefined,
      oif: undefined,
    });
    if (route.kind !== 'unicast')
      return { outcome: 'not-delivered', acceptedBy: undefined, extraDeliveries: [], traceEvents: [] };
    const proto = (opts.proto ?? 'tcp') === 'udp' ? ('udp' as const) : ('tcp' as const);
    let r;
    try {
      r = k.sendRaw(src.netns, src.creds, route.dev, {
        proto,
        src: srcIp,
        sport: this.nextRawPort++,
        dst: dst.ip,
        dport: dst.port,
        ...(proto === 'tcp' ? { flags: { syn: true } } : {}),
        nextHop: formatIp(route.nextHop),
      });
    } catch (e) {
      if (e instanceof SimErrnoError)
        return {
          outcome: 'error',
          error: `${e.call}: ${e.errno}`,
          acceptedBy: undefined,
          extraDeliveries: [],
          traceEvents: [],
        };
      throw e;
    }
    const extraDeliveries: Delivery[] = [];
    let hop: { acceptedBy: Acceptor | undefined; acceptedIn: PodRef | { node: string } | undefined } = {
      acceptedBy: undefined,
      acceptedIn: undefined,
    };
    if (r.delivery === 'delivered' && r.socket) {
      hop = this.classify(r.socket.acceptedFrom ?? r.socket);
      if (proto === 'udp') r.socket.inbox.length = 0;
      const app = appPodOf(r.socket, this.knownPod);
      if (app)
        extraDeliveries.push({
          pod: app,
          port: dst.port,
          peer: `${family === 6 ? `[${srcIp}]` : srcIp}:${this.nextRawPort - 1}`,
          viaProxy: false,
        });
    }
    await runFor(this.sim.clock, 0);
    return {
      outcome: r.delivery === 'delivered' ? 'delivered' : 'not-delivered',
      ...hopFields(hop),
      extraDeliveries,
      traceEvents: r.trace,
    };
  }

  // ------------------------------------------------------------------ reuse between histories

  /** Namespaces present before any history (none today; kept so a reset never deletes them). */
  private readonly bootNamespaces = new Set<string>();

  /**
   * Undo a history: every component up, every policy deleted, every pod and namespace the
   * baseline does not name deleted, baseline labels restored, missing baseline pods created
   * again, conntrack flushed, connection logs cleared, then settle. The caller must compare
   * stateDigest() with the baseline's before trusting the world (check's world pool does).
   */
  async resetTo(baseline: ResetBaseline): Promise<void> {
    const clock = this.sim.clock;
    this.apiCutOff.clear();
    this.agentFaults.clear();
    for (const s of this.stacks) {
      await drive(clock, s.retireOld());
      if (!s.agent) await drive(clock, s.startAgent());
      if (!s.proxyRunning) s.startProxy();
    }
    const api = this.sim.api;
    for (const p of this.sim.store.list('AuthorizationPolicy').items) {
      await api.delete('AuthorizationPolicy', p.metadata?.name ?? '', p.metadata?.namespace);
    }
    const wanted = new Map(baseline.pods.map((p) => [podKey(p), p]));
    const present = new Set<string>();
    for (const p of this.sim.store.list('Pod').items) {
      if (this.proxyPodUids.has(p.metadata?.uid ?? '')) continue;
      const ref = { namespace: p.metadata?.namespace ?? '', name: p.metadata?.name ?? '' };
      const spec = wanted.get(podKey(ref));
      if (!spec || !sameShape(p, spec)) {
        await this.deletePod(ref);
        continue;
      }
      present.add(podKey(ref));
      const patch = labelPatch(p.metadata?.labels ?? {}, spec.labels ?? {});
      if (patch) await this.labelPod(ref, patch);
    }
    for (const n of this.sim.store.list('Namespace').items) {
      const name = n.metadata?.name ?? '';
      const labels = baseline.namespaces[name];
      if (labels === undefined) {
        if (!this.bootNamespaces.has(name)) await api.delete('Namespace', name, undefined);
        continue;
      }
      const patch = labelPatch(n.metadata?.labels ?? {}, labels);
      if (patch) await this.labelNamespace(name, patch);
    }
    for (const [name, labels] of Object.entries(baseline.namespaces)) {
      if (!this.sim.store.list('Namespace').items.some((n) => n.metadata?.name === name))
        await this.createNamespace(name, labels);
    }
    await this.settle();
    for (const spec of baseline.pods) if (!present.has(podKey(spec))) await this.createPod(spec);
    // Finished flows are already gone; a history's UDP flows stay until flushed (no timeouts in the sim).
    for (const n of this.sim.kernel.netnsNames()) this.sim.kernel.netns(n).conntrack.flush();
    for (const s of this.stacks) s.sink.records.length = 0;
  }

  /**
   * Everything a later history could observe, with identities abstracted: pods by namespace/name
   * (not uid), sandbox netns by pod, pod addresses by pod and index, proxy sockets without their
   * incarnation. Two worlds with equal digests answer every World call the same way up to those
   * identities (as far as the digest sees: API objects, sandboxes, every netns's rules, ipsets,
   * sockets and conntrack, agents' and proxies' per-pod state, pending timers).
   */
  stateDigest(): string {
    const k = this.sim.kernel;
    // One block per object; blocks are sorted after renaming, so creation order does not count.
    const blocks: string[] = [];
    const rename = new Map<string, string>();
    for (const n of this.sim.store.list('Namespace').items)
      blocks.push(`ns ${n.metadata?.name ?? ''} ${sortedJson(n.metadata?.labels ?? {})}`);
    for (const p of this.sim.store.list('Pod').items) {
      const key = podKeyOf(p);
      rename.set(p.metadata?.uid ?? '', `<uid ${key}>`);
      (p.status?.podIPs ?? []).forEach((x, i) => {
        if (x.ip) rename.set(x.ip, `<ip ${key}#${i}>`);
      });
      blocks.push(
        `pod ${key} node=${p.spec?.nodeName ?? ''} phase=${p.status?.phase ?? ''} hostNetwork=${String(p.spec?.hostNetwork === true)}` +
          ` labels=${sortedJson(p.metadata?.labels ?? {})} annotations=${sortedJson(p.metadata?.annotations ?? {})}` +
          ` ips=${(p.status?.podIPs ?? []).length} conditions=${(p.status?.conditions ?? []).map((c) => `${c.type}=${c.status}`).join(',')}`,
      );
    }
    blocks.push(
      `policies ${this.sim.store.list('AuthorizationPolicy').items.length} serviceaccounts ${this.sim.store.list('ServiceAccount').items.length}`,
    );
    for (const s of this.stacks) {
      for (const r of s.node.disk.sandboxes.values()) {
        if (r.netns !== '') rename.set(r.netns, `<netns ${r.namespace}/${r.name}>`);
        blocks.push(
          `sandbox ${s.name} ${r.namespace}/${r.name} ready=${String(r.ready)} hostNetwork=${String(r.hostNetwork)} ips=${r.ips.length}` +
            ` containers=${r.containers.map((c) => `${c.ref.container}:${String(c.running)}`).join(',')} networks=${r.networks.join(',')}`,
        );
      }
      blocks.push(`components ${s.name} agent=${s.agent ? 'up' : 'down'} proxy=${s.proxyRunning ? 'up' : 'down'}`);
      for (const m of s.agent?.meshPods() ?? [])
        blocks.push(
          `mesh ${s.name} ${m.namespace}/${m.name} uid=${m.uid} netns=${m.netns ?? ''} rules=${String(m.rules)} acked=${String(m.acked)} annotated=${m.annotated ?? ''}`,
        );
      for (const uid of s.servedPods()) blocks.push(`served ${s.name} ${uid} ${s.servedNetns(uid) ?? ''}`);
      blocks.push(`certificates ${s.name} ${s.heldIdentities().join(',')}`);
    }
    for (const name of k.netnsNames()) {
      const ns = k.netns(name);
      const socks = ns.sockets
        .all()
        .map(
          (x) =>
            `  sock ${x.proto}/${x.family} ${x.state} ${x.state === 'listening' || x.proto === 'udp' ? String(x.local?.port ?? '') : '*'} ${x.label.replace(/#\d+$/, '')}`,
        )
        .sort();
      const rules = ([4, 6] as const).map((f) => k.iptablesSave(name, f).replace(/\[\d+:\d+\]/g, ''));
      blocks.push(
        [
          `netns ${name} conntrack=${ns.conntrack.entries().length}`,
          ...socks,
          ...rules,
          ns.nftables.list(),
          k.ipsetsOf(name).save(),
        ].join('\n'),
      );
    }
    blocks.push(
      `timers ${this.sim.clock.pending()} cni-api-cut-off ${[...this.apiCutOff].sort().join(',')} agent-add-faults ${[
        ...this.agentFaults,
      ]
        .map(([n, f]) => `${n}=${f.fault}`)
        .sort()
        .join(',')}`,
    );
    // One pass; longest alternative first, so a name that prefixes another (10.244.0.5 /
    // 10.244.0.50, ...-sb1 / ...-sb10) is not split.
    const names = [...rename.keys()].filter((f) => f !== '').sort((a, b) => b.length - a.length);
    if (names.length === 0) return blocks.sort().join('\n');
    const re = new RegExp(names.map((n) => n.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')).join('|'), 'g');
    return blocks
      .map((b) => b.replace(re, (m) => rename.get(m) ?? m))
      .sort()
      .join('\n');
  }

  async close(): Promise<void> {
    for (const s of this.stacks) {
      await drive(this.sim.clock, s.stopProxy('immediate'));
      await drive(this.sim.clock, s.stopAgent());
    }
    for (const n of this.sim.nodes) n.kubelet?.stop();
  }
}

/** A baseline a reused world is reset to (check's post-prelude state), in World terms. */
export interface ResetBaseline {
  readonly namespaces: Readonly<Record<string, Readonly<Record<string, string>>>>;
  readonly pods: readonly PodSpec[];
}

function podKeyOf(p: Pod): string {
  return `${p.metadata?.namespace ?? ''}/${p.metadata?.name ?? ''}`;
}

function sortedJson(o: Readonly<Record<string, string>>): string {
  return JSON.stringify(
    Object.keys(o)
      .sort()
      .map((k) => [k, o[k]]),
  );
}

/** The merge patch that turns `have` into `want` (null deletes), or undefined when equal. */
function labelPatch(
  have: Readonly<Record<string, string>>,
  want: Readonly<Record<string, string>>,
): Record<string, string | null> | undefined {
  const patch: Record<string, string | null> = {};
  for (const k of Object.keys(have)) if (!(k in want)) patch[k] = null;
  for (const [k, v] of Object.entries(want)) if (have[k] !== v) patch[k] = v;
  return Object.keys(patch).length > 0 ? patch : undefined;
}

/** Does the pod object still have the baseline's immutable shape (node, network, annotations, app identity)? */
function sameShape(p: Pod, spec: PodSpec): boolean {
  const annotations = { ...(p.metadata?.annotations ?? {}) };
  delete annotations[REDIRECTION_STATUS];
  const main = p.spec?.containers?.[0];
  return (
    (spec.node === undefined || p.spec?.nodeName === spec.node) &&
    (p.spec?.hostNetwork === true) === (spec.hostNetwork === true) &&
    sortedJson(annotations) === sortedJson(spec.annotations ?? {}) &&
    (main?.securityContext?.runAsUser ?? imageUser(main?.image).uid) === spec.app.uid &&
    (main?.securityContext?.runAsUser === undefined) === (spec.app.uidSource === 'image') &&
    sortedJson(Object.fromEntries((main?.securityContext?.capabilities?.add ?? []).map((c) => [c, '']))) ===
      sortedJson(Object.fromEntries(spec.app.caps.map((c) => [c, ''])))
  );
}

function hopFields(h: { acceptedBy: Acceptor | undefined; acceptedIn: PodRef | { node: string } | undefined }): {
  acceptedBy: Acceptor | undefined;
  acceptedIn?: PodRef | { node: string };
} {
  return h.acceptedIn !== undefined
    ? { acceptedBy: h.acceptedBy, acceptedIn: h.acceptedIn }
    : { acceptedBy: h.acceptedBy };
}

/** A failure before the handshake (setsockopt, bind) is a syscall error, not a network outcome. */
function isSyscallError(f: SocketFailure): boolean {
  return f.call !== 'connect';
}

function failureOutcome(f: SocketFailure): ConnectResult['outcome'] {
  if (isSyscallError(f)) return 'error';
  switch (f.kind) {
    case 'refused':
      return 'refused';
    case 'timeout':
      return 'timeout';
    case 'unreachable':
      return 'unreachable';
    default:
      return 'error';
  }
}

export async function createSimWorld(options: WorldOptions, extra: SimWorldExtras = {}): Promise<SimMeshWorld> {
  const w = new SimMeshWorld(options, extra);
  await w.boot();
  return w;
}

export const simWorldFactory: WorldFactory = {
  kind: 'sim',
  available: () => ({ ok: true, reason: 'the simulator runs in-process everywhere' }),
  create: (options) => createSimWorld(options),
};
