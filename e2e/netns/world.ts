/**
 * The netns World (scenarios/world.ts) over a NetnsLab (world-lab.ts): real kernel, real
 * processes. Connections are made by probe processes (probe.ts) in the source netns as the
 * source's uid/caps from a known source port; attribution reads the node proxies' JSON-lines
 * connection logs (first hop: an 'outbound' record whose downstream source is the client, or an
 * inbound record for it) and the pod apps' accept reports (deliveries, tagged per attempt;
 * viaProxy when a proxy's upstream tuple is the peer the app saw), plus what listeners opened
 * through appExec received (probe events, tagged the same way).
 * - UDP: the datagram carries the tag; the app that received it is the first hop, with the source
 *   address it saw. EPERM from connect()/send() (a netfilter DROP on the output path) is a
 *   timeout / not-delivered, as the sim reports a dropped packet.
 * - Pod apps and their probes have the capabilities Kubernetes gives (effectiveAppCaps: none for
 *   a non-root uid), as the sim's containers.
 * - The agent and the proxy run as deploy/ rendered for the options says (profile, IPv6, DNS
 *   capture: its components; e2e/deployment/launch.ts), so the world needs kubectl to render.
 * - IPv6 (options.ipv6): dual-stack pods from fd00:10:244:<i>::/64; v6 capture on (agent and proxy).
 * - raw (AF_PACKET, probe `raw-send`): needs NET_RAW (EPERM otherwise). UDP is attributed like a
 *   datagram; a TCP SYN cannot complete a handshake (the sender's kernel resets it), so the
 *   answer decides: SYN-ACK = delivered, and the destination's conntrack entry says which port's
 *   listener took it (a REDIRECT shows as 15006 etc.).
 * - options.dnsCapture: the agent captures DNS (the proxy serves no 15053, as in the sim:
 *   world-lab.ts componentLaunch lists what the lab changes and why).
 * Not here: options.kernelVersion (it is the machine's).
 */
import * as fs from 'node:fs';
import * as path from 'node:path';
import { randomInt } from 'node:crypto';
import { REDIRECTION_STATUS } from '../../impl/api/annotations.js';
import type { ConnectionLogRecord } from '../../impl/ztunnel/connection-log.js';
import { parseConnectionLog } from '../../impl/ztunnel/connection-log.js';
import {
  IDENTITY_CREDENTIALS,
  podKey,
  PROXY_POD,
  proxyPodName,
  type Acceptor,
  type AppAction,
  type AppExecResult,
  type Component,
  type ConnectOptions,
  type ConnectResult,
  type Delivery,
  type Destination,
  type DriftRepair,
  type ForgedHboneResult,
  forgedWithoutConnection,
  type HeldConnection,
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
} from '../../scenarios/world.js';
import { parseZdsRogueOutput, zdsRogueScript } from '../kind/zds-rogue.js';
import { toProxyLogEntry } from '../kind/attribution.js';
import { setprivArgs } from './processes.js';
import { insertedRuleText, insertedTableText } from '../../scenarios/world.js';
import { ComponentLifecycles } from '../../scenarios/worlds/component-lifecycles.js';
import { nodeAddress, OUTSIDE_ADDRESS } from './addressing.js';
import { CommandError, execIn, ipIn } from './ip.js';
import { observe, observeIn, observeInOutput, parseConntrackList } from './observe.js';
import { missingTools, missingToolsReason } from './required-tools.js';
import { reapProcessRuns } from './leftovers.js';
import { kubectlAvailability } from '../deployment/launch.js';
import { ProbeError, ProbePool, type ProbeOwner } from './probe.js';
import {
  flushTablesThrough,
  nftThrough,
  restoreThrough,
  connectThrough,
  attemptError,
  fromFreeSourcePort,
  randomSourcePort,
  rawSendThrough,
  type ClosedEvent,
  type ConnectOutcome,
  type HeldSendOutcome,
  type HoldOutcome,
  type ProbeEvent,
  type RawSendOutcome,
  tcpConnectOutcome,
} from './probe-protocol.js';
import { effectiveAppCaps, LAB_COMPONENT_LABEL, NetnsLab, repoRoot, unless, type LabPodState } from './world-lab.js';
import { settleNetnsWorld, type SettleResult } from './world-settle.js';

/** What `iptables-restore` of empty tables leaves: every table the mesh writes, flushed (as the sim's appExec). */

/**
 * settle(): the bound on waiting for convergence (world-settle.ts says what it means when hit:
 * a convergence finding, not a harness error) — longer than the proxy's 15 s ZDS reconnect
 * backoff plus the agent's 5 s retry cap and 2 s repair interval, with room for a loaded
 * machine — and the pause between observation rounds.
 */
const SETTLE_BOUND_MS = 60_000;
const SETTLE_POLL_MS = 200;
/**
 * connect(): bounds on waiting for an attempt's records (see awaitAttempt). A TCP attempt waits
 * on observed state and reaches its bound only when something is broken (a harness error says what); a
 * datagram's non-delivery is only visible as the absence of a report, so its bound decides it.
 */
// A proxy writes 'accepted' when it takes a connection and its final record when the upstream
// connect ends — at worst its connect timeout (10 s) later, twice in sequence for an outbound
// HBONE leg whose destination proxy then connects to the app; the bound leaves room above that.
const ATTEMPT_BOUND_MS = 30_000;
const DATAGRAM_BOUND_MS = 2_000;
const ATTEMPT_POLL_MS = 20;
/** The node proxy's HBONE port in every pod netns (forgedHbone's destination). */
const HBONE_PORT = 15008;
/** forgedHbone: how long a refused handshake's proxy records get to arrive (no delivery to wait for). */
const FORGED_REFUSED_SETTLE_MS = 500;
/** The API server's own audience: a token for it is not one the mesh CA accepts (forgedHbone wrong-audience). */
const API_SERVER_AUDIENCE = 'https://kubernetes.default.svc.cluster.local';
/** Connection log events after which a proxy leg writes nothing more. */
const FINAL_EVENTS: ReadonlySet<string> = new Set(['closed', 'closed-by-policy', 'denied', 'failed']);

/**
 * Proxy legs of one connection without their final record: the legs from `client`, the legs
 * their forwarded upstream tuples opened, and the legs whose upstream reached an app (`peers`).
 */
function openLegs(
  recs: readonly { node: string; r: ConnectionLogRecord }[],
  clients: ReadonlySet<string>,
  peers: readonly string[],
): string[] {
  const tuples = new Set(clients);
  for (const { r } of recs)
    if (r.upstream && peers.includes(tupleText(r.upstream.src))) tuples.add(tupleText(r.downstream.src));
  for (let grew = true; grew;) {
    grew = false;
    for (const { r } of recs) {
      if (tuples.has(tupleText(r.downstream.src)) && r.upstream && !tuples.has(tupleText(r.upstream.src))) {
        tuples.add(tupleText(r.upstream.src));
        grew = true;
      }
    }
  }
  const legs = new Map<string, boolean>();
  for (const { node, r } of recs) {
    if (!tuples.has(tupleText(r.downstream.src))) continue;
    const k = `${node} ${r.direction} from ${tupleText(r.downstream.src)}`;
    legs.set(k, (legs.get(k) ?? false) || FINAL_EVENTS.has(r.event));
  }
  return [...legs].filter(([, done]) => !done).map(([k]) => `proxy leg ${k} has no final record yet`);
}

/** How long a running agent or proxy may take to answer /status (a busy or restarting process) before that is a harness error. */
const STATUS_ANSWER_MS = 30_000;

const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

/**
 * The apps' reports of an attempt's tag, each with the proxy record whose upstream leg is the
 * connection the app saw, when there is one: its node made it, in the netns of the record's pod
 * (the source pod for outbound, the destination for inbound).
 */
function attributeDeliveries(
  dels: readonly { pod: PodRef; port: number; peer: string }[],
  recs: readonly { node: string; r: ConnectionLogRecord }[],
): Delivery[] {
  return dels.map((d) => {
    const leg = recs.find((x) => x.r.upstream !== undefined && tupleText(x.r.upstream.src) === d.peer);
    const [ns, name] = leg ? leg.r.pod.split('/') : [];
    return {
      pod: d.pod,
      port: d.port,
      peer: d.peer,
      viaProxy: leg !== undefined,
      ...(leg ? { proxyNode: leg.node } : {}),
      ...(ns && name ? { proxyFor: { namespace: ns, name } } : {}),
    };
  });
}

