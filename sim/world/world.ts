/**
 * SimWorld: a whole simulated cluster in one process, deterministic per seed.
 *
 *   outside (203.0.113.10) ──┐
 *   node-0 host (192.0.2.10) ─┼─ br0 in the fabric netns (192.0.2.1, 203.0.113.1; routes to
 *   node-1 host (192.0.2.11) ─┘  every pod CIDR via its node; nodes route to each other's
 *                                pod CIDRs directly)
 *   pods: cni0 bridge per node (10.244.<i>.1/24), veth per pod, from the sim bridge +
 *   host-local + loopback plugins through each node's kubelet.
 *
 * The same address plan as the netns world (e2e/netns/addressing.ts), with room for more nodes.
 * Virtual time (VirtualClock) and three seeded streams: the API store's (uids, generated
 * names), the scheduler's (node choice) and the interleaving's (kubelet sync delays).
 */
import type { V1Container, V1PodSecurityContext, V1Probe } from '@kubernetes/client-node';
import type { CniConfList } from '../../impl/api/cni.js';
import { isKubeApiError, type KubeObjectOf, type Wire } from '../../impl/host/kube.js';
import { VirtualClock } from '../time/virtual-clock.js';
import { SeededRandom } from '../time/seeded-random.js';
import { ApiStore } from '../kube/store.js';
import { jsonClone } from '../kube/json-value.js';
import { SimKubeApi } from '../kube/sim-kube-api.js';
import { SimKernel } from '../kernel/kernel.js';
import { simPrimaryPlugins } from '../cni/plugins.js';
import type { CniInvocation } from '../cni/chain.js';
import { NodeDisk } from '../node/runtime-state.js';
import { SimKubelet, type BackoffPolicy, type KubeletRecord, type Pod } from '../node/kubelet.js';
import { SimNode } from '../node/sim-node.js';

/** Most nodes the address plan holds (192.0.2.10 .. 192.0.2.209, 10.244.0.0/24 .. 10.244.199.0/24). */
const MAX_SIM_NODES = 200;
const FABRIC_NETNS = 'fabric';
export const OUTSIDE_NETNS = 'outside';
export const OUTSIDE_ADDRESS = { ipv4: '203.0.113.10', ipv6: 'fd00:203::10' } as const;

interface SimWorldOptions {
  readonly seed: number;
  readonly nodes: number;
  /** Dual-stack pods and nodes (default true). */
  readonly ipv6?: boolean;
  /** Upper bound of each kubelet sync's random delay, in ms (0: no jitter, the default). */
  readonly jitterMs?: number;
  /** Virtual time one CNI network ADD takes, in ms (default 0). */
  readonly cniLatencyMs?: number;
  readonly backoff?: BackoffPolicy;
  readonly kernelVersion?: string;
  /** Packet traces in the kernel (default true; benchmarks turn them off). */
  readonly trace?: boolean;
  /** Status patches and Events from kubelets (default true). */
  readonly kubeletEvents?: boolean;
  /** Record every CNI plugin invocation in the history (default false). */
  readonly recordCni?: boolean;
  /** Watch/event window of the API store. */
  readonly eventWindow?: number;
  /**
   * How kubelets run the sim's own CNI plugins: 'in-process' (default) hands configurations and
   * results over as values; 'exec' goes through the exec protocol's JSON text for every plugin.
   * Plugins registered without an in-process entry (our CNI plugin) always run through exec.
   */
  readonly cniProtocol?: 'exec' | 'in-process';
}

interface PodInput {
  readonly namespace: string;
  readonly name: string;
  /** Omit to let the seeded scheduler pick. */
  readonly nodeName?: string;
  readonly labels?: Record<string, string>;
  readonly annotations?: Record<string, string>;
  readonly hostNetwork?: boolean;
  readonly serviceAccountName?: string;
  readonly securityContext?: Wire<V1PodSecurityContext>;
  /** Default: one container `app` listening on TCP 8080. */
  readonly containers?: Array<Wire<V1Container>>;
  /** Shorthand: a TCP readiness probe on this port for the first container. */
  readonly readinessTcpPort?: number;
}

