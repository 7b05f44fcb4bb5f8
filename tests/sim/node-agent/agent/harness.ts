/**
 * A one-node sim world for node-agent tests, built from the real pieces: the simulated kernel,
 * the in-memory API, our CNI plugin (exec protocol) for sandbox ADDs, the agent with the sim
 * port adapters, and a ZDS client standing in for the proxy (acks, or nacks on demand).
 */
import type { Profile } from '../../../../impl/api/profile.js';
import { SimKernel } from '../../../../sim/kernel/kernel.js';
import { simNetnsName, simNetnsPath } from '../../../../sim/kernel/netns.js';
import { SimNetnsRules } from '../../../../sim/kernel/netns-rules-adapter.js';
import { SimPodFlows } from '../../../../sim/kernel/pod-flows-adapter.js';
import { SimHostIpSets, SimNetnsFinder } from '../../../../sim/kernel/host-adapters.js';
import { ApiStore } from '../../../../sim/kube/store.js';
import { SimKubeApi } from '../../../../sim/kube/sim-kube-api.js';
import { VirtualClock } from '../../../../sim/time/virtual-clock.js';
import { SeededRandom } from '../../../../sim/time/seeded-random.js';
import { runFor, settle } from '../../../../sim/time/settle.js';
import { SimPluginEventTransport } from '../../../../sim/transport/plugin-events.js';
import { SimZdsNetwork } from '../../../../sim/zds/sim-zds-network.js';
import { MemoryLogger } from '../../../../sim/log/memory-logger.js';
import { MemoryMetrics } from '../../../../sim/metrics/memory-metrics.js';
import { NodeAgent, type NodeAgentConfig } from '../../../../impl/node-agent/node-agent.js';
import { DEFAULT_ENROLLMENT_CONFIG } from '../../../../impl/api/enrollment-config.js';
import { AmbientCniPlugin } from '../../../../impl/cni-plugin/cni-plugin.js';
import { ZdsClient } from '../../../../impl/ztunnel/zds-client.js';
import { cniEnv, k8sCniArgs, type CniExecOutput } from '../../../../impl/api/cni.js';
import { netnsId, type PodUid } from '../../../../impl/api/ids.js';
import { REDIRECTION_STATUS } from '../../../../impl/api/annotations.js';
import type { KubeObjectOf } from '../../../../impl/host/kube.js';
import type { HostIpSets, IpSetSpec } from '../../../../impl/host/ipsets.js';
import type { PodFlows } from '../../../../impl/host/pod-flows.js';

export const NODE = 'node-1';
export const HOST_NS = 'host-node-1';
export const AGENT_SOCK = '/var/run/ambient-lab/plugin-events.sock';
const ZDS_SOCK = '/var/run/ambient-lab/zds.sock';
const PROXY_UID = 1337;

type Pod = KubeObjectOf<'Pod'>;

/** The sim's ipsets, with adds of chosen addresses refused. */
class FailingIpSets implements HostIpSets {
  constructor(
    private readonly inner: HostIpSets,
    private readonly failing: ReadonlySet<string>,
  ) {}
  ensure(set: IpSetSpec): Promise<void> {
    return this.inner.ensure(set);
  }
  add(set: string, ip: string, comment: string): Promise<void> {
    return this.failing.has(ip)
      ? Promise.reject(new Error(`ipset add ${set} ${ip}: CANNOT ADD`))
      : this.inner.add(set, ip, comment);
  }
  remove(set: string, ip: string, comment: string): Promise<void> {
    return this.inner.remove(set, ip, comment);
  }
  list(set: string): Promise<readonly { ip: string; comment: string }[]> {
    return this.inner.list(set);
  }
}