function ep(ip: string, port: number): string {
  return ip.includes(':') ? `[${ip}]:${port}` : `${ip}:${port}`;
}

function portOf(endpoint: string): number {
  return Number(endpoint.slice(endpoint.lastIndexOf(':') + 1));
}

function tupleText(e: { ip: string; port: number }): string {
  return ep(e.ip, e.port);
}

/** The first hop a proxy's record of a connection names. */
function proxyAcceptor(r: ConnectionLogRecord): Acceptor {
  return r.direction === 'outbound'
    ? 'proxy-outbound'
    : r.direction === 'inbound-hbone'
      ? 'proxy-hbone'
      : 'proxy-inbound';
}

/** How long a held connection's connect, greeting and each send's answer may take. */
const HELD_ANSWER_MS = 3_000;

export class NetnsWorld implements World {
  readonly kind: 'netns' | 'containers';
  readonly nodes: readonly string[];
  private readonly probes = new ProbePool();
  /** Listeners the pods' apps opened through appExec, by probe listener name. */
  private readonly appListeners = new Map<string, { pod: PodRef; port: number; netns: string; owner: ProbeOwner }>();
  private rr = 0;
  private readonly lifecycles = new ComponentLifecycles();

  /** `kind`: 'containers' when the lab's nodes and components are containers (e2e/containers/world.ts). */
  constructor(
    readonly lab: NetnsLab,
    readonly options: WorldOptions,
    kind: 'netns' | 'containers' = 'netns',
  ) {
    this.kind = kind;
    this.nodes = lab.state.nodes.map((n) => n.name);
    if (!lab.backend)
      this.cniApiFault = (node, failing) => {
        lab.setCniApiFault(node, failing);
        return Promise.resolve();
      };
  }

  async createNamespace(name: string, labels: Readonly<Record<string, string>> = {}): Promise<void> {
    await this.lab.api.create('Namespace', { metadata: { name, labels: { ...labels } } });
  }

  async labelNamespace(name: string, labels: Readonly<Record<string, string | null>>): Promise<void> {
    await this.lab.api.patch('Namespace', name, undefined, { metadata: { labels } });
  }

  async createPod(spec: PodSpec): Promise<PodObservation> {
    const node = spec.node ?? this.nodes[this.rr++ % this.nodes.length]!;
    await this.lab.createPod({
      namespace: spec.namespace,
      name: spec.name,
      node,
      labels: { ...(spec.labels ?? {}) },
      annotations: { ...(spec.annotations ?? {}) },
      ...(spec.serviceAccount ? { serviceAccount: spec.serviceAccount } : {}),
      hostNetwork: spec.hostNetwork ?? false,
      uid: spec.app.uid,
      ...(spec.app.uidSource ? { uidSource: spec.app.uidSource } : {}),
      caps: spec.app.caps,
      tcpPorts: spec.app.tcpPorts,
      udpPorts: spec.app.udpPorts ?? [],
      probePorts: spec.app.probePorts ?? [],
    });
    const obs = (await this.pods()).find((p) => p.namespace === spec.namespace && p.name === spec.name);
    if (!obs) throw new Error(`pod ${spec.namespace}/${spec.name} vanished right after creation`);
    return obs;
  }

  async labelPod(pod: PodRef, labels: Readonly<Record<string, string | null>>): Promise<void> {
    await this.lab.api.patch('Pod', pod.name, pod.namespace, { metadata: { labels } });
  }

  async deletePod(pod: PodRef): Promise<void> {
    await this.forgetPodNetns(this.lab.state.pods[podKey(pod)]?.netns);
    await this.lab.deletePod(pod.namespace, pod.name);
  }

  async applyPolicy(policy: PolicyObject): Promise<void> {
    const meta = policy['metadata'] as { name: string; namespace: string };
    const obj = policy as never;
    // Only "not there" (404) means create; any other failure of the read is the world's, and propagates.
    const cur = await this.lab.api.get('AuthorizationPolicy', meta.name, meta.namespace).catch(unless(404));
    if (cur)
      await this.lab.api.replace('AuthorizationPolicy', {
        ...(obj as object),
        metadata: { ...meta, resourceVersion: cur.metadata?.resourceVersion },
      } as never);
    else await this.lab.api.create('AuthorizationPolicy', obj);
  }

  async deletePolicy(namespace: string, name: string): Promise<void> {
    await this.lab.api.delete('AuthorizationPolicy', name, namespace);
  }

  // Lifecycle operations on one component run in call order (see ComponentLifecycles).
  stop(component: Component, node: string): Promise<void> {
    return this.lifecycles.run(node, [component], () => this.lab.stopComponent(component, node));
  }

  start(component: Component, node: string): Promise<void> {
    return this.lifecycles.run(node, [component], () => this.lab.startComponent(component, node));
  }

  restart(component: Component, node: string): Promise<void> {
    return this.lifecycles.run(node, [component], async () => {
      await this.lab.stopComponent(component, node);
      await this.lab.startComponent(component, node);
    });
  }

  rebootNode(node: string): Promise<void> {
    return this.lifecycles.run(node, ['agent', 'proxy'], async () => {
      for (const p of Object.values(this.lab.state.pods))
        if (p.node === node && !p.hostNetwork) await this.forgetPodNetns(p.netns);
      await this.lab.rebootNode(node);
    });
  }

  /** Each node's own addresses on the fabric (World.nodeAddresses); IPv6 in a dual-stack world. */
  async nodeAddresses(): Promise<Readonly<Record<string, readonly string[]>>> {
    const out: Record<string, readonly string[]> = {};
    for (const n of this.lab.state.nodes) {
      const a = nodeAddress(n.index);
      out[n.name] = [a.ipv4, ...(this.lab.state.ipv6 === true ? [a.ipv6] : [])];
    }
    return out;
  }

  async dropWatches(): Promise<void> {
    await this.lab.api.dropWatches();
  }

  /**
   * World.driftRepairs: the `drift repaired` lines of each node's agent log (pino JSON, one object
   * a line). A line that is not JSON is skipped only when it is the last, unfinished one.
   */
  async driftRepairs(): Promise<readonly DriftRepair[]> {
    const out: DriftRepair[] = [];
    for (const n of this.lab.state.nodes) {
      const file = path.join(this.lab.nodeDir(n.name), 'agent.log');
      let text: string;
      try {
        text = fs.readFileSync(file, 'utf8');
      } catch (e) {
        throw new Error(
          `reading the agent log on ${n.name} (${file}) for its drift repairs failed: ${(e as Error).message}; the lab writes it when it starts the agent`,
          { cause: e },
        );
      }
      for (const line of text.slice(0, text.lastIndexOf('\n') + 1).split('\n')) {
        if (!line.includes('"drift repaired"')) continue;
        let o: Record<string, unknown>;
        try {
          o = JSON.parse(line) as Record<string, unknown>;
        } catch (e) {
          throw new Error(
            `the agent log on ${n.name} (${file}) has a 'drift repaired' line that is not JSON: ${(e as Error).message}: ${line.slice(0, 200)}`,
            { cause: e },
          );
        }
        out.push({
          node: n.name,
          pod: String(o.pod),
          windowMs: typeof o.windowMs === 'number' ? o.windowMs : undefined,
          flowsEnded: typeof o.flowsEnded === 'number' ? o.flowsEnded : undefined,
          foreign: String(o.foreign),
        });
      }
    }
    return out;
  }

  private podState(ref: PodRef): LabPodState {
    const p = this.lab.state.pods[`${ref.namespace}/${ref.name}`];
    if (!p) throw new Error(`no pod ${ref.namespace}/${ref.name} in this world`);
    return p;
  }

  /** The node proxy's connection log; the proxy creates it when it starts (with the lab), so it always exists. */
  private connectionLogFile(node: string): string {
    return path.join(this.lab.nodeDir(node), 'connections.jsonl');
  }

  private readConnectionLog(node: string): Buffer {
    const f = this.connectionLogFile(node);
    try {
      return fs.readFileSync(f);
    } catch (e) {
      throw new Error(
        `reading the connection log of the proxy on ${node} (${f}) failed: ${e instanceof Error ? e.message : String(e)}; the proxy creates it at start — see ${path.join(this.lab.nodeDir(node), 'proxy.log')}`,
        { cause: e },
      );
    }
  }

