/**
 * The kind world (scenarios/world.ts): a real cluster per world. kind creates it (kindnet
 * primary, fixtures/kind/cluster.yaml), our images are built and loaded, the manifests applied
 * (e2e/kind/kind-cli.ts); the API side goes through @kubernetes/client-node; what cannot go
 * through the API (exec, node containers) goes through kubectl/docker command lines.
 *
 * - Pods: the app container runs the netns world's pod app (e2e/netns/world-pod-app.ts) from the
 *   agent image, as the threat model's uid/capabilities; it logs one JSON line per accepted
 *   connection to stdout, read back with `kubectl logs` (deliveries).
 * - connect(): the netns world's probe program, launched where the connection starts
 *   (exec-probe.ts): `kubectl exec -i` into the source pod's app container (same uid, caps,
 *   netns); for a host source, into the node's host-probe pod (hostNetwork, root) under setpriv
 *   with the source's uid/caps; for outside, a `docker run` container on the kind network routed
 *   to the pod CIDR through the destination's node. Who accepted is read from the node proxies'
 *   connection logs (`kubectl logs` of the proxy container), as in the netns world.
 * - pods(): `redirected` and `served` come from the nodes (node-evidence.ts): iptables-save in
 *   each sandbox's netns, and the proxy's /status matched by netns inode.
 * - stop/start(component, node): a node label the DaemonSets avoid (KindCli.enableNodeStop): the
 *   DaemonSet controller deletes that node's pod (SIGTERM and grace period, as a real stop) and
 *   recreates it when the label goes. restart: delete the pod; the controller recreates it.
 * - rebootNode: `docker restart` of the node container (containerd, kubelet and every pod
 *   sandbox restart; the pods get new netns).
 * - dropWatches: restart kube-apiserver (its static pod) — every watch of every client breaks.
 *
 * - zdsClient: a rogue ZDS client (zds-rogue.ts) in the node's host-probe pod as the given uid.
 * - appExec: the probe program exec'd into the app container (the app's own uid, capabilities
 *   and netns, so the kernel decides): iptables-restore of empty tables, or a listener kept open
 *   (its `kubectl exec` stays attached) until the pod is deleted; its accepts are deliveries.
 *
 * - raw (ConnectOptions.raw): the probe's `raw-send` from the same place as a connect; the device
 *   and next-hop MAC come from the source's netns through the same launcher (raw-attempt.ts). UDP
 *   is attributed as a datagram (the app's tagged log line); a TCP SYN-ACK by the destination
 *   sandbox's conntrack entry, read on its node. Without NET_RAW the probe reports EPERM.
 * - IPv6 (options.ipv6): a dual-stack cluster (fixtures/kind/cluster-dual.yaml), addresses from
 *   status.podIPs and the nodes' InternalIPs of both families; agent and proxy capture IPv6
 *   (single-stack worlds render deploy/ with its ipv6-off component).
 * - The DaemonSets are deploy/ rendered for the options (profile, IPv6, DNS capture: its
 *   components; kindDeployment) by the one loader (e2e/deployment/launch.ts) and applied.
 *
 * Not here: kernelVersion (the host's kernel decides); meshV6 different from ipv6. A non-root app's added capabilities are effective only where the
 * runtime sets ambient capabilities; otherwise the probe reports the EPERM it gets.
 */
import type { DeploymentChoice } from '../deployment/launch.js';
import { execa } from 'execa';
import { randomInt } from 'node:crypto';
import { mkdtemp, rm } from 'node:fs/promises';
import * as os from 'node:os';
import * as path from 'node:path';
import * as k8s from '@kubernetes/client-node';
import { REDIRECTION_STATUS } from '../../impl/api/annotations.js';
import { parseConnectionLog, type ConnectionLogRecord } from '../../impl/ztunnel/connection-log.js';
import type {
  AppAction,
  AppExecResult,
  Component,
  ConnectOptions,
  ConnectResult,
  Destination,
  PodObservation,
  PodRef,
  PodSpec,
  PolicyObject,
  Source,
  World,
  WorldFactory,
  WorldOptions,
  ZdsClientAttempt,
} from '../../scenarios/world.js';
import { insertedRuleText, insertedTableText } from '../../scenarios/world.js';
import { ComponentLifecycles } from '../../scenarios/worlds/component-lifecycles.js';
import { setprivArgs } from '../netns/processes.js';
import { repoRoot as findRepoRoot } from '../netns/world-lab.js';
import type { ConnectOutcome } from '../netns/probe-protocol.js';
import { ExecProbe, ExecProbeError } from './exec-probe.js';
import { E2E_NAMESPACE, KindCli, PROBE_PROGRAM, SYSTEM_NAMESPACE } from './kind-cli.js';
import { nodeEvidenceScript, parseNodeEvidence, type NodeEvidence } from './node-evidence.js';
import { NODE_ZDS_SOCKET, parseZdsRogueOutput, zdsRogueScript } from './zds-rogue.js';
import { appAccepts, attribute, ep, nodeSideOf, tupleText, type AppAccept } from './attribution.js';
import { appPod, hostProbePod } from './pod-specs.js';
import { nextHopCommand, parseNextHop, parseRawPort, rawConntrackScript, rawSynAckAcceptor } from './raw-attempt.js';
import {
  flushTablesThrough,
  connectThrough,
  nftThrough,
  randomSourcePort,
  rawSendThrough,
  restoreThrough,
  type RawSendOutcome,
} from '../netns/probe-protocol.js';
import { rethrowAfterCleanup } from '../cleanup.js';

