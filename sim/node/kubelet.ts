/**
 * A node's kubelet and container runtime, as one model, deterministic on the Clock.
 *
 * It watches the pods bound to its node (an informer with fieldSelector spec.nodeName=<node>,
 * through the Kube port) and, per pod, one operation at a time (the CNI spec forbids parallel
 * operations on one container):
 *
 * - create a sandbox: a fresh netns (`cni-<sandbox id>`), then CNI ADD of the loopback network
 *   (as containerd does) and of the node's configuration list, chaining prevResult; the final
 *   result is cached. A failed ADD is followed by DEL (spec: every ADD is eventually followed by
 *   a DEL) and the netns is removed; the pod stays Pending, a FailedCreatePodSandBox Warning is
 *   recorded, and creation is retried with exponential backoff on the clock.
 * - start the containers only after ADD succeeded (processes with the securityContext's
 *   identity, listening on their declared TCP ports), then patch the pod's status (Running,
 *   podIP/podIPs from the CNI result) through the status subresource.
 * - run readiness probes (TCP connects from the node's host netns to podIP:port).
 * - on pod deletion: stop the containers, DEL in reverse with the cached result, remove the netns.
 *
 * Node reboot and runtime restart are driven from outside (SimNode): stop(), change the world,
 * start() — on start the model re-reads the NodeDisk and reconciles it with the API.
 */
import type { V1Pod } from '@kubernetes/client-node';
import { k8sCniArgs, type CniConfList, type CniResult } from '../../impl/api/cni.js';
import type { Clock, TimerHandle } from '../../impl/host/clock.js';
import { isKubeApiError, type Informer, type KubeApi, type MergePatch, type Wire } from '../../impl/host/kube.js';
import { rfc3339Seconds } from '../kube/rfc3339.js';
import { CniChain, CniChainError, type CniInvocation, type CniPluginExec } from '../cni/chain.js';
import { simNetnsPath } from '../cni/bridge.js';
import type { SimKernel, ConnectResult } from '../kernel/kernel.js';
import { credentials } from '../kernel/process.js';
import { parseIp, type Family } from '../../impl/api/ip/address.js';
import { SimContainer, containerCredentials, declaredTcpPorts } from './container.js';
import type { NodeDisk, SandboxRecord } from './runtime-state.js';

export type Pod = Wire<V1Pod>;

/** The loopback network containerd sets up in every sandbox before the configured one. */
const LOOPBACK_NETWORK: CniConfList = { cniVersion: '1.0.0', name: 'cni-loopback', plugins: [{ type: 'loopback' }] };

export interface BackoffPolicy {
  readonly initialMs: number;
  readonly maxMs: number;
}

/** Kubelet's pod-worker backoff for sandbox creation failures (10 s doubling to 5 min). */
const DEFAULT_BACKOFF: BackoffPolicy = { initialMs: 10_000, maxMs: 300_000 };

/** Something the kubelet did, for histories and replay checks. */
export interface KubeletRecord {
  readonly t: number;
  readonly node: string;
  readonly what:
    | 'sandbox-create'
    | 'cni-add-ok'
    | 'cni-add-failed'
    | 'cni-del'
    | 'cni-del-failed'
    | 'containers-started'
    | 'status-running'
    | 'backoff'
    | 'teardown'
    | 'sandbox-dead'
    | 'adopted'
    | 'probe';
  readonly pod: string;
  readonly detail: string;
}

interface KubeletOptions {
  readonly nodeName: string;
  readonly hostNetns: string;
  /** The node's addresses (status.hostIP/hostIPs; a hostNetwork pod's IPs). */
  readonly hostIPs: readonly string[];
  readonly kernel: SimKernel;
  readonly clock: Clock;
  readonly api: KubeApi;
  readonly disk: NodeDisk;
  /** The node's CNI_PATH: plugins by type. */
  readonly plugins: CniPluginExec;
  /** The node's CNI configuration list, read at every operation (it may change, e.g. when a plugin chains itself in). */
  readonly network: () => CniConfList;
  /** Run the loopback network before the configured one (default true, as containerd). */
  readonly loopback?: boolean;
  readonly backoff?: BackoffPolicy;
  /** Delay before each pod sync, in ms (a seeded source gives interleavings); default 0. */
  readonly syncDelay?: () => number;
  /** Virtual time one CNI ADD takes, in ms; default 0. */
  readonly cniLatencyMs?: number;
  readonly record?: (r: KubeletRecord) => void;
  readonly observeCni?: (inv: CniInvocation) => void;
  /** Patch status and write Events (default true; benchmarks may turn events off). */
  readonly events?: boolean;
  /**
   * Call plugins that can be called in process without the exec protocol's JSON text (see
   * sim/cni/chain.ts); default false: every call goes through exec, as libcni does.
   */
  readonly cniInProcess?: boolean;
}

