/**
 * A private cluster topology built from network namespaces, per run (docs/design.md, 'Real-kernel
 * safety'): nothing is created in the root network namespace, so no packet can leave the machine
 * whatever rules a test installs.
 *
 *   outside ──veth── ┐
 *   node-0  ──veth── ├─ br0 in the fabric netns (also the router between 192.0.2.0/24 and
 *   node-1  ──veth── ┘  203.0.113.0/24, with routes to every pod CIDR via its node)
 *   pod-a ──veth── node-0 (host route per pod, default route via the node)
 *
 * Addresses: see addressing.ts. Layering, so a CNI-driven path can reuse the node part later:
 * `create()` builds fabric, outside and nodes; `addPod()` = `createPodNetns()` (an empty netns,
 * registered with the node, which is all a real CNI chain needs: `CNI_NETNS=<netnsPath>`, run
 * with `ip netns exec <node netns>`) + `wirePod()` (this builder's own ptp-style wiring).
 * A CNI path would call createPodNetns(), run the chain in the node netns, then record the
 * addresses it reports with registerPodAddresses().
 */
import {
  FABRIC_GATEWAY,
  FABRIC_PREFIX_LEN,
  FIRST_POD_SLOT,
  LAST_POD_SLOT,
  MAX_NODES,
  OUTSIDE_ADDRESS,
  OUTSIDE_GATEWAY,
  nodeAddress,
  podAddress,
  podCidr,
  podGateway,
  type DualStack,
} from './addressing.js';
import { execIn, ipIn } from './ip.js';
import { NetnsRun } from './netns-run.js';
import { NetnsProcesses, type NetnsProcess, type SpawnOptions } from './processes.js';
import { rethrowAfterCleanup } from '../cleanup.js';

interface ClusterOptions {
  /** Number of nodes, 1..MAX_NODES; named node-0, node-1, ... */
  readonly nodes: number;
  /** Run prefix (`al-...-`); default a fresh one. Every namespace name starts with it. */
  readonly prefix?: string;
  /**
   * Node i's network namespace is that of process nodePids[i] (a node container's init) instead
   * of a new one: the cluster names it and wires it like its own. One pid per node.
   */
  readonly nodePids?: readonly number[];
}

interface NamespaceInfo {
  /** Name under /run/netns (use with `ip -n`, `ip netns exec`). */
  readonly netns: string;
  /** Path form, as a NetnsId (`/run/netns/<netns>`). */
  readonly netnsPath: string;
}

interface NodeInfo extends NamespaceInfo {
  readonly name: string;
  readonly index: number;
  /** Address on the fabric (eth0). */
  readonly address: DualStack;
  readonly podCidr: DualStack;
  /** Node-side address every pod on this node routes through. */
  readonly podGateway: DualStack;
}

interface OutsideInfo extends NamespaceInfo {
  readonly address: DualStack;
}

export interface PodInfo extends NamespaceInfo {
  readonly name: string;
  readonly node: string;
  readonly ipv4: string | undefined;
  readonly ipv6: string | undefined;
  /** Node-side veth name (in the node netns), when this builder wired the pod. */
  readonly hostVeth: string | undefined;
}

interface AddPodOptions {
  /** Also give the pod an IPv6 address and default route (default true: the cluster is dual-stack). */
  readonly ipv6?: boolean;
}

const POD_NAME = /^[a-z0-9]([a-z0-9-]{0,14}[a-z0-9])?$/;

function pathOf(netns: string): string {
  return `/run/netns/${netns}`;
}

interface MutablePod {
  name: string;
  node: string;
  netns: string;
  netnsPath: string;
  ipv4: string | undefined;
  ipv6: string | undefined;
  hostVeth: string | undefined;
}

export class NetnsCluster {
  readonly processes = new NetnsProcesses();
  private readonly podsByName = new Map<string, MutablePod>();
  private readonly nextSlot = new Map<string, number>();
  private vethSeq = 0;
  private disposed = false;

