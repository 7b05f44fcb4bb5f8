/**
 * A standalone two-node mesh for the node proxy's own tests and benches (tests/sim/ztunnel,
 * bench/ztunnel-*): no agent, no API server; workloads and policy are fakes.
 *
 * Two nodes in the simulated kernel, each with a bridge and pods, linked node to node; the
 * upstream in-pod plan (rendered by the rule builder, applied through the sim NetnsRules
 * adapter) in every enrolled pod; a node proxy per node over the sim Sockets adapter.
 *
 *   node1 (192.0.2.1)                         node2 (192.0.2.2)
 *     cni0 10.244.1.1/24                        cni0 10.244.2.1/24
 *       a 10.244.1.5 enrolled  sa-a               c 10.244.2.5 enrolled  sa-c
 *       b 10.244.1.6 enrolled  sa-b
 *       p 10.244.1.7 not in the mesh
 */
import { netnsId, podUid, type PodUid } from '../../impl/api/ids.js';
import type { WorkloadInfo } from '../../impl/api/zds/messages.js';
import type { ReadResult, SocketOutcome, Sockets, TcpConnection } from '../../impl/host/sockets.js';
import type { ZdsNetnsHandle } from '../../impl/host/zds-transport.js';
import type { HboneTransport } from '../../impl/host/hbone.js';
import type { AuthzDecision, AuthzRequest, Authorizer } from '../../impl/ztunnel/authz/authorizer.js';
import { NodeProxy, type NodeProxyOptions } from '../../impl/ztunnel/node-proxy.js';
import { MemoryConnectionLog, type ProxyWorkload, type WorkloadLookup } from '../../impl/ztunnel/proxy-deps.js';
import { buildInpodPlan } from '../../impl/node-agent/rule-builder.js';
import { SimKernel } from '../kernel/kernel.js';
import { credentials } from '../kernel/process.js';
import { SimNetnsRules } from '../kernel/netns-rules-adapter.js';
import { SimSockets } from '../kernel/sockets-adapter.js';
import { SimHbone, SimMeshCa } from '../hbone/sim-hbone.js';
import { MemoryLogger } from '../log/memory-logger.js';
import { VirtualClock } from '../time/virtual-clock.js';

export const APP = credentials(1000, 1000);
const PROXY_CREDS = credentials(1337, 1337, ['NET_ADMIN', 'NET_RAW']);
export const TRUST_DOMAIN = 'cluster.local';

interface PodSpec {
  readonly name: string;
  readonly node: 'node1' | 'node2';
  readonly ip: string;
  readonly enrolled: boolean;
  readonly sa: string;
}

export const PODS: readonly PodSpec[] = [
  { name: 'a', node: 'node1', ip: '10.244.1.5', enrolled: true, sa: 'sa-a' },
  { name: 'b', node: 'node1', ip: '10.244.1.6', enrolled: true, sa: 'sa-b' },
  { name: 'p', node: 'node1', ip: '10.244.1.7', enrolled: false, sa: 'sa-p' },
  { name: 'c', node: 'node2', ip: '10.244.2.5', enrolled: true, sa: 'sa-c' },
];

/** A policy engine stand-in: a predicate, replaced to change policy (bumps the generation). */
export class FakeAuthorizer implements Authorizer {
  generation = 0;
  readonly seen: AuthzRequest[] = [];
  private readonly listeners = new Set<() => void>();
  constructor(private rule: (r: AuthzRequest) => boolean = () => true) {}

  evaluate(req: AuthzRequest): AuthzDecision {
    this.seen.push(req);
    const allow = this.rule(req);
    return { allow, reason: allow ? 'fake: allowed' : 'fake: denied', dryRun: [] };
  }

  setRule(rule: (r: AuthzRequest) => boolean): void {
    this.rule = rule;
    this.generation++;
    for (const l of this.listeners) l();
  }

  onChange(l: () => void): () => void {
    this.listeners.add(l);
    return () => this.listeners.delete(l);
  }
}