interface PodWork {
  pod: Pod;
  readonly uid: string;
  readonly key: string;
  deleted: boolean;
  busy: boolean;
  dirty: boolean;
  attempts: number;
  backoffUntil: number;
  timer: TimerHandle | undefined;
  probeTimer: TimerHandle | undefined;
  ready: boolean | undefined;
}

const IFNAME = 'eth0';

export class SimKubelet {
  private informer: Informer<Pod> | undefined;
  private readonly work = new Map<string, PodWork>();
  private running = false;
  /** Bumped at stop(): callbacks of an older incarnation are ignored. */
  private generation = 0;
  private readonly onAdd = (p: Pod): void => this.observe(p, false);
  private readonly onUpdate = (p: Pod): void => this.observe(p, false);
  private readonly onDelete = (p: Pod): void => this.observe(p, true);
  private chainsFor: { readonly list: CniConfList; readonly chains: Array<[CniChain, string]> } | undefined;

  constructor(private readonly o: KubeletOptions) {}

  get nodeName(): string {
    return this.o.nodeName;
  }

  /** Start watching pods; reconciles the disk's sandboxes with the API's pods first. */
  async start(): Promise<void> {
    if (this.running) return;
    this.running = true;
    const gen = this.generation;
    const inf = this.o.api.informer('Pod', { fieldSelector: `spec.nodeName=${this.o.nodeName}` });
    this.informer = inf;
    inf.on('add', this.onAdd);
    inf.on('update', this.onUpdate);
    inf.on('delete', this.onDelete);
    inf.on('error', () => {
      // The informer stopped (list/watch failure): restart it after a second, as a real kubelet's reflector does.
      if (gen === this.generation)
        this.o.clock.setTimer(1000, () => {
          if (gen === this.generation) void inf.start();
        });
    });
    await inf.start();
    if (gen !== this.generation) return;
    // Sandboxes on disk whose pod is gone (deleted while the runtime was down): tear down.
    const live = new Set(inf.list().map((p) => p.metadata?.uid ?? ''));
    for (const rec of [...this.o.disk.sandboxes.values()]) {
      if (!live.has(rec.podUid) && !this.work.has(rec.podUid)) {
        const w = this.newWork({ metadata: { uid: rec.podUid, name: rec.name, namespace: rec.namespace } });
        w.deleted = true;
        this.schedule(w);
      }
    }
  }

  /** Stop: no more syncs, probes or informer events. Sandboxes and containers stay (on the disk). */
  stop(): void {
    this.running = false;
    this.generation++;
    if (this.informer) {
      this.informer.off('add', this.onAdd);
      this.informer.off('update', this.onUpdate);
      this.informer.off('delete', this.onDelete);
      this.informer.stop();
    }
    this.informer = undefined;
    for (const w of this.work.values()) {
      w.timer?.cancel();
      w.probeTimer?.cancel();
    }
    this.work.clear();
  }

  get isRunning(): boolean {
    return this.running;
  }

  /** The live sandbox of a pod (by UID), if any. */
  sandbox(podUid: string): SandboxRecord | undefined {
    return this.o.disk.sandboxes.get(podUid);
  }

  /** A running container of a pod. */
  container(podUid: string, name?: string): SimContainer {
    const rec = this.o.disk.sandboxes.get(podUid);
    const c = rec?.containers.find((x) => name === undefined || x.ref.container === name);
    if (!rec || !c)
      throw new Error(
        `node ${this.o.nodeName}: no running container ${name ?? '(any)'} for pod uid ${podUid} (sandbox ${rec ? (rec.ready ? 'ready' : 'not ready') : 'absent'})`,
      );
    return c;
  }