  private logOffsets(): Map<string, number> {
    const m = new Map<string, number>();
    for (const n of this.nodes) {
      try {
        m.set(n, fs.statSync(this.connectionLogFile(n)).size);
      } catch (e) {
        throw new Error(
          `the connection log of the proxy on ${n} (${this.connectionLogFile(n)}) cannot be read: ${e instanceof Error ? e.message : String(e)}; the proxy creates it at start — see ${path.join(this.lab.nodeDir(n), 'proxy.log')}`,
          { cause: e },
        );
      }
    }
    return m;
  }

  private newRecords(offsets: Map<string, number>): { node: string; r: ConnectionLogRecord }[] {
    const out: { node: string; r: ConnectionLogRecord }[] = [];
    for (const n of this.nodes) {
      const text = this.readConnectionLog(n)
        .subarray(offsets.get(n) ?? 0)
        .toString('utf8');
      // Only whole lines: the proxy may be writing the last one right now (it is read at the next poll).
      const parsed = parseConnectionLog(text.slice(0, text.lastIndexOf('\n') + 1));
      if (parsed.errors.length > 0) {
        throw new Error(
          `the connection log of the proxy on ${n} (${this.connectionLogFile(n)}) has lines the harness cannot read: ${parsed.errors
            .slice(0, 3)
            .map((x) => `line ${x.line} after offset ${offsets.get(n) ?? 0}: ${x.message}`)
            .join('; ')}`,
        );
      }
      for (const r of parsed.records) out.push({ node: n, r });
    }
    return out;
  }

  /** Where a connection starts: the netns, who runs the probe, and the source's own addresses. */
  private endpointOf(from: Source): { netns: string; owner: ProbeOwner; ips: readonly string[] } | string {
    if (from.kind === 'pod') {
      const p = this.podState(from.pod);
      if (!p.started || !p.netns) return `source pod ${from.pod.namespace}/${from.pod.name} is not running`;
      return { netns: p.netns, owner: { uid: p.appUid, gid: p.appUid, caps: effectiveAppCaps(p) }, ips: p.ips };
    }
    if (from.kind === 'host') {
      const n = this.lab.node(from.node);
      return {
        netns: n.netns,
        owner: { uid: from.uid, gid: from.uid, caps: from.caps },
        ips: [n.address, nodeAddress(n.index).ipv6],
      };
    }
    // The outside client is root with every capability (it is not the threat's app).
    return {
      netns: this.lab.state.outside,
      owner: { uid: 0, gid: 0, caps: ['NET_ADMIN', 'NET_RAW'] },
      ips: [OUTSIDE_ADDRESS.ipv4, OUTSIDE_ADDRESS.ipv6],
    };
  }

  /** Deliveries tagged `tag`: the pod apps' reports and the appExec listeners' probe events. */
  private deliveries(tag: string, events: ProbeEvent[]): { pod: PodRef; port: number; peer: string }[] {
    const out: { pod: PodRef; port: number; peer: string }[] = [];
    for (const p of Object.values(this.lab.state.pods)) {
      // Each app's own channel (NetnsLab.startApp): a pod cannot write another pod's records.
      for (const e of this.lab.appRecords(p)) {
        if ((e.ev === 'accept' || e.ev === 'datagram') && e.tag === tag && e.port !== undefined && e.peer !== undefined)
          out.push({ pod: { namespace: p.namespace, name: p.name }, port: e.port, peer: e.peer });
      }
    }
    events.push(...this.probes.events.drain());
    for (const e of events) {
      if ((e.ev !== 'tag' && e.ev !== 'datagram') || e.tag !== tag) continue;
      const l = this.appListeners.get(e.listener);
      if (l) out.push({ pod: l.pod, port: l.port, peer: e.peer });
    }
    return out;
  }

  async connect(from: Source, to: Destination, opts: ConnectOptions = {}): Promise<ConnectResult> {
    const none = (error: string): ConnectResult => ({
      outcome: 'error',
      error,
      acceptedBy: undefined,
      deliveries: [],
      proxyLog: [],
    });
    const family: 4 | 6 = opts.family ?? (to.kind === 'ip' ? (to.ip.includes(':') ? 6 : 4) : 4);
    const src = this.endpointOf(from);
    if (typeof src === 'string') return none(src);
    let dstIp: string;
    if (to.kind === 'pod') {
      const d = this.podState(to.pod);
      dstIp = d.ips.find((ip) => ip.includes(':') === (family === 6)) ?? '';
      if (!dstIp)
        return none(
          `destination pod ${to.pod.namespace}/${to.pod.name} has no IPv${family} address${family === 6 && this.options.ipv6 !== true ? ' (the world was made with ipv6: false)' : ''}`,
        );
    } else dstIp = to.ip;
    const srcIp = opts.sourceIp ?? src.ips.find((ip) => ip.includes(':') === (family === 6));
    if (!srcIp) return none(`the source has no IPv${family} address`);
    const proto = opts.proto ?? 'tcp';
    let sourcePort: number;
    const tag = `al-${Date.now().toString(36)}-${randomInt(1e9).toString(36)}`;
    const offsets = this.logOffsets();
    this.probes.events.drain();
    const events: ProbeEvent[] = [];
    const probe = await this.probes.get(src.netns, src.owner);
    let out: ConnectOutcome;
    let rawAnswer: RawSendOutcome['result'] | undefined;
    let tproxyBefore: ReadonlyMap<number, number> | undefined;
    if (opts.raw) {
      const hop = await this.nextHop(src.netns, dstIp);
      if (typeof hop === 'string') return none(hop);
      if (proto === 'tcp') tproxyBefore = await this.tproxyHits(dstIp);
      sourcePort = randomSourcePort(); // a crafted frame binds no socket: no port to find taken
      ({ out, rawAnswer } = await rawSendThrough(probe, {
        tag,
        proto,
        ifname: hop.dev,
        dstMac: hop.mac,
        source: srcIp,
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
        // IP_TRANSPARENT only for a non-local source (as the sim): it needs NET_RAW or NET_ADMIN.
        transparent: opts.sourceIp !== undefined && !src.ips.includes(opts.sourceIp),
        source: opts.sourceIp,
      }));
    }
    const client = ep(srcIp, sourcePort);
    // What the first hop may see as the client: its own tuple, or — for a socket in a node's
    // netns (a host socket, a hostNetwork pod), which binds no address (the kernel picks the
    // route's, e.g. the pod bridge's) and whose connections to pods the node's rules SNAT (the
    // host probe source) — the tuples its conntrack entry says it left with.
    const clients = new Set([client]);
    if (
      this.lab.state.nodes.some((n) => n.netns === src.netns) &&
      proto === 'tcp' &&
      out.result === 'established' &&
      !opts.raw
    )
      for (const alias of await this.nodeSourceTuples(src.netns, sourcePort, dstIp, to.port)) clients.add(alias);
    // A raw TCP SYN never completes a handshake, so nothing is logged for it: its answer says what listened.
    const mayDeliver = out.result === 'established' || (out.result === 'sent' && !(opts.raw && proto === 'tcp'));
    const {
      dels,
      recs,
      note: waitNote,
    } = await this.awaitAttempt(tag, clients, out.result === 'established' && !opts.raw, mayDeliver, offsets, events);
    const mine = recs.filter(
      (x) =>
        clients.has(tupleText(x.r.downstream.src)) ||
        dels.some((d) => x.r.upstream && tupleText(x.r.upstream.src) === d.peer),
    );
    const proxyLog: ProxyLogEntry[] = mine.map(({ node, r }) => toProxyLogEntry(node, r));
    const first = mine.find((x) => clients.has(tupleText(x.r.downstream.src)));
    let acceptedBy: Acceptor | undefined;
    let acceptedIn: ConnectResult['acceptedIn'];
    const deliveries = attributeDeliveries(dels, mine);
    if (first) {
      acceptedBy = proxyAcceptor(first.r);
      const [ns, name] = first.r.pod.split('/');
      acceptedIn = ns && name ? { namespace: ns, name } : { node: first.node };
    } else if (proto === 'udp' && deliveries.length > 0) {
      // UDP has no handshake: the first hop is whoever received the datagram (no proxy takes
      // UDP: captured DNS goes to a 15053 nobody serves).
      acceptedBy = 'app';
      acceptedIn = deliveries[0]!.pod;
    } else if (deliveries.some((d) => !d.viaProxy && portOf(d.peer) === sourcePort)) {
      // No proxy took it and an app saw the client's own port: the app was the first hop. (The
      // address may differ from the one the world guessed: to 127.0.0.1 the kernel picks 127.0.0.1.)
      acceptedBy = 'app';
      acceptedIn = deliveries.find((d) => !d.viaProxy && portOf(d.peer) === sourcePort)!.pod;
    } else if (out.result === 'established') acceptedBy = 'other';
    // EPERM from connect()/send() is a netfilter DROP on the sender's own output path, not a
    // refused permission: the packet is gone, as a dropped SYN (timeout) or datagram is in the sim.
    const droppedAtOutput =
      out.result === 'error' && out.code === 'EPERM' && (out.call === 'connect' || out.call === 'send');
    let outcome: ConnectResult['outcome'] =
      out.result === 'established'
        ? 'established'
        : out.result === 'sent'
          ? deliveries.length > 0
            ? 'delivered'
            : 'not-delivered'
          : out.result === 'timeout'
            ? 'timeout'
            : droppedAtOutput
              ? proto === 'udp'
                ? 'not-delivered'
                : 'timeout'
              : out.code === 'ECONNREFUSED'
                ? proto === 'udp'
                  ? 'not-delivered'
                  : 'refused'
                : out.code === 'ENETUNREACH' || out.code === 'EHOSTUNREACH'
                  ? 'unreachable'
                  : 'error';
    let rawNote = '';
    if (opts.raw && proto === 'tcp' && rawAnswer === 'syn-ack') {
      // The SYN reached a listener. Which one: the destination's conntrack entry says where a
      // REDIRECT sent it (reply source port); no entry means no NAT, so the port aimed at.
      outcome = 'delivered';
      const hop = await this.rawListener(srcIp, sourcePort, dstIp, to.port, tproxyBefore);
      acceptedBy = hop.acceptedBy;
      if (hop.acceptedIn) acceptedIn = hop.acceptedIn;
      if (hop.delivery) deliveries.push(hop.delivery);
      rawNote = `; SYN-ACK from listener port ${hop.port}`;
    } else if (opts.raw && proto === 'tcp' && rawAnswer !== undefined) rawNote = `; answer ${rawAnswer}`;
    return {
      outcome,
      ...(outcome === 'error' ? { error: attemptError(out) } : {}),
      acceptedBy,
      ...(acceptedIn ? { acceptedIn } : {}),
      deliveries,
      proxyLog,
      trace: `probe ${src.netns}${opts.raw ? ' AF_PACKET' : ''} ${proto} ${client} -> ${ep(dstIp, to.port)}: ${out.result}${out.code ? ` ${out.call ?? ''} ${out.code}` : ''}${droppedAtOutput ? " (dropped by netfilter on the sender's output path)" : ''}${rawNote}; proxy records ${mine.length}; deliveries ${deliveries.length}${waitNote}`,
    };
  }

