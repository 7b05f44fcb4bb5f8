/**
 * The netns World (scenarios/world.ts) over a NetnsLab (world-lab.ts): real kernel, real
 * processes. Connections are made by probe processes (probe.ts) in the source netns as the
 * source's uid/caps from a known source port; attribution reads the node proxies' JSON-lines
 * connection logs (first hop: an 'outbound' record whose downstream source is the client, or an
 * inbound record for it) and the pod apps' accept reports (deliveries, tagged per attempt;
 * viaProxy when a proxy's upstream tuple is the peer the app saw).
 * Not yet: IPv6 pods, UDP/raw attribution beyond delivery, options.kernelVersion (real kernel).
 */
import * as fs from 'node:fs';
import * as path from 'node:path';
import { randomInt } from 'node:crypto';
import { REDIRECTION_STATUS } from '../../impl/api/annotations.js';
import type { ConnectionLogRecord } from '../../impl/ztunnel/connection-log.js';
import { parseConnectionLog } from '../../impl/ztunnel/connection-log.js';
import type {
  Acceptor, Component, ConnectOptions, ConnectResult, Delivery, Destination, PodObservation, PodRef, PodSpec, PolicyObject, ProxyLogEntry,
  Source, World, WorldFactory, WorldOptions,
} from '../../scenarios/world.js';
import { execIn } from './ip.js';
import { ProbePool, type ProbeOwner } from './probe.js';
import type { ConnectOutcome } from './probe-protocol.js';
import { NetnsLab, type LabPodState } from './world-lab.js';

const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

function ep(ip: string, port: number): string {
  return ip.includes(':') ? `[${ip}]:${port}` : `${ip}:${port}`;
}

function tupleText(e: { ip: string; port: number }): string {
  return ep(e.ip, e.port);
}

export class NetnsWorld implements World {
  readonly kind = 'netns' as const;
  readonly nodes: readonly string[];
  private readonly probes = new ProbePool();
  private rr = 0;