interface HistoryEntry {
  readonly t: number;
  readonly kind: 'kubelet' | 'cni' | 'world';
  readonly text: string;
}

/**
 * A kubelet record in the history, its text built when read: a cluster run writes several per
 * pod and reads few, and the joined text (a chain of concatenations) outweighed the record.
 */
class KubeletHistoryEntry implements HistoryEntry {
  readonly kind = 'kubelet';
  constructor(private readonly r: KubeletRecord) {}

  get t(): number {
    return this.r.t;
  }

  get text(): string {
    return `${this.r.node} ${this.r.what} ${this.r.pod} ${this.r.detail}`;
  }

  /** The same JSON as a plain entry. */
  toJSON(): HistoryEntry {
    return { t: this.t, kind: this.kind, text: this.text };
  }
}

interface QuiescenceReport {
  /** true when no timer was left pending. */
  readonly quiescent: boolean;
  readonly timersFired: number;
  readonly now: number;
}

function v6Group(n: number): string {
  return String(n); // decimal digits as hex text, as the netns plan does
}

function simNodeAddress(index: number): { ipv4: string; ipv6: string } {
  return { ipv4: `192.0.2.${10 + index}`, ipv6: `fd00:192::${v6Group(10 + index)}` };
}

function simPodCidr(index: number): { ipv4: string; ipv6: string } {
  return {
    ipv4: `10.244.${index}.0/24`,
    ipv6: index === 0 ? 'fd00:10:244::/64' : `fd00:10:244:${v6Group(index)}::/64`,
  };
}

/** The primary network of node `index`: bridge cni0 + host-local on its pod CIDR(s). */
function primaryNetwork(index: number, ipv6: boolean): CniConfList {
  const cidr = simPodCidr(index);
  return {
    cniVersion: '1.0.0',
    name: 'sim-pod-network',
    plugins: [
      {
        type: 'bridge',
        bridge: 'cni0',
        isGateway: true,
        isDefaultGateway: true,
        ipam: { type: 'host-local', ranges: [[{ subnet: cidr.ipv4 }], ...(ipv6 ? [[{ subnet: cidr.ipv6 }]] : [])] },
      },
    ],
  };
}

export class SimWorld {
  readonly clock = new VirtualClock();
  readonly kernel: SimKernel;
  readonly store: ApiStore;
  readonly api: SimKubeApi;
  readonly nodes: readonly SimNode[];
  readonly history: HistoryEntry[] = [];
  private readonly schedRandom: SeededRandom;
  private readonly jitterRandom: SeededRandom;
  private started = false;

  constructor(readonly options: SimWorldOptions) {
    const n = options.nodes;
    if (!Number.isInteger(n) || n < 1 || n > MAX_SIM_NODES)
      throw new Error(`SimWorld: nodes must be an integer in 1..${MAX_SIM_NODES}, got ${n}`);
    const ipv6 = options.ipv6 ?? true;
    this.schedRandom = new SeededRandom(options.seed * 3 + 1);
    this.jitterRandom = new SeededRandom(options.seed * 3 + 2);
    this.kernel = new SimKernel({
      ...(options.kernelVersion ? { kernelVersion: options.kernelVersion } : {}),
      trace: options.trace ?? true,
    });
    this.store = new ApiStore({
      clock: this.clock,
      random: new SeededRandom(options.seed),
      ...(options.eventWindow ? { eventWindow: options.eventWindow } : {}),
    });
    this.api = new SimKubeApi(this.store, this.clock);
    this.buildFabric(ipv6);
    const nodes: SimNode[] = [];
    for (let i = 0; i < n; i++) nodes.push(this.buildNode(i, ipv6));
    for (const a of nodes) {
      for (const b of nodes) {
        if (a === b) continue;
        this.kernel.addRoute(a.hostNetns, { dst: b.podCidr.ipv4, via: b.address.ipv4 });
        if (ipv6) this.kernel.addRoute(a.hostNetns, { dst: b.podCidr.ipv6!, via: b.address.ipv6! });
      }
    }
    this.nodes = nodes;
  }