  /**
   * World.cniApiFault, netns world only (see NetnsLab.setCniApiFault); the container world's CNI
   * files are its installer's, so it leaves this undefined and the phase says it is skipped.
   */
  readonly cniApiFault?: (node: string, failing: boolean) => Promise<void>;

  /**
   * World.zdsClient: the rogue client script the kind world runs (e2e/kind/zds-rogue.ts: this
   * repository's own ZDS codec and native addon, so it speaks exactly the proxy's protocol), as
   * `uid` with no capabilities, in the node's network namespace, against the node agent's ZDS
   * socket (the node run dir, where both real worlds' agents listen). A script that cannot run
   * or prints no result is a harness error, not a rejection.
   */
  async zdsClient(node: string, uid: number): Promise<ZdsClientAttempt> {
    const n = this.lab.node(node);
    const socket = path.join(this.lab.nodeDir(node), 'zds.sock');
    let stdout: string;
    try {
      stdout = await execIn(n.netns, [
        ...setprivArgs({ uid, gid: uid, caps: [] }),
        process.execPath,
        '-e',
        zdsRogueScript(socket, repoRoot()),
      ]);
    } catch (e) {
      throw new Error(`the rogue ZDS client on ${node} (uid ${uid}) failed: ${(e as Error).message}`, { cause: e });
    }
    const attempt = parseZdsRogueOutput(stdout);
    // The script's own failure (a module it could not load) says nothing about the agent.
    if (attempt.detail.startsWith('rogue client failed'))
      throw new Error(`the rogue ZDS client on ${node} (uid ${uid}) did not run: ${attempt.detail}`);
    return attempt;
  }

  /** World.forgeableCredentials: a bound token lives at least 10 minutes, which a real world cannot wait out. */
  readonly forgeableCredentials: readonly IdentityCredential[] = IDENTITY_CREDENTIALS.filter(
    (c) => c !== 'expired-token',
  );

  /**
   * World.forgedHbone: the compromised node's program (forged-hbone-program.ts) as root in the
   * node's netns, with the token the credential names — the node proxy's projected token file;
   * one of its pod's tokens for the API server's audience; one bound to a proxy pod of the other
   * node made and deleted for the purpose (a pod since replaced) — or a root of its own. The
   * attempt is then observed as connect() observes one: the destination app's report of the tag,
   * and the proxies' records of the attacker's tuple (as the node's conntrack maps it).
   */
  async forgedHbone(
    node: string,
    identity: string,
    credential: IdentityCredential,
    to: Destination,
  ): Promise<ForgedHboneResult> {
    if (!this.forgeableCredentials.includes(credential))
      throw new Error(`forgedHbone: the ${this.kind} world cannot present a ${credential} (see forgeableCredentials)`);
    if (to.kind !== 'pod') throw new Error('forgedHbone: the destination must be a pod');
    const dstIp = this.podState(to.pod).ips.find((ip) => !ip.includes(':'));
    // As connect(): a destination without an address now is an outcome.
    if (!dstIp) {
      const error = `destination pod ${podKey(to.pod)} has no IPv4 address`;
      return forgedWithoutConnection(error, { kind: 'not-asked', detail: error });
    }
    const n = this.lab.node(node);
    const dir = fs.mkdtempSync(path.join(this.lab.state.runDir, 'forged-'));
    try {
      const tokenFile = await this.forgedTokenFile(node, credential, dir);
      const tag = `al-forged-${Date.now().toString(36)}-${randomInt(1e9).toString(36)}`;
      const offsets = this.logOffsets();
      const out = await execIn(
        n.netns,
        [
          process.execPath,
          path.join(repoRoot(), 'dist', 'e2e', 'netns', 'forged-hbone-program.js'),
          credential === 'self-signed' ? 'self-signed' : 'ca',
          this.lab.caAddress(),
          this.lab.proxyVolumeFiles(node).rootCert,
          tokenFile,
          identity,
          dstIp,
          String(to.port),
          tag,
        ],
        undefined,
        60_000,
      );
      const o = JSON.parse(out.trim().split('\n').at(-1) ?? '{}') as {
        certificate?: 'issued' | 'refused' | 'self-signed';
        detail?: string;
        hbone?: string;
        sourcePort?: number;
        reply?: string;
        error?: string;
      };
      if (o.error !== undefined || o.certificate === undefined)
        throw new Error(`forgedHbone on ${node} (${credential}) could not tell: ${o.error ?? out.trim()}`);
      const certificate = { kind: o.certificate, detail: o.detail ?? '' };
      if (o.certificate === 'refused')
        return forgedWithoutConnection(
          `the mesh CA refused ${identity} (${credential}): ${o.detail ?? ''}`,
          certificate,
        );
      const accepted = o.hbone === 'accepted';
      const clients = new Set<string>();
      if (o.sourcePort !== undefined) {
        clients.add(ep(n.address, o.sourcePort));
        for (const alias of await this.nodeSourceTuples(n.netns, o.sourcePort, dstIp, HBONE_PORT)) clients.add(alias);
      }
      const { dels, recs } = await this.awaitForged(tag, clients, accepted && /^ok /.test(o.reply ?? ''), offsets);
      const mine = recs.filter(
        (x) =>
          clients.has(tupleText(x.r.downstream.src)) ||
          dels.some((d) => x.r.upstream && tupleText(x.r.upstream.src) === d.peer),
      );
      const deliveries = attributeDeliveries(dels, mine);
      const first = mine.find((x) => clients.has(tupleText(x.r.downstream.src)));
      const [fns, fname] = first ? first.r.pod.split('/') : [];
      return {
        outcome: accepted ? 'established' : 'refused',
        ...(accepted ? {} : { error: `HBONE: ${o.hbone ?? 'no answer'}` }),
        acceptedBy: first ? proxyAcceptor(first.r) : undefined,
        ...(first ? { acceptedIn: fns && fname ? { namespace: fns, name: fname } : { node: first.node } } : {}),
        deliveries,
        proxyLog: mine.map(({ node: at, r }) => toProxyLogEntry(at, r)),
        trace: `forged HBONE from ${node} as ${identity} (${credential}) to ${ep(dstIp, HBONE_PORT)} -> ${ep(dstIp, to.port)}: certificate ${o.certificate}; ${o.hbone ?? ''}; reply ${JSON.stringify(o.reply ?? '')}; proxy records ${mine.length}; deliveries ${deliveries.length}`,
        certificate,
      };
    } finally {
      fs.rmSync(dir, { recursive: true, force: true });
    }
  }