// From source or from dist/: fixtures/, ci/ and the manifests are at the repository root.
const repoRoot = findRepoRoot();
const merge = k8s.setHeaderOptions('Content-Type', k8s.PatchStrategy.MergePatch);
const POD_CIDR = '10.244.0.0/16'; // fixtures/kind/cluster.yaml
const POD_CIDR6 = 'fd00:10:244::/56'; // fixtures/kind/cluster-dual.yaml
/** The kind config of a world's options: dual-stack when it asks for IPv6. */
export const kindConfigFor = (o: Pick<WorldOptions, 'ipv6'>): string =>
  o.ipv6 ? 'fixtures/kind/cluster-dual.yaml' : 'fixtures/kind/cluster.yaml';

/**
 * The settings deploy/ is rendered for from the world options: the profile, DNS capture, and IPv6
 * capture as the cluster's stack (the base turns it on, upstream's default; a single-stack world
 * renders the ipv6-off component).
 */
export function kindDeployment(
  o: Pick<WorldOptions, 'profile' | 'dnsCapture' | 'ipv6' | 'rulesBackend'>,
): DeploymentChoice {
  return {
    profile: o.profile,
    ipv6: o.ipv6,
    dnsCapture: o.dnsCapture,
    ...(o.rulesBackend === 'nftables' ? { backend: o.rulesBackend } : {}),
  };
}
const PROXY_STATUS_URL = 'http://127.0.0.1:15000/status'; // the proxy's admin port (loopback only), hostNetwork
const HIDDEN_NAMESPACES = new Set([SYSTEM_NAMESPACE, E2E_NAMESPACE, 'kube-system', 'local-path-storage']);
const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));
/**
 * Close every probe (each `kubectl exec` ends when its stdin does), then report the ones that did
 * not end cleanly: a probe that cannot be stopped is a leak in a shared cluster, not a detail.
 */
async function closeProbes(probes: readonly { close(): Promise<void> }[]): Promise<void> {
  const failed: string[] = [];
  for (const p of probes)
    await p.close().catch((e: unknown) => {
      failed.push(e instanceof Error ? e.message : String(e));
    });
  if (failed.length > 0)
    throw new Error(
      `kind world: ${failed.length} app probe(s) did not end cleanly: ${failed.join('; ').slice(0, 2000)}`,
    );
}

/** A .catch for client-node reads: a 404 (no such object) is `undefined`, a checked absence; anything else is rethrown. */
function absentIf404(e: unknown): undefined {
  if ((e as { code?: unknown }).code === 404) return undefined;
  throw e;
}

/** What `iptables-restore` of empty tables leaves: every table the mesh writes, flushed (as the other worlds' appExec). */

function errorResult(error: string): ConnectResult {
  return { outcome: 'error', error, acceptedBy: undefined, deliveries: [], proxyLog: [] };
}

export class KindWorld implements World {
  readonly kind = 'kind' as const;
  private readonly core: k8s.CoreV1Api;
  private readonly custom: k8s.CustomObjectsApi;
  private readonly nodeIps = new Map<string, string>();
  private readonly nodeIps6 = new Map<string, string>();
  private readonly image: string;
  /** Probes attached to app containers for appExec listeners, by pod key; their listeners by probe listener name. */
  private readonly appProbes = new Map<string, ExecProbe>();
  private readonly appListeners = new Map<string, { readonly pod: PodRef; readonly port: number }>();
  /** What this world changed that outlives it on a shared cluster (clear() undoes it). */
  private readonly createdNamespaces = new Set<string>();
  private readonly stopped = new Set<string>();
  private readonly lifecycles = new ComponentLifecycles();

  /**
   * `release`: the world runs on a cluster shared by a whole check run (shared-cluster.ts);
   * close() hands it back (release) instead of deleting the cluster.
   */
  constructor(
    readonly options: WorldOptions,
    readonly nodes: readonly string[],
    private readonly cli: KindCli,
    kc: k8s.KubeConfig,
    private readonly tmp: string | undefined,
    private readonly env?: NodeJS.ProcessEnv,
    private readonly release?: () => Promise<void>,
  ) {
    this.core = kc.makeApiClient(k8s.CoreV1Api);
    this.custom = kc.makeApiClient(k8s.CustomObjectsApi);
    this.image = cli.images.agent;
  }

  /** Node addresses (host sources, the outside route), and one host-probe pod per node. */
  async prepare(): Promise<void> {
    await this.loadNodeAddresses();
    await this.startHostProbes();
  }

  async loadNodeAddresses(): Promise<void> {
    for (const n of (await this.core.listNode()).items) {
      const internal = (n.status?.addresses ?? []).filter((a) => a.type === 'InternalIP').map((a) => a.address);
      const ip = internal.find((a) => !a.includes(':'));
      const ip6 = internal.find((a) => a.includes(':'));
      if (n.metadata?.name && ip) this.nodeIps.set(n.metadata.name, ip);
      if (n.metadata?.name && ip6) this.nodeIps6.set(n.metadata.name, ip6);
    }
  }