  private constructor(
    private readonly lab: NetnsRun,
    readonly fabric: NamespaceInfo,
    readonly outside: OutsideInfo,
    readonly nodes: readonly NodeInfo[],
  ) {}

  get prefix(): string {
    return this.lab.prefix;
  }

  /** Build fabric, outside and nodes. On any failure, removes what it built and rethrows. */
  static async create(opts: ClusterOptions): Promise<NetnsCluster> {
    if (!Number.isInteger(opts.nodes) || opts.nodes < 1 || opts.nodes > MAX_NODES) {
      throw new Error(`NetnsCluster.create: nodes must be an integer in 1..${MAX_NODES}, got ${opts.nodes}`);
    }
    const lab = new NetnsRun(opts.prefix);
    try {
      const fabric = await lab.create('fabric');
      await buildFabric(fabric);
      const outsideNs = await lab.create('outside');
      await attachToFabric(fabric, outsideNs, 'out', OUTSIDE_ADDRESS, OUTSIDE_GATEWAY);
      const nodes: NodeInfo[] = [];
      if (opts.nodePids && opts.nodePids.length !== opts.nodes)
        throw new Error(`NetnsCluster.create: ${opts.nodePids.length} node pids for ${opts.nodes} nodes`);
      for (let i = 0; i < opts.nodes; i++) {
        const pid = opts.nodePids?.[i];
        const ns = pid === undefined ? await lab.create(`node-${i}`) : await lab.attach(`node-${i}`, pid);
        const address = nodeAddress(i);
        await attachToFabric(fabric, ns, `n${i}`, address, FABRIC_GATEWAY);
        await enableForwarding(ns);
        nodes.push({
          name: `node-${i}`,
          index: i,
          netns: ns,
          netnsPath: pathOf(ns),
          address,
          podCidr: podCidr(i),
          podGateway: podGateway(i),
        });
      }
      // Pod CIDRs: the fabric router knows every node's, and nodes reach each other directly.
      for (const n of nodes) {
        await ipIn(fabric, ['route', 'add', n.podCidr.ipv4, 'via', n.address.ipv4]);
        await ipIn(fabric, ['-6', 'route', 'add', n.podCidr.ipv6, 'via', n.address.ipv6]);
        for (const m of nodes) {
          if (m === n) continue;
          await ipIn(n.netns, ['route', 'add', m.podCidr.ipv4, 'via', m.address.ipv4]);
          await ipIn(n.netns, ['-6', 'route', 'add', m.podCidr.ipv6, 'via', m.address.ipv6]);
        }
      }
      return new NetnsCluster(
        lab,
        { netns: fabric, netnsPath: pathOf(fabric) },
        { netns: outsideNs, netnsPath: pathOf(outsideNs), address: OUTSIDE_ADDRESS },
        nodes,
      );
    } catch (e) {
      await lab.dispose().catch((d: unknown) => {
        throw new AggregateError(
          [e, d],
          `NetnsCluster.create failed (${String(e)}) and cleanup failed too (${String(d)})`,
          { cause: e },
        );
      });
      throw e;
    }
  }

  node(name: string): NodeInfo {
    const n = this.nodes.find((x) => x.name === name);
    if (!n)
      throw new Error(
        `no node ${JSON.stringify(name)} in cluster ${this.prefix}; nodes are ${this.nodes.map((x) => x.name).join(', ')}`,
      );
    return n;
  }

  pod(name: string): PodInfo {
    const p = this.podsByName.get(name);
    if (!p) throw new Error(`no pod ${JSON.stringify(name)} in cluster ${this.prefix}`);
    return { ...p };
  }

  pods(): PodInfo[] {
    return [...this.podsByName.values()].map((p) => ({ ...p }));
  }