  constructor(readonly lab: NetnsLab, readonly options: WorldOptions) {
    this.nodes = lab.state.nodes.map((n) => n.name);
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
      namespace: spec.namespace, name: spec.name, node, labels: { ...(spec.labels ?? {}) }, annotations: { ...(spec.annotations ?? {}) },
      ...(spec.serviceAccount ? { serviceAccount: spec.serviceAccount } : {}), hostNetwork: spec.hostNetwork ?? false,
      uid: spec.app.uid, caps: spec.app.caps, tcpPorts: spec.app.tcpPorts, udpPorts: spec.app.udpPorts ?? [], probePorts: spec.app.probePorts ?? [],
    });
    const obs = (await this.pods()).find((p) => p.namespace === spec.namespace && p.name === spec.name);
    if (!obs) throw new Error(`pod ${spec.namespace}/${spec.name} vanished right after creation`);
    return obs;
  }

  async labelPod(pod: PodRef, labels: Readonly<Record<string, string | null>>): Promise<void> {
    await this.lab.api.patch('Pod', pod.name, pod.namespace, { metadata: { labels } });
  }

  async deletePod(pod: PodRef): Promise<void> {
    await this.lab.deletePod(pod.namespace, pod.name);
  }

  async applyPolicy(policy: PolicyObject): Promise<void> {
    const meta = policy['metadata'] as { name: string; namespace: string };
    const obj = policy as never;
    try {
      const cur = await this.lab.api.get('AuthorizationPolicy', meta.name, meta.namespace);
      await this.lab.api.replace('AuthorizationPolicy', { ...(obj as object), metadata: { ...meta, resourceVersion: cur.metadata?.resourceVersion } } as never);
    } catch {
      await this.lab.api.create('AuthorizationPolicy', obj);
    }
  }

  async deletePolicy(namespace: string, name: string): Promise<void> {
    await this.lab.api.delete('AuthorizationPolicy', name, namespace);
  }

  stop(component: Component, node: string): Promise<void> {
    return this.lab.stopComponent(component, node);
  }

  start(component: Component, node: string): Promise<void> {
    return this.lab.startComponent(component, node);
  }

  async restart(component: Component, node: string): Promise<void> {
    await this.lab.stopComponent(component, node);
    await this.lab.startComponent(component, node);
  }

  rebootNode(node: string): Promise<void> {
    return this.lab.rebootNode(node);
  }

  async dropWatches(): Promise<void> {
    await this.lab.api.dropWatches();
  }

  private podState(ref: PodRef): LabPodState {
    const p = this.lab.state.pods[`${ref.namespace}/${ref.name}`];
    if (!p) throw new Error(`no pod ${ref.namespace}/${ref.name} in this world`);
    return p;
  }

  private logOffsets(): Map<string, number> {
    const m = new Map<string, number>();
    for (const n of this.nodes) {
      const f = path.join(this.lab.nodeDir(n), 'connections.jsonl');
      m.set(n, fs.existsSync(f) ? fs.statSync(f).size : 0);
    }
    return m;
  }

  private newRecords(offsets: Map<string, number>): { node: string; r: ConnectionLogRecord }[] {
    const out: { node: string; r: ConnectionLogRecord }[] = [];
    for (const n of this.nodes) {
      const f = path.join(this.lab.nodeDir(n), 'connections.jsonl');
      if (!fs.existsSync(f)) continue;
      const text = fs.readFileSync(f).subarray(offsets.get(n) ?? 0).toString('utf8');
      for (const r of parseConnectionLog(text).records) out.push({ node: n, r });
    }
    return out;
  }

  private deliveries(tag: string): { pod: LabPodState; port: number; peer: string; local: string }[] {
    const out: { pod: LabPodState; port: number; peer: string; local: string }[] = [];
    for (const p of Object.values(this.lab.state.pods)) {
      let text: string;
      try {
        text = fs.readFileSync(this.lab.reportFile(p), 'utf8');
      } catch {
        continue;
      }
      for (const line of text.split('\n')) {
        if (!line.includes(tag)) continue;
        const e = JSON.parse(line) as { port: number; peer: string; local: string; tag?: string };
        if (e.tag === tag) out.push({ pod: p, port: e.port, peer: e.peer, local: e.local });
      }
    }
    return out;
  }

  async connect(from: Source, to: Destination, opts: ConnectOptions = {}): Promise<ConnectResult> {
    let netns: string;
    let owner: ProbeOwner;
    let srcIp: string;
    if (from.kind === 'pod') {
      const p = this.podState(from.pod);
      if (!p.started || !p.netns) return { outcome: 'error', error: `source pod ${from.pod.namespace}/${from.pod.name} is not running`, acceptedBy: undefined, deliveries: [], proxyLog: [] };
      netns = p.netns;
      owner = { uid: p.appUid, gid: p.appUid, caps: p.appCaps };
      srcIp = p.ips[0]!;
    } else if (from.kind === 'host') {
      const n = this.lab.node(from.node);
      netns = n.netns;
      owner = { uid: from.uid, gid: from.uid, caps: from.caps };
      srcIp = n.address;
    } else {
      netns = this.lab.state.outside;
      owner = { uid: 0, gid: 0, caps: [] };
      srcIp = '203.0.113.10';
    }
    let dstIp: string;
    if (to.kind === 'pod') {
      const d = this.podState(to.pod);
      dstIp = d.ips.find((ip) => (opts.family === 6 ? ip.includes(':') : !ip.includes(':'))) ?? '';
      if (!dstIp) return { outcome: 'error', error: `destination pod has no IPv${opts.family ?? 4} address`, acceptedBy: undefined, deliveries: [], proxyLog: [] };
    } else dstIp = to.ip;
    if (opts.raw) return { outcome: 'error', error: 'raw (AF_PACKET) attempts are not implemented in the netns world yet', acceptedBy: undefined, deliveries: [], proxyLog: [] };
    const proto = opts.proto ?? 'tcp';
    const sourcePort = randomInt(20_000, 60_000);
    const tag = `al-${Date.now().toString(36)}-${randomInt(1e9).toString(36)}`;
    const offsets = this.logOffsets();
    const probe = await this.probes.get(netns, owner);
    const out = (await probe.request({
      op: 'connect', tag, proto, address: dstIp, port: to.port, mark: opts.mark, transparent: opts.sourceIp !== undefined,
      source: opts.sourceIp, sourcePort, timeoutMs: 3000,
    })) as ConnectOutcome;
    const client = ep(opts.sourceIp ?? srcIp, sourcePort);
    // Give the proxies and apps a bounded moment to log what this attempt caused.
    let dels = this.deliveries(tag);
    let recs = this.newRecords(offsets);
    for (let t = 0; t < 1000 && (out.result === 'established' || out.result === 'sent'); t += 50) {
      await sleep(50);
      dels = this.deliveries(tag);
      recs = this.newRecords(offsets);
      if (dels.length > 0) {
        await sleep(100); // the proxy's record of the same connection may trail the app's
        recs = this.newRecords(offsets);
        break;
      }
    }
    const mine = recs.filter((x) => tupleText(x.r.downstream.src) === client
      || dels.some((d) => x.r.upstream && tupleText(x.r.upstream.src) === d.peer));
    const proxyLog: ProxyLogEntry[] = mine.map(({ node, r }) => {
      const [ns, name] = r.pod.includes('/') ? r.pod.split('/') : [undefined, undefined];
      return {
        node, pod: ns && name ? { namespace: ns, name } : undefined,
        event: r.event === 'failed' ? 'error' : r.event === 'closed-by-policy' ? 'denied' : r.event,
        direction: r.direction, srcIdentity: r.srcIdentity, dstIdentity: r.dstIdentity, allowed: r.decision?.allow, reason: r.decision?.reason ?? r.reason ?? '',
      };
    });
    const first = mine.find((x) => tupleText(x.r.downstream.src) === client);
    let acceptedBy: Acceptor | undefined;
    let acceptedIn: ConnectResult['acceptedIn'];
    if (first) {
      acceptedBy = first.r.direction === 'outbound' ? 'proxy-outbound' : first.r.direction === 'inbound-hbone' ? 'proxy-hbone' : 'proxy-inbound';
      const [ns, name] = first.r.pod.split('/');
      acceptedIn = ns && name ? { namespace: ns, name } : { node: first.node };
    } else if (dels.some((d) => d.peer === client)) {
      acceptedBy = 'app';
      const d = dels.find((x) => x.peer === client)!;
      acceptedIn = { namespace: d.pod.namespace, name: d.pod.name };
    } else if (out.result === 'established') acceptedBy = 'other';
    const deliveries: Delivery[] = dels.map((d) => ({
      pod: { namespace: d.pod.namespace, name: d.pod.name }, port: d.port, peer: d.peer,
      viaProxy: mine.some((x) => x.r.upstream !== undefined && tupleText(x.r.upstream.src) === d.peer),
    }));
    const outcome: ConnectResult['outcome'] = out.result === 'established' ? 'established' : out.result === 'sent' ? (deliveries.length > 0 ? 'delivered' : 'not-delivered')
      : out.result === 'timeout' ? 'timeout' : out.code === 'ECONNREFUSED' ? 'refused' : out.code === 'ENETUNREACH' || out.code === 'EHOSTUNREACH' ? 'unreachable' : 'error';
    return {
      outcome, ...(outcome === 'error' ? { error: `${out.call ?? 'connect'}: ${out.code ?? out.message}` } : {}),
      acceptedBy, ...(acceptedIn ? { acceptedIn } : {}), deliveries, proxyLog,
      trace: `probe ${netns} ${client} -> ${ep(dstIp, to.port)}: ${out.result}${out.code ? ` ${out.code}` : ''}; proxy records ${mine.length}; deliveries ${deliveries.length}`,
    };
  }

  async settle(): Promise<void> {
    let last = '';
    let stable = 0;
    const deadline = Date.now() + 15_000;
    while (Date.now() < deadline) {
      const now = JSON.stringify(await this.pods());
      stable = now === last ? stable + 1 : 0;
      if (stable >= 2) return;
      last = now;
      await sleep(200);
    }
  }

  async pods(): Promise<readonly PodObservation[]> {
    const out: PodObservation[] = [];
    const served = new Map<string, Set<string>>();
    for (const n of this.nodes) {
      const s = await this.lab.componentStatus('proxy', n);
      const set = new Set<string>();
      const pid = (s.status?.['pid'] as number | undefined);
      // The proxy names each netns by its own fd: compare namespace inodes.
      for (const p of (s.status?.['pods'] as { uid: string; netns: string }[] | undefined) ?? []) {
            try {
          if (pid) set.add(`${p.uid}|${fs.statSync(p.netns.replace('/proc/self/', `/proc/${pid}/`)).ino}`);
        } catch {
          // the proxy closed it meanwhile
        }
      }
      served.set(n, set);
    }
    for (const pod of await this.lab.api.list('Pod')) {
      const ns = pod.metadata?.namespace ?? '';
      const name = pod.metadata?.name ?? '';
      const st = this.lab.state.pods[`${ns}/${name}`];
      let redirected = false;
      let inode = '';
      if (st?.netns && st.started && !st.hostNetwork) {
        const save = await execIn(st.netns, ['iptables-save']).catch(() => '');
        redirected = /--to-ports 15001\b|--on-port 15001\b/.test(save);
        try {
          inode = String(fs.statSync(`/run/netns/${st.netns}`).ino);
        } catch {
          inode = '';
        }
      }
      out.push({
        namespace: ns, name, uid: pod.metadata?.uid ?? '', node: pod.spec?.nodeName ?? '', labels: pod.metadata?.labels ?? {},
        phase: pod.status?.phase ?? 'Pending', started: st?.started ?? false, hostNetwork: pod.spec?.hostNetwork === true,
        ips: (pod.status?.podIPs ?? []).map((x) => x.ip ?? '').filter((x) => x !== ''),
        annotation: pod.metadata?.annotations?.[REDIRECTION_STATUS], redirected,
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

export const netnsWorldFactory: WorldFactory = {
  kind: 'netns',
  available() {
    if (process.platform !== 'linux') return { ok: false, reason: 'the netns world needs Linux' };
    if (process.getuid?.() !== 0) return { ok: false, reason: 'the netns world needs root (network namespaces, iptables)' };
    if (!fs.existsSync('/usr/lib/cni/bridge')) return { ok: false, reason: 'needs containernetworking-plugins in /usr/lib/cni' };
    return { ok: true, reason: '' };
  },
  async create(options: WorldOptions): Promise<World> {
    const lab = await NetnsLab.create({ nodes: options.nodes, profile: options.profile, stateRoot: '/run/ambient-lab/worlds' });
    return new NetnsWorld(lab, options);
  },
};