  /** A TCP connect from the node's host netns (what a kubelet probe does). */
  probeTcp(ip: string, port: number): ConnectResult {
    const s = this.o.kernel.socket(
      this.o.hostNetns,
      'tcp',
      parseIp(ip).family,
      credentials(0, 0, ['NET_ADMIN', 'NET_RAW', 'NET_BIND_SERVICE']),
      `kubelet probe ${this.o.nodeName}`,
    );
    const r = this.o.kernel.connect(s, ip, port);
    if (r.outcome === 'established') {
      this.o.kernel.close(s);
      if (r.server) this.o.kernel.close(r.server);
    }
    return r;
  }

  /** CHECK a pod's sandbox networks against their cached results (throws CniChainError). */
  async checkSandbox(podUid: string): Promise<void> {
    const rec = this.o.disk.sandboxes.get(podUid);
    if (!rec || rec.hostNetwork)
      throw new Error(`node ${this.o.nodeName}: pod uid ${podUid} has no sandbox netns to CHECK`);
    const pod = this.work.get(podUid)?.pod ?? { metadata: { uid: podUid, name: rec.name, namespace: rec.namespace } };
    for (const [chain, ifname] of this.chains()) await chain.check(this.attachment(pod, rec, ifname));
  }

  /** Pods this kubelet is working on (by UID). */
  podUids(): string[] {
    return [...this.work.keys()];
  }

  // ----------------------------------------------------------------------------- internals

  private chains(): Array<[CniChain, string]> {
    // The configuration list is read at every operation; its chain is rebuilt only when it changed.
    const list = this.o.network();
    if (this.chainsFor?.list !== list) {
      const opts = {
        path: ['/opt/cni/bin'],
        ...(this.o.observeCni ? { observe: this.o.observeCni } : {}),
        inProcess: this.o.cniInProcess ?? false,
      };
      const out: Array<[CniChain, string]> = [];
      if (this.o.loopback ?? true)
        out.push([new CniChain(LOOPBACK_NETWORK, this.o.plugins, this.o.disk.cniCache, opts), 'lo']);
      out.push([new CniChain(list, this.o.plugins, this.o.disk.cniCache, opts), IFNAME]);
      this.chainsFor = { list, chains: out };
    }
    return this.chainsFor.chains;
  }

  private attachment(
    pod: Pod,
    rec: SandboxRecord,
    ifname: string,
  ): { containerId: string; netns: string | undefined; ifname: string; args: Array<[string, string]> } {
    const m = pod.metadata ?? {};
    return {
      containerId: rec.sandboxId,
      netns: rec.netns && this.o.kernel.hasNetns(rec.netns) ? rec.netnsPath : undefined,
      ifname,
      args: k8sCniArgs(
        { namespace: m.namespace ?? rec.namespace, name: m.name ?? rec.name, uid: rec.podUid },
        rec.sandboxId,
      ),
    };
  }

  private rec(what: KubeletRecord['what'], w: { key: string }, detail = ''): void {
    this.o.record?.({ t: this.o.clock.now(), node: this.o.nodeName, what, pod: w.key, detail });
  }

  private newWork(pod: Pod): PodWork {
    const uid = pod.metadata?.uid ?? '';
    const w: PodWork = {
      pod,
      uid,
      key: `${pod.metadata?.namespace ?? ''}/${pod.metadata?.name ?? ''}`,
      deleted: false,
      busy: false,
      dirty: false,
      attempts: 0,
      backoffUntil: 0,
      timer: undefined,
      probeTimer: undefined,
      ready: undefined,
    };
    this.work.set(uid, w);
    return w;
  }

  private observe(pod: Pod, deleted: boolean): void {
    const uid = pod.metadata?.uid;
    if (!uid || !this.running) return;
    let w = this.work.get(uid);
    if (!w) {
      if (deleted && !this.o.disk.sandboxes.has(uid)) return;
      w = this.newWork(pod);
    }
    w.pod = pod;
    if (deleted) w.deleted = true;
    this.schedule(w);
  }

