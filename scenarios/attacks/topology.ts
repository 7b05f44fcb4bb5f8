/**
 * The standard topology every threat runs against (two nodes):
 *
 *   mesh (ambient namespace)   victim   node-0  tcp 8080+8081 (probe port 8081), udp 9999; policy: ALLOW only from sa `friend`
 *                              remote   node-1  tcp 8080 (enrolled, cross-node victim)
 *                              friend   node-1  sa friend (liveness client)
 *                              attacker node-0  uid/caps of the threat (in-pod threats only)
 *   plain (no label)           sink     node-1  tcp 8080, udp 9999 (outside the mesh)
 *                              client   node-1  (other-node attacker, outside the mesh)
 *                              hostpod  node-0  hostNetwork (host threats: a hostNetwork pod as the threat's uid)
 *
 * `TopologyState` keeps what the properties need and the World cannot observe (namespace labels,
 * pod facts, components, policies) — the ClusterContext minus the pod observations.
 */
import type { PodObservation, PodRef, PodSpec, PolicyObject, World } from '../world.js';
import { podKey } from '../world.js';
import type { ClusterContext, ComponentStates, MeshSettings, PodFacts } from '../properties/types.js';
import type { ThreatModel } from '../threats/threats.js';

export const MESH_NS = 'mesh';
const PLAIN_NS = 'plain';
export const APP_PORT = 8080;
export const PROBE_PORT = 8081;
export const UDP_PORT = 9999;
/** The sink also serves DNS (TCP and UDP), so uncaptured DNS from an enrolled pod is visible. */
export const DNS_PORT = 53;
/**
 * The sink also listens for UDP on the proxy DNS listener's port: strict lets DNS the pod's
 * rules redirected to 127.0.0.1:15053 out of filter OUTPUT, which must not let UDP to a remote
 * address on that port out as well.
 */
export const UDP_PROXY_DNS_PORT = 15053;

export const VICTIM: PodRef = { namespace: MESH_NS, name: 'victim' };
export const REMOTE: PodRef = { namespace: MESH_NS, name: 'remote' };
export const FRIEND: PodRef = { namespace: MESH_NS, name: 'friend' };
export const ATTACKER: PodRef = { namespace: MESH_NS, name: 'attacker' };
export const SINK: PodRef = { namespace: PLAIN_NS, name: 'sink' };
export const CLIENT: PodRef = { namespace: PLAIN_NS, name: 'client' };
export const HOSTPOD: PodRef = { namespace: PLAIN_NS, name: 'hostpod' };
/**
 * Catalog phase hostile-annotations: ambient pods whose owner wrote hostile values into the
 * annotations that shape the rules (rule-text injection, a huge value, exclusion annotations with
 * bad ports the mesh does not honour, a forged redirection status). An invalid value must be
 * refused under strict (the agent fails the sandbox ADD: the pod does not start) and ignored under
 * upstream (as upstream: the pod starts captured); an annotation the mesh does not read must
 * change nothing (the pod is captured); none may reach rule text.
 */
export const HOSTILE_PODS: readonly { readonly pod: PodRef; readonly annotations: Readonly<Record<string, string>> }[] =
  [
    {
      pod: { namespace: MESH_NS, name: 'hostile-inject' },
      annotations: {
        'istio.io/reroute-virtual-interfaces': 'eth0\n-I ISTIO_OUTPUT 1 -j ACCEPT',
        'ambient.istio.io/bypass-inbound-capture': 'true -j ACCEPT',
        'ambient.istio.io/dns-capture': 'false\n*filter\n-F\nCOMMIT',
      },
    },
    {
      pod: { namespace: MESH_NS, name: 'hostile-huge' },
      annotations: { 'istio.io/reroute-virtual-interfaces': `eth0,${'x'.repeat(200_000)}` },
    },
    // Valid for the ambient rules (they read none of these): the pod starts, and must be captured as if they were absent.
    {
      pod: { namespace: MESH_NS, name: 'hostile-exclude' },
      annotations: {
        'traffic.sidecar.istio.io/excludeInboundPorts': '8080,-1,99999,0x1f90',
        'traffic.sidecar.istio.io/excludeOutboundPorts': '*',
        'traffic.sidecar.istio.io/excludeOutboundIPRanges': '0.0.0.0/0',
      },
    },
    { pod: { namespace: MESH_NS, name: 'hostile-status' }, annotations: { 'ambient.istio.io/redirection': 'enabled' } },
  ];
/**
 * Catalog phase pending-destination: an ambient pod on the victim's node whose app takes its own
 * 15006 while the node proxy is stopped, so the restarted proxy cannot serve it and it stays
 * `pending`; a mesh peer then connects to it.
 */
export const PENDING_SQUATTER: PodRef = { namespace: MESH_NS, name: 'pending-squatter' };
/**
 * Catalog phase squat-before-enrollment: a pod outside the mesh on the victim's node whose app
 * takes 15006 before the pod is labelled into the mesh, so no proxy ever serves it (`pending`).
 */
export const EARLY_SQUATTER: PodRef = { namespace: PLAIN_NS, name: 'early-squatter' };
/** Catalog phase live-enrollment: a pod outside the mesh, labelled into it while it has connections open. */
export const LIVE_ENROLLEE: PodRef = { namespace: PLAIN_NS, name: 'live-enrollee' };
/** Catalog phase api-error-at-add: the ambient pod created while the CNI plugin cannot reach the API. */
export const API_LATE: PodRef = { namespace: MESH_NS, name: 'api-late' };