export class AgentWorld {
  readonly clock = new VirtualClock();
  readonly random = new SeededRandom(7);
  readonly store = new ApiStore({ clock: this.clock, random: this.random });
  readonly kube = new SimKubeApi(this.store, this.clock);
  readonly kernel = new SimKernel({ trace: false });
  /** As the agent's process makes it: strict reads the nftables ruleset too (a foreign table is drift). */
  readonly rules: SimNetnsRules;
  /** The PodFlows adapter the agent uses; a test may wrap it (e.g. to make end() fail). */
  flows: PodFlows = new SimPodFlows(this.kernel);
  readonly events = new SimPluginEventTransport(this.clock);
  readonly zdsNet = new SimZdsNetwork(this.clock);
  readonly log = new MemoryLogger();
  readonly metrics = new MemoryMetrics();
  /** Sandboxes the runtime created: pod uid -> netns name. */
  readonly sandboxes = new Map<string, string>();
  private nextIp = 10;
  private nextSandbox = 1;
  agent: NodeAgent | undefined;
  proxy: ZdsClient | undefined;
  /** What the stand-in proxy serves: pod uid -> netns. */
  readonly proxyPods = new Map<string, string>();
  /** Make the stand-in proxy refuse adds. */
  proxyNack: string | undefined;
  /** ZDS Adds the stand-in proxy received (acked or nacked), and its connections: counts of rounds. */
  proxyAddsSeen = 0;
  /** ZDS Dels the stand-in proxy received, by pod uid. */
  readonly proxyDelsSeen: string[] = [];
  proxyConnects = 0;
  /** Addresses whose ipset add fails (as a kernel refusal would). */
  readonly failIpsetAdds = new Set<string>();
  /** The host probe sets as the agent reaches them (adds of failIpsetAdds fail). */
  readonly ipsets: HostIpSets = new FailingIpSets(new SimHostIpSets(this.kernel, HOST_NS), this.failIpsetAdds);

  constructor(
    readonly profile: Profile = 'upstream',
    private readonly overrides: Partial<NodeAgentConfig> = {},
  ) {
    this.rules = new SimNetnsRules(this.kernel, {
      nftables: profile === 'strict' || overrides.backend === 'nftables',
    });
    const k = this.kernel;
    k.addNetns(HOST_NS);
    k.setLink(HOST_NS, 'lo', true);
    k.addBridge(HOST_NS, 'cni0');
    k.addAddress(HOST_NS, 'cni0', '10.244.1.1/24');
    k.setLink(HOST_NS, 'cni0', true);
    k.setForwarding(HOST_NS, 4, true);
  }

  /** Settings of the next agent started (a restart with other settings changes them in between). */
  settings: Partial<Pick<NodeAgentConfig, 'profile' | 'ipv6' | 'dnsCapture'>> = {};

  config(): NodeAgentConfig {
    return {
      nodeName: NODE,
      profile: this.profile,
      ipv6: false,
      dnsCapture: true,
      enrollment: DEFAULT_ENROLLMENT_CONFIG,
      proxyUid: PROXY_UID,
      kubeletUid: 0,
      allowedProxyUids: [PROXY_UID],
      pluginEventAddress: AGENT_SOCK,
      zdsAddress: ZDS_SOCK,
      hostNetns: netnsId(HOST_NS),
      repairIntervalMs: 10_000,
      zdsAckTimeoutMs: 2000,
      ...this.overrides,
      ...this.settings,
    };
  }

  /** The plugin install state the next agent started includes in its readiness (install-check.ts). */
  installCheck: ConstructorParameters<typeof NodeAgent>[1]['installCheck'];

  async startAgent(): Promise<NodeAgent> {
    const agent = new NodeAgent(this.config(), {
      ...(this.installCheck ? { installCheck: this.installCheck } : {}),
      kube: this.kube,
      rules: this.rules,
      flows: this.flows,
      finder: new SimNetnsFinder(this.kernel, () => [...this.sandboxes].map(([podUid, netns]) => ({ podUid, netns }))),
      ipsets: this.ipsets,
      pluginEvents: this.events,
      zdsTransport: this.zdsNet.endpoint({ pid: 100, uid: 0, gid: 0 }),
      clock: this.clock,
      log: this.log,
      metrics: this.metrics,
    });
    this.agent = agent;
    await settle(this.clock, agent.start());
    return agent;
  }