  /**
   * Sync soon (an informer change: coalesced into the running sync when busy) or after
   * `delayMs` (a timed retry: always a timer, so a sync that schedules its own retry ends).
   */
  private schedule(w: PodWork, delayMs?: number): void {
    if (w.busy && delayMs === undefined) {
      w.dirty = true;
      return;
    }
    w.timer?.cancel();
    const gen = this.generation;
    w.timer = this.o.clock.setTimer(delayMs ?? this.o.syncDelay?.() ?? 0, () => {
      w.timer = undefined;
      if (gen === this.generation) void this.sync(w, gen);
    });
  }

  private async sync(w: PodWork, gen: number): Promise<void> {
    if (w.busy) {
      w.dirty = true;
      return;
    }
    w.busy = true;
    try {
      do {
        w.dirty = false;
        await this.syncOnce(w, gen);
        if (gen !== this.generation) return;
      } while (w.dirty);
    } finally {
      w.busy = false;
    }
  }

  private async syncOnce(w: PodWork, gen: number): Promise<void> {
    const disk = this.o.disk;
    let rec = disk.sandboxes.get(w.uid);
    if (w.deleted) {
      w.probeTimer?.cancel();
      if (rec && !(await this.teardown(w, rec))) {
        this.backoff(w, 'teardown');
        return;
      }
      this.work.delete(w.uid);
      return;
    }
    if (rec && !rec.hostNetwork && (!rec.netns || !this.o.kernel.hasNetns(rec.netns))) {
      // The sandbox's netns is gone (reboot): clean it up (DEL without a netns), then recreate.
      this.rec('sandbox-dead', w, rec.sandboxId);
      for (const c of rec.containers) c.stop();
      if (!(await this.teardown(w, rec))) {
        this.backoff(w, 'teardown');
        return;
      }
      if (gen !== this.generation) return;
      if (this.o.events ?? true) {
        await this.event(w, 'Normal', 'SandboxChanged', 'Pod sandbox changed, it will be killed and re-created.');
      }
      rec = undefined;
    }
    if (rec?.ready) {
      if (rec.containers.length === 0 || !rec.containers.every((c) => c.running)) {
        // Processes died (reboot of a hostNetwork pod): start them again.
        rec.containers = this.startContainers(w.pod, rec.netns || this.o.hostNetns, rec.ips);
      }
      if (w.ready === undefined) {
        this.rec('adopted', w, rec.sandboxId);
        await this.reportRunning(w, rec);
      }
      return;
    }
    if (w.backoffUntil > this.o.clock.now()) {
      this.schedule(w, w.backoffUntil - this.o.clock.now());
      return;
    }
    if (rec) {
      // A sandbox that never became ready (the runtime stopped mid-ADD): tear it down and retry.
      if (!(await this.teardown(w, rec))) {
        this.backoff(w, 'teardown');
        return;
      }
    }
    await this.createSandbox(w, gen);
  }

  private async createSandbox(w: PodWork, gen: number): Promise<void> {
    const disk = this.o.disk;
    const pod = w.pod;
    const seq = disk.nextSandboxSeq++;
    const sandboxId = `${this.o.nodeName}-sb${seq}`;
    const hostNetwork = pod.spec?.hostNetwork === true;
    const netns = hostNetwork ? '' : `cni-${sandboxId}`;
    const rec: SandboxRecord = {
      podUid: w.uid,
      namespace: pod.metadata?.namespace ?? '',
      name: pod.metadata?.name ?? '',
      sandboxId,
      netns,
      netnsPath: netns ? simNetnsPath(netns) : '',
      hostNetwork,
      networks: [],
      ready: false,
      ips: [],
      containers: [],
    };
    disk.sandboxes.set(w.uid, rec);
    this.rec('sandbox-create', w, sandboxId);
    if (hostNetwork) {
      rec.ips = [...this.o.hostIPs];
    } else {
      this.o.kernel.addNetns(netns);
      let final: CniResult | undefined;
      try {
        for (const [chain, ifname] of this.chains()) {
          if (this.o.cniLatencyMs) await this.o.clock.sleep(this.o.cniLatencyMs);
          rec.networks.push(chain.network);
          final = await chain.add(this.attachment(pod, rec, ifname));
        }
      } catch (e) {
        if (gen !== this.generation) return;
        const msg = e instanceof Error ? e.message : String(e);
        this.rec('cni-add-failed', w, msg);
        // Spec: a failed ADD is still followed by DEL; then the sandbox goes.
        await this.teardown(w, rec);
        if (this.o.events ?? true) {
          await this.event(
            w,
            'Warning',
            'FailedCreatePodSandBox',
            `Failed to create pod sandbox: rpc error: code = Unknown desc = failed to setup network for sandbox "${sandboxId}": ${msg}`,
          );
        }
        this.backoff(w, 'add');
        return;
      }
      if (gen !== this.generation) return;
      rec.ips = podIps(final);
      this.rec('cni-add-ok', w, `${sandboxId} ${rec.ips.join(',')}`);
    }
    rec.containers = this.startContainers(pod, hostNetwork ? this.o.hostNetns : netns, rec.ips);
    rec.ready = true;
    w.attempts = 0;
    this.rec('containers-started', w, rec.containers.map((c) => c.ref.container).join(','));
    await this.reportRunning(w, rec);
  }