export class FakeWorkloads implements WorkloadLookup {
  readonly all = new Map<string, ProxyWorkload>();
  byIp(ip: string): ProxyWorkload | undefined {
    for (const w of this.all.values()) if (w.ips.includes(ip)) return w;
    return undefined;
  }
  byUid(uid: PodUid): ProxyWorkload | undefined {
    return this.all.get(uid);
  }
}

export function workloadOf(p: PodSpec): ProxyWorkload {
  return {
    uid: `uid-${p.name}`,
    name: p.name,
    namespace: 'default',
    serviceAccount: p.sa,
    labels: { app: p.name },
    ips: [p.ip],
    enrolled: p.enrolled,
    identity: { trustDomain: TRUST_DOMAIN, namespace: 'default', serviceAccount: p.sa },
  };
}

export function infoOf(p: PodSpec): WorkloadInfo {
  return { name: p.name, namespace: 'default', serviceAccount: p.sa };
}

export function handleFor(pod: string, identity = pod): ZdsNetnsHandle & { closed: boolean } {
  const h = {
    netns: netnsId(pod),
    identity,
    closed: false,
    close(): void {
      h.closed = true;
    },
  };
  return h;
}

export const INPOD_PLAN = buildInpodPlan({
  profile: 'upstream',
  ipv6: false,
  dnsCapture: false,
  ingressMode: false,
  virtualInterfaces: [],
});

function addPod(k: SimKernel, p: PodSpec, hostDev: string, gw: string): void {
  k.addNetns(p.name);
  k.setLink(p.name, 'lo', true);
  k.addVeth(p.name, 'eth0', p.node, hostDev);
  k.setMaster(p.node, hostDev, 'cni0');
  k.addAddress(p.name, 'eth0', `${p.ip}/24`);
  k.setLink(p.name, 'eth0', true);
  k.setLink(p.node, hostDev, true);
  k.addRoute(p.name, { dst: 'default', family: 4, via: gw });
}

export interface Mesh {
  readonly k: SimKernel;
  readonly clock: VirtualClock;
  readonly log: MemoryLogger;
  readonly authz: FakeAuthorizer;
  readonly workloads: FakeWorkloads;
  readonly ca: SimMeshCa;
  readonly proxies: Record<'node1' | 'node2', NodeProxy>;
  readonly logs: Record<'node1' | 'node2', MemoryConnectionLog>;
  /** An app's view of the sockets (uid 1000, no capabilities). */
  app(pod: string): Sockets;
  /** A new proxy process on a node (a restart), sharing the world's ports. */
  newProxy(node: 'node1' | 'node2', over?: Partial<NodeProxyOptions>): { proxy: NodeProxy; log: MemoryConnectionLog };
  /** Hand every enrolled pod of the node to the proxy (what ZDS Add does). */
  addPods(proxy: NodeProxy, node: 'node1' | 'node2'): Promise<void>;
}