  /** A pod with its own netns, a veth to its node, addresses from the node's pod CIDR and routes. */
  async addPod(nodeName: string, name: string, opts: AddPodOptions = {}): Promise<PodInfo> {
    await this.createPodNetns(nodeName, name);
    try {
      await this.wirePod(name, opts.ipv6 ?? true);
    } catch (e) {
      return rethrowAfterCleanup(e, [`remove pod ${name}`, () => this.removePod(name)]);
    }
    return this.pod(name);
  }

  /**
   * Step one of a pod: an empty netns (lo up) registered to `nodeName`, no addresses yet. This is
   * the seam for a CNI-driven path, which then runs the chain with CNI_NETNS=<netnsPath>.
   */
  async createPodNetns(nodeName: string, name: string): Promise<PodInfo> {
    this.assertLive();
    const node = this.node(nodeName);
    if (!POD_NAME.test(name))
      throw new Error(
        `invalid pod name ${JSON.stringify(name)}: expected 1-16 characters of [a-z0-9-], alphanumeric at both ends`,
      );
    if (this.podsByName.has(name))
      throw new Error(`pod ${JSON.stringify(name)} already exists in cluster ${this.prefix}`);
    const ns = await this.lab.create(`pod-${name}`);
    this.podsByName.set(name, {
      name,
      node: node.name,
      netns: ns,
      netnsPath: pathOf(ns),
      ipv4: undefined,
      ipv6: undefined,
      hostVeth: undefined,
    });
    return this.pod(name);
  }

  /** Record addresses a pod got from elsewhere (e.g. a CNI result) so tests can look them up. */
  registerPodAddresses(name: string, addrs: { ipv4?: string; ipv6?: string }): void {
    const p = this.podsByName.get(name);
    if (!p) throw new Error(`no pod ${JSON.stringify(name)} in cluster ${this.prefix}`);
    p.ipv4 = addrs.ipv4 ?? p.ipv4;
    p.ipv6 = addrs.ipv6 ?? p.ipv6;
  }

  private async wirePod(name: string, ipv6: boolean): Promise<void> {
    const p = this.podsByName.get(name);
    if (!p) throw new Error(`no pod ${JSON.stringify(name)} in cluster ${this.prefix}`);
    const node = this.node(p.node);
    const slot = this.nextSlot.get(node.name) ?? FIRST_POD_SLOT;
    if (slot > LAST_POD_SLOT)
      throw new Error(`node ${node.name} has no pod addresses left (slots are never reused within a run)`);
    // Slots and veth names are never reused in a run, so a late kernel cleanup can't collide.
    this.nextSlot.set(node.name, slot + 1);
    const addr = podAddress(node.index, slot);
    const gw = node.podGateway;
    const veth = `vp${this.vethSeq++}`;
    await ipIn(node.netns, ['link', 'add', veth, 'type', 'veth', 'peer', 'name', 'eth0', 'netns', p.netns]);
    p.hostVeth = veth;
    // Node side: the gateway address on every pod veth (answers the pod's ARP/ND), a host route.
    await ipIn(node.netns, ['addr', 'add', `${gw.ipv4}/32`, 'dev', veth]);
    await ipIn(node.netns, ['link', 'set', veth, 'up']);
    await ipIn(node.netns, ['route', 'add', `${addr.ipv4}/32`, 'dev', veth, 'src', node.address.ipv4]);
    // Pod side: a /32, an on-link route to the gateway, the default route through it.
    await ipIn(p.netns, ['addr', 'add', `${addr.ipv4}/32`, 'dev', 'eth0']);
    await ipIn(p.netns, ['link', 'set', 'eth0', 'up']);
    await ipIn(p.netns, ['route', 'add', gw.ipv4, 'dev', 'eth0', 'scope', 'link']);
    await ipIn(p.netns, ['route', 'add', 'default', 'via', gw.ipv4, 'dev', 'eth0']);
    p.ipv4 = addr.ipv4;
    if (ipv6) {
      // nodad: addresses are usable at once instead of after duplicate address detection.
      await ipIn(node.netns, ['-6', 'addr', 'add', `${gw.ipv6}/128`, 'dev', veth, 'nodad']);
      await ipIn(node.netns, ['-6', 'route', 'add', `${addr.ipv6}/128`, 'dev', veth]);
      await ipIn(p.netns, ['-6', 'addr', 'add', `${addr.ipv6}/128`, 'dev', 'eth0', 'nodad']);
      await ipIn(p.netns, ['-6', 'route', 'add', `${gw.ipv6}/128`, 'dev', 'eth0']);
      await ipIn(p.netns, ['-6', 'route', 'add', 'default', 'via', gw.ipv6, 'dev', 'eth0']);
      p.ipv6 = addr.ipv6;
    }
  }