  private buildFabric(ipv6: boolean): void {
    const k = this.kernel;
    k.addNetns(FABRIC_NETNS);
    k.setLink(FABRIC_NETNS, 'lo', true);
    k.addBridge(FABRIC_NETNS, 'br0');
    k.setLink(FABRIC_NETNS, 'br0', true);
    k.addAddress(FABRIC_NETNS, 'br0', '192.0.2.1/24');
    k.addAddress(FABRIC_NETNS, 'br0', '203.0.113.1/24');
    k.setForwarding(FABRIC_NETNS, 4, true);
    if (ipv6) {
      k.addAddress(FABRIC_NETNS, 'br0', 'fd00:192::1/64');
      k.addAddress(FABRIC_NETNS, 'br0', 'fd00:203::1/64');
      k.setForwarding(FABRIC_NETNS, 6, true);
    }
    k.addNetns(OUTSIDE_NETNS);
    this.attach(
      OUTSIDE_NETNS,
      'out',
      OUTSIDE_ADDRESS.ipv4,
      ipv6 ? OUTSIDE_ADDRESS.ipv6 : undefined,
      '203.0.113.1',
      'fd00:203::1',
    );
  }

  /** A veth from `ns` (eth0) to the fabric bridge, an address and a default route via `gw`. */
  private attach(ns: string, port: string, v4: string, v6: string | undefined, gw4: string, gw6: string): void {
    const k = this.kernel;
    k.setLink(ns, 'lo', true);
    k.addVeth(FABRIC_NETNS, port, ns, 'eth0');
    k.setMaster(FABRIC_NETNS, port, 'br0');
    k.setLink(FABRIC_NETNS, port, true);
    k.setLink(ns, 'eth0', true);
    k.addAddress(ns, 'eth0', `${v4}/24`);
    k.addRoute(ns, { dst: 'default', family: 4, via: gw4 });
    if (v6) {
      k.addAddress(ns, 'eth0', `${v6}/64`);
      k.addRoute(ns, { dst: 'default', family: 6, via: gw6 });
    }
  }

  private buildNode(i: number, ipv6: boolean): SimNode {
    const name = `node-${i}`;
    const addr = simNodeAddress(i);
    const cidr = simPodCidr(i);
    this.kernel.addNetns(name);
    this.attach(name, `n${i}`, addr.ipv4, ipv6 ? addr.ipv6 : undefined, '192.0.2.1', 'fd00:192::1');
    this.kernel.setForwarding(name, 4, true);
    this.kernel.addRoute(FABRIC_NETNS, { dst: cidr.ipv4, via: addr.ipv4 });
    if (ipv6) {
      this.kernel.setForwarding(name, 6, true);
      this.kernel.addRoute(FABRIC_NETNS, { dst: cidr.ipv6, via: addr.ipv6 });
    }
    const disk = new NodeDisk();
    const plugins = simPrimaryPlugins({ kernel: this.kernel, hostNetns: name, ipam: disk.ipam });
    const address = { ipv4: addr.ipv4, ipv6: ipv6 ? addr.ipv6 : undefined };
    const node = new SimNode(
      name,
      i,
      name,
      address,
      { ipv4: cidr.ipv4, ipv6: ipv6 ? cidr.ipv6 : undefined },
      this.kernel,
      disk,
      plugins,
      primaryNetwork(i, ipv6),
    );
    const jitter = this.options.jitterMs ?? 0;
    const recordCni = this.options.recordCni ?? false;
    node.kubelet = new SimKubelet({
      nodeName: name,
      hostNetns: name,
      hostIPs: ipv6 ? [addr.ipv4, addr.ipv6] : [addr.ipv4],
      kernel: this.kernel,
      clock: this.clock,
      api: this.api,
      disk,
      plugins,
      network: () => node.network,
      ...(this.options.backoff ? { backoff: this.options.backoff } : {}),
      ...(jitter > 0 ? { syncDelay: () => this.jitterRandom.int(0, jitter) } : {}),
      ...(this.options.cniLatencyMs ? { cniLatencyMs: this.options.cniLatencyMs } : {}),
      events: this.options.kubeletEvents ?? true,
      cniInProcess: (this.options.cniProtocol ?? 'in-process') === 'in-process',
      record: (r: KubeletRecord) => this.history.push(new KubeletHistoryEntry(r)),
      ...(recordCni
        ? {
            observeCni: (inv: CniInvocation) =>
              this.history.push({
                t: this.clock.now(),
                kind: 'cni',
                text: `${inv.network} ${inv.command} #${inv.index} ${inv.type} ${inv.containerId ?? ''} exit=${inv.output?.exitCode ?? 'none'}`,
              }),
          }
        : {}),
    });
    return node;
  }

