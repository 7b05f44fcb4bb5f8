/**
 * The node proxy on the real kernel: a 2-node NetnsCluster, the upstream in-pod plan applied
 * by the Linux NetnsRules adapter in each enrolled pod, one NodeProxy per node running in this
 * process (unless told otherwise) over the real Sockets adapter (listeners inside the pod namespaces) with real TLS
 * HBONE and a run-time CA; apps are in-process listeners inside the pod namespaces.
 *
 *   node-0: a 10.244.0.2 (enrolled, sa-a), b 10.244.0.3 (enrolled, sa-b), p 10.244.0.4 (not in the mesh)
 *   node-1: c 10.244.1.2 (enrolled, sa-c)
 */
import { netnsId, podUid } from '../../impl/api/ids.js';
import type { Sockets } from '../../impl/host/sockets.js';
import { SystemClock } from '../../impl/linux/clock.js';
import { hboneTransport, parseHboneKind, resolveHbone } from '../../impl/linux/hbone-choice.js';
import { MeshCa } from '../../impl/linux/mesh-ca.js';
import { LinuxNetnsRules } from '../../impl/linux/netns-rules.js';
import { LinuxSockets } from '../../impl/linux/sockets.js';
import { NodeProxy } from '../../impl/ztunnel/node-proxy.js';
import { MemoryConnectionLog } from '../../impl/ztunnel/proxy-deps.js';
import { withCluster, type NetnsCluster, type PodInfo } from './cluster.js';
import { MemoryLogger } from '../../sim/log/memory-logger.js';
import { FakeAuthorizer, FakeWorkloads, INPOD_PLAN, TRUST_DOMAIN } from '../../sim/proxy-mesh/proxy-mesh.js';

interface NetnsMesh {
  readonly c: NetnsCluster;
  readonly pods: Record<'a' | 'b' | 'p' | 'c', PodInfo>;
  readonly authz: FakeAuthorizer;
  readonly workloads: FakeWorkloads;
  readonly ca: MeshCa;
  readonly proxies: NodeProxy[];
  readonly logs: MemoryConnectionLog[];
  readonly log: MemoryLogger;
  /** Sockets of this process, addressed to a pod's namespace. */
  readonly sockets: Sockets;
  netnsOf(pod: 'a' | 'b' | 'p' | 'c'): ReturnType<typeof netnsId>;
}

const SPEC = [
  { name: 'a', node: 'node-0', enrolled: true, sa: 'sa-a' },
  { name: 'b', node: 'node-0', enrolled: true, sa: 'sa-b' },
  { name: 'p', node: 'node-0', enrolled: false, sa: 'sa-p' },
  { name: 'c', node: 'node-1', enrolled: true, sa: 'sa-c' },
] as const;

interface NetnsMeshOptions {
  /**
   * Nodes whose proxy runs in this process (default both). A node left out gets its pods'
   * rules but no proxy: the caller runs one elsewhere (the bench, in a process of its own).
   */
  readonly inProcessProxies?: readonly ('node-0' | 'node-1')[];
}

export async function withNetnsMesh<T>(fn: (m: NetnsMesh) => Promise<T>, opts: NetnsMeshOptions = {}): Promise<T> {
  return withCluster({ nodes: 2 }, async (c) => {
    const pods = {} as Record<'a' | 'b' | 'p' | 'c', PodInfo>;
    for (const s of SPEC) pods[s.name] = await c.addPod(s.node, s.name, { ipv6: false });
    const rules = new LinuxNetnsRules();
    for (const s of SPEC) if (s.enrolled) await rules.apply(netnsId(pods[s.name].netnsPath), INPOD_PLAN);
    const authz = new FakeAuthorizer();
    const workloads = new FakeWorkloads();
    for (const s of SPEC) {
      workloads.all.set(`uid-${s.name}`, {
        uid: `uid-${s.name}`,
        name: s.name,
        namespace: 'default',
        serviceAccount: s.sa,
        labels: { app: s.name },
        ips: [pods[s.name].ipv4!],
        enrolled: s.enrolled,
        identity: { trustDomain: TRUST_DOMAIN, namespace: 'default', serviceAccount: s.sa },
      });
    }
    const ca = await MeshCa.create(TRUST_DOMAIN);
    const sockets = new LinuxSockets();
    const log = new MemoryLogger();
    const clock = new SystemClock();
    const proxies: NodeProxy[] = [];
    const logs: MemoryConnectionLog[] = [];
    for (const node of opts.inProcessProxies ?? ['node-0', 'node-1']) {
      const connectionLog = new MemoryConnectionLog();
      const proxy = new NodeProxy({
        // As the deployed proxy (--hbone auto): the native tunnel when built; HBONE=tls|native picks one.
        sockets,
        hbone: hboneTransport(resolveHbone(parseHboneKind(process.env['HBONE'], 'netns mesh fixture')).use, ca),
        authorizer: authz,
        workloads,
        clock,
        log: log.child({ node }),
        trustDomain: TRUST_DOMAIN,
        connectionLog,
      });
      for (const s of SPEC) {
        if (s.node !== node || !s.enrolled) continue;
        await proxy.onAdd(
          podUid(`uid-${s.name}`),
          { name: s.name, namespace: 'default', serviceAccount: s.sa },
          {
            netns: netnsId(pods[s.name].netnsPath),
            identity: pods[s.name].netns,
            close: () => undefined,
          },
        );
      }
      proxies.push(proxy);
      logs.push(connectionLog);
    }
    try {
      return await fn({
        c,
        pods,
        authz,
        workloads,
        ca,
        proxies,
        logs,
        log,
        sockets,
        netnsOf: (p) => netnsId(pods[p].netnsPath),
      });
    } finally {
      for (const p of proxies) await p.shutdown('immediate');
    }
  });
}