  /** One host-probe pod per node (waits until they run). */
  async startHostProbes(): Promise<void> {
    await this.core.createNamespace({
      body: { metadata: { name: E2E_NAMESPACE, labels: { 'istio.io/dataplane-mode': 'none' } } },
    });
    for (const node of this.nodes)
      await this.core.createNamespacedPod({ namespace: E2E_NAMESPACE, body: hostProbePod(node, this.image) });
    for (const node of this.nodes)
      await this.waitRunning(E2E_NAMESPACE, hostProbePod(node, this.image).metadata!.name!);
  }

  private async waitRunning(namespace: string, name: string, attempts = 120): Promise<k8s.V1Pod | undefined> {
    let last: k8s.V1Pod | undefined;
    for (let i = 0; i < attempts; i++) {
      last = await this.core.readNamespacedPod({ namespace, name }).catch(absentIf404); // 404: not there (yet)
      if (last?.status?.phase === 'Running' || last?.status?.phase === 'Failed') return last;
      const waiting = last?.status?.containerStatuses?.find((c) => c.state?.waiting)?.state?.waiting?.reason;
      if (waiting === 'ErrImageNeverPull' || waiting === 'InvalidImageName')
        throw new Error(`pod ${namespace}/${name} cannot start: ${waiting}`);
      await sleep(1000);
    }
    return last;
  }

  async createNamespace(name: string, labels: Readonly<Record<string, string>> = {}): Promise<void> {
    await this.core.createNamespace({ body: { metadata: { name, labels: { ...labels } } } });
    this.createdNamespaces.add(name);
  }

  async labelNamespace(name: string, labels: Readonly<Record<string, string | null>>): Promise<void> {
    await this.core.patchNamespace({ name, body: { metadata: { labels } } }, merge);
  }

  async createPod(spec: PodSpec): Promise<PodObservation> {
    await this.core.createNamespacedPod({ namespace: spec.namespace, body: appPod(spec, this.image) });
    // settled: Running, or still not started after a bounded wait (the plugin refused the sandbox)
    await this.waitRunning(spec.namespace, spec.name, 60);
    const obs = (await this.pods()).find((p) => p.namespace === spec.namespace && p.name === spec.name);
    if (!obs) throw new Error(`kind world: pod ${spec.namespace}/${spec.name} vanished while starting`);
    return obs;
  }

  async labelPod(pod: PodRef, labels: Readonly<Record<string, string | null>>): Promise<void> {
    await this.core.patchNamespacedPod(
      { name: pod.name, namespace: pod.namespace, body: { metadata: { labels } } },
      merge,
    );
  }

  async deletePod(pod: PodRef): Promise<void> {
    await this.forgetAppProbe(pod);
    await this.core.deleteNamespacedPod({ name: pod.name, namespace: pod.namespace, gracePeriodSeconds: 0 });
  }

  async applyPolicy(policy: PolicyObject): Promise<void> {
    const meta = policy['metadata'] as { name: string; namespace: string };
    const target = {
      group: 'security.istio.io',
      version: 'v1',
      namespace: meta.namespace,
      plural: 'authorizationpolicies',
    };
    const body = { apiVersion: 'security.istio.io/v1', kind: 'AuthorizationPolicy', ...policy };
    // Only "not there" (404) means create; any other failure of the read is the world's, and propagates.
    const cur = (await this.custom.getNamespacedCustomObject({ ...target, name: meta.name }).catch(absentIf404)) as
      { metadata?: { resourceVersion?: string } } | undefined;
    if (cur)
      await this.custom.replaceNamespacedCustomObject({
        ...target,
        name: meta.name,
        body: { ...body, metadata: { ...meta, resourceVersion: cur.metadata?.resourceVersion } },
      });
    else await this.custom.createNamespacedCustomObject({ ...target, body });
  }

  async deletePolicy(namespace: string, name: string): Promise<void> {
    await this.custom.deleteNamespacedCustomObject({
      group: 'security.istio.io',
      version: 'v1',
      namespace,
      plural: 'authorizationpolicies',
      name,
    });
  }

  // Lifecycle operations on one component run in call order (see ComponentLifecycles).
  stop(component: Component, node: string): Promise<void> {
    return this.lifecycles.run(node, [component], async () => {
      this.stopped.add(`${component}|${node}`);
      await this.cli.setComponentOnNode(component, node, false);
      await this.cli.waitComponent(component, node, 'gone');
    });
  }

  start(component: Component, node: string): Promise<void> {
    return this.lifecycles.run(node, [component], async () => {
      await this.cli.setComponentOnNode(component, node, true);
      await this.cli.waitComponent(component, node, 'ready');
      this.stopped.delete(`${component}|${node}`);
    });
  }

  restart(component: Component, node: string): Promise<void> {
    return this.lifecycles.run(node, [component], () => this.restartNow(component, node));
  }

