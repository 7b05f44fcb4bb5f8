/**
 * The mesh's two DaemonSet pods on one simulated node, as processes that can be stopped,
 * started and restarted: the node agent (impl/node-agent) and the node proxy (impl/ztunnel),
 * each wired with the sim adapters of its ports. Every start is a new process: fresh informers,
 * a fresh workload index and policy store, new sockets with the proxy's credentials.
 */
import { netnsId, podUid } from '../../../impl/api/ids.js';
import type { RedirectionPlan } from '../../../impl/host/netns-rules.js';
import type { Logger } from '../../../impl/host/log.js';
import { NodeAgent, type NodeAgentConfig } from '../../../impl/node-agent/node-agent.js';
import { DEFAULT_ENROLLMENT_CONFIG } from '../../../impl/api/enrollment-config.js';
import { Ztunnel } from '../../../impl/ztunnel/ztunnel.js';
import { WorkloadIndex } from '../../../impl/ztunnel/workloads.js';
import { WorkloadWatcher } from '../../../impl/ztunnel/workloads-watch.js';
import { PolicyStore } from '../../../impl/ztunnel/authz/policy-store.js';
import { PolicyAuthorizer } from '../../../impl/ztunnel/authz/engine.js';
import { AuthorizationPolicyWatcher } from '../../../impl/ztunnel/authz/policy-watcher.js';
import { LineConnectionLog, type MemoryConnectionLogSink } from '../../../impl/ztunnel/connection-log.js';
import type { SimKernel } from '../../../sim/kernel/kernel.js';
import { simNetnsName, simNetnsPath } from '../../../sim/kernel/netns.js';
import type { NetnsFinder } from '../../../impl/host/netns-finder.js';
import type { NetnsId } from '../../../impl/api/ids.js';
import type { Profile } from '../../../impl/api/profile.js';
import type { Backend } from '../../../impl/api/backend.js';
import { credentials, type Credentials } from '../../../sim/kernel/process.js';
import { SimNetnsRules } from '../../../sim/kernel/netns-rules-adapter.js';
import { SimPodFlows } from '../../../sim/kernel/pod-flows-adapter.js';
import { SimHostIpSets, SimNetnsFinder, SimNftHostIpSets } from '../../../sim/kernel/host-adapters.js';
import { SimSockets } from '../../../sim/kernel/sockets-adapter.js';
import { SimHbone, type SimMeshCa } from '../../../sim/hbone/sim-hbone.js';
import { managedSimCertificates, SimCaFetcher, type SimCaAuthority } from '../../../sim/hbone/sim-ca.js';
import { CertificateManager } from '../../../impl/ztunnel/cert-manager.js';
import type { SimKubeApi } from '../../../sim/kube/sim-kube-api.js';
import type { SimNode } from '../../../sim/node/sim-node.js';
import type { VirtualClock } from '../../../sim/time/virtual-clock.js';
import type { SeededRandom } from '../../../sim/time/seeded-random.js';
import type { SimPluginEventTransport } from '../../../sim/transport/plugin-events.js';
import type { SimZdsNetwork } from '../../../sim/zds/sim-zds-network.js';
import { MemoryMetrics } from '../../../sim/metrics/memory-metrics.js';
import { NetnsPathSockets } from './netns-sockets.js';

const PROXY_UID = 1337;
/** The node proxy runs as 1337 with NET_ADMIN + NET_RAW (marks, IP_TRANSPARENT), as ztunnel. */
const PROXY_CREDS: Credentials = credentials(PROXY_UID, PROXY_UID, ['NET_ADMIN', 'NET_RAW']);
/** Every proxy socket's label starts with this (attribution reads it). */
export const PROXY_LABEL_PREFIX = 'ztunnel@';
export const TRUST_DOMAIN = 'cluster.local';
/** Agent repair period; settle's quiet window is longer, so every settle includes a repair pass. */
export const REPAIR_INTERVAL_MS = 5000;
/** Proxy upstream connect timeout (short: a dropped SYN costs this much virtual time per attempt). */
export const PROXY_CONNECT_TIMEOUT_MS = 1000;

export function pluginEventAddress(node: string): string {
  return `/var/run/ambient-lab/${node}/plugin-events.sock`;
}

export function zdsAddress(node: string): string {
  return `/var/run/ambient-lab/${node}/zds.sock`;
}