  node(name: string): SimNode {
    const n = this.nodes.find((x) => x.name === name);
    if (!n)
      throw new Error(
        `SimWorld: no node ${JSON.stringify(name)}; nodes are ${this.nodes.map((x) => x.name).join(', ')}`,
      );
    return n;
  }

  /** Node of a pod's sandbox, by the pod's spec.nodeName. */
  nodeOf(pod: Pod): SimNode {
    const n = pod.spec?.nodeName;
    if (!n) throw new Error(`pod ${pod.metadata?.namespace}/${pod.metadata?.name} is not bound to a node`);
    return this.node(n);
  }

  /** Register the Node objects and start every kubelet. */
  async start(): Promise<void> {
    if (this.started) return;
    this.started = true;
    for (const n of this.nodes) {
      await this.api.create('Node', {
        apiVersion: 'v1',
        kind: 'Node',
        metadata: { name: n.name, labels: { 'kubernetes.io/hostname': n.name } },
        spec: { podCIDR: n.podCidr.ipv4, podCIDRs: [n.podCidr.ipv4, ...(n.podCidr.ipv6 ? [n.podCidr.ipv6] : [])] },
      });
      await this.api.patchStatus('Node', n.name, undefined, {
        status: {
          addresses: [
            { type: 'InternalIP', address: n.address.ipv4 },
            ...(n.address.ipv6 ? [{ type: 'InternalIP', address: n.address.ipv6 }] : []),
          ],
        },
      });
    }
    for (const n of this.nodes) await n.kubelet!.start();
    this.log('world started');
  }

  log(text: string): void {
    this.history.push({ t: this.clock.now(), kind: 'world', text });
  }

  async createNamespace(
    name: string,
    meta: { labels?: Record<string, string>; annotations?: Record<string, string> } = {},
  ): Promise<KubeObjectOf<'Namespace'>> {
    this.log(`create namespace ${name}`);
    return this.api.create('Namespace', { apiVersion: 'v1', kind: 'Namespace', metadata: { name, ...meta } });
  }