  private async restartNow(component: Component, node: string): Promise<void> {
    const before = await this.cli.componentPods(component, node);
    for (const p of before) await this.core.deleteNamespacedPod({ name: p.name, namespace: SYSTEM_NAMESPACE });
    for (let i = 0; i < 120; i++) {
      const now = await this.cli.componentPods(component, node);
      if (now.some((p) => p.ready && !p.terminating && !before.some((b) => b.name === p.name))) return;
      await sleep(1000);
    }
    throw new Error(
      `kind world: ambient-lab-${component} on ${node} did not come back ready after its pod was deleted`,
    );
  }

  rebootNode(node: string): Promise<void> {
    return this.lifecycles.run(node, ['agent', 'proxy'], async () => {
      await this.cli.rebootNode(node);
      for (const c of ['agent', 'proxy'] as const) await this.cli.waitComponent(c, node, 'ready');
    });
  }

  /** Each node's InternalIP addresses (World.nodeAddresses), as the API reports them now. */
  async nodeAddresses(): Promise<Readonly<Record<string, readonly string[]>>> {
    await this.loadNodeAddresses();
    const out: Record<string, readonly string[]> = {};
    for (const [node, ip] of this.nodeIps)
      out[node] = [ip, ...(this.nodeIps6.has(node) ? [this.nodeIps6.get(node)!] : [])];
    return out;
  }

  async dropWatches(): Promise<void> {
    await this.cli.restartApiServer();
  }

  /**
   * Where an attempt starts: the probe's launcher argv, the source address, and `hop` — the same
   * place running another command (the next-hop lookup of a raw attempt).
   */
  private async launcher(
    from: Source,
    to: Destination,
    dstNode: string | undefined,
    family: 4 | 6,
  ): Promise<{ argv: string[]; srcIp: string | undefined; hop: (cmd: readonly string[]) => string[] } | string> {
    const node = 'node' in from ? from.node : undefined;
    if (from.kind === 'pod') {
      const p = await this.core
        .readNamespacedPod({ namespace: from.pod.namespace, name: from.pod.name })
        .catch(absentIf404); // 404: no such pod
      if (p?.status?.phase !== 'Running') return `source pod ${from.pod.namespace}/${from.pod.name} is not running`;
      const ip = (p.status.podIPs ?? []).map((x) => x.ip).find((x) => (family === 6) === x.includes(':'));
      return {
        argv: this.cli.execArgv(from.pod.namespace, from.pod.name, 'app', ['node', PROBE_PROGRAM]),
        srcIp: ip,
        hop: (cmd) => this.cli.execArgv(from.pod.namespace, from.pod.name, 'app', cmd),
      };
    }
    if (from.kind === 'host') {
      if (!node || !this.nodeIps.has(node)) return `no node ${String(node)} in this world`;
      const priv = setprivArgs({ uid: from.uid, gid: from.uid, caps: from.caps.map((c) => c.toLowerCase()) });
      const hostProbe = hostProbePod(node, this.image).metadata!.name!;
      const srcIp = family === 6 ? this.nodeIps6.get(node) : this.nodeIps.get(node);
      if (!srcIp) return `node ${node} has no IPv${family} address (IPv6 needs a world made with ipv6: true)`;
      return {
        argv: this.cli.execArgv(E2E_NAMESPACE, hostProbe, 'probe', [...priv, 'node', PROBE_PROGRAM]),
        srcIp,
        hop: (cmd) => this.cli.execArgv(E2E_NAMESPACE, hostProbe, 'probe', [...priv, ...cmd]),
      };
    }
    const via = (family === 6 ? this.nodeIps6 : this.nodeIps).get(dstNode ?? this.nodes[0]!);
    if (!via)
      return `outside: no IPv${family} node address to route ${to.kind === 'pod' ? podKeyOf(to.pod) : to.ip} through`;
    const route = { cidr: family === 6 ? POD_CIDR6 : POD_CIDR, via };
    // The outside client is root with NET_ADMIN/NET_RAW, as in the netns world (it is not the threat's app).
    return {
      argv: this.cli.outsideArgv(this.image, route, ['node', PROBE_PROGRAM]),
      srcIp: undefined,
      hop: (cmd) => this.cli.outsideArgv(this.image, route, cmd),
    };
  }