interface StackShared {
  readonly kernel: SimKernel;
  readonly api: SimKubeApi;
  readonly clock: VirtualClock;
  readonly random: SeededRandom;
  readonly events: SimPluginEventTransport;
  readonly zds: SimZdsNetwork;
  /** The mesh CA (its decision in-process) every proxy asks for its pods' certificates. */
  readonly meshCa: SimCaAuthority;
  /** The mesh root of the sim HBONE: verifies the peers' certificates. */
  readonly meshRoot: SimMeshCa;
  /** A fresh projected token of `node`'s proxy pod, as the kubelet writes it when the pod starts. */
  readonly proxyToken: (node: string) => string;
  readonly log: Logger;
  readonly profile: Profile;
  readonly ipv6: boolean;
  readonly dnsCapture: boolean;
  /** The agent's rules backend (absent: iptables). */
  readonly rulesBackend?: Backend;
  readonly planTransform:
    | ((plan: RedirectionPlan, pod: { readonly namespace: string; readonly name: string }) => RedirectionPlan)
    | undefined;
  readonly agentConfig: Partial<NodeAgentConfig> | undefined;
  /**
   * Netns (sim names) the node agent of `node` must not see (World.agentAddFault
   * 'netns-missing'); undefined: it sees every one.
   */
  readonly hiddenNetns?: (node: string, netns: string) => boolean;
}

/** The agent's netns finder with some namespaces hidden from it (a netns-missing fault). */
class HidingNetnsFinder implements NetnsFinder {
  constructor(
    private readonly inner: NetnsFinder,
    private readonly hidden: (netns: string) => boolean,
  ) {}
  async find(podUid: string, ips: readonly string[]): Promise<NetnsId | undefined> {
    const found = await this.inner.find(podUid, ips);
    return found !== undefined && this.hidden(simNetnsName(found)) ? undefined : found;
  }
  async exists(netns: NetnsId): Promise<boolean> {
    return !this.hidden(simNetnsName(netns)) && this.inner.exists(netns);
  }
}

interface ProxyProcess {
  readonly ztunnel: Ztunnel;
  readonly certificates: CertificateManager;
  readonly workloads: WorkloadWatcher;
  readonly policies: AuthorizationPolicyWatcher;
}

export class NodeStack {
  agent: NodeAgent | undefined;
  private proxy: ProxyProcess | undefined;
  private incarnation = 0;

  constructor(
    private readonly s: StackShared,
    readonly node: SimNode,
    /** Where this node's proxies write their connection log (one sink across restarts). */
    readonly sink: MemoryConnectionLogSink,
  ) {}

  get name(): string {
    return this.node.name;
  }

  agentConfig(): NodeAgentConfig {
    return {
      nodeName: this.node.name,
      profile: this.s.profile,
      ipv6: this.s.ipv6,
      dnsCapture: this.s.dnsCapture,
      enrollment: DEFAULT_ENROLLMENT_CONFIG,
      proxyUid: PROXY_UID,
      kubeletUid: 0,
      allowedProxyUids: [PROXY_UID],
      pluginEventAddress: pluginEventAddress(this.node.name),
      zdsAddress: zdsAddress(this.node.name),
      hostNetns: netnsId(simNetnsPath(this.node.hostNetns)),
      repairIntervalMs: REPAIR_INTERVAL_MS,
      zdsAckTimeoutMs: 2000,
      trustDomain: TRUST_DOMAIN,
      ...(this.s.rulesBackend === 'nftables' ? { backend: 'nftables' as const } : {}),
      ...this.s.agentConfig,
    };
  }

  /** Start the agent process; resolves when its start-up finished (drive the clock meanwhile). */
  async startAgent(): Promise<void> {
    if (this.agent) return;
    const { kernel } = this.s;
    const config = this.agentConfig();
    const nft = config.backend === 'nftables';
    const agent = new NodeAgent(config, {
      kube: this.s.api,
      // strict reads the nftables ruleset in either backend (a foreign table is drift)
      rules: new SimNetnsRules(kernel, { nftables: nft || config.profile === 'strict' }),
      flows: new SimPodFlows(kernel),
      finder: this.finder(),
      ipsets: nft
        ? new SimNftHostIpSets(kernel, this.node.hostNetns, this.s.profile)
        : new SimHostIpSets(kernel, this.node.hostNetns),
      pluginEvents: this.s.events,
      zdsTransport: this.s.zds.endpoint({ pid: 100 + this.node.index, uid: 0, gid: 0 }),
      clock: this.s.clock,
      log: this.s.log.child({ node: this.node.name }),
      metrics: new MemoryMetrics(),
      ...(this.s.planTransform ? { planTransform: this.s.planTransform } : {}),
    });
    this.agent = agent;
    await agent.start();
  }

  private finder(): NetnsFinder {
    const disk = this.node.disk;
    const base = new SimNetnsFinder(this.s.kernel, () =>
      [...disk.sandboxes.values()]
        .filter((r) => r.netns !== '')
        .map((r) => ({ podUid: r.podUid, netns: simNetnsPath(r.netns) })),
    );
    const hidden = this.s.hiddenNetns;
    return hidden ? new HidingNetnsFinder(base, (n) => hidden(this.node.name, n)) : base;
  }