  private startContainers(pod: Pod, netns: string, ips: readonly string[]): SimContainer[] {
    const families = [...new Set(ips.map((ip) => parseIp(ip).family))] as Family[];
    const m = pod.metadata ?? {};
    return (pod.spec?.containers ?? []).map((c) => {
      const ct = new SimContainer(
        this.o.kernel,
        { namespace: m.namespace ?? '', pod: m.name ?? '', uid: m.uid ?? '', container: c.name },
        netns,
        containerCredentials(pod, c),
        declaredTcpPorts(c),
      );
      ct.start(families.length ? families : [4]);
      return ct;
    });
  }

  /** DEL every network of the sandbox in reverse, then remove the netns. False when a DEL failed. */
  private async teardown(w: PodWork, rec: SandboxRecord): Promise<boolean> {
    for (const c of rec.containers) c.stop();
    rec.containers = [];
    if (!rec.hostNetwork) {
      const chains = this.chains()
        .filter(([c]) => rec.networks.includes(c.network))
        .reverse();
      for (const [chain, ifname] of chains) {
        try {
          await chain.del(this.attachment(w.pod, rec, ifname));
          this.rec('cni-del', w, `${rec.sandboxId} ${chain.network}`);
        } catch (e) {
          const msg = e instanceof CniChainError || e instanceof Error ? e.message : String(e);
          this.rec('cni-del-failed', w, msg);
          return false;
        }
        rec.networks.splice(rec.networks.indexOf(chain.network), 1);
      }
      if (rec.netns && this.o.kernel.hasNetns(rec.netns)) this.o.kernel.deleteNetns(rec.netns);
    }
    this.o.disk.sandboxes.delete(rec.podUid);
    this.rec('teardown', w, rec.sandboxId);
    return true;
  }

  private backoff(w: PodWork, why: string): void {
    const b = this.o.backoff ?? DEFAULT_BACKOFF;
    const delay = Math.min(b.maxMs, b.initialMs * 2 ** Math.min(w.attempts, 30));
    w.attempts++;
    w.backoffUntil = this.o.clock.now() + delay;
    this.rec('backoff', w, `${why} attempt ${w.attempts}, retry in ${delay} ms`);
    this.schedule(w, delay);
  }

  private async reportRunning(w: PodWork, rec: SandboxRecord): Promise<void> {
    const probe = readinessProbe(w.pod);
    w.ready = probe ? false : true;
    this.rec('status-running', w, rec.ips.join(','));
    if (this.o.events ?? true)
      await this.patchStatus(w, runningStatus(w.pod, rec, this.o.hostIPs, w.ready, this.timestamp()));
    if (probe) this.scheduleProbe(w, probe.initialDelayMs);
  }

  private scheduleProbe(w: PodWork, delay: number): void {
    const gen = this.generation;
    w.probeTimer?.cancel();
    w.probeTimer = this.o.clock.setTimer(delay, () => {
      if (gen !== this.generation || w.deleted) return;
      void this.runProbe(w);
    });
  }