  async stopAgent(): Promise<void> {
    await settle(this.clock, this.agent!.stop());
    this.agent = undefined;
  }

  startProxy(uid = PROXY_UID): ZdsClient {
    const proxyPods = this.proxyPods;
    const client = new ZdsClient({
      transport: this.zdsNet.endpoint({ pid: 200, uid, gid: uid }),
      address: ZDS_SOCK,
      clock: this.clock,
      random: this.random,
      log: this.log,
      handler: {
        onAdd: async (podUid: PodUid, _info, netns) => {
          this.proxyAddsSeen++;
          if (this.proxyNack) {
            netns.close();
            throw new Error(this.proxyNack);
          }
          proxyPods.set(podUid, simNetnsName(netns.netns));
          netns.close();
        },
        onKeep: async () => undefined,
        onDel: async (podUid) => {
          this.proxyDelsSeen.push(podUid);
          proxyPods.delete(podUid);
        },
        onSnapshotSent: async (named) => {
          for (const k of [...proxyPods.keys()]) if (!named.has(k as PodUid)) proxyPods.delete(k);
        },
      },
    });
    this.proxy = client;
    client.on((e) => {
      if (e.type === 'connected') this.proxyConnects++;
    });
    client.start();
    return client;
  }

  stopProxy(): void {
    this.proxy?.stop();
    this.proxy = undefined;
    this.proxyPods.clear();
  }

  async run(ms = 1000): Promise<void> {
    await runFor(this.clock, ms);
  }

  async namespace(name: string, labels: Record<string, string> = {}): Promise<void> {
    await this.store.create('Namespace', { metadata: { name, labels } });
  }

  async labelNamespace(name: string, labels: Record<string, string | null>): Promise<void> {
    await this.store.patch('Namespace', name, undefined, { metadata: { labels } });
  }

  async labelPod(ns: string, name: string, labels: Record<string, string | null>): Promise<void> {
    await this.store.patch('Pod', name, ns, { metadata: { labels } });
  }

  /** Create the Pod object, its sandbox (netns, veth, address) and run our CNI plugin's ADD. */
  async pod(
    ns: string,
    name: string,
    opts: {
      labels?: Record<string, string>;
      annotations?: Record<string, string>;
      hostNetwork?: boolean;
      loIpv6Disabled?: boolean;
      /** Spec fields over the defaults (e.g. securityContext, containers). */
      spec?: Partial<NonNullable<Pod['spec']>>;
    } = {},
  ): Promise<{ pod: Pod; cni: CniExecOutput; netns: string; ip: string }> {
    const pod = await this.store.create('Pod', {
      metadata: { name, namespace: ns, labels: opts.labels ?? {}, annotations: opts.annotations ?? {} },
      spec: {
        nodeName: NODE,
        hostNetwork: opts.hostNetwork ?? false,
        containers: [{ name: 'app', image: 'app' }],
        ...opts.spec,
      },
    });
    const { netns, ip } = this.sandbox(pod.metadata!.uid!);
    // A pod sysctl (or a node that disables IPv6 for new namespaces) set before the CNI ADD.
    if (opts.loIpv6Disabled) this.kernel.setIpv6Disabled(netns, 'lo', true);
    const cni = await this.cniAdd(pod, simNetnsPath(netns), ip);
    if (cni.exitCode === 0) {
      this.store.patch('Pod', name, ns, { status: { phase: 'Running', podIP: ip, podIPs: [{ ip }] } }, 'status');
    }
    return { pod: await this.store.get('Pod', name, ns), cni, netns, ip };
  }