  async connect(from: Source, to: Destination, opts: ConnectOptions = {}): Promise<ConnectResult> {
    if (opts.raw && from.kind === 'outside')
      return errorResult(
        'raw (AF_PACKET) attempts from outside are not staged in the kind world (the threat model draws raw sources from pods and hosts)',
      );
    const family: 4 | 6 = opts.family ?? (to.kind === 'ip' && to.ip.includes(':') ? 6 : 4);
    let dstIp: string;
    let dstPods: { ref: PodRef; node: string | undefined }[];
    const all = (await this.core.listPodForAllNamespaces()).items.filter(
      (p) => !HIDDEN_NAMESPACES.has(p.metadata?.namespace ?? ''),
    );
    if (to.kind === 'pod') {
      const d = all.find((p) => p.metadata?.namespace === to.pod.namespace && p.metadata?.name === to.pod.name);
      dstIp = (d?.status?.podIPs ?? []).map((x) => x.ip).find((x) => (family === 6) === x.includes(':')) ?? '';
      if (!dstIp) return errorResult(`destination pod has no IPv${family} address`);
      dstPods = [{ ref: to.pod, node: d?.spec?.nodeName }];
    } else {
      dstIp = to.ip;
      dstPods = all
        .filter((p) => !p.spec?.hostNetwork && (p.status?.podIPs ?? []).some((x) => x.ip === to.ip))
        .map((p) => ({ ref: { namespace: p.metadata!.namespace!, name: p.metadata!.name! }, node: p.spec?.nodeName }));
    }
    const launch = await this.launcher(from, to, dstPods[0]?.node, family);
    if (typeof launch === 'string') return errorResult(launch);
    const proto = opts.proto ?? 'tcp';
    let sourcePort: number;
    const tag = `al-${randomInt(1e9).toString(36)}-${randomInt(1e9).toString(36)}`;
    const since = new Date(Date.now() - 2000).toISOString();
    let hop: { dev: string; mac: string } | undefined;
    if (opts.raw) {
      const srcIp = opts.sourceIp ?? launch.srcIp;
      if (!srcIp) return errorResult(`raw: the source has no IPv${family} address`);
      const found = await this.nextHop(launch.hop(nextHopCommand(dstIp)));
      if (typeof found === 'string') return errorResult(`raw: ${found}`);
      hop = found;
    }
    const probe = await ExecProbe.start(launch.argv, this.env ? { env: this.env } : {});
    let out: ConnectOutcome;
    let rawAnswer: RawSendOutcome['result'] | undefined;
    try {
      if (hop) {
        sourcePort = randomSourcePort(); // a crafted frame binds no socket: no port to find taken
        ({ out, rawAnswer } = await rawSendThrough(probe, {
          tag,
          proto,
          ifname: hop.dev,
          dstMac: hop.mac,
          source: (opts.sourceIp ?? launch.srcIp)!,
          sourcePort,
          address: dstIp,
          port: to.port,
        }));
      } else {
        ({ value: out, sourcePort } = await connectThrough(probe, {
          tag,
          proto,
          address: dstIp,
          port: to.port,
          mark: opts.mark,
          transparent: opts.sourceIp !== undefined,
          source: opts.sourceIp,
        }));
      }
    } finally {
      await probe.close();
    }
    // The apps and the proxies log asynchronously, and `kubectl logs` trails them: poll until a
    // delivery shows, or the proxy recorded an end for this client (denied/failed), or ~6 s pass.
    const client = { ip: opts.sourceIp ?? launch.srcIp, port: sourcePort };
    const isClient = (t: string): boolean =>
      client.ip !== undefined ? t === ep(client.ip, client.port) : t.endsWith(`:${client.port}`);
    let accepts: { pod: PodRef; a: AppAccept }[] = [];
    let records: { node: string; r: ConnectionLogRecord }[] = [];
    const listened: { pod: PodRef; a: AppAccept }[] = []; // drained events: keep them across polls
    // a raw TCP SYN never completes a handshake: nothing is logged for it (its answer says what listened)
    const reached = out.result === 'established' || (out.result === 'sent' && !(opts.raw && proto === 'tcp'));
    for (let i = 0; i < (reached ? 20 : 1); i++) {
      accepts = [];
      for (const d of dstPods) {
        const log = await this.appLog(d.ref, since);
        for (const a of appAccepts(log, tag)) accepts.push({ pod: d.ref, a });
      }
      listened.push(...this.listenerAccepts(tag));
      accepts.push(...listened);
      records = await this.proxyRecords(since);
      if (accepts.length > 0 || !reached) break;
      if (
        records.some(
          (x) =>
            isClient(tupleText(x.r.downstream.src)) && ['denied', 'failed', 'closed-by-policy'].includes(x.r.event),
        )
      )
        break;
      await sleep(300);
    }
    if (accepts.length > 0) {
      await sleep(300); // the proxy's record of the delivered connection may trail the app's
      records = await this.proxyRecords(since);
    }
    let res = attribute({ outcome: out, client, records, accepts });
    let rawNote = '';
    if (opts.raw && proto === 'tcp' && rawAnswer === 'syn-ack' && client.ip) {
      res = await this.rawSynAck(res, client as { ip: string; port: number }, to.port, dstPods[0]);
      rawNote = `; SYN-ACK (${res.acceptedBy ?? '?'})`;
    } else if (opts.raw && rawAnswer !== undefined) rawNote = `; answer ${rawAnswer}`;
    return {
      ...res,
      trace: `probe \`${launch.argv.slice(0, 8).join(' ')} ...\`${opts.raw ? ' AF_PACKET' : ''} ${proto} ${client.ip ?? '?'}:${sourcePort} -> ${ep(dstIp, to.port)}: ${out.result}${out.code ? ` ${out.code}` : ''}${rawNote}; proxy records ${res.proxyLog.length}; deliveries ${res.deliveries.length}`,
    };
  }