export const VICTIM_POLICY: PolicyObject = {
  metadata: { namespace: MESH_NS, name: 'victim-only-friend' },
  spec: {
    selector: { matchLabels: { app: 'victim' } },
    action: 'ALLOW',
    rules: [{ from: [{ source: { principals: ['cluster.local/ns/mesh/sa/friend'] } }] }],
  },
};

/** Cluster facts the caller tracks; becomes a ClusterContext with fresh pod observations. */
export class TopologyState {
  readonly namespaces: Record<string, Record<string, string>> = {};
  readonly specs: Record<string, PodFacts> = {};
  readonly components: Record<string, { agent: 'up' | 'down'; proxy: 'up' | 'down' }> = {};
  readonly policies: PolicyObject[] = [];
  readonly createdWhileAgentDown = new Set<string>();

  constructor(
    readonly mesh: MeshSettings,
    nodes: readonly string[],
  ) {
    for (const n of nodes) this.components[n] = { agent: 'up', proxy: 'up' };
  }

  async createNamespace(world: World, name: string, labels: Record<string, string>): Promise<void> {
    await world.createNamespace(name, labels);
    this.namespaces[name] = { ...labels };
  }

  /** `meshDown`: enrollment cannot happen on its node right now (e.g. the CNI plugin is cut off from the API) — fail closed applies as for an agent down. */
  async createPod(world: World, spec: PodSpec, o: { readonly meshDown?: boolean } = {}): Promise<PodObservation> {
    this.specs[podKey(spec)] = {
      uid: spec.app.uid,
      tcpPorts: spec.app.tcpPorts,
      ...(spec.app.probePorts ? { probePorts: spec.app.probePorts } : {}),
      ...(spec.serviceAccount ? { serviceAccount: spec.serviceAccount } : {}),
      ...(spec.annotations ? { annotations: spec.annotations } : {}),
    };
    const down = o.meshDown === true || (spec.node !== undefined && this.components[spec.node]?.agent === 'down');
    const obs = await world.createPod(spec);
    if (down) this.createdWhileAgentDown.add(obs.uid);
    return obs;
  }

  async deletePod(world: World, pod: PodRef): Promise<void> {
    await world.deletePod(pod);
    delete this.specs[podKey(pod)];
  }

  async applyPolicy(world: World, p: PolicyObject): Promise<void> {
    await world.applyPolicy(p);
    this.policies.push(p);
  }

  async setComponent(world: World, c: 'agent' | 'proxy', node: string, state: 'up' | 'down'): Promise<void> {
    if (state === 'down') await world.stop(c, node);
    else await world.start(c, node);
    this.components[node]![c] = state;
  }

  async context(world: World, quiescent: boolean): Promise<ClusterContext> {
    return {
      mesh: this.mesh,
      pods: await world.pods(),
      namespaces: this.namespaces,
      specs: this.specs,
      components: structuredClone(this.components) as ComponentStates,
      policies: [...this.policies],
      quiescent,
      createdWhileAgentDown: this.createdWhileAgentDown,
    };
  }
}

/** Build the standard topology; the attacker pod only for in-pod threats. */
export async function buildTopology(world: World, t: ThreatModel, mesh: MeshSettings): Promise<TopologyState> {
  const [n0, n1] = [world.nodes[0]!, world.nodes[1] ?? world.nodes[0]!];
  const s = new TopologyState(mesh, world.nodes);
  await s.createNamespace(world, MESH_NS, { 'istio.io/dataplane-mode': 'ambient' });
  await s.createNamespace(world, PLAIN_NS, {});
  await s.applyPolicy(world, VICTIM_POLICY);
  const app = (uid = 1000) => ({
    uid,
    caps: [],
    tcpPorts: [APP_PORT, PROBE_PORT],
    udpPorts: [UDP_PORT],
    probePorts: [PROBE_PORT],
  });
  await s.createPod(world, { ...VICTIM, node: n0, labels: { app: 'victim' }, app: app() });
  await s.createPod(world, {
    ...REMOTE,
    node: n1,
    labels: { app: 'remote' },
    app: { ...app(), tcpPorts: [APP_PORT, PROBE_PORT, DNS_PORT] },
  });
  await s.createPod(world, { ...FRIEND, node: n1, labels: { app: 'friend' }, serviceAccount: 'friend', app: app() });
  await s.createPod(world, {
    ...SINK,
    node: n1,
    labels: { app: 'sink' },
    app: { uid: 1000, caps: [], tcpPorts: [APP_PORT, DNS_PORT], udpPorts: [UDP_PORT, DNS_PORT, UDP_PROXY_DNS_PORT] },
  });
  await s.createPod(world, { ...CLIENT, node: n1, labels: { app: 'client' }, app: app() });
  if (t.vantage === 'enrolled-pod') {
    await s.createPod(world, {
      ...ATTACKER,
      node: n0,
      labels: { app: 'attacker' },
      serviceAccount: 'attacker',
      app: {
        uid: t.uids[0]!,
        ...(t.uidSource ? { uidSource: t.uidSource } : {}),
        caps: t.caps,
        tcpPorts: [APP_PORT],
        udpPorts: [UDP_PORT],
      },
    });
  }
  if (t.vantage === 'same-node-host') {
    await s.createPod(world, {
      ...HOSTPOD,
      node: n0,
      hostNetwork: true,
      labels: { app: 'hostpod' },
      app: { uid: t.uids[0]!, caps: [], tcpPorts: [] },
    });
  }
  await world.settle();
  return s;
}
