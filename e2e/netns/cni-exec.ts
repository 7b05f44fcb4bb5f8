/**
 * The netns world's container-runtime side of CNI: real plugin binaries run per the exec
 * protocol (environment, config on stdin, result or error JSON on stdout, exit code) inside a
 * node netns (`ip netns exec <node>`, which is where a runtime on that node runs them), with a
 * file-based result cache (libcni's `<cacheDir>/results/<net>-<id>-<ifname>`). The chain logic
 * itself (order, prevResult, DEL in reverse with the cached result) is sim/cni/chain.ts, shared
 * with the sim runtime so both worlds invoke plugins the same way.
 *
 * Why here and not impl/linux: impl/ is the system under test, and nothing in it invokes CNI
 * plugins — the runtime that does is part of the world around it, like the kubelet model.
 */
import { spawn } from 'node:child_process';
import { access, mkdir, readFile, readdir, rm, writeFile, constants } from 'node:fs/promises';
import * as path from 'node:path';
import {
  cidrAddress,
  k8sCniArgs,
  type CniExecOutput,
  type CniExecRequest,
  type CniResult,
} from '../../impl/api/cni.js';
import {
  cacheKey,
  type CachedAttachment,
  type CniAttachment,
  type CniChain,
  type CniPluginExec,
  type CniResultCache,
} from '../../sim/cni/chain.js';
import type { NetnsCluster, PodInfo } from './cluster.js';
import type { NetnsProcess, SpawnOptions } from './processes.js';
import { rethrowAfterCleanup } from '../cleanup.js';

/** Debian's containernetworking-plugins directory. */
export const DEBIAN_CNI_DIR = '/usr/lib/cni';

interface NetnsPluginExecOptions {
  /** Node netns to run plugins in (its name under /run/netns). */
  readonly netns: string;
  /** Directories searched for plugin binaries, in order (what CNI_PATH lists). */
  readonly dirs: readonly string[];
  readonly timeoutMs?: number;
  /**
   * Run plugins through this command instead of `ip netns exec <netns>` (e.g. nsenter into a node
   * container's mount and network namespaces), finding binaries under `root` (that container's
   * root as seen from here, /proc/<pid>/root): a runtime inside the node runs its own plugins.
   */
  readonly enter?: { readonly argv: readonly string[]; readonly root: string };
}

export class NetnsPluginExec implements CniPluginExec {
  constructor(private readonly o: NetnsPluginExecOptions) {
    if (!/^al-[a-z0-9-]+$/.test(o.netns))
      throw new Error(`NetnsPluginExec: netns ${JSON.stringify(o.netns)} is not one of ours (names start with al-)`);
  }

  /** The binary for `type` in the first directory that has it, executable. */
  async find(type: string): Promise<string> {
    if (!/^[A-Za-z0-9][A-Za-z0-9_.-]*$/.test(type)) throw new Error(`invalid plugin type ${JSON.stringify(type)}`);
    for (const d of this.o.dirs) {
      const p = path.join(d, type);
      try {
        await access(this.o.enter ? path.join(this.o.enter.root, p) : p, constants.X_OK);
        return p;
      } catch {
        // not in this directory
      }
    }
    throw new Error(`failed to find plugin "${type}" in path [${this.o.dirs.join(' ')}]`);
  }

  async exec(type: string, req: CniExecRequest): Promise<CniExecOutput> {
    const bin = await this.find(type);
    // Only the protocol's variables plus PATH (plugins run iptables, sysctl): nothing else leaks in.
    const env: Record<string, string> = { PATH: process.env['PATH'] ?? '/usr/sbin:/usr/bin:/sbin:/bin', ...req.env };
    const timeoutMs = this.o.timeoutMs ?? 30_000;
    return new Promise((resolve, reject) => {
      const argv = this.o.enter ? [...this.o.enter.argv, bin] : ['ip', 'netns', 'exec', this.o.netns, bin];
      const child = spawn(argv[0]!, argv.slice(1), { env, stdio: ['pipe', 'pipe', 'pipe'] });
      let stdout = '';
      let stderr = '';
      const timer = setTimeout(() => {
        child.kill('SIGKILL'); // our own child, by its handle
        reject(new Error(`plugin ${type} (${req.env['CNI_COMMAND']}) did not finish within ${timeoutMs} ms`));
      }, timeoutMs);
      child.stdout.on('data', (b: Buffer) => {
        stdout += b.toString();
      });
      child.stderr.on('data', (b: Buffer) => {
        stderr += b.toString();
      });
      child.on('error', (e) => {
        clearTimeout(timer);
        reject(new Error(`could not run plugin ${bin} in ${this.o.netns}: ${e.message}`));
      });
      child.on('close', (code) => {
        clearTimeout(timer);
        resolve({ exitCode: code ?? 1, stdout, stderr });
      });
      // A plugin may exit without reading stdin (VERSION does): EPIPE is not a failure.
      child.stdin.on('error', () => undefined);
      child.stdin.end(req.stdin);
    });
  }
}