  /**
   * The app container's log since `since`. When `kubectl logs` fails, the pod is read back: a pod
   * that is gone or not running has no app that could have accepted anything (a checked state);
   * a running one whose log cannot be read is a harness error.
   */
  private async appLog(ref: PodRef, since: string): Promise<string> {
    try {
      return await this.cli.podLog(ref.namespace, ref.name, 'app', since);
    } catch (e) {
      const p = await this.core.readNamespacedPod({ namespace: ref.namespace, name: ref.name }).catch(absentIf404);
      if (p?.status?.phase !== 'Running') return '';
      throw new Error(
        `kind world: reading the app log of running pod ${podKeyOf(ref)} failed: ${e instanceof Error ? e.message : String(e)}`,
        { cause: e },
      );
    }
  }

  /** The device and next-hop MAC, asked in the source's netns (raw-attempt.ts); a string says why not. */
  private async nextHop(argv: readonly string[]): Promise<{ dev: string; mac: string } | string> {
    const [cmd, ...args] = argv;
    if (!cmd) return 'empty next-hop argv';
    const r = await execa(cmd, args, {
      env: this.env ?? process.env,
      extendEnv: this.env === undefined,
      reject: false,
      timeout: 60_000,
    });
    if (r.exitCode !== 0)
      return `next-hop lookup \`${argv.slice(0, 8).join(' ')} ...\` exited ${r.exitCode ?? '?'}: ${String(r.stderr).trim() || String(r.stdout).trim()}`;
    return parseNextHop(String(r.stdout));
  }

  /**
   * A raw SYN answered with a SYN-ACK: the destination sandbox's conntrack entry (read on its
   * node) says which listener port took it after NAT; no entry means the port aimed at.
   */
  private async rawSynAck(
    res: ReturnType<typeof attribute>,
    client: { ip: string; port: number },
    dport: number,
    dst: { ref: PodRef; node: string | undefined } | undefined,
  ): Promise<ReturnType<typeof attribute>> {
    let port = dport;
    let appPorts: number[] = [];
    if (dst?.node) {
      // The SYN-ACK came from this pod's sandbox: its spec and its conntrack entry must be read, or the attempt cannot be judged.
      const p = await this.core.readNamespacedPod({ namespace: dst.ref.namespace, name: dst.ref.name });
      const uid = p.metadata?.uid;
      if (!uid) throw new Error(`kind world: pod ${podKeyOf(dst.ref)} has no uid in the API; cannot find its sandbox`);
      appPorts = (p.spec?.containers ?? []).flatMap((c) =>
        (c.ports ?? []).filter((x) => (x.protocol ?? 'TCP') === 'TCP').map((x) => x.containerPort),
      );
      for (const l of this.appListeners.values()) if (podKeyOf(l.pod) === podKeyOf(dst.ref)) appPorts.push(l.port);
      port = parseRawPort(
        await this.cli.onNode(dst.node, rawConntrackScript(uid, client.ip, client.port)),
        dport,
        `which listener answered the raw SYN ${ep(client.ip, client.port)} -> ${podKeyOf(dst.ref)}:${dport} (conntrack on node ${dst.node})`,
      );
    }
    const who = rawSynAckAcceptor({ port, dst: dst?.ref, appPorts, client });
    return {
      ...res,
      outcome: 'delivered',
      acceptedBy: who.acceptedBy,
      ...(who.acceptedIn ? { acceptedIn: who.acceptedIn } : {}),
      deliveries: who.delivery ? [...res.deliveries, who.delivery] : res.deliveries,
    };
  }

  private async forgetAppProbe(pod: PodRef): Promise<void> {
    const key = podKeyOf(pod);
    const probe = this.appProbes.get(key);
    this.appProbes.delete(key);
    for (const [name, l] of [...this.appListeners]) if (podKeyOf(l.pod) === key) this.appListeners.delete(name);
    if (probe) await closeProbes([probe]);
  }

  async appExec(pod: PodRef, action: AppAction): Promise<AppExecResult> {
    const p = await this.core.readNamespacedPod({ namespace: pod.namespace, name: pod.name }).catch(absentIf404); // 404: no such pod
    if (p?.status?.phase !== 'Running' || p.spec?.hostNetwork)
      return {
        ok: false,
        error: `appExec ${action.kind} in ${podKeyOf(pod)}: the pod has no running app in its own netns`,
      };
    const argv = this.cli.execArgv(pod.namespace, pod.name, 'app', ['node', PROBE_PROGRAM]);
    const envOpt = this.env ? { env: this.env } : {};
    if (action.kind === 'nft-flush' || action.kind === 'nft-insert') {
      // the app image must carry nft (the probe image does: Debian's nftables)
      const probe = await ExecProbe.start(argv, envOpt);
      const who = `uid ${p.spec?.containers[0]?.securityContext?.runAsUser ?? '?'} in ${podKeyOf(pod)}`;
      try {
        return await nftThrough(
          probe,
          who,
          action.kind === 'nft-flush' ? 'flush ruleset\n' : insertedTableText(action.table),
        );
      } finally {
        await probe.close();
      }
    }
    if (action.kind === 'iptables-flush' || action.kind === 'iptables-insert') {
      // a dual-stack pod has v6 rules too (as the netns world flushes both)
      const probe = await ExecProbe.start(argv, envOpt);
      const dualStack = (p.status.podIPs ?? []).some((x) => x.ip.includes(':'));
      const who = `uid ${p.spec?.containers[0]?.securityContext?.runAsUser ?? '?'} in ${podKeyOf(pod)}`;
      try {
        return action.kind === 'iptables-flush'
          ? await flushTablesThrough(probe, dualStack, who)
          : await restoreThrough(probe, dualStack, who, insertedRuleText(action.rule), true);
      } finally {
        await probe.close();
      }
    }
    // A listener lives as long as its probe: one probe per pod, attached until the pod is deleted.
    let probe = this.appProbes.get(podKeyOf(pod));
    if (!probe?.running) {
      probe = await ExecProbe.start(argv, { ...envOpt, timeoutMs: 24 * 3600_000 });
      this.appProbes.set(podKeyOf(pod), probe);
    }
    const name = `app ${podKeyOf(pod)} tcp ${action.port} #${this.appListeners.size}`;
    try {
      await probe.request({
        op: 'listen',
        name,
        proto: 'tcp',
        family: 4,
        address: '0.0.0.0',
        port: action.port,
        mark: undefined,
        transparent: action.transparent === true,
        reuseport: action.reusePort === true,
        reuseaddr: true, // as the netns world: a stopped proxy's TIME_WAIT connections on 15006 must not refuse the squat
      });
    } catch (e) {
      const code = e instanceof ExecProbeError ? e.code : 'failed';
      return { ok: false, error: `bind(${action.port}): ${code} — ${e instanceof Error ? e.message : String(e)}` };
    }
    this.appListeners.set(name, { pod: { namespace: pod.namespace, name: pod.name }, port: action.port });
    return { ok: true };
  }