  /** Stop the pod's processes (by pid), remove its veth and its netns. */
  async removePod(name: string): Promise<void> {
    const p = this.podsByName.get(name);
    if (!p) throw new Error(`no pod ${JSON.stringify(name)} in cluster ${this.prefix}`);
    await this.processes.stopAll(p.netns);
    // Deleting the veth explicitly (rather than waiting for the netns teardown to do it) frees
    // the node-side routes now, not at the kernel's leisure.
    if (p.hostVeth) {
      const nodeNs = this.node(p.node).netns;
      await ipIn(nodeNs, ['link', 'del', p.hostVeth]).catch(async (e: unknown) => {
        // Gone already (its peer's netns went first) is the goal reached; anything else is a leak.
        if (
          (await ipIn(nodeNs, ['-o', 'link', 'show']))
            .split('\n')
            .some((l) => l.includes(` ${p.hostVeth}@`) || l.includes(` ${p.hostVeth}:`))
        )
          throw e;
      });
    }
    await this.lab.remove(p.netns);
    this.podsByName.delete(name);
  }

  /** Run a program to completion inside one of this cluster's namespaces; resolves with stdout. */
  exec(netns: string, argv: readonly string[], input?: string, timeoutMs?: number): Promise<string> {
    this.assertOwn(netns);
    return execIn(netns, argv, input, timeoutMs);
  }

  /**
   * A host on the fabric beside the nodes — the pod of a Service (the mesh CA's): the network
   * namespace of process `pid` (a sandbox container's init), named `<prefix><short>`, wired to
   * the fabric bridge at `address` like a node. removeFabricHost() (or dispose()) undoes it.
   */
  async attachFabricHost(short: string, pid: number, address: DualStack): Promise<string> {
    this.assertLive();
    const ns = await this.lab.attach(short, pid);
    await attachToFabric(this.fabric.netns, ns, short, address, FABRIC_GATEWAY);
    return ns;
  }

  /**
   * Undo attachFabricHost. The veth is deleted first, from the fabric's side: the kernel frees a
   * namespace's devices asynchronously, so a host attached again at once would find the old
   * port name still taken.
   */
  async removeFabricHost(ns: string): Promise<void> {
    this.assertOwn(ns);
    await ipIn(this.fabric.netns, ['link', 'del', ns.slice(this.prefix.length)]);
    await this.lab.remove(ns);
  }

  /** Start a long-running program in one of this cluster's namespaces; dispose() stops it by pid. */
  spawn(netns: string, argv: readonly string[], opts: SpawnOptions = {}): NetnsProcess {
    this.assertOwn(netns);
    return this.processes.spawn(netns, argv, opts);
  }

  /** Namespaces of this run that still exist on the machine. */
  remaining(): Promise<string[]> {
    return this.lab.remaining();
  }