  private async runProbe(w: PodWork): Promise<void> {
    const probe = readinessProbe(w.pod);
    const rec = this.o.disk.sandboxes.get(w.uid);
    if (!probe || !rec?.ready || rec.ips.length === 0) return;
    const ok = this.probeTcp(rec.ips[0]!, probe.port).outcome === 'established';
    this.rec('probe', w, `${rec.ips[0]}:${probe.port} ${ok ? 'ok' : 'failed'}`);
    if (ok !== w.ready) {
      w.ready = ok;
      await this.patchStatus(w, { status: { conditions: conditions(ok, this.timestamp()) } });
    }
    this.scheduleProbe(w, probe.periodMs);
  }

  private async patchStatus(w: PodWork, patch: MergePatch): Promise<void> {
    const m = w.pod.metadata ?? {};
    try {
      await this.o.api.patchStatus('Pod', m.name ?? '', m.namespace, patch);
    } catch (e) {
      if (isKubeApiError(e, 404)) return; // the pod went away meanwhile
      // A failed status write is retried by the next sync, as the status manager does.
      this.schedule(w, 1000);
      w.ready = undefined;
    }
  }

  private async event(w: PodWork, type: 'Normal' | 'Warning', reason: string, message: string): Promise<void> {
    const m = w.pod.metadata ?? {};
    await this.o.api
      .createEvent({
        involvedObject: { kind: 'Pod', name: m.name ?? '', namespace: m.namespace ?? '', uid: w.uid },
        type,
        reason,
        message,
        component: 'kubelet',
      })
      .catch(() => undefined); // events are best effort
  }

  private timestamp(): string {
    return rfc3339Seconds(Date.UTC(2025, 0, 1), this.o.clock.now());
  }
}

/** Pod IPs from a CNI result: addresses on sandbox interfaces (or unattributed), not loopback; IPv4 first. */
function podIps(result: CniResult | undefined): string[] {
  const out: string[] = [];
  for (const ip of result?.ips ?? []) {
    const iface = ip.interface !== undefined ? result?.interfaces?.[ip.interface] : undefined;
    if (iface && iface.sandbox === undefined) continue;
    const a = ip.address.slice(0, ip.address.lastIndexOf('/'));
    if (a === '127.0.0.1' || a === '::1') continue;
    if (!out.includes(a)) out.push(a);
  }
  return out.sort((x, y) => (x.includes(':') ? 1 : 0) - (y.includes(':') ? 1 : 0));
}

interface TcpProbe {
  readonly port: number;
  readonly initialDelayMs: number;
  readonly periodMs: number;
}

function readinessProbe(pod: Pod): TcpProbe | undefined {
  for (const c of pod.spec?.containers ?? []) {
    const p = c.readinessProbe;
    const port = p?.tcpSocket?.port;
    if (p && port !== undefined) {
      const n = typeof port === 'number' ? port : c.ports?.find((x) => x.name === port)?.containerPort;
      if (n === undefined) continue;
      return { port: n, initialDelayMs: (p.initialDelaySeconds ?? 0) * 1000, periodMs: (p.periodSeconds ?? 10) * 1000 };
    }
  }
  return undefined;
}

function conditions(ready: boolean, t: string): Array<Record<string, string>> {
  const s = ready ? 'True' : 'False';
  return [
    { type: 'PodScheduled', status: 'True', lastTransitionTime: t },
    { type: 'Initialized', status: 'True', lastTransitionTime: t },
    { type: 'ContainersReady', status: s, lastTransitionTime: t },
    { type: 'Ready', status: s, lastTransitionTime: t },
  ];
}

function runningStatus(
  pod: Pod,
  rec: SandboxRecord,
  hostIPs: readonly string[],
  ready: boolean,
  t: string,
): MergePatch {
  return {
    status: {
      phase: 'Running',
      hostIP: hostIPs[0],
      hostIPs: hostIPs.map((ip) => ({ ip })),
      podIP: rec.ips[0],
      podIPs: rec.ips.map((ip) => ({ ip })),
      startTime: t,
      conditions: conditions(ready, t),
      containerStatuses: (pod.spec?.containers ?? []).map((c) => ({
        name: c.name,
        image: c.image ?? '',
        imageID: '',
        ready,
        restartCount: 0,
        started: true,
        containerID: `sim://${rec.sandboxId}/${c.name}`,
        state: { running: { startedAt: t } },
      })),
    },
  };
}