  /** A process on the node as `uid` (no capabilities) speaks ZDS to the agent as if it were the proxy. */
  async zdsClient(node: string, uid: number): Promise<ZdsClientAttempt> {
    if (!this.nodeIps.has(node)) throw new Error(`kind world: no node ${node}`);
    const priv = setprivArgs({ uid, gid: uid, caps: [] });
    const r = await this.cli.exec(E2E_NAMESPACE, hostProbePod(node, this.image).metadata!.name!, 'probe', [
      ...priv,
      'node',
      '-e',
      zdsRogueScript(NODE_ZDS_SOCKET),
    ]);
    if (r.exitCode !== 0)
      throw new Error(
        `kind world: the rogue ZDS client on ${node} failed (exit ${r.exitCode}): ${r.stderr.trim() || r.stdout.trim()}`,
      );
    return parseZdsRogueOutput(r.stdout);
  }

  /** Accepts the appExec listeners saw for `tag` (their probes report the client's first line). */
  private listenerAccepts(tag: string): { pod: PodRef; a: AppAccept }[] {
    const out: { pod: PodRef; a: AppAccept }[] = [];
    for (const probe of this.appProbes.values()) {
      for (const e of probe.drainEvents()) {
        if ((e.ev !== 'tag' && e.ev !== 'datagram') || e.tag !== tag) continue;
        const l = this.appListeners.get(e.listener);
        if (l)
          out.push({
            pod: l.pod,
            a: { ev: e.ev === 'datagram' ? 'datagram' : 'accept', port: l.port, peer: e.peer, tag },
          });
      }
    }
    return out;
  }

  /** Every node proxy's connection-log records since `since` (their container logs). */
  private async proxyRecords(since: string): Promise<{ node: string; r: ConnectionLogRecord }[]> {
    const out: { node: string; r: ConnectionLogRecord }[] = [];
    for (const node of this.nodes) {
      for (const p of await this.cli.componentPods('proxy', node)) {
        // A failed read is an error: an empty log would read as "no proxy took it".
        const text = await this.cli.podLog(SYSTEM_NAMESPACE, p.name, 'proxy', since);
        for (const r of parseConnectionLog(text).records) out.push({ node, r });
      }
    }
    return out;
  }

  async settle(): Promise<void> {
    let last = '';
    for (let stable = 0, i = 0; i < 30 && stable < 2; i++) {
      const now = JSON.stringify(await this.pods());
      stable = now === last ? stable + 1 : 0;
      last = now;
      if (stable < 2) await sleep(1000);
    }
  }