/** libcni's on-disk result cache under `<dir>/results/`. */
export class FileResultCache implements CniResultCache {
  constructor(readonly dir: string) {}

  private file(network: string, containerId: string, ifname: string): string {
    return path.join(this.dir, 'results', cacheKey(network, containerId, ifname));
  }

  async get(network: string, containerId: string, ifname: string): Promise<CachedAttachment | undefined> {
    try {
      return JSON.parse(await readFile(this.file(network, containerId, ifname), 'utf8')) as CachedAttachment;
    } catch (e) {
      if ((e as NodeJS.ErrnoException).code === 'ENOENT') return undefined;
      throw e;
    }
  }

  async put(entry: CachedAttachment): Promise<void> {
    await mkdir(path.join(this.dir, 'results'), { recursive: true });
    await writeFile(this.file(entry.network, entry.containerId, entry.ifname), JSON.stringify(entry));
  }

  async delete(network: string, containerId: string, ifname: string): Promise<void> {
    await rm(this.file(network, containerId, ifname), { force: true });
  }

  async list(): Promise<CachedAttachment[]> {
    let names: string[];
    try {
      names = await readdir(path.join(this.dir, 'results'));
    } catch (e) {
      if ((e as NodeJS.ErrnoException).code === 'ENOENT') return []; // nothing cached yet: the directory is made by the first put()
      throw e;
    }
    return Promise.all(
      names.map(async (n) => JSON.parse(await readFile(path.join(this.dir, 'results', n), 'utf8')) as CachedAttachment),
    );
  }
}

/** One network of a pod: the chain and the interface name it attaches (`eth0`, `lo`). */
export interface PodNetwork {
  readonly chain: CniChain;
  readonly ifname: string;
}

interface CniPod {
  readonly pod: PodInfo;
  readonly containerId: string;
  readonly results: readonly CniResult[];
  /** The container process, started only after every ADD succeeded. */
  readonly process: NetnsProcess;
}

/**
 * What a runtime does for a pod, on the real kernel: an empty pod netns, CNI ADD of each network
 * in order, and only then the container process. A failed ADD is followed by DEL of every
 * network (reverse order, spec) and the netns is removed; the error is rethrown and no process
 * is started.
 */
export async function startPodWithCni(
  cluster: NetnsCluster,
  nodeName: string,
  name: string,
  networks: readonly PodNetwork[],
  argv: readonly string[],
  spawnOpts: SpawnOptions = {},
): Promise<CniPod> {
  const pod = await cluster.createPodNetns(nodeName, name);
  const containerId = `${cluster.prefix}${name}`.replace(/-+$/, '');
  const att = (ifname: string): CniAttachment => ({
    containerId,
    netns: pod.netnsPath,
    ifname,
    args: k8sCniArgs({ namespace: 'default', name, uid: containerId }, containerId),
  });
  const results: CniResult[] = [];
  try {
    for (const n of networks) results.push(await n.chain.add(att(n.ifname)));
  } catch (e) {
    // DEL after a failed ADD must succeed (CNI spec); one that fails is a leak, reported with the ADD's error.
    return rethrowAfterCleanup(
      e,
      ...[...networks].reverse().map((n) => [`CNI DEL of ${n.ifname}`, () => n.chain.del(att(n.ifname))] as const),
      [`remove pod ${name}`, () => cluster.removePod(name)],
    );
  }
  const last = results[results.length - 1];
  const v4 = last?.ips?.map((ip) => cidrAddress(ip.address)).find((a) => !a.includes(':') && a !== '127.0.0.1');
  const v6 = last?.ips?.map((ip) => cidrAddress(ip.address)).find((a) => a.includes(':') && a !== '::1');
  cluster.registerPodAddresses(name, { ...(v4 ? { ipv4: v4 } : {}), ...(v6 ? { ipv6: v6 } : {}) });
  const proc = cluster.spawn(pod.netns, argv, spawnOpts);
  return { pod: cluster.pod(name), containerId, results, process: proc };
}

/** Stop the pod's processes, DEL every network in reverse with the cached results, remove the netns. */
export async function stopPodWithCni(cluster: NetnsCluster, p: CniPod, networks: readonly PodNetwork[]): Promise<void> {
  await cluster.processes.stopAll(p.pod.netns);
  for (const n of [...networks].reverse())
    await n.chain.del({ containerId: p.containerId, netns: p.pod.netnsPath, ifname: n.ifname });
  await cluster.removePod(p.pod.name);
}