  /** The token file a compromised `node` presents for `credential` (the self-signed attempt asks no CA: any file). */
  private async forgedTokenFile(node: string, credential: IdentityCredential, dir: string): Promise<string> {
    const own = this.lab.proxyVolumeFiles(node).token;
    if (credential === 'node-token' || credential === 'self-signed') return own;
    const other = this.nodes.find((x) => x !== node) ?? node;
    const file = path.join(dir, 'token');
    let token: string;
    if (credential === 'wrong-audience') {
      const name = proxyPodName(node);
      const pod = await this.lab.api.get('Pod', name, PROXY_POD.namespace);
      token = await this.lab.api.requestToken(
        PROXY_POD.namespace,
        PROXY_POD.serviceAccount,
        { name, uid: pod.metadata?.uid ?? '' },
        API_SERVER_AUDIENCE,
        3600,
      );
    } else {
      // replayed-token: bound to a proxy pod of the other node that is gone by the time it is used.
      const name = `${proxyPodName(other)}-replaced`;
      const made = await this.lab.api.create('Pod', {
        metadata: { name, namespace: PROXY_POD.namespace, labels: { [LAB_COMPONENT_LABEL]: 'ambient-lab' } },
        spec: {
          nodeName: other,
          serviceAccountName: PROXY_POD.serviceAccount,
          hostNetwork: true,
          containers: [{ name: 'proxy', image: 'ambient-lab/proxy:dev' }],
        },
      });
      try {
        token = await this.lab.api.requestToken(
          PROXY_POD.namespace,
          PROXY_POD.serviceAccount,
          { name, uid: made.metadata?.uid ?? '' },
          PROXY_POD.tokenAudience,
          PROXY_POD.tokenSeconds,
        );
      } finally {
        await this.lab.api.delete('Pod', name, PROXY_POD.namespace);
      }
    }
    fs.writeFileSync(file, token, { mode: 0o600 });
    return file;
  }

  /**
   * forgedHbone's wait: with a delivery expected (the app answered), until the app's report of
   * the tag and every proxy leg's final record are in, bounded as connect()'s; without one, a
   * short moment for the proxies' records of the refused handshake (there is no delivery to wait
   * for: the tunnel never opened).
   */
  private async awaitForged(
    tag: string,
    clients: ReadonlySet<string>,
    delivered: boolean,
    offsets: Map<string, number>,
  ): Promise<{
    dels: { pod: PodRef; port: number; peer: string }[];
    recs: { node: string; r: ConnectionLogRecord }[];
  }> {
    const start = Date.now();
    const events: ProbeEvent[] = [];
    for (;;) {
      await sleep(ATTEMPT_POLL_MS);
      const dels = this.deliveries(tag, events);
      const recs = this.newRecords(offsets);
      if (!delivered) {
        if (Date.now() - start >= FORGED_REFUSED_SETTLE_MS) return { dels, recs };
        continue;
      }
      const missing = [
        ...(dels.length === 0 ? ["the app's report of the tag has not arrived"] : []),
        ...openLegs(
          recs,
          clients,
          dels.map((d) => d.peer),
        ),
      ];
      if (missing.length === 0) return { dels, recs };
      if (Date.now() - start >= this.bounds.attemptMs)
        throw new Error(
          `observing forged HBONE ${tag} failed: still incomplete after ${this.bounds.attemptMs} ms: ${missing.join('; ')}; see the components' logs in the run directory`,
        );
    }
  }

  /**
   * World.holdConnection (TCP, IPv4): a probe in the source netns, as the source, connects from a
   * known port and writes `HOLD <tag>`; a pod app keeps such a connection open, answers
   * `held <pod>`, and reports each later line before it echoes it (world-pod-app.ts). First hop:
   * a proxy record whose downstream source is the client, else the app that reported the tag
   * with the client's own port as its peer, else 'other'. send() writes one line; it was delivered
   * when the destination app reported that line — read from the app's own report channel, not
   * inferred from the echo (an echo without a report is a harness error).
   */
  async holdConnection(from: Source, to: Destination): Promise<HeldConnection> {
    const src = this.endpointOf(from);
    if (typeof src === 'string') throw new Error(`holdConnection: ${src}`);
    const dstIp = to.kind === 'pod' ? this.podState(to.pod).ips.find((ip) => !ip.includes(':')) : to.ip;
    if (!dstIp) throw new Error(`holdConnection: the destination has no IPv4 address`);
    const srcIp = src.ips.find((ip) => !ip.includes(':'));
    if (!srcIp) throw new Error('holdConnection: the source has no IPv4 address');
    const tag = `al-held-${Date.now().toString(36)}-${randomInt(1e9).toString(36)}`;
    const offsets = this.logOffsets();
    const probe = await this.probes.get(src.netns, src.owner);
    const { value: out, sourcePort } = await fromFreeSourcePort(
      async (port) =>
        (await probe.request({
          op: 'hold',
          tag,
          address: dstIp,
          port: to.port,
          sourcePort: port,
          timeoutMs: HELD_ANSWER_MS,
        })) as HoldOutcome,
    );
    const client = ep(srcIp, sourcePort);
    // The app that reported `t` (as `ev`); for 'accept', only with the client's own port as the peer (no proxy between).
    const appSaw = (ev: 'accept' | 'data', t: string): PodRef | undefined => {
      for (const p of Object.values(this.lab.state.pods))
        if (
          this.lab
            .appRecords(p)
            .some((e) => e.ev === ev && e.tag === t && (ev === 'data' || portOf(e.peer ?? ':0') === sourcePort))
        )
          return { namespace: p.namespace, name: p.name };
      return undefined;
    };
    let acceptedBy: Acceptor | undefined;
    if (out.result === 'established') {
      // The app reports before it greets, a proxy records before it connects on: a greeting means both are written.
      const greeted = out.greeting !== undefined && /^held \S+\/\S+$/.test(out.greeting);
      const start = Date.now();
      for (;;) {
        const first = this.newRecords(offsets).find((x) => tupleText(x.r.downstream.src) === client);
        const app = appSaw('accept', tag);
        if (first) acceptedBy = proxyAcceptor(first.r);
        else if (app) acceptedBy = 'app';
        if (acceptedBy !== undefined || (!greeted && Date.now() - start >= HELD_ANSWER_MS)) break;
        if (Date.now() - start >= this.bounds.attemptMs)
          throw new Error(
            `observing held connection ${tag} (${client} -> ${ep(dstIp, to.port)}) failed: the peer answered ${JSON.stringify(out.greeting)} but after ${this.bounds.attemptMs} ms neither a proxy record nor the app's report of the tag has arrived; see the components' logs in the run directory`,
          );
        await sleep(ATTEMPT_POLL_MS);
      }
      acceptedBy ??= 'other';
    }
    let sends = 0;
    return {
      outcome: tcpConnectOutcome(out),
      acceptedBy,
      send: async () => {
        const line = `${tag}-${++sends}`;
        const r = (await probe.request({ op: 'held-send', tag, line, timeoutMs: HELD_ANSWER_MS })) as HeldSendOutcome;
        let app = appSaw('data', line);
        // The echo and the app's report travel on different channels: after an echo the report is
        // written (the app reports first) and on its way. Without an echo the line got no answer
        // before a reset, an end or the timeout: an app that took it would have answered.
        const start = Date.now();
        while (r.result === 'ack' && !app) {
          if (Date.now() - start >= this.bounds.attemptMs)
            throw new Error(
              `observing held connection ${tag}: the peer echoed ${line} but no app reported it within ${this.bounds.attemptMs} ms (${r.detail}); the app's report channel lost a record`,
            );
          await sleep(ATTEMPT_POLL_MS);
          app = appSaw('data', line);
        }
        const how = `${r.result}${r.code ? ` ${r.code}` : ''}: ${r.detail}`;
        return app
          ? { delivered: true, detail: `delivered to ${podKey(app)} (${how})` }
          : { delivered: false, detail: how };
      },
      close: async () => {
        await probe.request({ op: 'held-close', tag });
      },
    };
  }