export async function buildMesh(opts: { hbone?: HboneTransport; applyRules?: boolean } = {}): Promise<Mesh> {
  const k = new SimKernel({ kernelVersion: '6.1' });
  const clock = new VirtualClock();
  const log = new MemoryLogger();
  for (const [node, subnet, uplink] of [
    ['node1', '10.244.1', '192.0.2.1/24'],
    ['node2', '10.244.2', '192.0.2.2/24'],
  ] as const) {
    k.addNetns(node);
    k.setLink(node, 'lo', true);
    k.addBridge(node, 'cni0');
    k.addAddress(node, 'cni0', `${subnet}.1/24`);
    k.setLink(node, 'cni0', true);
    k.setForwarding(node, 4, true);
    void uplink;
  }
  k.addVeth('node1', 'eth0', 'node2', 'eth0');
  k.addAddress('node1', 'eth0', '192.0.2.1/24');
  k.addAddress('node2', 'eth0', '192.0.2.2/24');
  k.setLink('node1', 'eth0', true);
  k.setLink('node2', 'eth0', true);
  k.addRoute('node1', { dst: '10.244.2.0/24', via: '192.0.2.2' });
  k.addRoute('node2', { dst: '10.244.1.0/24', via: '192.0.2.1' });
  let dev = 0;
  for (const p of PODS) addPod(k, p, `veth${dev++}`, p.node === 'node1' ? '10.244.1.1' : '10.244.2.1');
  const rules = new SimNetnsRules(k);
  if (opts.applyRules ?? true) {
    for (const p of PODS) if (p.enrolled) await rules.apply(netnsId(p.name), INPOD_PLAN);
  }
  const authz = new FakeAuthorizer();
  const workloads = new FakeWorkloads();
  for (const p of PODS) workloads.all.set(`uid-${p.name}`, workloadOf(p));
  const ca = new SimMeshCa(TRUST_DOMAIN);
  const hbone = opts.hbone ?? new SimHbone({ ca });
  const newProxy = (
    node: 'node1' | 'node2',
    over: Partial<NodeProxyOptions> = {},
  ): { proxy: NodeProxy; log: MemoryConnectionLog } => {
    const connectionLog = new MemoryConnectionLog();
    const proxy = new NodeProxy({
      sockets: new SimSockets({ kernel: k, owner: PROXY_CREDS, defaultNetns: node, label: `ztunnel@${node}`, clock }),
      hbone,
      authorizer: authz,
      workloads,
      clock,
      log: log.child({ node }),
      trustDomain: TRUST_DOMAIN,
      connectionLog,
      ...over,
    });
    return { proxy, log: connectionLog };
  };
  const addPods = async (proxy: NodeProxy, node: 'node1' | 'node2'): Promise<void> => {
    for (const p of PODS)
      if (p.node === node && p.enrolled) await proxy.onAdd(podUid(`uid-${p.name}`), infoOf(p), handleFor(p.name));
  };
  const n1 = newProxy('node1');
  const n2 = newProxy('node2');
  await addPods(n1.proxy, 'node1');
  await addPods(n2.proxy, 'node2');
  return {
    k,
    clock,
    log,
    authz,
    workloads,
    ca,
    proxies: { node1: n1.proxy, node2: n2.proxy },
    logs: { node1: n1.log, node2: n2.log },
    app: (pod) => new SimSockets({ kernel: k, owner: APP, defaultNetns: pod, label: `app-${pod}`, clock }),
    newProxy,
    addPods,
  };
}

interface EchoServer {
  /** Every accepted connection's peer address as the app saw it. */
  readonly peers: string[];
  readonly conns: TcpConnection[];
  close(): Promise<void>;
}

/** An app that echoes every byte back, prefixed by nothing; records who connected. */
export async function echoServer(s: Sockets, port = 8080): Promise<EchoServer> {
  const peers: string[] = [];
  const conns: TcpConnection[] = [];
  const l = await s.listenTcp({ family: 4, address: '0.0.0.0', port }, (c) => {
    peers.push(`${c.remoteAddress.address}`);
    conns.push(c);
    void (async () => {
      for (;;) {
        const r = await c.read();
        if (r.done) {
          c.close();
          return;
        }
        const w = await c.write(r.bytes);
        if (!w.ok) return;
      }
    })();
  });
  if (!l.ok) throw new Error(`echo server: ${l.message}`);
  return { peers, conns, close: () => l.value.close() };
}

const text = (r: ReadResult): string =>
  r.done ? `<done${r.failure ? `:${r.failure.kind}` : ''}>` : Buffer.from(r.bytes).toString('utf8');

/** Connect from `s` to ip:port, send `msg`, read one reply chunk. */
export async function exchange(
  s: Sockets,
  ip: string,
  port: number,
  msg = 'hello',
): Promise<{ connect: SocketOutcome<TcpConnection>; reply?: string }> {
  const c = await s.connectTcp({ family: 4, dst: { family: 4, address: ip, port } });
  if (!c.ok) return { connect: c };
  const w = await c.value.write(Buffer.from(msg));
  if (!w.ok) return { connect: c, reply: `<write failed:${w.kind}>` };
  return { connect: c, reply: text(await c.value.read()) };
}

export { text };