  sandbox(uid: string): { netns: string; ip: string } {
    const n = this.nextSandbox++;
    const netns = `pod-${n}`;
    const ip = `10.244.1.${this.nextIp++}`;
    const k = this.kernel;
    k.addNetns(netns);
    k.setLink(netns, 'lo', true);
    k.addVeth(netns, 'eth0', HOST_NS, `veth${n}`);
    k.setMaster(HOST_NS, `veth${n}`, 'cni0');
    k.addAddress(netns, 'eth0', `${ip}/24`);
    k.setLink(netns, 'eth0', true);
    k.setLink(HOST_NS, `veth${n}`, true);
    k.addRoute(netns, { dst: 'default', family: 4, via: '10.244.1.1' });
    this.sandboxes.set(uid, netns);
    return { netns, ip };
  }

  /** Node reboot without drain for one pod: its netns is destroyed and a new sandbox made. */
  async rebootSandbox(pod: Pod): Promise<{ netns: string; ip: string }> {
    const uid = pod.metadata!.uid!;
    const old = this.sandboxes.get(uid)!;
    this.kernel.deleteNetns(old);
    const { netns, ip } = this.sandbox(uid);
    this.store.patch(
      'Pod',
      pod.metadata!.name!,
      pod.metadata!.namespace!,
      { status: { podIP: ip, podIPs: [{ ip }] } },
      'status',
    );
    return { netns, ip };
  }

  async cniAdd(pod: Pod, netns: string, ip: string): Promise<CniExecOutput> {
    const plugin = new AmbientCniPlugin({
      openKube: () => this.kube,
      events: this.events,
      clock: this.clock,
      log: this.log,
    });
    return settle(
      this.clock,
      plugin.exec({
        env: cniEnv({
          command: 'ADD',
          containerId: `sb-${simNetnsName(netns)}`,
          netns,
          ifname: 'eth0',
          args: k8sCniArgs(
            { namespace: pod.metadata!.namespace!, name: pod.metadata!.name!, uid: pod.metadata!.uid! },
            `sb-${simNetnsName(netns)}`,
          ),
          path: ['/opt/cni/bin'],
        }),
        stdin: JSON.stringify({
          cniVersion: '1.0.0',
          name: 'k8s',
          type: 'ambient-lab-cni',
          agentSocket: AGENT_SOCK,
          kubeconfig: '/etc/cni/kubeconfig',
          apiAttempts: 2,
          apiRetryDelayMs: 100,
          agentTimeoutMs: 5000,
          prevResult: { cniVersion: '1.0.0', ips: [{ address: `${ip}/24` }] },
        }),
      }),
    );
  }

  async annotation(ns: string, name: string): Promise<string | undefined> {
    const p = await this.store.get('Pod', name, ns);
    return p.metadata?.annotations?.[REDIRECTION_STATUS];
  }

  /** Does the pod's current netns hold redirection (the in-pod nat REDIRECT to 15001)? */
  rulesIn(netns: string): boolean {
    return this.kernel.hasNetns(netns) && this.kernel.iptablesSave(netns, 4).includes('--to-ports 15001');
  }

  /**
   * The convergence invariant: a pod is annotated `enabled` iff its current sandbox has the rules
   * and the proxy serves it with that sandbox; a pod with rules but no proxy is `pending`.
   */
  async truthful(): Promise<string[]> {
    const problems: string[] = [];
    for (const p of (await this.store.list('Pod')).items) {
      const uid = p.metadata!.uid!;
      const netns = this.sandboxes.get(uid);
      const ann = p.metadata?.annotations?.[REDIRECTION_STATUS];
      const rules = netns !== undefined && this.rulesIn(netns);
      const served = netns !== undefined && this.proxyPods.get(uid) === netns;
      if (ann === 'enabled' && !(rules && served))
        problems.push(`${p.metadata!.name}: annotated enabled but rules=${rules} proxy=${served}`);
      if (ann === undefined && (rules || served))
        problems.push(`${p.metadata!.name}: not annotated but rules=${rules} proxy=${served}`);
    }
    return problems;
  }
}