  /**
   * After an attempt, wait until what it caused is on record — decided on observed state. For a
   * TCP connection: the client saw it close (the probe's 'closed' event); every proxy leg of it
   * (the records from the client's tuple, each forwarded leg's upstream tuple, and the leg that
   * reached a reporting app) has its final record (closed, closed-by-policy, denied, failed); the
   * app that answered `ok <namespace>/<name>` has reported the tag; and each probe holding an
   * appExec listener has passed its events on (a request round trip: its events precede the
   * reply). A proxy writes its records before it relays or closes, and an app reports before it
   * answers, so once the client has seen the close they are written or on their way. A datagram
   * has no close: its delivery report ends the wait, and without one the bound decides
   * not-delivered — as the sim's dropped packet. A TCP attempt past its bound throws, naming what was missing.
   */
  private async awaitAttempt(
    tag: string,
    clients: ReadonlySet<string>,
    tcp: boolean,
    mayDeliver: boolean,
    offsets: Map<string, number>,
    events: ProbeEvent[],
  ): Promise<{
    dels: { pod: PodRef; port: number; peer: string }[];
    recs: { node: string; r: ConnectionLogRecord }[];
    note: string;
  }> {
    const start = Date.now();
    let synced = false;
    for (;;) {
      const dels = this.deliveries(tag, events);
      const recs = this.newRecords(offsets);
      if (!mayDeliver) return { dels, recs, note: '' };
      const missing: string[] = [];
      if (tcp) {
        const closed = events.find((e): e is ClosedEvent => e.ev === 'closed' && e.tag === tag);
        if (!closed) missing.push('the client has not seen the connection close');
        const answered = closed && /^ok (\S+\/\S+)\n/.exec(closed.reply)?.[1];
        if (answered && !dels.some((d) => podKey(d.pod) === answered))
          missing.push(`${answered} answered but its report of the tag has not arrived`);
        missing.push(
          ...openLegs(
            recs,
            clients,
            dels.map((d) => d.peer),
          ),
        );
        if (closed && missing.length === 0 && !synced) {
          // Events of appExec listeners' probes that took part arrive on those probes' own pipes.
          for (const o of new Map(
            [...this.appListeners.values()].map((l) => [`${l.netns}|${l.owner.uid}`, l]),
          ).values()) {
            await (await this.probes.get(o.netns, o.owner)).request({ op: 'release', tag: '(flush events)' });
          }
          synced = true;
          continue;
        }
        if (missing.length === 0) return { dels, recs, note: '' };
        // Past the bound the world cannot say who took the connection: judging the partial
        // record (no proxy record read as "first hop was other") would be a verdict on a failed
        // observation, so it is the harness's error, naming what never arrived.
        if (Date.now() - start >= this.bounds.attemptMs)
          throw new Error(
            `observing attempt ${tag} failed: still incomplete after ${this.bounds.attemptMs} ms: ${missing.join('; ')} ` +
              `(proxy records read so far: ${recs.length}; deliveries: ${dels.length}). A proxy or probe stopped writing ` +
              `its log, or the machine is overloaded; see the components' logs in the run directory.`,
          );
      } else {
        if (dels.length > 0) return { dels, recs, note: '' };
        if (Date.now() - start >= DATAGRAM_BOUND_MS)
          return { dels, recs, note: `; no delivery report within ${DATAGRAM_BOUND_MS} ms: taken as not delivered` };
      }
      await sleep(ATTEMPT_POLL_MS);
    }
  }

  /** The device and next-hop MAC a frame to `dst` leaves `netns` by (route lookup, then whose interface holds the next hop). */
  private async nextHop(netns: string, dst: string): Promise<{ dev: string; mac: string } | string> {
    const v6 = dst.includes(':');
    let route: { dst?: string; gateway?: string; dev?: string } | undefined;
    try {
      route = (
        JSON.parse(await ipIn(netns, [...(v6 ? ['-6'] : []), '-j', 'route', 'get', dst])) as {
          dst?: string;
          gateway?: string;
          dev?: string;
        }[]
      )[0];
    } catch (e) {
      // The kernel's answer "no route" is the attempt's result; any other failure is the harness's.
      if (e instanceof CommandError && /unreachable|No route to host/i.test(e.stderr))
        return `no route to ${dst} in ${netns}: ${e.stderr.trim()}`;
      throw new Error(`finding the route to ${dst} in ${netns} failed: ${e instanceof Error ? e.message : String(e)}`, {
        cause: e,
      });
    }
    if (!route?.dev) return `no route to ${dst} in ${netns}`;
    const hop = route.gateway ?? dst;
    const candidates = [
      ...this.lab.state.nodes.map((n) => n.netns),
      this.lab.state.fabric,
      this.lab.state.outside,
      ...Object.values(this.lab.state.pods)
        .map((p) => p.netns)
        .filter((x): x is string => x !== undefined),
    ];
    for (const ns of new Set(candidates)) {
      // Every candidate is a namespace of this world that exists (state drops a pod's netns when
      // it is removed): a failure to read one is a harness error, not "the hop is elsewhere".
      const links = JSON.parse(
        await observe(['ip', '-n', ns, '-j', 'addr', 'show'], `netns ${ns} (finding the next hop towards ${dst})`),
      ) as { ifname: string; address?: string; addr_info?: { local?: string }[] }[];
      const l = links.find((x) => x.addr_info?.some((a) => a.local === hop));
      if (l?.address) return { dev: route.dev, mac: l.address };
    }
    return `no interface of this world holds the next hop ${hop} (towards ${dst})`;
  }

  /**
   * The tuples a TCP connection from source port `sport` to dst:dport left `netns` as: the
   * original source of its conntrack entry (the address the kernel chose) and, after source NAT
   * there, the reply tuple's destination. A node's connection to a pod is SNATed by the node's
   * rules (the host probe source), so the proxy that takes it logs the translated tuple. No entry
   * is a real state (conntrack ran and counted); a tool that fails is a harness error, not "no NAT".
   */
  private async nodeSourceTuples(netns: string, sport: number, dst: string, dport: number): Promise<string[]> {
    const entries = await this.conntrackTcp(
      netns,
      dst,
      ['--orig-port-src', String(sport), '--orig-dst', dst, '--orig-port-dst', String(dport)],
      `the source of the connection from port ${sport} to ${ep(dst, dport)}`,
    );
    return entries
      .filter((e) => e.orig.sport === sport && e.orig.dst === dst && e.orig.dport === dport)
      .flatMap((e) => [ep(e.orig.src, e.orig.sport), ep(e.reply.dst, e.reply.dport)]);
  }

  /** `conntrack -L -p tcp FILTER...` in `netns` (the family of `dst`), parsed; any failure throws, saying `what`. */
  private async conntrackTcp(
    netns: string,
    dst: string,
    filter: readonly string[],
    what: string,
  ): Promise<ReturnType<typeof parseConntrackList>> {
    const argv = ['conntrack', '-L', '-f', dst.includes(':') ? 'ipv6' : 'ipv4', '-p', 'tcp', ...filter];
    const out = await observeInOutput(netns, argv);
    return parseConntrackList(out.stdout, out.stderr, `${what} (\`${argv.join(' ')}\` in ${netns})`);
  }