  async pods(): Promise<readonly PodObservation[]> {
    const list = (await this.core.listPodForAllNamespaces()).items.filter(
      (p) => !HIDDEN_NAMESPACES.has(p.metadata?.namespace ?? ''),
    );
    const evidence = new Map<string, NodeEvidence>();
    await Promise.all(
      this.nodes.map(async (n) => {
        evidence.set(n, parseNodeEvidence(await this.cli.onNode(n, nodeEvidenceScript(PROXY_STATUS_URL)), n));
      }),
    );
    for (const n of this.nodes) {
      const ev = evidence.get(n)!;
      // A proxy that did not answer serves nothing only when none is running on the node (stopped,
      // restarting): a ready proxy pod that does not answer is a failed read.
      if (
        ev.statusError !== undefined &&
        (await this.cli.componentPods('proxy', n)).some((p) => p.ready && !p.terminating)
      ) {
        throw new Error(
          `kind world: the proxy on ${n} is ready but its /status (${PROXY_STATUS_URL}, read on the node) failed: ${ev.statusError}`,
        );
      }
    }
    // A listed pod whose sandbox rules could not be read, and that is not being deleted, has no observation.
    for (const p of list) {
      const why = evidence.get(p.spec?.nodeName ?? '')?.unreadable.get(p.metadata?.uid ?? '');
      if (why !== undefined && !p.metadata?.deletionTimestamp)
        throw new Error(
          `kind world: cannot read the rules of pod ${p.metadata?.namespace}/${p.metadata?.name} on ${p.spec?.nodeName}: ${why}`,
        );
    }
    return list.map((p) => {
      const uid = p.metadata!.uid!;
      const node = p.spec?.nodeName ?? '';
      const hostNetwork = p.spec?.hostNetwork === true;
      const side = hostNetwork ? { redirected: false, served: false } : nodeSideOf(uid, evidence.get(node));
      return {
        namespace: p.metadata!.namespace!,
        name: p.metadata!.name!,
        uid,
        node,
        labels: p.metadata?.labels ?? {},
        phase: p.status?.phase ?? 'Unknown',
        started:
          (p.status?.containerStatuses?.length ?? 0) > 0 &&
          (p.status?.containerStatuses?.every((c) => c.state?.running !== undefined) ?? false),
        hostNetwork,
        ips: (p.status?.podIPs ?? []).map((x) => x.ip),
        annotation: p.metadata?.annotations?.[REDIRECTION_STATUS],
        ...side,
      };
    });
  }

  /**
   * Undo what this world did to a shared cluster, so the next world starts from the same place:
   * its attached probes closed, the namespaces it created deleted (and gone: the next history
   * creates the same names), the components it stopped started again and ready.
   */
  async clear(opts: { readonly attempts?: number; readonly intervalMs?: number } = {}): Promise<void> {
    const probes = [...this.appProbes.values()];
    this.appProbes.clear();
    this.appListeners.clear();
    await closeProbes(probes);
    for (const key of [...this.stopped]) {
      const [component, node] = key.split('|') as [Component, string];
      await this.start(component, node);
    }
    const names = [...this.createdNamespaces];
    // 404: already gone. Any other failure would only show as a 3-minute wait below: say it now.
    for (const name of names) await this.core.deleteNamespace({ name }).catch(absentIf404);
    for (let i = 0; ; i++) {
      const left: string[] = [];
      for (const name of names)
        if (
          await this.core.readNamespace({ name }).then(
            () => true,
            () => false,
          )
        )
          left.push(name);
      if (left.length === 0) break;
      if (i + 1 >= (opts.attempts ?? 180))
        throw new Error(
          `kind world: namespaces ${left.join(', ')} still exist after deletion; the shared cluster cannot be reused (delete them by hand or let the run recreate the cluster)`,
        );
      await sleep(opts.intervalMs ?? 1000);
    }
    this.createdNamespaces.clear();
  }

  async close(): Promise<void> {
    if (this.release) {
      await this.release();
      return;
    }
    const probes = [...this.appProbes.values()];
    this.appProbes.clear();
    // The cluster goes whatever the probes did; a probe's failure is still reported.
    try {
      await closeProbes(probes);
    } finally {
      try {
        await this.cli.deleteCluster();
      } finally {
        if (this.tmp) await rm(this.tmp, { recursive: true, force: true });
      }
    }
  }
}

function podKeyOf(p: PodRef): string {
  return `${p.namespace}/${p.name}`;
}

export const kindWorldFactory: WorldFactory = {
  kind: 'kind',
  available: () =>
    process.env['KIND'] === '1'
      ? { ok: true, reason: 'KIND=1 (needs kind and a Docker engine)' }
      : { ok: false, reason: 'kind world runs only when asked: set KIND=1 (needs Docker and kind)' },
  async create(options: WorldOptions): Promise<World> {
    if (options.meshV6 !== undefined && options.meshV6 !== options.ipv6)
      throw new Error(
        `kind world: meshV6 ${options.meshV6} with ipv6 ${options.ipv6} is unsupported (the agent and proxy follow the cluster's stack); run it on the sim world`,
      );
    const tmp = await mkdtemp(path.join(os.tmpdir(), 'al-kind-'));
    const cluster = `al-${process.pid.toString(36)}-${options.seed.toString(36)}`.slice(0, 30).replace(/-+$/, '');
    const cli = new KindCli({
      cluster,
      repoRoot,
      kubeconfig: path.join(tmp, 'kubeconfig'),
      kindConfig: kindConfigFor(options),
    });
    await cli.up({
      build: process.env['AMBIENT_LAB_SKIP_IMAGE_BUILD'] !== '1',
      deployment: kindDeployment(options),
    });
    try {
      const kc = new k8s.KubeConfig();
      kc.loadFromFile(path.join(tmp, 'kubeconfig'));
      const nodes = (await kc.makeApiClient(k8s.CoreV1Api).listNode()).items.map((n) => n.metadata!.name!).sort();
      const world = new KindWorld(options, nodes, cli, kc, tmp);
      await world.prepare();
      return world;
    } catch (e) {
      return rethrowAfterCleanup(
        e,
        ['delete the kind cluster', () => cli.deleteCluster()],
        [`remove ${tmp}`, () => rm(tmp, { recursive: true, force: true })],
      );
    }
  },
};