  async stopAgent(): Promise<void> {
    const a = this.agent;
    this.agent = undefined;
    await a?.stop();
  }

  /** Start a proxy process; a running one keeps running until retireOld() (a restart hand-over). */
  startProxy(): void {
    const n = ++this.incarnation;
    const { s } = this;
    const log = s.log.child({ node: this.node.name, proxy: n });
    const index = new WorkloadIndex({ trustDomain: TRUST_DOMAIN });
    const store = new PolicyStore({ log });
    const authorizer = new PolicyAuthorizer({ store, log });
    const workloads = new WorkloadWatcher({ kube: s.api, clock: s.clock, log, index });
    const policies = new AuthorizationPolicyWatcher({ kube: s.api, clock: s.clock, log, store });
    const sockets = new SimSockets({
      kernel: s.kernel,
      owner: PROXY_CREDS,
      defaultNetns: this.node.hostNetns,
      label: `${PROXY_LABEL_PREFIX}${this.node.name}#${n}`,
      clock: s.clock,
    });
    // The proxy's own token, read at every fetch (one per process start here: the kubelet's refresh
    // at 80 % of 12 h never comes within a history).
    const token = s.proxyToken(this.node.name);
    const certificates = new CertificateManager({
      fetcher: new SimCaFetcher({ ca: s.meshCa, token: () => token, clock: s.clock }),
      clock: s.clock,
      random: s.random,
      log,
    });
    const ztunnel = new Ztunnel({
      sockets: new NetnsPathSockets(sockets),
      hbone: new SimHbone({ ca: s.meshRoot, certificates: managedSimCertificates(certificates) }),
      identities: certificates,
      authorizer,
      workloads: index,
      clock: s.clock,
      log,
      trustDomain: TRUST_DOMAIN,
      profile: s.profile,
      connectionLog: new LineConnectionLog(s.clock, this.sink, (err, r) =>
        log.error('connection log record rejected', { error: err.message, pod: r.pod, event: r.event }),
      ),
      families: s.ipv6 ? [4, 6] : [4],
      connectTimeoutMs: PROXY_CONNECT_TIMEOUT_MS,
      drainMs: 1000,
      zdsTransport: s.zds.endpoint({ pid: 200 + 1000 * n + this.node.index, uid: PROXY_UID, gid: PROXY_UID }),
      zdsAddress: zdsAddress(this.node.name),
      random: s.random,
      // No DNS listener (15053) yet, as in the netns world, whose lab turns the manifests'
      // listener off (e2e/netns/world-lab.ts, `proxyDns`), so the two agree
      // (tests/netns/world/sim-parity.spec.ts): with DNS capture on, app DNS fails closed. The kind
      // world deploys the manifests as they are, listener included. To turn it on everywhere,
      // pass `dns: { upstream: [...] }` here and `proxyDns` in the lab, and teach the worlds'
      // attribution to read the proxy's DNS log.
    });
    workloads.start();
    policies.start();
    ztunnel.start();
    const previous = this.proxy;
    this.proxy = { ztunnel, certificates, workloads, policies };
    if (previous) this.retiring.push(previous);
  }

  /** Old proxies still draining after a restart. */
  private readonly retiring: ProxyProcess[] = [];

  /** Stop the current proxy (and any draining one): listeners close, connections reset or drain. */
  async stopProxy(mode: 'immediate' | 'graceful' = 'immediate'): Promise<void> {
    const all = [...this.retiring.splice(0), ...(this.proxy ? [this.proxy] : [])];
    this.proxy = undefined;
    await Promise.all(all.map((p) => this.kill(p, mode)));
  }

  /** Stop the draining predecessors only (the end of a restart hand-over). */
  async retireOld(): Promise<void> {
    await Promise.all(this.retiring.splice(0).map((p) => this.kill(p, 'graceful')));
  }

  private async kill(p: ProxyProcess, mode: 'immediate' | 'graceful'): Promise<void> {
    p.workloads.stop();
    p.policies.stop();
    await p.ztunnel.stop(mode, mode === 'graceful' ? 1000 : 0);
    p.certificates.stop();
  }

  get proxyRunning(): boolean {
    return this.proxy !== undefined;
  }

  /** Identities the current proxy holds a valid certificate for (sorted). */
  heldIdentities(): readonly string[] {
    return (this.proxy?.certificates.held() ?? [])
      .filter((h) => h.notAfterMs !== undefined)
      .map((h) => h.identity)
      .sort();
  }

  /** Pod UIDs the current proxy serves (listeners open). */
  servedPods(): readonly string[] {
    return this.proxy ? this.proxy.ztunnel.proxy.servedPods() : [];
  }

  /** The netns (path) the current proxy serves a pod with. */
  servedNetns(uid: string): string | undefined {
    const p = this.proxy?.ztunnel.proxy.pod(podUid(uid));
    return p?.netns;
  }
}