  /** The netns that holds `dst` (a pod's or a node's), if the lab has it. */
  private netnsOf(dst: string): { pod?: LabPodState; node?: { name: string }; netns?: string } {
    const pod = Object.values(this.lab.state.pods).find((p) => !p.hostNetwork && p.ips.includes(dst));
    const node = this.lab.state.nodes.find((n) => n.address === dst || nodeAddress(n.index).ipv6 === dst);
    return {
      ...(pod ? { pod } : {}),
      ...(node ? { node } : {}),
      ...((pod?.netns ?? node?.netns) ? { netns: pod?.netns ?? node?.netns } : {}),
    };
  }

  /**
   * Packets counted so far by the TPROXY rules of the netns holding `dst`, by --on-port (from
   * `iptables-save -c -t mangle`, and with the nftables backend `nft list ruleset`). TPROXY rewrites nothing, so conntrack cannot tell which
   * listener it chose; a rule whose count grew across a raw SYN (attempts run one at a time)
   * says the SYN was handed to the transparent listener on its port.
   */
  private async tproxyHits(dst: string): Promise<ReadonlyMap<number, number>> {
    const { netns } = this.netnsOf(dst);
    const hits = new Map<number, number>();
    if (!netns) return hits;
    const argv = [dst.includes(':') ? 'ip6tables-save' : 'iptables-save', '-c', '-t', 'mangle'];
    const out = await observeInOutput(netns, argv);
    for (const line of out.stdout.split('\n')) {
      const m = /^\[(\d+):\d+\] -A \S+ .*-j TPROXY --on-port (\d+)/.exec(line);
      if (m) hits.set(Number(m[2]), (hits.get(Number(m[2])) ?? 0) + Number(m[1]));
    }
    if (this.lab.state.rulesBackend === 'nftables') {
      // The nftables backend's TPROXY rules carry a counter (ruleset-to-nft.ts) for exactly this.
      const nft = await observeInOutput(netns, ['nft', 'list', 'ruleset']);
      for (const line of nft.stdout.split('\n')) {
        const m = /counter packets (\d+) bytes \d+ tproxy (?:ip6? )?to \S*?:(\d+)\b/.exec(line);
        if (m) hits.set(Number(m[2]), (hits.get(Number(m[2])) ?? 0) + Number(m[1]));
      }
    }
    return hits;
  }

  /** Which socket answered a raw SYN src:sport -> dst:dport with a SYN-ACK (see connect). */
  private async rawListener(
    src: string,
    sport: number,
    dst: string,
    dport: number,
    tproxyBefore: ReadonlyMap<number, number> | undefined,
  ): Promise<{ port: number; acceptedBy: Acceptor; acceptedIn?: PodRef | { node: string }; delivery?: Delivery }> {
    const { pod, node, netns } = this.netnsOf(dst);
    let port = dport;
    if (netns) {
      // The destination's conntrack table: the entry of this SYN says which port a REDIRECT sent
      // it to. No entry is a real, checked state (conntrack ran, exited 0 and counted 0
      // entries): nothing tracked, so no NAT, and the port aimed at answered — unless a TPROXY
      // rule took the SYN (tproxyHits).
      const what = `which listener answered the raw SYN ${ep(src, sport)} -> ${ep(dst, dport)}`;
      const all = await this.conntrackTcp(netns, dst, ['--orig-src', src, '--orig-port-src', String(sport)], what);
      const entries = all.filter((e) => e.orig.dst === dst && e.orig.dport === dport);
      // Entries of this source that none match: a format this filter misreads, not "no NAT".
      if (all.length > 0 && entries.length === 0)
        throw new Error(
          `${what}: conntrack in ${netns} lists this source only towards other destinations: ${all.map((e) => `${e.orig.dst}:${e.orig.dport}`).join(', ')}`,
        );
      const ports = new Set(entries.map((e) => e.reply.sport));
      if (ports.size > 1)
        throw new Error(
          `${what}: conntrack in ${netns} has entries to different ports (${[...ports].join(', ')}); cannot tell which answered`,
        );
      if (ports.size === 1) port = [...ports][0]!;
      if (port === dport && tproxyBefore) {
        const after = await this.tproxyHits(dst);
        const grew = [...after].filter(([p, n]) => n > (tproxyBefore.get(p) ?? 0)).map(([p]) => p);
        if (grew.length > 1)
          throw new Error(
            `${what}: TPROXY rules to several ports (${grew.join(', ')}) counted packets in ${netns} meanwhile; cannot tell which answered`,
          );
        if (grew.length === 1) port = grew[0]!;
      }
    }
    if (!pod) return { port, acceptedBy: 'other', ...(node ? { acceptedIn: { node: node.name } } : {}) };
    const ref: PodRef = { namespace: pod.namespace, name: pod.name };
    const appHolds =
      pod.tcpPorts.includes(port) ||
      [...this.appListeners.values()].some((l) => podKey(l.pod) === podKey(ref) && l.port === port);
    if (appHolds)
      return {
        port,
        acceptedBy: 'app',
        acceptedIn: ref,
        delivery: { pod: ref, port, peer: ep(src, sport), viaProxy: false },
      };
    const proxy: Acceptor | undefined =
      port === 15001
        ? 'proxy-outbound'
        : port === 15006
          ? 'proxy-inbound'
          : port === 15008
            ? 'proxy-hbone'
            : port === 15053
              ? 'proxy-dns'
              : undefined;
    return { port, acceptedBy: proxy ?? 'other', acceptedIn: ref };
  }