  /** Create a pod (bound to `nodeName`, or to a node the seeded scheduler picks). */
  async createPod(p: PodInput): Promise<Pod> {
    const nodeName = p.nodeName ?? this.nodes[this.schedRandom.int(0, this.nodes.length - 1)]!.name;
    const containers: Array<Wire<V1Container>> = jsonClone(
      p.containers ?? [{ name: 'app', image: 'sim/app', ports: [{ containerPort: 8080 }] }],
    );
    if (p.readinessTcpPort !== undefined && containers[0]) {
      const probe: Wire<V1Probe> = { tcpSocket: { port: p.readinessTcpPort }, periodSeconds: 10 };
      containers[0].readinessProbe = probe;
    }
    this.log(`create pod ${p.namespace}/${p.name} on ${nodeName}`);
    return this.api.create('Pod', {
      apiVersion: 'v1',
      kind: 'Pod',
      metadata: {
        name: p.name,
        namespace: p.namespace,
        ...(p.labels ? { labels: p.labels } : {}),
        ...(p.annotations ? { annotations: p.annotations } : {}),
      },
      spec: {
        nodeName,
        containers,
        ...(p.hostNetwork ? { hostNetwork: true } : {}),
        ...(p.serviceAccountName ? { serviceAccountName: p.serviceAccountName } : {}),
        ...(p.securityContext ? { securityContext: p.securityContext } : {}),
      },
    });
  }

  async deletePod(namespace: string, name: string): Promise<void> {
    this.log(`delete pod ${namespace}/${name}`);
    await this.api.delete('Pod', name, namespace);
  }

  async getPod(namespace: string, name: string): Promise<Pod> {
    return this.api.get('Pod', name, namespace);
  }

  /** Let microtasks (promise continuations of the models) run to completion. */
  async flush(): Promise<void> {
    await new Promise<void>((resolve) => setImmediate(resolve));
  }

  /**
   * Fire timers in virtual time until none is pending, or `maxTimers` fired, or the next one is
   * due more than `maxMs` after now. Periodic work (probes, backoff) keeps a world from being
   * quiescent, so pass a bound when pods have probes or failing sandboxes.
   */
  async runToQuiescence(opts: { maxTimers?: number; maxMs?: number } = {}): Promise<QuiescenceReport> {
    const maxTimers = opts.maxTimers ?? 1_000_000;
    const until = opts.maxMs === undefined ? Infinity : this.clock.now() + opts.maxMs;
    let fired = 0;
    for (;;) {
      await this.flush();
      const due = this.clock.nextDue();
      if (due === undefined) return { quiescent: true, timersFired: fired, now: this.clock.now() };
      if (fired >= maxTimers || due > until) return { quiescent: false, timersFired: fired, now: this.clock.now() };
      this.clock.fireNext();
      fired++;
    }
  }

  /** Advance virtual time by `ms`, firing what falls due (with microtasks drained between timers). */
  async runFor(ms: number): Promise<void> {
    const until = this.clock.now() + ms;
    for (;;) {
      await this.flush();
      const due = this.clock.nextDue();
      if (due === undefined || due > until) break;
      this.clock.fireNext();
    }
    this.clock.advance(until - this.clock.now());
    await this.flush();
  }

  /** Run until the pod is Running (status from the API), or fail after `maxMs` of virtual time. */
  async waitForRunning(namespace: string, name: string, maxMs = 600_000): Promise<Pod> {
    const until = this.clock.now() + maxMs;
    for (;;) {
      await this.flush();
      // Not created yet (404) is "not Running"; any other failure of the API is the world's own error.
      const pod = await this.api.get('Pod', name, namespace).catch((e: unknown) => {
        if (isKubeApiError(e, 404)) return undefined;
        throw e;
      });
      if (pod?.status?.phase === 'Running') return pod;
      const due = this.clock.nextDue();
      if (due === undefined || due > until) {
        const events = this.store
          .list('Event', { namespace })
          .items.filter((e) => e.involvedObject?.name === name)
          .map((e) => `${e.reason}: ${e.message}`);
        throw new Error(
          `pod ${namespace}/${name} is not Running after ${maxMs} ms of virtual time (phase ${pod?.status?.phase ?? 'absent'}; events: ${events.join(' | ') || 'none'})`,
        );
      }
      this.clock.fireNext();
    }
  }

  /** Events recorded about a pod. */
  eventsFor(namespace: string, name: string): Array<KubeObjectOf<'Event'>> {
    return this.store.list('Event', { namespace }).items.filter((e) => e.involvedObject?.name === name);
  }
}