  /**
   * Stop every process this cluster started (by pid), delete every namespace, and verify that
   * none is left; throws listing the leftovers otherwise. Safe to call twice.
   */
  async dispose(): Promise<void> {
    this.disposed = true;
    const errors: string[] = [];
    await this.processes.stopAll().catch((e: unknown) => errors.push(`stopping processes: ${String(e)}`));
    const still = this.processes.running();
    if (still.length > 0) errors.push(`processes still running: ${still.map((p) => p.describe()).join(', ')}`);
    try {
      await this.lab.dispose();
    } catch (e) {
      errors.push(e instanceof Error ? e.message : String(e));
    }
    this.podsByName.clear();
    if (errors.length > 0)
      throw new Error(`dispose of netns cluster ${this.prefix} left things behind: ${errors.join('; ')}`);
  }

  private assertLive(): void {
    if (this.disposed) throw new Error(`netns cluster ${this.prefix} is already disposed`);
  }

  private assertOwn(netns: string): void {
    this.assertLive();
    if (!this.lab.names().includes(netns)) {
      throw new Error(
        `netns ${JSON.stringify(netns)} does not belong to cluster ${this.prefix}; pass e.g. cluster.node('node-0').netns`,
      );
    }
  }
}

/**
 * Run `fn` with a fresh cluster and always dispose it. If `fn` throws, its error wins (the
 * cleanup error, if any, is reported alongside it in an AggregateError).
 */
export async function withCluster<T>(opts: ClusterOptions, fn: (c: NetnsCluster) => Promise<T>): Promise<T> {
  const cluster = await NetnsCluster.create(opts);
  let result: T;
  try {
    result = await fn(cluster);
  } catch (e) {
    try {
      await cluster.dispose();
    } catch (d) {
      throw new AggregateError([e, d], `test body failed (${String(e)}) and cleanup failed (${String(d)})`, {
        cause: d,
      });
    }
    throw e;
  }
  await cluster.dispose();
  return result;
}

async function buildFabric(fabric: string): Promise<void> {
  await ipIn(fabric, ['link', 'add', 'br0', 'type', 'bridge']);
  await ipIn(fabric, ['link', 'set', 'br0', 'up']);
  for (const gw of [FABRIC_GATEWAY, OUTSIDE_GATEWAY]) {
    await ipIn(fabric, ['addr', 'add', `${gw.ipv4}/${FABRIC_PREFIX_LEN.ipv4}`, 'dev', 'br0']);
    await ipIn(fabric, ['-6', 'addr', 'add', `${gw.ipv6}/${FABRIC_PREFIX_LEN.ipv6}`, 'dev', 'br0', 'nodad']);
  }
  await enableForwarding(fabric);
}

/** A veth from `ns` (eth0) to the fabric bridge (port `port`), an address and a default route. */
async function attachToFabric(fabric: string, ns: string, port: string, addr: DualStack, gw: DualStack): Promise<void> {
  await ipIn(fabric, ['link', 'add', port, 'type', 'veth', 'peer', 'name', 'eth0', 'netns', ns]);
  await ipIn(fabric, ['link', 'set', port, 'master', 'br0']);
  await ipIn(fabric, ['link', 'set', port, 'up']);
  await ipIn(ns, ['addr', 'add', `${addr.ipv4}/${FABRIC_PREFIX_LEN.ipv4}`, 'dev', 'eth0']);
  await ipIn(ns, ['-6', 'addr', 'add', `${addr.ipv6}/${FABRIC_PREFIX_LEN.ipv6}`, 'dev', 'eth0', 'nodad']);
  await ipIn(ns, ['link', 'set', 'eth0', 'up']);
  await ipIn(ns, ['route', 'add', 'default', 'via', gw.ipv4]);
  await ipIn(ns, ['-6', 'route', 'add', 'default', 'via', gw.ipv6]);
}

/** IPv4 and IPv6 forwarding inside `ns` only (`sysctl -w` under `ip netns exec`). */
async function enableForwarding(ns: string): Promise<void> {
  await execIn(ns, ['sysctl', '-q', '-w', 'net.ipv4.ip_forward=1', 'net.ipv6.conf.all.forwarding=1']);
}