  /**
   * The pod's app acts on its own netns (World.appExec): a probe in the pod netns as the app's
   * uid and capability set runs the real tools and calls, so the kernel's own permission checks
   * decide (iptables-restore needs NET_ADMIN; bind conflicts and SO_REUSEPORT uid groups are
   * the kernel's). A listener's accepts count as deliveries to the app; it lives until the pod is deleted.
   */
  async appExec(pod: PodRef, action: AppAction): Promise<AppExecResult> {
    const p = this.lab.state.pods[podKey(pod)];
    if (!p?.started || !p.netns || p.hostNetwork)
      return {
        ok: false,
        error: `appExec ${action.kind} in ${podKey(pod)}: the pod has no running app in its own netns`,
      };
    const owner: ProbeOwner = { uid: p.appUid, gid: p.appUid, caps: effectiveAppCaps(p) };
    const probe = await this.probes.get(p.netns, owner);
    const who = `uid ${p.appUid}, effective capabilities [${effectiveAppCaps(p).join(', ')}] in ${podKey(pod)}`;
    const dualStack = p.ips.some((ip) => ip.includes(':'));
    if (action.kind === 'iptables-flush') return flushTablesThrough(probe, dualStack, who);
    if (action.kind === 'iptables-insert')
      return restoreThrough(probe, dualStack, who, insertedRuleText(action.rule), true);
    if (action.kind === 'nft-flush') return nftThrough(probe, who, 'flush ruleset\n');
    if (action.kind === 'nft-insert') return nftThrough(probe, who, insertedTableText(action.table));
    const name = `app ${podKey(pod)} tcp ${action.port} #${this.appListeners.size}`;
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
        // As any server binds: a stopped proxy's connections that REDIRECT gave local port 15006
        // sit in TIME_WAIT for a minute, and a plain bind would fail on them (EADDRINUSE) where the
        // app's real squatter would not.
        reuseaddr: true,
      });
    } catch (e) {
      const code = e instanceof ProbeError ? e.code : 'failed';
      return { ok: false, error: `bind(${action.port}): ${code} — ${e instanceof Error ? e.message : String(e)}` };
    }
    this.appListeners.set(name, {
      pod: { namespace: pod.namespace, name: pod.name },
      port: action.port,
      netns: p.netns,
      owner,
    });
    return { ok: true };
  }

  /** Pids of the probe processes this world runs (for leftover checks). */
  probePids(): Promise<number[]> {
    return this.probes.pids();
  }

  /** Stop the probes of a pod's netns and forget its appExec listeners (before the netns goes). */
  private async forgetPodNetns(netns: string | undefined): Promise<void> {
    if (!netns) return;
    await this.probes.stopIn(netns);
    for (const [k, l] of [...this.appListeners]) if (l.netns === netns) this.appListeners.delete(k);
  }

  /**
   * How long an observation waits before a missing record (attemptMs: connect, held connections)
   * or a running component's silent /status (statusAnswerMs) is a harness error. The defaults
   * leave room for a loaded machine; the tests of those very errors shorten them.
   */
  bounds: { attemptMs: number; statusAnswerMs: number } = {
    attemptMs: ATTEMPT_BOUND_MS,
    statusAnswerMs: STATUS_ANSWER_MS,
  };

  /** How the last settle() ended: converged, or what was still pending at the bound. */
  lastSettle: SettleResult | undefined;

  /** Wait on observed state (world-settle.ts): converged, or the bound reached and reported. */
  async settle(): Promise<void> {
    this.lastSettle = await settleNetnsWorld(this.lab, {
      ipv6: this.lab.state.ipv6 === true,
      boundMs: SETTLE_BOUND_MS,
      pollMs: SETTLE_POLL_MS,
    });
    if (!this.lastSettle.converged) {
      // Not an error: the properties judge the state the world is in. Said once, for whoever reads the run's output.
      process.stderr.write(
        `[netns world] settle: not converged after ${this.lastSettle.waitedMs} ms (${this.lastSettle.rounds} rounds); still pending: ${this.lastSettle.pending.join('; ')}\n`,
      );
    }
  }

  /**
   * A component's /status, checked: undefined only when its process is not running (a real
   * state). A running process that does not answer is asked again until it answers or exits (a
   * stop or restart racing this read); silent past bounds.statusAnswerMs, it is a harness error.
   */
  private async liveStatus(component: 'agent' | 'proxy', node: string): Promise<Record<string, unknown> | undefined> {
    const deadline = Date.now() + this.bounds.statusAnswerMs;
    for (;;) {
      const s = await this.lab.componentStatus(component, node);
      if (!s.running) return undefined;
      if (s.status) return s.status;
      if (Date.now() > deadline) {
        throw new Error(
          `the ${component} on ${node} is running but its /status did not answer within ${this.bounds.statusAnswerMs} ms (${s.detail}); see ${path.join(this.lab.nodeDir(node), `${component}.log`)}`,
        );
      }
      await sleep(100);
    }
  }

  async pods(): Promise<readonly PodObservation[]> {
    const out: PodObservation[] = [];
    const served = new Map<string, Set<string>>();
    for (const n of this.nodes) {
      const status = await this.liveStatus('proxy', n);
      const set = new Set<string>();
      if (status) {
        const pid = status['pid'];
        const pods = status['pods'];
        if (typeof pid !== 'number' || !Array.isArray(pods))
          throw new Error(
            `the proxy on ${n} answered /status without a pid and a pods list: ${JSON.stringify(status).slice(0, 300)}`,
          );
        // The proxy names each netns by its own fd: compare namespace inodes. Its pid is in its
        // own pid namespace (a container's): the backend says which process that is here.
        const hostPid = this.lab.backend ? this.lab.backend.hostPid(this.lab, 'proxy', n, pid) : pid;
        for (const p of pods as { uid: string; netns: string }[]) {
          const fdPath = p.netns.replace('/proc/self/', `/proc/${hostPid}/`);
          try {
            set.add(`${p.uid}|${fs.statSync(fdPath).ino}`);
          } catch (e) {
            // ENOENT: the proxy closed that fd (or exited) since it answered — it no longer holds
            // that netns, which is the state "not served". Anything else is a failed read.
            if ((e as NodeJS.ErrnoException).code !== 'ENOENT')
              throw new Error(
                `reading the netns the proxy on ${n} serves pod uid ${p.uid} with (${fdPath}) failed: ${e instanceof Error ? e.message : String(e)}`,
                { cause: e },
              );
          }
        }
      }
      served.set(n, set);
    }
    for (const pod of await this.lab.api.list('Pod')) {
      const ns = pod.metadata?.namespace ?? '';
      const name = pod.metadata?.name ?? '';
      const st = this.lab.state.pods[`${ns}/${name}`];
      // the deployment's own pods (the proxies') are not the scenario's: the sim world has none
      if (!st && pod.metadata?.labels?.[LAB_COMPONENT_LABEL] === 'ambient-lab') continue;
      let redirected = false;
      let inode = '';
      for (;;) {
        const netns = st?.netns;
        if (!st || !netns || !st.started || st.hostNetwork) break;
        try {
          const save = await observeIn(netns, ['iptables-save']);
          redirected = /--to-ports 15001\b|--on-port 15001\b/.test(save);
          // The nftables backend writes no iptables: its redirect is in the nftables ruleset.
          if (!redirected && this.lab.state.rulesBackend === 'nftables')
            redirected = /redirect to :15001\b/.test(await observeIn(netns, ['nft', '-s', 'list', 'ruleset']));
          inode = String(fs.statSync(`/run/netns/${netns}`).ino);
          break;
        } catch (e) {
          // A sandbox torn down or replaced while it was read (a deletion or reboot racing this
          // observation): read the pod's current sandbox, if any. Otherwise the read failed.
          if (st.netns === netns && st.started) throw e;
          redirected = false;
          inode = '';
        }
      }
      out.push({
        namespace: ns,
        name,
        uid: pod.metadata?.uid ?? '',
        node: pod.spec?.nodeName ?? '',
        labels: pod.metadata?.labels ?? {},
        phase: pod.status?.phase ?? 'Pending',
        started: st?.started ?? false,
        hostNetwork: pod.spec?.hostNetwork === true,
        ips: (pod.status?.podIPs ?? []).map((x) => x.ip ?? '').filter((x) => x !== ''),
        annotation: pod.metadata?.annotations?.[REDIRECTION_STATUS],
        redirected,
        served: inode !== '' && (served.get(pod.spec?.nodeName ?? '')?.has(`${pod.metadata?.uid}|${inode}`) ?? false),
      });
    }
    return out;
  }

  async close(): Promise<void> {
    await this.probes.stopAll();
    await this.lab.destroy();
  }
}

/** Where the netns world's labs keep their run directories. */
const NETNS_WORLDS_ROOT = '/run/ambient-lab/worlds';

/**
 * The options a real-kernel world (this one, or the container world built on it) is made with
 * when a test or bench names only what it varies: two nodes, the strict profile, IPv4 only, no
 * DNS capture, seed 1. kernelVersion is there for the type only (these worlds run this machine's).
 */
export const REAL_WORLD_OPTIONS: WorldOptions = {
  nodes: 2,
  profile: 'strict',
  kernelVersion: '6.1',
  ipv6: false,
  dnsCapture: false,
  seed: 1,
};

export const netnsWorldFactory: WorldFactory = {
  kind: 'netns',
  available() {
    if (process.platform !== 'linux') return { ok: false, reason: 'the netns world needs Linux' };
    if (process.getuid?.() !== 0)
      return { ok: false, reason: 'the netns world needs root (network namespaces, iptables)' };
    const missing = missingTools();
    if (missing.length > 0)
      return { ok: false, reason: `the netns world needs tools this machine lacks — ${missingToolsReason(missing)}` };
    // the components' launch is rendered from deploy/ (kubectl kustomize)
    const kubectl = kubectlAvailability();
    if (!kubectl.ok) return { ok: false, reason: `the netns world: ${kubectl.reason}` };
    return { ok: true, reason: '' };
  },
  async create(options: WorldOptions): Promise<World> {
    if (options.meshV6 !== undefined && options.meshV6 !== options.ipv6)
      throw new Error(
        `netns world: meshV6 ${options.meshV6} with ipv6 ${options.ipv6} is unsupported (the agent and proxy follow the cluster's stack); run that case on the sim world`,
      );
    const lab = await NetnsLab.create({
      nodes: options.nodes,
      profile: options.profile,
      ipv6: options.ipv6,
      dnsCapture: options.dnsCapture,
      ...(options.rulesBackend === 'nftables' ? { rulesBackend: options.rulesBackend } : {}),
      stateRoot: NETNS_WORLDS_ROOT,
    });
    return new NetnsWorld(lab, options);
  },
  reapInterrupted: () => reapProcessRuns(NETNS_WORLDS_ROOT),
};

/** The netns world's factory, as check loads it by module (e2e/world-modules.ts). */
export function createNetnsWorldFactory(): WorldFactory {
  return netnsWorldFactory;
}
