/**
 * The netns world's cluster, as processes on the real kernel (what `ambient-lab up` leaves running
 * and what the netns World drives):
 *
 *   fabric netns   the Kubernetes API process (kube-api-process.ts): the sim ApiStore behind
 *                  the HTTP facade, on 192.0.2.1:6443; Unix sockets in the run dir for the harness;
 *                  it holds the rendered deployment's DaemonSets, as applied (createDaemonSets)
 *   node netns     per node: the node agent and the node proxy as real processes
 *                  (bin/ambient-lab-agent.js, bin/ambient-lab-proxy.js), and the CNI chain that
 *                  a runtime on that node runs: Debian loopback; bridge + host-local; our plugin
 *   pod netns      per pod: created empty, wired by the CNI chain, then the app process
 *                  (world-pod-app.ts) as the pod's uid and capabilities
 *
 * Every process is started detached with its output in a log file under the run dir, so a
 * cluster can outlive the command that made it; each pid is recorded (state.json) and the only
 * handle used to stop it, after checking that /proc/PID/cmdline is still the program we started.
 * Namespaces are those of one NetnsCluster (run prefix `al-...`).
 *
 * Kubelet approximations: the harness is the kubelet — it creates the Pod object, runs the
 * sandbox (netns + CNI ADD), starts the app and writes status (phase, podIPs). A pod whose CNI
 * ADD fails stays Pending with its sandbox removed, and the kubelet tries again with a backoff
 * (scenarios/worlds/kubelet-backoff.ts, as the sim world's kubelet) for as long as the process that made the
 * lab runs (`ambient-lab up` exits: its failed pods stay Pending). Sandbox operations on one pod
 * (create, retry, teardown) run one after another, in call order. Reboot: see rebootNode().
 */
import { DEPLOYMENT_ENROLLMENT_SETTINGS } from '../../impl/api/enrollment-config.js';
import { MeshCa } from '../../impl/linux/mesh-ca.js';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { spawn, type ChildProcess } from 'node:child_process';
import type { Readable } from 'node:stream';
import { fileURLToPath } from 'node:url';
import { k8sCniArgs, cidrAddress, parseConfList, type CniConfList, type CniResult } from '../../impl/api/cni.js';
import type { KubeObjectOf } from '../../impl/host/kube.js';
import { CniChain } from '../../sim/cni/chain.js';
import { facadeKubeconfig } from '../../sim/kube/http-facade.js';
import { CA_SERVICE_ADDRESS, FABRIC_GATEWAY, nodeAddress } from './addressing.js';
import { NetnsCluster } from './cluster.js';
import { newRunPrefix } from './netns-run.js';
import { DEBIAN_CNI_DIR, FileResultCache, NetnsPluginExec } from './cni-exec.js';
import { PRIMARY_CONFLIST_FILE, primaryConfList } from './primary-conflist.js';
import { execIn } from './ip.js';
import { setprivArgs, type SpawnOptions } from './processes.js';
import { WorldApi, WorldApiError } from './world-api-client.js';
import {
  deploymentChoiceOf,
  deploymentDaemonSets,
  deploymentLaunch,
  renderDeployment,
  type DeploymentChoice,
  type RenderedDaemonSet,
} from '../deployment/launch.js';
import type { Backend } from '../../impl/api/backend.js';
import type { Profile } from '../../impl/api/profile.js';
import { sandboxRetryDelayMs } from '../../scenarios/worlds/kubelet-backoff.js';
import { LAB_COMPONENT_LABEL, proxyPodName, type UidSource } from '../../scenarios/world.js';
import { rethrowAfterCleanup } from '../cleanup.js';
import {
  PROJECTED_TOKENS_FILE,
  writeTokenFile,
  type ProjectedToken,
  type ProjectedTokens,
} from './projected-tokens.js';

export type LabComponent = 'agent' | 'proxy';

/**
 * What a lab whose nodes are not plain namespaces supplies (the container world, e2e/containers):
 * it places the nodes and runs the components; the lab keeps the API, the topology between the
 * nodes, the kubelet (sandboxes, apps, pod status) and everything observed. Without a backend the
 * lab is the netns world's: node namespaces of its own, components as processes, the CNI chain
 * configured by the lab.
 */
export interface LabBackend {
  /** For messages ("container world"). */
  readonly kind: string;
  /** Start the node hosts; one pid per node, whose network namespace becomes the node's. Called once, before wiring. */
  startNodes(lab: NetnsLab): Promise<number[]>;
  /** Start `component` on `node`; resolves with the process whose life is the component's (on this machine's pid namespace). */
  startComponent(lab: NetnsLab, component: LabComponent, node: string, logFile: string): Promise<LabPid>;
  stopComponent(lab: NetnsLab, component: LabComponent, node: string): Promise<void>;
  /** The CNI networks a runtime on `node` attaches a new sandbox to, in order (read from the node's configuration). */
  chains(lab: NetnsLab, node: string): Promise<{ chain: CniChain; ifname: string }[]>;
  /** Make the sandbox netns (named `netns` on this machine) visible on `node`; returns CNI_NETNS as the node sees it. */
  exposeSandbox(lab: NetnsLab, node: string, netns: string): Promise<string>;
  /** CNI_NETNS of an exposed sandbox (for DEL). */
  sandboxPath(lab: NetnsLab, node: string, netns: string): string;
  /** Undo exposeSandbox (before the netns is removed). */
  hideSandbox(lab: NetnsLab, node: string, netns: string): Promise<void>;
  /**
   * The process whose pid namespace pod apps on `node` join (the node container's init): the
   * agent, hostPID there, finds pods' processes in that namespace's /proc, as on a node.
   */
  podPidNamespace(lab: NetnsLab, node: string): number;
  /** A pid a component reports about itself (in its own pid namespace) as a pid on this machine. */
  hostPid(lab: NetnsLab, component: LabComponent, node: string, pid: number): number;
  /** Remove everything the backend made; throws listing what it could not remove. */
  dispose(lab: NetnsLab): Promise<void>;
  /**
   * Run the mesh CA as the Deployment's pod of its own, reachable on the fabric at
   * CA_SERVICE_ADDRESS (its Service). Absent: the lab runs it as a process in the fabric
   * namespace. Resolves with the process whose life is the CA's.
   */
  startCa?(lab: NetnsLab, logFile: string): Promise<LabPid>;
  stopCa?(lab: NetnsLab): Promise<void>;
}

const API_PORT = 6443;

/** How the lab breaks the API for a node's CNI plugin (setCniApiFault). */
type CniApiFaultMode = 'unreachable' | 'error';
/** The mesh CA's port (deploy/base/ca.yaml, istiod's CA port). */
const CA_PORT = 15012;
/** The label of the deployment's own pods (the proxy pods the lab makes in its API); scenarios' pods never carry it. */
export { LAB_COMPONENT_LABEL };
/** The ConfigMap with the mesh root certificate that the proxies mount (deploy/base/proxy.yaml). */
const MESH_ROOT_CERT_CONFIGMAP = 'ambient-lab-mesh-root-cert';
const POD_UID_ENV = 'AMBIENT_LAB_POD_UID';

/**
 * A process the lab started. Its identity is the pid plus the kernel's start time of that pid
 * (field 22 of /proc/PID/stat, clock ticks since boot), read right after spawn: a pid the kernel
 * recycles gets a new start time, and every proxy of the cluster shares a command line, so the
 * command line cannot tell them apart. `marker` (the program) is for messages, and the only check
 * for state files written before start times were recorded.
 */
export interface LabPid {
  readonly pid: number;
  readonly marker: string;
  readonly startTime?: string;
}

export interface LabPodState {
  readonly namespace: string;
  readonly name: string;
  readonly uid: string;
  readonly node: string;
  readonly hostNetwork: boolean;
  /** Short name in the NetnsCluster (netns `<prefix>pod-<short>`); undefined for hostNetwork. */
  short: string | undefined;
  netns: string | undefined;
  containerId: string | undefined;
  ips: string[];
  app: LabPid | undefined;
  readonly appUid: number;
  /** Capabilities the pod spec adds (after dropping all); see effectiveAppCaps for what the process gets. */
  readonly appCaps: readonly string[];
  readonly tcpPorts: readonly number[];
  readonly udpPorts: readonly number[];
  /** Network sysctls set in the sandbox before the CNI ADD (as a node or runtime may, e.g. net.ipv6.conf.lo.disable_ipv6). */
  readonly sysctls?: Readonly<Record<string, string>>;
  started: boolean;
  error: string | undefined;
  /** Sandbox attempts that failed since the last one that worked (the kubelet's backoff step). */
  sandboxFailures?: number;
  /** Sandbox attempts finished, ever (settle waits for a retry begun after the last change it saw). */
  sandboxAttempts?: number;
  /** Sandbox attempts begun, ever: an attempt in flight when a change happened does not count as a retry after it. */
  sandboxStarts?: number;
}

export interface LabState {
  readonly version: 1;
  readonly name: string;
  readonly prefix: string;
  readonly runDir: string;
  readonly profile: Profile;
  /** Dual-stack pods (a v6 range from fd00:10:244:<i>::/64) and v6 capture (agent and proxy --ipv6). Absent in older state files: false. */
  readonly ipv6?: boolean;
  /** The agent captures pod DNS (UDP/TCP 53 to the proxy's 15053; --dns-capture). Absent in older state files: false. */
  readonly dnsCapture?: boolean;
  /** The agent and proxy capture IPv6 (--ipv6) whatever the pods' stack; absent: as `ipv6`. */
  readonly captureIpv6?: boolean;
  /** The agent's rules backend (deploy/components/backend-nftables); absent: iptables. */
  readonly rulesBackend?: Backend;
  /**
   * The rendered manifests the components' launch comes from (deployment.yaml in the run dir,
   * written at create: deploy/ rendered for this lab's settings, or the stream it was given).
   * Absent in state files written before deploy/ existed: such a lab cannot start components.
   */
  readonly deployment?: string;
  /** The proxies run their DNS listener (15053); absent: off, as in the sim world. */
  readonly proxyDns?: boolean;
  readonly nodes: readonly {
    readonly name: string;
    readonly netns: string;
    readonly index: number;
    readonly address: string;
  }[];
  readonly fabric: string;
  readonly outside: string;
  readonly kubeconfig: string;
  readonly apiSocket: string;
  readonly controlSocket: string;
  api: LabPid | undefined;
  /** The mesh CA process (the CA Deployment's container, in the fabric namespace); absent in older state files. */
  ca?: LabPid | undefined;
  /** The projected-token refresher (LabOptions.refreshTokens), when it runs. */
  tokenRefresher?: LabPid | undefined;
  components: Record<string, LabPid | undefined>;
  pods: Record<string, LabPodState>;
  podSeq: number;
}

/**
 * The capabilities an app container's process really has, as Kubernetes runs it: the added ones
 * when it runs as root; none for any other uid — Kubernetes sets no ambient capabilities, so the
 * exec of a non-root program loses them (kubernetes/kubernetes#56374; the sim's
 * containerCredentials does the same).
 */
export function effectiveAppCaps(p: Pick<LabPodState, 'appUid' | 'appCaps'>): readonly string[] {
  return p.appUid === 0 ? p.appCaps : [];
}

// ------------------------------------------------------------------ paths and processes

/** The repository root (where package.json and bin/ are), from source or from dist/. */
export function repoRoot(): string {
  let dir = path.dirname(fileURLToPath(import.meta.url));
  for (let i = 0; i < 6; i++) {
    if (fs.existsSync(path.join(dir, 'package.json')) && fs.existsSync(path.join(dir, 'bin', 'ambient-lab-agent.js')))
      return dir;
    dir = path.dirname(dir);
  }
  throw new Error('cannot find the ambient-lab repository root from e2e/netns/world-lab');
}

/** Write `text` readable by root and `gid` only (default 0640): a secret the proxy's group must read. */
function writeGroupReadable(file: string, text: string, gid: number, mode = 0o640): void {
  fs.writeFileSync(file, text, { mode: 0o600 });
  fs.chownSync(file, 0, gid);
  fs.chmodSync(file, mode);
}

/**
 * The lab's rendered deployment, written to state.deployment: deploy/ rendered for the lab's
 * settings, or the stream it was given — whose settings must be the lab's, or the world's
 * expectations (profile, stack, DNS capture) would not describe what runs.
 */
function writeDeployment(state: LabState, opts: Pick<LabOptions, 'deployment'>): void {
  const want = {
    profile: state.profile,
    ipv6: (state.captureIpv6 ?? state.ipv6) === true,
    dnsCapture: state.dnsCapture === true,
    ...(state.rulesBackend === 'nftables' ? { backend: state.rulesBackend } : {}),
  };
  const source = opts.deployment ?? 'deploy/ rendered for this lab';
  const rendered = opts.deployment !== undefined ? fs.readFileSync(opts.deployment, 'utf8') : renderDeployment(want);
  const got = deploymentChoiceOf(deploymentLaunch(rendered, { nodeName: 'node-0', source }));
  if (JSON.stringify(got) !== JSON.stringify(want))
    throw new Error(
      `the lab's deployment (${source}) says ${JSON.stringify(got)} but the lab was asked for ${JSON.stringify(want)}: render it with those settings (deploy/components)`,
    );
  fs.writeFileSync(state.deployment!, rendered, { mode: 0o644 });
}

/** A compiled program under dist/; throws with what to do when it is missing. */
function builtProgram(rel: string): string {
  const p = path.join(repoRoot(), 'dist', rel);
  if (!fs.existsSync(p)) throw new Error(`${p} is missing: run \`npm run build\` first`);
  return p;
}

const children = new Map<number, ChildProcess>();
/** How each child this process started ended (pid → words), for messages about a process that exited. */
const childExits = new Map<number, string>();

/** Field 22 of /proc/PID/stat (start time, clock ticks after boot) and whether it is a zombie; undefined when there is no such pid. */
export function procStart(pid: number): { startTime: string; zombie: boolean } | undefined {
  let stat: string;
  try {
    stat = fs.readFileSync(`/proc/${pid}/stat`, 'utf8');
  } catch {
    return undefined;
  }
  // "pid (comm) state ppid ...": comm may hold spaces and parentheses, so split after the last ')'.
  const rest = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  const startTime = rest[22 - 3];
  if (startTime === undefined)
    throw new Error(`/proc/${pid}/stat has no field 22 (start time): ${JSON.stringify(stat.slice(0, 200))}`);
  return { startTime, zombie: rest[0] === 'Z' };
}

/**
 * Start `argv` in `netns` (as uid/caps when given), detached, output appended to `logFile`. With
 * `channel`, the child also gets fd 3: one end of a socket pair whose other end only this
 * process holds (returned as `channel`) — what the child writes there is attributable to it
 * alone (see NetnsLab.startApp).
 */
function spawnInNetns(
  netns: string,
  argv: readonly string[],
  opts: SpawnOptions & { env?: Record<string, string>; logFile: string; channel?: boolean; pidNamespaceOf?: number },
): LabPid & { channel?: Readable } {
  if (!/^al-[a-z0-9-]+$/.test(netns))
    throw new Error(`refusing to start a process in netns ${JSON.stringify(netns)}: not one of ours`);
  const out = fs.openSync(opts.logFile, 'a', 0o644);
  const priv = setprivArgs(opts);
  // With pidNamespaceOf, nsenter joins that process's pid namespace and forks: the returned pid is
  // nsenter's, waiting for the program (childPid() finds the program's own).
  const enter = opts.pidNamespaceOf !== undefined ? ['nsenter', '-t', String(opts.pidNamespaceOf), '-p', '--'] : [];
  const full = [...enter, 'ip', 'netns', 'exec', netns, ...priv, ...argv];
  const child = spawn(full[0]!, full.slice(1), {
    detached: true,
    stdio: opts.channel ? ['ignore', out, out, 'pipe'] : ['ignore', out, out],
    env: { ...process.env, ...(opts.env ?? {}) },
  });
  fs.closeSync(out);
  if (child.pid === undefined) throw new Error(`could not start ${argv.join(' ')} in ${netns}`);
  // The pid exists from fork on and keeps its start time through `ip netns exec` and setpriv's execs.
  const started = procStart(child.pid);
  if (!started) throw new Error(`${argv.join(' ')} in ${netns} (pid ${child.pid}) exited at once; see ${opts.logFile}`);
  child.on('error', () => undefined);
  children.set(child.pid, child);
  child.on('exit', (code, signal) => {
    children.delete(child.pid!);
    childExits.set(child.pid!, signal !== null ? `killed by ${signal}` : `exit code ${code}`);
  });
  child.unref();
  const channel = opts.channel ? (child.stdio[3] as Readable & { unref?: () => void }) : undefined;
  // Like the child itself, its channel must not keep this process alive (`ambient-lab up` exits).
  channel?.unref?.();
  // setpriv and `ip netns exec` exec in place: the pid is the program's own.
  return { pid: child.pid, marker: argv[1] ?? argv[0]!, startTime: started.startTime, ...(channel ? { channel } : {}) };
}

/** The one child of `parent` (nsenter's forked program), once it exists; its pid and start time. */
async function childPid(parent: LabPid, what: string): Promise<LabPid> {
  return waitFor(`${what}: nsenter (pid ${parent.pid}) started no program`, 5000, () => {
    if (!isOurs(parent)) throw new Error(`nsenter (pid ${parent.pid}) exited`);
    const kids = fs
      .readFileSync(`/proc/${parent.pid}/task/${parent.pid}/children`, 'utf8')
      .trim()
      .split(/\s+/)
      .filter((x) => x !== '')
      .map(Number);
    const kid = kids[0];
    const st = kid === undefined ? undefined : procStart(kid);
    return Promise.resolve(
      kid === undefined || !st ? undefined : { pid: kid, marker: parent.marker, startTime: st.startTime },
    );
  });
}

/** Is this pid still the process we started (alive, not a zombie, the same start time)? */
export function isOurs(p: LabPid): boolean {
  try {
    const now = procStart(p.pid);
    if (!now || now.zombie) return false;
    if (p.startTime !== undefined) return now.startTime === p.startTime;
    return fs.readFileSync(`/proc/${p.pid}/cmdline`, 'utf8').includes(p.marker);
  } catch {
    return false;
  }
}

const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

/**
 * Wait until `log`, from byte `from` on (what this start wrote: logs are appended to across
 * restarts), holds `line`; fails with the log's tail when the process `p` exits first.
 */
function untilLogLine(
  what: string,
  timeoutMs: number,
  p: LabPid,
  log: string,
  from: number,
  line: string,
): Promise<true> {
  return waitFor(what, timeoutMs, async () => {
    const text = fs.existsSync(log) ? fs.readFileSync(log).subarray(from).toString('utf8') : '';
    if (!isOurs(p)) throw new Error(`it exited; see ${log}: ${text.slice(-800)}`);
    return text.includes(line) ? true : undefined;
  });
}

/** Stop one of our processes by pid: SIGTERM, SIGKILL after `graceMs`; resolves when it is gone. */
async function stopPid(p: LabPid | undefined, graceMs = 3000, signal: NodeJS.Signals = 'SIGTERM'): Promise<void> {
  if (!p || !isOurs(p)) return;
  const kill = (sig: NodeJS.Signals): void => {
    try {
      process.kill(p.pid, sig);
    } catch (e) {
      if ((e as NodeJS.ErrnoException).code !== 'ESRCH') throw e;
    }
  };
  kill(signal);
  for (let t = 0; isOurs(p); t += 25) {
    if (t === graceMs) kill('SIGKILL');
    if (t > graceMs + 5000) throw new Error(`pid ${p.pid} (${p.marker}) did not exit after SIGKILL`);
    await sleep(25);
  }
}

/**
 * Like Promise.all, but settles only once every promise has (so nothing still runs when the
 * caller cleans up after a failure), then throws the first failure.
 */
async function allOrFirstError(ps: readonly Promise<void>[]): Promise<void> {
  const rs = await Promise.allSettled(ps);
  const failed = rs.find((r): r is PromiseRejectedResult => r.status === 'rejected');
  if (failed) throw failed.reason;
}

async function waitFor<T>(what: string, timeoutMs: number, probe: () => Promise<T | undefined>): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  let last: unknown;
  for (;;) {
    try {
      const v = await probe();
      if (v !== undefined) return v;
    } catch (e) {
      last = e;
    }
    if (Date.now() > deadline)
      throw new Error(
        `${what} within ${timeoutMs} ms${last ? `: ${last instanceof Error ? last.message : String(last)}` : ''}`,
      );
    await sleep(50);
  }
}

// ------------------------------------------------------------------ the lab

/** A .catch handler that accepts only an API answer with one of `codes` (a checked, expected state) and rethrows anything else. */
/** A .catch that makes the given API status codes (e.g. 404: not there) an undefined answer and rethrows anything else. */
export function unless(...codes: number[]): (e: unknown) => undefined {
  return (e: unknown) => {
    if (e instanceof WorldApiError && codes.includes(e.code)) return undefined;
    throw e;
  };
}

interface LabOptions {
  readonly nodes: number;
  readonly profile: Profile;
  /** Dual-stack pods and v6 capture (default false: IPv4 only). */
  readonly ipv6?: boolean;
  /** DNS capture by the agent's rules (default false). */
  readonly dnsCapture?: boolean;
  /** IPv6 capture by the agent and proxy (default: as `ipv6`); on with v4-only pods is upstream's default on a v4 cluster. */
  readonly captureIpv6?: boolean;
  /** The agent's rules backend (default iptables). */
  readonly rulesBackend?: Backend;
  /** Run directory parent (default /run/ambient-lab); the run dir is <parent>/<name>. */
  readonly stateRoot?: string;
  /**
   * A rendered manifest stream (a file of `kubectl kustomize` output) to launch the components
   * from; default: deploy/ rendered for profile, ipv6 (captureIpv6) and dnsCapture. Either way
   * its settings must be the lab's (checked at create).
   */
  readonly deployment?: string;
  /** Run the proxies' DNS listener (default false: captured DNS fails closed, as in the sim world). */
  readonly proxyDns?: boolean;
  /** Lab name (default: the run prefix without its trailing dash). */
  readonly name?: string;
  readonly prefix?: string;
  /** Nodes and components placed by someone else (see LabBackend); default: the netns world's. */
  readonly backend?: LabBackend;
  /**
   * Refresh the proxies' projected tokens as kubelet does (token-refresher.ts): for a lab that
   * stays up (`ambient-lab up`) longer than their 12 h. Default false: a test world lives minutes.
   */
  readonly refreshTokens?: boolean;
}

export const DEFAULT_STATE_ROOT = '/run/ambient-lab';

/** One line an app wrote on its report channel (world-pod-app.ts). */
interface AppRecord {
  readonly ev: 'ready' | 'accept' | 'datagram' | 'data';
  readonly port?: number;
  readonly peer?: string;
  readonly local?: string;
  readonly tag?: string;
}

interface AppChannel {
  lines: string[];
  partial: string;
  closed: boolean;
}

const appKey = (p: LabPid): string => `${p.pid}@${p.startTime ?? p.marker}`;

export class NetnsLab {
  readonly api: WorldApi;
  /** Report channels of the apps this process started, by process identity (appKey). */
  private readonly appChannels = new Map<string, AppChannel>();
  /** Per pod key: the tail of its sandbox operations (they run one after another). */
  private readonly sandboxOps = new Map<string, Promise<void>>();
  /** Per pod key: the kubelet's pending sandbox retry. */
  private readonly sandboxRetries = new Map<string, NodeJS.Timeout>();
  /**
   * Per node name: its components' launch, parsed once from the rendered deployment. That file
   * changes only through applyDeployment (which clears this); nothing else rewrites it while the
   * lab lives, so every component start on a node reads the same launch.
   */
  private readonly launches = new Map<string, ReturnType<typeof deploymentLaunch>>();
  /** Sandbox retries that failed for the harness's own reasons (not a refused ADD): settle throws them. */
  readonly kubeletErrors: string[] = [];

  /**
   * Is a sandbox operation (creation, a kubelet retry, a teardown) of pod `key` (namespace/name)
   * running or queued? While one is, the pod's record is between states — e.g. a retry whose ADD
   * succeeded is still starting the app — so nothing observed of that pod is settled.
   */
  sandboxInFlight(key: string): boolean {
    return this.sandboxOps.has(key);
  }

  /**
   * Test hook: a pause before each app starts, widening the window between an admitted CNI ADD
   * and a running pod so a test can show that settle() waits through it (0: no pause).
   */
  appStartDelayMs = 0;

  private constructor(
    readonly state: LabState,
    private readonly cluster: NetnsCluster | undefined,
    readonly backend?: LabBackend,
  ) {
    this.api = new WorldApi(state.apiSocket, state.controlSocket);
  }

  /** Re-open a lab from its state file (another process made it). */
  static attach(runDir: string): NetnsLab {
    const file = path.join(runDir, 'state.json');
    let text: string;
    try {
      text = fs.readFileSync(file, 'utf8');
    } catch {
      throw new Error(`no ambient-lab cluster state at ${file}: is the cluster up? (ambient-lab up)`);
    }
    return new NetnsLab(JSON.parse(text) as LabState, undefined);
  }

  static async create(opts: LabOptions): Promise<NetnsLab> {
    const prefix = opts.prefix ?? newRunPrefix();
    const name = opts.name ?? prefix.replace(/-$/, '');
    const runDir = path.join(opts.stateRoot ?? DEFAULT_STATE_ROOT, name);
    // A backend's node hosts exist before the topology: the cluster wires their namespaces.
    let nodePids: number[] | undefined;
    if (opts.backend) {
      const early = new NetnsLab(NetnsLab.initialState(opts, name, prefix, runDir, undefined), undefined, opts.backend);
      fs.mkdirSync(runDir, { recursive: true, mode: 0o755 });
      fs.chmodSync(runDir, 0o755);
      try {
        nodePids = await opts.backend.startNodes(early);
      } catch (e) {
        return rethrowAfterCleanup(e, [
          `remove the ${opts.backend.kind}'s nodes`,
          () => opts.backend!.dispose(early).then(() => fs.rmSync(runDir, { recursive: true, force: true })),
        ]);
      }
    }
    let cluster: NetnsCluster;
    try {
      cluster = await NetnsCluster.create({ nodes: opts.nodes, prefix, ...(nodePids ? { nodePids } : {}) });
    } catch (e) {
      if (!opts.backend) throw e;
      const early = new NetnsLab(NetnsLab.initialState(opts, name, prefix, runDir, undefined), undefined, opts.backend);
      return rethrowAfterCleanup(e, [
        `remove the ${opts.backend.kind}'s nodes`,
        () => opts.backend!.dispose(early).then(() => fs.rmSync(runDir, { recursive: true, force: true })),
      ]);
    }
    let lab: NetnsLab | undefined;
    try {
      fs.mkdirSync(runDir, { recursive: true, mode: 0o755 });
      fs.chmodSync(runDir, 0o755); // readable by the components; nothing here is writable by a pod
      const state = NetnsLab.initialState(opts, name, cluster.prefix, runDir, cluster);
      lab = new NetnsLab(state, cluster, opts.backend);
      lab.save();
      writeDeployment(state, opts);
      // One mesh root, made at install time as the README says: its key goes to the CA only (the
      // Secret ambient-lab-mesh-root), its certificate to every proxy (the ConfigMap).
      const root = await (await MeshCa.create('cluster.local')).exportRoot();
      // The proxy runs as the manifests' uid/gid, not root: what it reads is shared with its
      // group (never with the pods' uids), and each node's directory is writable by that group
      // (its status socket and connection log).
      const gid = lab.proxyGid();
      fs.writeFileSync(path.join(runDir, 'mesh-ca.pem'), root.certPem, { mode: 0o644 });
      // as the CA's Secret volume is mounted (deploy/base/ca.yaml: defaultMode 0440, fsGroup = its gid)
      writeGroupReadable(path.join(runDir, 'mesh-ca.key'), root.keyPem, lab.caGid(), 0o440);
      await lab.startApi();
      await lab.createDaemonSets();
      for (const n of state.nodes) {
        const dir = path.join(runDir, n.name);
        fs.mkdirSync(dir, { recursive: true });
        fs.chownSync(dir, 0, gid);
        fs.chmodSync(dir, 0o775);
        await lab.writeProxyVolumes(n.name);
        // A backend's nodes run the manifests' install-cni, which chains the plugin itself.
        if (!lab.backend) lab.writeNodeCni(n.name);
      }
      // Nodes are independent: their agents start together, then their proxies (each proxy
      // connects to its node's agent). The CA starts beside them: a proxy is ready without it and
      // asks it only for its pods' certificates. A failure is the first one's; the rest are
      // cleaned up below.
      await allOrFirstError([
        lab.startCa(),
        (async () => {
          await allOrFirstError(state.nodes.map((n) => lab!.startComponent('agent', n.name)));
          await allOrFirstError(state.nodes.map((n) => lab!.startComponent('proxy', n.name)));
        })(),
      ]);
      if (opts.refreshTokens) await lab.startTokenRefresher();
      return lab;
    } catch (e) {
      return rethrowAfterCleanup(
        e,
        lab ? ['destroy the lab', () => lab!.destroy()] : ['dispose the cluster', () => cluster.dispose()],
      );
    }
  }

  /** The state of a new lab; nodes, fabric and outside are known once the cluster exists. */
  private static initialState(
    opts: LabOptions,
    name: string,
    prefix: string,
    runDir: string,
    cluster: NetnsCluster | undefined,
  ): LabState {
    return {
      version: 1,
      name,
      prefix,
      runDir,
      profile: opts.profile,
      ipv6: opts.ipv6 ?? false,
      dnsCapture: opts.dnsCapture ?? false,
      ...(opts.captureIpv6 !== undefined ? { captureIpv6: opts.captureIpv6 } : {}),
      ...(opts.rulesBackend === 'nftables' ? { rulesBackend: opts.rulesBackend } : {}),
      deployment: path.join(runDir, 'deployment.yaml'),
      ...(opts.proxyDns !== undefined ? { proxyDns: opts.proxyDns } : {}),
      nodes: cluster
        ? cluster.nodes.map((n) => ({ name: n.name, netns: n.netns, index: n.index, address: n.address.ipv4 }))
        : Array.from({ length: opts.nodes }, (_, i) => ({
            name: `node-${i}`,
            netns: `${prefix}node-${i}`,
            index: i,
            address: nodeAddress(i).ipv4,
          })),
      fabric: cluster?.fabric.netns ?? `${prefix}fabric`,
      outside: cluster?.outside.netns ?? `${prefix}outside`,
      kubeconfig: path.join(runDir, 'kubeconfig'),
      apiSocket: path.join(runDir, 'api.sock'),
      controlSocket: path.join(runDir, 'api-control.sock'),
      api: undefined,
      components: {},
      pods: {},
      podSeq: 0,
    };
  }

  save(): void {
    const file = path.join(this.state.runDir, 'state.json');
    fs.writeFileSync(`${file}.tmp`, JSON.stringify(this.state, null, 2), { mode: 0o600 });
    fs.renameSync(`${file}.tmp`, file);
  }

  nodeDir(node: string): string {
    return path.join(this.state.runDir, node);
  }

  node(name: string): LabState['nodes'][number] {
    const n = this.state.nodes.find((x) => x.name === name);
    if (!n)
      throw new Error(`no node ${JSON.stringify(name)}; nodes are ${this.state.nodes.map((x) => x.name).join(', ')}`);
    return n;
  }

  /**
   * The API's serving certificate and key for in-cluster clients (a backend's components use the
   * service account: client-node and the CNI installer speak https to KUBERNETES_SERVICE_HOST).
   * Self-signed for the fabric gateway's address; it is also the CA the pods' ca.crt holds.
   */
  apiTlsFiles(): { cert: string; key: string } {
    return { cert: path.join(this.state.runDir, 'api-tls.crt'), key: path.join(this.state.runDir, 'api-tls.key') };
  }

  /** Where the in-cluster API is (KUBERNETES_SERVICE_HOST/PORT as a backend's components get them). */
  apiService(): { host: string; port: number } {
    return { host: FABRIC_GATEWAY.ipv4, port: API_PORT };
  }

  /** The group the CA runs as (its manifest's runAsGroup): it alone may read the root key. */
  caGid(): number {
    return this.deploymentLaunch(this.state.nodes[0]?.name ?? 'node-0').ca.gid;
  }

  /** The CA's address as the proxies reach it, by IP: the lab has no cluster DNS for its Service's name. */
  caAddress(): string {
    // A backend runs the CA as a pod of its own at its Service address; the lab's own CA process
    // listens on the fabric gateway beside the API.
    const host = this.backend?.startCa ? CA_SERVICE_ADDRESS.ipv4 : FABRIC_GATEWAY.ipv4;
    return `https://${host}:${CA_PORT}`;
  }

  /** Wire the network namespace of `pid` (the CA pod's sandbox) to the fabric at CA_SERVICE_ADDRESS; returns its name. */
  attachCaPod(pid: number): Promise<string> {
    if (!this.cluster) throw new Error(`lab ${this.state.name} has no cluster to attach the CA's pod to`);
    return this.cluster.attachFabricHost('ca', pid, CA_SERVICE_ADDRESS);
  }

  /** Undo attachCaPod. */
  detachCaPod(netns: string): Promise<void> {
    if (!this.cluster) throw new Error(`lab ${this.state.name} has no cluster`);
    return this.cluster.removeFabricHost(netns);
  }

  /**
   * Start the mesh CA as the CA Deployment's container says (user, group, capabilities, program,
   * environment), in the fabric namespace beside the API. The lab adds placement only: its
   * kubeconfig for the API facade (readable by the CA's group), the root Secret's files, the
   * fabric address to listen on and to put in the serving certificate.
   */
  async startCa(): Promise<void> {
    if (this.state.ca && isOurs(this.state.ca)) return;
    if (this.backend?.startCa) {
      const log = path.join(this.state.runDir, 'ca.log');
      const from = fs.existsSync(log) ? fs.statSync(log).size : 0;
      const p = await this.backend.startCa(this, log);
      this.state.ca = p;
      this.save();
      await untilLogLine('the mesh CA did not come up', 30_000, p, log, from, 'mesh CA serving');
      return;
    }
    const launch = this.deploymentLaunch(this.state.nodes[0]?.name ?? 'node-0').ca;
    const kubeconfig = path.join(this.state.runDir, 'ca.kubeconfig');
    // a backend's API terminates TLS on its TCP port (startApi); the lab's own API clients go through the Unix relay
    const scheme = this.backend ? 'https' : 'http';
    writeGroupReadable(kubeconfig, facadeKubeconfig(`${scheme}://${FABRIC_GATEWAY.ipv4}:${API_PORT}`), launch.gid);
    const log = path.join(this.state.runDir, 'ca.log');
    // the log is appended to across restarts: only what this start writes counts
    const from = fs.existsSync(log) ? fs.statSync(log).size : 0;
    const argv = [
      process.execPath,
      ...launch.nodeFlags,
      path.join(repoRoot(), launch.program),
      '--kubeconfig',
      kubeconfig,
      '--ca-cert',
      path.join(this.state.runDir, 'mesh-ca.pem'),
      '--ca-key',
      path.join(this.state.runDir, 'mesh-ca.key'),
      '--listen',
      `${FABRIC_GATEWAY.ipv4}:${CA_PORT}`,
      '--ips',
      FABRIC_GATEWAY.ipv4,
    ];
    const p = spawnInNetns(this.state.fabric, argv, {
      uid: launch.uid,
      gid: launch.gid,
      groups: launch.groups,
      caps: launch.caps,
      env: { ...launch.env },
      logFile: log,
    });
    this.state.ca = p;
    this.save();
    await untilLogLine('the mesh CA did not come up', 15_000, p, log, from, 'mesh CA serving');
  }

  /**
   * The kubelet's refresh of the proxies' projected tokens (token-refresher.ts), in the fabric
   * namespace beside the API, as root (it writes the nodes' token files). `maxAgeMs` refreshes
   * sooner than the tokens' lifetime says (tests).
   */
  async startTokenRefresher(o: { readonly checkEveryMs?: number; readonly maxAgeMs?: number } = {}): Promise<void> {
    if (this.state.tokenRefresher && isOurs(this.state.tokenRefresher)) return;
    const log = path.join(this.state.runDir, 'token-refresher.log');
    const from = fs.existsSync(log) ? fs.statSync(log).size : 0;
    const p = spawnInNetns(
      this.state.fabric,
      [
        process.execPath,
        path.join(repoRoot(), 'dist', 'e2e', 'netns', 'token-refresher.js'),
        this.state.runDir,
        ...(o.checkEveryMs !== undefined ? ['--check-every-ms', String(o.checkEveryMs)] : []),
        ...(o.maxAgeMs !== undefined ? ['--max-age-ms', String(o.maxAgeMs)] : []),
      ],
      // root for the nodes' files, with only CAP_CHOWN (each token file goes to the proxy's group)
      { uid: 0, gid: 0, groups: [], caps: ['chown'], env: {}, logFile: log },
    );
    this.state.tokenRefresher = p;
    this.save();
    await untilLogLine('the token refresher did not start', 15_000, p, log, from, 'token refresher running');
  }

  /** Stop the mesh CA (a test of the proxies without it); startCa() brings it back. */
  async stopCa(): Promise<void> {
    if (this.backend?.stopCa) await this.backend.stopCa(this);
    await stopPid(this.state.ca);
    this.state.ca = undefined;
    this.save();
  }

  /**
   * The files writeProxyVolumes made for `node`'s proxy: what root on that node can read (the
   * compromised node of World.forgedHbone).
   */
  proxyVolumeFiles(node: string): { readonly rootCert: string; readonly token: string } {
    const launch = this.deploymentLaunch(node).proxy;
    const token = launch.tokenMounts[0];
    if (!token) throw new Error(`${launch.source}: the proxy mounts no projected token`);
    const dir = this.nodeDir(node);
    return {
      rootCert: path.join(dir, 'configmaps', MESH_ROOT_CERT_CONFIGMAP, 'ca.crt'),
      token: path.join(dir, 'tokens', token.path),
    };
  }

  /**
   * What kubelet puts into the proxy pod's volumes on `node`, under the node's directory: the
   * mesh root certificate (its configMap volume) in configmaps/<name>/ca.crt, and each projected
   * service-account token in tokens/<path>, bound to the proxy's pod there (a DaemonSet pod the
   * lab makes in its API, as the DaemonSet controller would: the CA authorizes by it). Files are
   * readable by root and the proxy's group only, as fsGroup makes them.
   */
  async writeProxyVolumes(node: string): Promise<void> {
    const launch = this.deploymentLaunch(node).proxy;
    const dir = this.nodeDir(node);
    for (const m of launch.configMapMounts) {
      if (m.configMapName !== MESH_ROOT_CERT_CONFIGMAP)
        throw new Error(
          `${launch.source}: the lab holds the ConfigMap ${MESH_ROOT_CERT_CONFIGMAP} only; the proxy mounts ${m.configMapName}`,
        );
      const to = path.join(dir, 'configmaps', m.configMapName);
      fs.mkdirSync(to, { recursive: true, mode: 0o755 });
      fs.copyFileSync(path.join(this.state.runDir, 'mesh-ca.pem'), path.join(to, 'ca.crt'));
      fs.chmodSync(path.join(to, 'ca.crt'), m.defaultMode);
    }
    if (launch.tokenMounts.length === 0) return;
    const pod = await this.ensureProxyPod(node, launch.pod);
    fs.mkdirSync(path.join(dir, 'tokens'), { recursive: true, mode: 0o755 });
    const listFile = path.join(this.state.runDir, PROJECTED_TOKENS_FILE);
    const list: ProjectedTokens = fs.existsSync(listFile)
      ? (JSON.parse(fs.readFileSync(listFile, 'utf8')) as ProjectedTokens)
      : { apiSocket: this.state.apiSocket, controlSocket: this.state.controlSocket, tokens: [] };
    const written: ProjectedToken[] = [];
    for (const m of launch.tokenMounts) {
      const entry = {
        file: path.join(dir, 'tokens', m.path),
        gid: launch.gid,
        mode: 0o440,
        namespace: launch.pod.namespace,
        serviceAccount: launch.pod.serviceAccount,
        pod,
        audience: m.audience,
        expirationSeconds: m.expirationSeconds,
        mintedAtMs: Date.now(),
      };
      const token = await this.api.requestToken(
        entry.namespace,
        entry.serviceAccount,
        pod,
        entry.audience,
        entry.expirationSeconds,
      );
      writeTokenFile(entry.file, token, entry.gid, entry.mode);
      written.push(entry);
    }
    // What the token refresher keeps fresh (when it runs): this node's entries replace any before.
    const files = new Set(written.map((t) => t.file));
    const next: ProjectedTokens = { ...list, tokens: [...list.tokens.filter((t) => !files.has(t.file)), ...written] };
    fs.writeFileSync(`${listFile}.tmp`, JSON.stringify(next, null, 2), { mode: 0o600 });
    fs.renameSync(`${listFile}.tmp`, listFile);
  }

  /** The proxy DaemonSet's pod on `node` in the lab's API (made once; the CA checks a caller's token against it). */
  private async ensureProxyPod(
    node: string,
    pod: { readonly serviceAccount: string; readonly namespace: string },
  ): Promise<{ name: string; uid: string }> {
    const name = proxyPodName(node);
    const existing = await this.api.get('Pod', name, pod.namespace).catch(unless(404)); // 404: not made yet
    const made =
      existing ??
      (await this.api.create('Pod', {
        metadata: {
          name,
          namespace: pod.namespace,
          labels: {
            'app.kubernetes.io/name': 'ambient-lab-proxy',
            [LAB_COMPONENT_LABEL]: 'ambient-lab',
            'istio.io/dataplane-mode': 'none',
          },
        },
        spec: {
          nodeName: node,
          serviceAccountName: pod.serviceAccount,
          hostNetwork: true,
          containers: [{ name: 'proxy', image: 'ambient-lab/proxy:dev' }],
        },
      }));
    const uid = made.metadata?.uid;
    if (!uid) throw new Error(`the lab's API answered pod ${pod.namespace}/${name} without a uid`);
    // Running on the host network: the node's address is its IP, as kubelet reports it.
    const address = this.node(node).address;
    if (!existing)
      await this.api.patch(
        'Pod',
        name,
        pod.namespace,
        { status: { phase: 'Running', hostIP: address, podIP: address, podIPs: [{ ip: address }] } },
        true,
      );
    return { name, uid };
  }

  private async startApi(): Promise<void> {
    const log = path.join(this.state.runDir, 'api.log');
    const tls = this.backend ? this.apiTlsFiles() : undefined;
    if (tls) {
      await execIn(this.state.fabric, [
        'openssl',
        'req',
        '-x509',
        '-newkey',
        'ec',
        '-pkeyopt',
        'ec_paramgen_curve:prime256v1',
        '-nodes',
        '-days',
        '2',
        '-subj',
        '/CN=kubernetes',
        '-addext',
        `subjectAltName=IP:${FABRIC_GATEWAY.ipv4}`,
        '-addext',
        'basicConstraints=critical,CA:TRUE',
        '-keyout',
        tls.key,
        '-out',
        tls.cert,
      ]);
    }
    this.state.api = spawnInNetns(
      this.state.fabric,
      [
        process.execPath,
        builtProgram('e2e/netns/kube-api-process.js'),
        '--listen',
        `${FABRIC_GATEWAY.ipv4}:${API_PORT}`,
        '--api-socket',
        this.state.apiSocket,
        '--control-socket',
        this.state.controlSocket,
        ...(tls ? ['--tls-cert', tls.cert, '--tls-key', tls.key] : []),
      ],
      { logFile: log },
    );
    this.save();
    writeGroupReadable(
      this.state.kubeconfig,
      facadeKubeconfig(`http://${FABRIC_GATEWAY.ipv4}:${API_PORT}`),
      this.proxyGid(),
    );
    await waitFor('the API process did not come up', 15_000, async () => {
      if (!isOurs(this.state.api!))
        throw new Error(`it exited; see ${log}: ${fs.readFileSync(log, 'utf8').slice(-500)}`);
      return await this.api.list('Namespace').then(
        () => true,
        () => undefined,
      );
    });
    for (const ns of ['default', 'kube-system', 'istio-system'])
      await this.api.create('Namespace', { metadata: { name: ns } }).catch(unless(409)); // 409: it exists already
  }

  /**
   * The rendered deployment's DaemonSets in the lab's API (with their namespace), as `kubectl
   * apply` of it leaves them: the CNI installer (install-cni, run by a backend's agent pod) looks
   * its owner up at exit and, as the manifests set it (when-daemonset-gone), leaves the plugin in
   * place while the DaemonSet is there. Nothing else reads them; the lab runs no controller.
   */
  private async createDaemonSets(): Promise<void> {
    for (const ds of this.daemonSets()) {
      await this.api.create('Namespace', { metadata: { name: ds.metadata.namespace } }).catch(unless(409)); // 409: it exists already
      await this.api.create('DaemonSet', ds as KubeObjectOf<'DaemonSet'>);
    }
  }

  /**
   * Remove the deployment's DaemonSets from the lab's API, as `kubectl delete` of them would (no
   * finalizers in the sim: they are gone at once, and the installer's lookup gets 404). Their
   * pods are not stopped here: a backend stops its installer after this (ContainersBackend.uninstall).
   */
  async deleteDaemonSets(): Promise<void> {
    for (const ds of this.daemonSets())
      await this.api.delete('DaemonSet', ds.metadata.name, ds.metadata.namespace).catch(unless(404)); // 404: already gone
  }

  private daemonSets(): RenderedDaemonSet[] {
    return deploymentDaemonSets(fs.readFileSync(this.deploymentFile(), 'utf8'), this.deploymentFile());
  }

  /**
   * How a component starts on `node`: its user, groups, capabilities, Node.js flags, program and
   * environment come from the rendered deployment (e2e/deployment/launch.ts) — profile, IPv6 and
   * DNS capture included, through deploy/'s components — so this world runs what ships. The
   * proxy gets its capabilities as ambient capabilities where the image gives them as file
   * capabilities (ci/proxy.Dockerfile): the same effective set for the same uid.
   *
   * What the lab adds, all of it (flags win over the manifests' AMBIENT_LAB_* variables):
   *   placement — where a kubelet's mounts would put things, the lab's run dir holds them:
   *     --node, --kubeconfig (the API facade instead of in-cluster config), --zds-socket,
   *     --status-socket, --plugin-socket, --cni-bin-dir/--cni-conf-dir (the node's CNI dirs),
   *     --connection-log, --ca-root and --token-file (the proxy's configMap and projected token
   *     volumes, written by writeProxyVolumes), --ca-address (the CA at the fabric gateway: the
   *     lab has no cluster DNS for the Service's name);
   *   the CNI files install-cni would write: the lab writes the chained conflist itself
   *     (writeNodeCni) instead of running the installer, and its kubelet runs that file;
   *   --pod-uid-sources cgroup,environ — the lab's pod processes are not in kubelet's pod
   *     cgroups, so the agent also finds them by their environment;
   *   --repair-interval-ms 2000 — the repair loop at 2 s instead of 10 s, so tests that break a
   *     pod's rules see the repair within their timeouts;
   *   --dns-upstream — the proxies run no DNS listener unless the lab is asked (proxyDns), as the
   *     sim world's, so the worlds agree on captured DNS (it fails closed) and nothing depends on
   *     this machine's resolvers; asked, it forwards to a lab address where nothing answers (the
   *     fabric gateway's port 53). The manifests forward to the node's resolv.conf.
   *
   * `where` places the lab's files as the component sees them (default: this machine's paths,
   * with the flags above). A backend whose components run in containers (e2e/containers) passes
   * the node's paths and `node: true`: no --kubeconfig (they use the service account), no
   * --cni-bin-dir/--cni-conf-dir (the manifests' hostPath mounts and AMBIENT_LAB_CNI_*_DIR place
   * the node's CNI dirs, and install-cni writes them) and no --ca-root/--token-file (the backend
   * mounts the node's configmaps/ and tokens/ where the manifests' volumes go); it runs `launch`
   * with `labArgs` itself.
   */
  componentLaunch(
    component: LabComponent,
    node: string,
    where: { dir: string; node: boolean } = { dir: this.nodeDir(node), node: false },
  ): {
    argv: string[];
    labArgs: string[];
    spawn: SpawnOptions;
    env: Record<string, string>;
    launch: ReturnType<typeof deploymentLaunch>['agent'];
  } {
    const dir = where.dir;
    const launch = this.deploymentLaunch(node)[component];
    const common = [
      '--node',
      node,
      ...(where.node ? [] : ['--kubeconfig', this.state.kubeconfig]),
      '--zds-socket',
      path.join(dir, 'zds.sock'),
      '--status-socket',
      path.join(dir, `${component}-status.sock`),
    ];
    const program = [process.execPath, ...launch.nodeFlags, path.join(repoRoot(), launch.program)];
    const spawn: SpawnOptions = { uid: launch.uid, gid: launch.gid, groups: launch.groups, caps: launch.caps };
    if (component === 'agent') {
      const labArgs = [
        ...common,
        '--plugin-socket',
        path.join(dir, 'cni', 'agent.sock'),
        ...(where.node ? [] : ['--cni-bin-dir', this.cniBinDir(), '--cni-conf-dir', this.cniConfDir(node)]),
        '--pod-uid-sources',
        'cgroup,environ',
        '--repair-interval-ms',
        '2000',
      ];
      return { argv: [...program, ...labArgs], labArgs, spawn, env: { ...launch.env }, launch };
    }
    const tokenFile = launch.tokenMounts[0];
    const rootCert = launch.configMapMounts.find((m) => m.configMapName === MESH_ROOT_CERT_CONFIGMAP);
    const labArgs = [
      ...common,
      '--connection-log',
      path.join(dir, 'connections.jsonl'),
      '--ca-address',
      this.caAddress(),
      ...(where.node
        ? []
        : [
            ...(rootCert ? ['--ca-root', path.join(dir, 'configmaps', rootCert.configMapName, 'ca.crt')] : []),
            ...(tokenFile ? ['--token-file', path.join(dir, 'tokens', tokenFile.path)] : []),
          ]),
      this.state.proxyDns === true ? `--dns-upstream=${FABRIC_GATEWAY.ipv4}:53` : '--dns-upstream=',
    ];
    return { argv: [...program, ...labArgs], labArgs, spawn, env: { ...launch.env }, launch };
  }

  /** The group the proxy runs as (its manifest's runAsGroup): it may read the lab's shared files. */
  proxyGid(): number {
    return this.deploymentLaunch(this.state.nodes[0]?.name ?? 'node-0').proxy.gid;
  }

  /**
   * Deploy other settings, as `kubectl apply -k` of another overlay would: deploy/ is rendered
   * again with `change` over the lab's settings and replaces the lab's deployment; components
   * started from now on run it (restart them, as the DaemonSet's rollout would).
   */
  applyDeployment(change: Partial<DeploymentChoice>): void {
    const state = this.state as { -readonly [K in keyof LabState]: LabState[K] };
    if (change.profile !== undefined) state.profile = change.profile;
    if (change.dnsCapture !== undefined) state.dnsCapture = change.dnsCapture;
    if (change.ipv6 !== undefined) state.captureIpv6 = change.ipv6;
    if (change.backend !== undefined) state.rulesBackend = change.backend;
    this.launches.clear();
    writeDeployment(this.state, {});
    this.save();
  }

  /**
   * The components' launch on `node`, from the lab's rendered manifests (the one loader); a
   * backend reads the containers the lab does not launch itself (install-cni) from it too.
   * Parsed once per node (launches); a file that cannot be read or parsed throws on every call.
   */
  deploymentLaunch(node: string): ReturnType<typeof deploymentLaunch> {
    const cached = this.launches.get(node);
    if (cached) return cached;
    const file = this.deploymentFile();
    const launch = deploymentLaunch(fs.readFileSync(file, 'utf8'), { nodeName: node, source: file });
    this.launches.set(node, launch);
    return launch;
  }

  private deploymentFile(): string {
    const file = this.state.deployment;
    if (file === undefined)
      throw new Error(
        `lab ${this.state.name} was made before deploy/ (its state has no rendered deployment): take it down (ambient-lab down --name ${this.state.name}) and bring it up again`,
      );
    return file;
  }

  running(component: LabComponent, node: string): boolean {
    const p = this.state.components[`${node}/${component}`];
    return p !== undefined && isOurs(p);
  }

  async startComponent(component: LabComponent, node: string): Promise<void> {
    const n = this.node(node);
    if (this.running(component, node)) return;
    const log = path.join(this.nodeDir(node), `${component}.log`);
    let p: LabPid;
    if (this.backend) p = await this.backend.startComponent(this, component, node, log);
    else {
      const { argv, spawn, env } = this.componentLaunch(component, node);
      p = spawnInNetns(n.netns, argv, { ...spawn, env, logFile: log });
    }
    this.state.components[`${node}/${component}`] = p;
    this.save();
    await waitFor(`the ${component} on ${node} did not become ready`, 20_000, async () => {
      if (!isOurs(p)) throw new Error(`it exited; see ${log}: ${fs.readFileSync(log, 'utf8').slice(-800)}`);
      return (await this.componentStatus(component, node)).ready ? true : undefined;
    });
  }

  async stopComponent(component: LabComponent, node: string): Promise<void> {
    if (this.backend) await this.backend.stopComponent(this, component, node);
    await stopPid(this.state.components[`${node}/${component}`]);
    this.state.components[`${node}/${component}`] = undefined;
    this.save();
  }

  /** The component's /readyz and /status over its Unix status socket. */
  async componentStatus(
    component: LabComponent,
    node: string,
  ): Promise<{ running: boolean; ready: boolean; detail: string; status: Record<string, unknown> | undefined }> {
    const sock = path.join(this.nodeDir(node), `${component}-status.sock`);
    if (!this.running(component, node))
      return { running: false, ready: false, detail: 'not running', status: undefined };
    const { request } = await import('./world-api-client.js');
    try {
      const status = (await request(sock, 'GET', '/status')) as Record<string, unknown>;
      const ready =
        component === 'agent'
          ? (status['health'] as { ready?: boolean } | undefined)?.ready === true
          : status['ready'] === true;
      const detail =
        component === 'agent'
          ? String((status['health'] as { detail?: string } | undefined)?.detail ?? '')
          : `zds ${status['zdsConnected'] ? 'connected' : 'not connected'}, ${(status['pods'] as unknown[]).length} pod(s) served`;
      return { running: true, ready, detail, status };
    } catch (e) {
      return { running: true, ready: false, detail: e instanceof Error ? e.message : String(e), status: undefined };
    }
  }

  /**
   * Ask the agent on `node` for a repair pass now (POST /repair on its status socket, which only
   * that socket serves); resolves when the pass has finished. Throws what failed (not running,
   * no answer, an error status).
   */
  async agentRepairNow(node: string): Promise<void> {
    if (!this.running('agent', node)) throw new Error(`the agent on ${node} is not running`);
    const { request } = await import('./world-api-client.js');
    await request(path.join(this.nodeDir(node), 'agent-status.sock'), 'POST', '/repair');
  }

  // ------------------------------------------------------------------ CNI

  /** The node's CNI bin dir (shared by the lab's nodes): Debian's plugins are in DEBIAN_CNI_DIR. */
  private cniBinDir(): string {
    return path.join(this.state.runDir, 'cni-bin');
  }

  /** The node's CNI conf dir: the config list its runtime (the lab's kubelet) uses. */
  /** Nodes whose CNI plugin cannot reach the API (World.cniApiFault): their conflist names a kubeconfig whose server refuses. */
  private readonly cniApiFaults = new Map<string, CniApiFaultMode>();

  /**
   * World.cniApiFault on a lab whose CNI files the lab writes (no backend): while `failing`, the
   * node's chained plugin config names a kubeconfig whose server is the API's address on a port
   * nothing listens on, so each of the plugin's API calls is refused; the agents keep the real
   * API. The kubelet reads the conflist at each sandbox, as a runtime does.
   */
  /**
   * Break the Kubernetes API for the CNI plugin on `node` (the chained conflist points it
   * elsewhere): `unreachable`, every call is refused; `error`, every call answers 500. `false`
   * points it back at the API.
   */
  setCniApiFault(node: string, failing: boolean, mode: CniApiFaultMode = 'unreachable'): void {
    if (this.backend)
      throw new Error(
        `cniApiFault: the ${this.backend.kind}'s CNI files are install-cni's, not the lab's; not supported there`,
      );
    this.node(node);
    if (failing) this.cniApiFaults.set(node, mode);
    else this.cniApiFaults.delete(node);
    this.writeNodeCni(node);
  }

  cniConfDir(node: string): string {
    return path.join(this.nodeDir(node), 'net.d');
  }

  /**
   * What install-cni leaves on a node, written by the lab itself before the agent starts: our
   * plugin in the bin dir and chained into the node's primary conflist (bridge + host-local,
   * then ambient-lab-cni with the enrollment settings the agent runs with by default). The agent
   * reads these (--cni-bin-dir/--cni-conf-dir) for its readiness, and the lab's kubelet runs the
   * chain from this file.
   */
  private writeNodeCni(node: string): void {
    const n = this.node(node);
    const dir = this.nodeDir(node);
    let kubeconfig = this.state.kubeconfig;
    const fault = this.cniApiFaults.get(node);
    if (fault !== undefined) {
      // unreachable: the API's address on a port nothing listens on (every call ECONNREFUSED);
      // error: the API process's listener that answers every request 500 (kube-api-process.ts)
      kubeconfig = path.join(dir, `cni-api-${fault}.kubeconfig`);
      facadeKubeconfig(`http://${FABRIC_GATEWAY.ipv4}:${API_PORT + (fault === 'unreachable' ? 1 : 2)}`, kubeconfig);
    }
    const binDir = this.cniBinDir();
    const link = path.join(binDir, 'ambient-lab-cni');
    if (!fs.existsSync(link)) {
      fs.mkdirSync(binDir, { recursive: true });
      fs.symlinkSync(path.join(repoRoot(), 'bin', 'ambient-lab-cni.js'), link);
    }
    const podnet = primaryConfList({
      node: n.index,
      ipv6: this.state.ipv6 === true,
      dataDir: path.join(dir, 'ipam'),
      chained: [
        {
          type: 'ambient-lab-cni',
          agentSocket: path.join(dir, 'cni', 'agent.sock'),
          kubeconfig,
          apiAttempts: 3,
          apiRetryDelayMs: 200,
          agentTimeoutMs: 10_000,
          ...DEPLOYMENT_ENROLLMENT_SETTINGS,
        },
      ],
    });
    fs.mkdirSync(this.cniConfDir(node), { recursive: true });
    fs.writeFileSync(path.join(this.cniConfDir(node), PRIMARY_CONFLIST_FILE), `${JSON.stringify(podnet, null, 2)}\n`);
  }

  private async chains(node: string): Promise<{ chain: CniChain; ifname: string }[]> {
    // A backend's nodes have their own CNI configuration (install-cni chains the plugin there).
    if (this.backend) return this.backend.chains(this, node);
    const n = this.node(node);
    const dir = this.nodeDir(node);
    const binDir = this.cniBinDir();
    const exec = new NetnsPluginExec({ netns: n.netns, dirs: [DEBIAN_CNI_DIR, binDir] });
    const cache = new FileResultCache(path.join(dir, 'cni-cache'));
    const opts = { path: [DEBIAN_CNI_DIR, binDir] };
    const loopback: CniConfList = { cniVersion: '1.0.0', name: 'cni-loopback', plugins: [{ type: 'loopback' }] };
    // The conflist the node's runtime uses, as on disk (writeNodeCni).
    const podnet = parseConfList(fs.readFileSync(path.join(this.cniConfDir(node), PRIMARY_CONFLIST_FILE), 'utf8'));
    return [
      { chain: new CniChain(loopback, exec, cache, opts), ifname: 'lo' },
      { chain: new CniChain(podnet, exec, cache, opts), ifname: 'eth0' },
    ];
  }

  private clusterOrThrow(): NetnsCluster {
    if (!this.cluster)
      throw new Error(
        'this lab was attached from its state file; pod sandboxes can only be made by the process that created it',
      );
    return this.cluster;
  }

  /** Run `op` on pod `p` after every sandbox operation already queued for it. */
  private serial(p: LabPodState, op: () => Promise<void>): Promise<void> {
    const key = `${p.namespace}/${p.name}`;
    const run = (this.sandboxOps.get(key) ?? Promise.resolve()).then(op);
    // The queue goes on after a failed operation; the caller gets its failure.
    const tail = run.then(
      () => undefined,
      () => undefined,
    );
    this.sandboxOps.set(key, tail);
    void tail.then(() => {
      if (this.sandboxOps.get(key) === tail) this.sandboxOps.delete(key);
    });
    return run;
  }

  private cancelRetry(p: LabPodState): void {
    const key = `${p.namespace}/${p.name}`;
    const t = this.sandboxRetries.get(key);
    if (t !== undefined) clearTimeout(t);
    this.sandboxRetries.delete(key);
  }

  /** After a refused ADD: try the sandbox again after the kubelet's backoff (see the file comment). */
  private scheduleRetry(p: LabPodState): void {
    this.cancelRetry(p);
    const key = `${p.namespace}/${p.name}`;
    const failures = p.sandboxFailures ?? 1;
    const delay = sandboxRetryDelayMs(failures);
    const timer = setTimeout(() => {
      this.sandboxRetries.delete(key);
      this.serial(p, async () => {
        // Deleted, torn down for a reboot, or started meanwhile: nothing to retry.
        if (this.state.pods[key] !== p || p.started || p.short !== undefined) return;
        await this.sandboxOnce(p);
      }).catch((e: unknown) => {
        this.kubeletErrors.push(
          `the kubelet's sandbox retry of ${key} failed: ${e instanceof Error ? e.message : String(e)}`,
        );
      });
    }, delay);
    // Like the lab's processes, a pending retry does not keep this process alive (`ambient-lab up` exits).
    timer.unref();
    this.sandboxRetries.set(key, timer);
  }

  /** Sandbox: netns + CNI ADD (lo, then eth0 with our plugin) + app; status written; retried while the ADD is refused. */
  runSandbox(p: LabPodState): Promise<void> {
    return this.serial(p, () => this.sandboxOnce(p));
  }

  private async sandboxOnce(p: LabPodState): Promise<void> {
    if (p.hostNetwork) {
      p.netns = this.node(p.node).netns;
      p.ips = [this.node(p.node).address];
      await this.startApp(p);
      p.started = true;
      await this.writeStatus(p);
      return;
    }
    const cluster = this.clusterOrThrow();
    p.sandboxStarts = (p.sandboxStarts ?? 0) + 1;
    const short = `p${this.state.podSeq++}`;
    const info = await cluster.createPodNetns(p.node, short);
    p.short = short;
    p.netns = info.netns;
    const cniNetns = this.backend ? await this.backend.exposeSandbox(this, p.node, info.netns) : info.netnsPath;
    // What container runtimes do in a pod netns (containerd, CRI-O): any uid may bind low ports,
    // so a non-root app can serve e.g. port 53 (the sim's pods can too).
    await execIn(info.netns, ['sysctl', '-q', '-w', 'net.ipv4.ip_unprivileged_port_start=0']);
    for (const [k, v] of Object.entries(p.sysctls ?? {})) {
      if (!/^net\.[A-Za-z0-9_.]+$/.test(k))
        throw new Error(
          `sandbox sysctl ${JSON.stringify(k)}: only network (net.*) sysctls belong to a pod's namespace`,
        );
      await execIn(info.netns, ['sysctl', '-q', '-w', `${k}=${v}`]);
    }
    p.containerId = `${this.state.prefix}${short}`;
    const att = (
      ifname: string,
    ): { containerId: string; netns: string; ifname: string; args: Array<[string, string]> } => ({
      containerId: p.containerId!,
      netns: cniNetns,
      ifname,
      args: k8sCniArgs({ namespace: p.namespace, name: p.name, uid: p.uid }, p.containerId!),
    });
    const nets = await this.chains(p.node);
    const results: CniResult[] = [];
    try {
      for (const n of nets) results.push(await n.chain.add(att(n.ifname)));
    } catch (e) {
      // DEL after a failed ADD (CNI spec): it must succeed even for what ADD never made (our plugin's
      // DEL does nothing; Debian's tolerate missing state), so a DEL or netns removal that fails
      // is a leak or a broken plugin — a harness error, not a refused pod.
      try {
        for (const n of [...nets].reverse()) await n.chain.del(att(n.ifname));
        if (this.backend) await this.backend.hideSandbox(this, p.node, info.netns);
        await cluster.removePod(short);
      } catch (cleanupError) {
        throw new Error(
          `pod ${p.namespace}/${p.name}: cleaning up after the failed CNI ADD (${e instanceof Error ? e.message : String(e)}) failed: ${cleanupError instanceof Error ? cleanupError.message : String(cleanupError)}`,
          { cause: cleanupError },
        );
      }
      p.short = undefined;
      p.netns = undefined;
      p.started = false;
      p.error = e instanceof Error ? e.message : String(e);
      p.sandboxAttempts = (p.sandboxAttempts ?? 0) + 1;
      p.sandboxFailures = (p.sandboxFailures ?? 0) + 1;
      this.save();
      await this.writeStatus(p);
      this.scheduleRetry(p);
      return;
    }
    const last = results[results.length - 1];
    p.ips = (last?.ips ?? []).map((ip) => cidrAddress(ip.address)).filter((a) => a !== '127.0.0.1' && a !== '::1');
    await this.startApp(p);
    // The attempt has finished only now that the pod runs: until then its record keeps the last
    // error (a kubelet retry whose ADD succeeded is not a started pod while its app starts).
    p.error = undefined;
    p.sandboxAttempts = (p.sandboxAttempts ?? 0) + 1;
    p.sandboxFailures = 0;
    p.started = true;
    this.save();
    await this.writeStatus(p);
  }

  /**
   * Start the pod's app. What it reports (accepts, datagrams, readiness) reaches the harness on
   * fd 3, a socket pair only this process and that app hold — never a file: a report file other
   * pods can reach lets one pod forge another's "seen source" (report files used to be mode 0666).
   * A socket cannot be opened through /proc/PID/fd, so another process gets at the app's end only
   * with ptrace rights over the app (ptrace, pidfd_getfd), which a process of the same uid has
   * unless the app is non-dumpable. So a non-root app starts as root holding only CAP_SETUID and
   * CAP_SETGID and drops to its uid itself (world-pod-app --drop-to): a credential change after
   * exec leaves a process non-dumpable (fs.suid_dumpable 0), and without capabilities it ends as
   * the pod spec says (effectiveAppCaps: none). Residual: a uid-0 app keeps its dumpable state (it
   * would need a capability set change Node cannot make), so another uid-0 pod with at least its
   * capabilities could still reach its channel through ptrace — no threat model's action does.
   */
  private async startApp(p: LabPodState): Promise<void> {
    if (this.appStartDelayMs > 0) await sleep(this.appStartDelayMs);
    const log = this.appLogFile(p);
    fs.mkdirSync(path.dirname(log), { recursive: true, mode: 0o755 });
    const selfDrop = p.appUid !== 0;
    const argv = [
      process.execPath,
      builtProgram('e2e/netns/world-pod-app.js'),
      '--pod',
      `${p.namespace}/${p.name}`,
      '--report-fd',
      '3',
      '--tcp',
      p.tcpPorts.join(','),
      '--udp',
      p.udpPorts.join(','),
      ...(selfDrop ? ['--drop-to', `${p.appUid}:${p.appUid}`] : []),
    ];
    const pidNs = this.backend?.podPidNamespace(this, p.node);
    const { channel, ...launched } = spawnInNetns(p.netns!, argv, {
      ...(selfDrop
        ? { caps: ['setuid', 'setgid'] }
        : { uid: p.appUid, caps: effectiveAppCaps(p).map((c) => c.toLowerCase()) }),
      env: { [POD_UID_ENV]: p.uid },
      logFile: log,
      channel: true,
      ...(pidNs !== undefined ? { pidNamespaceOf: pidNs } : {}),
    });
    const pid = pidNs !== undefined ? await childPid(launched, `the app of ${p.namespace}/${p.name}`) : launched;
    p.app = pid;
    const rec: AppChannel = { lines: [], partial: '', closed: false };
    this.appChannels.set(appKey(pid), rec);
    channel!.setEncoding('utf8');
    channel!.on('data', (d: string) => {
      const parts = (rec.partial + d).split('\n');
      rec.partial = parts.pop() ?? '';
      rec.lines.push(...parts.filter((l) => l !== ''));
    });
    channel!.on('close', () => {
      rec.closed = true;
    });
    channel!.on('error', () => {
      rec.closed = true;
    });
    await waitFor(`the app of ${p.namespace}/${p.name} did not start listening`, 10_000, async () => {
      if (!isOurs(p.app!))
        throw new Error(
          `it exited (${childExits.get(p.app!.pid) ?? 'how: unknown'}); its output: ${fs.readFileSync(log, 'utf8').slice(-500) || '(none)'}`,
        );
      return rec.lines.some((l) => l.includes('"ready"')) ? true : undefined;
    });
  }

  /**
   * What the pod's running app reported on its channel (see startApp), in order. Throws when this
   * process did not start that app (a lab attached from its state file holds no channels).
   */
  appRecords(p: LabPodState): AppRecord[] {
    if (!p.app) return [];
    const rec = this.appChannels.get(appKey(p.app));
    if (!rec)
      throw new Error(
        `the reports of ${p.namespace}/${p.name}'s app (pid ${p.app.pid}) go to the process that started it, not to this one (lab attached from ${this.state.runDir})`,
      );
    return rec.lines.map((l) => {
      try {
        return JSON.parse(l) as AppRecord;
      } catch {
        throw new Error(
          `the app of ${p.namespace}/${p.name} (pid ${p.app?.pid}) wrote a line that is not JSON on its report channel: ${JSON.stringify(l.slice(0, 200))}`,
        );
      }
    });
  }

  /** The app's stdout and stderr (root-owned; the app writes through the fd it inherits). */
  appLogFile(p: LabPodState): string {
    return path.join(this.state.runDir, 'pods', `${p.namespace}.${p.name}.${p.uid}.log`);
  }

  private async writeStatus(p: LabPodState): Promise<void> {
    const status = p.started
      ? {
          phase: 'Running',
          hostIP: this.node(p.node).address,
          podIP: p.ips[0],
          podIPs: p.ips.map((ip) => ({ ip })),
          conditions: [{ type: 'Ready', status: 'True' }],
        }
      : {
          phase: 'Pending',
          conditions: [
            { type: 'PodScheduled', status: 'True' },
            {
              type: 'Ready',
              status: 'False',
              reason: 'SandboxCreationFailed',
              message: (p.error ?? '').slice(0, 1000),
            },
          ],
        };
    // 404: the pod was deleted meanwhile (a deletion racing its sandbox); any other failure leaves
    // the API's phase and IPs wrong, which every later observation would read.
    await this.api.patch('Pod', p.name, p.namespace, { status }, true).catch(unless(404));
  }

  /** Stop the app, CNI DEL in reverse, remove the netns; a pending retry is dropped. */
  teardownSandbox(p: LabPodState, opts: { cniDel: boolean } = { cniDel: true }): Promise<void> {
    this.cancelRetry(p);
    return this.serial(p, async () => {
      this.cancelRetry(p); // a retry that fired while earlier operations ran
      await this.teardownOnce(p, opts);
    });
  }

  private async teardownOnce(p: LabPodState, opts: { cniDel: boolean }): Promise<void> {
    await stopPid(p.app);
    if (p.app) this.appChannels.delete(appKey(p.app));
    p.app = undefined;
    p.started = false;
    if (!p.hostNetwork && p.short !== undefined) {
      const cluster = this.clusterOrThrow();
      if (opts.cniDel) {
        const info = cluster.pod(p.short);
        // DEL must succeed (CNI spec: also for what is already gone); one that fails leaks an IP or a veth.
        for (const n of [...(await this.chains(p.node))].reverse()) {
          await n.chain.del({
            containerId: p.containerId!,
            netns: this.backend ? this.backend.sandboxPath(this, p.node, info.netns) : info.netnsPath,
            ifname: n.ifname,
            args: k8sCniArgs({ namespace: p.namespace, name: p.name, uid: p.uid }, p.containerId!),
          });
        }
      }
      if (this.backend) await this.backend.hideSandbox(this, p.node, p.netns!);
      await cluster.removePod(p.short);
      p.short = undefined;
      p.netns = undefined;
    }
    this.save();
  }

  async createPod(spec: {
    namespace: string;
    name: string;
    node: string;
    labels?: Record<string, string>;
    annotations?: Record<string, string>;
    serviceAccount?: string;
    hostNetwork?: boolean;
    uid: number;
    /** 'image': the spec declares no runAsUser; the app still runs as `uid`, as its image's USER (AppSpec.uidSource). */
    uidSource?: UidSource;
    caps: readonly string[];
    tcpPorts: readonly number[];
    udpPorts?: readonly number[];
    probePorts?: readonly number[];
    sysctls?: Readonly<Record<string, string>>;
  }): Promise<LabPodState> {
    this.node(spec.node);
    const pod: KubeObjectOf<'Pod'> = {
      metadata: {
        name: spec.name,
        namespace: spec.namespace,
        labels: spec.labels ?? {},
        annotations: spec.annotations ?? {},
      },
      spec: {
        nodeName: spec.node,
        hostNetwork: spec.hostNetwork ?? false,
        serviceAccountName: spec.serviceAccount ?? 'default',
        containers: [
          {
            name: 'app',
            image: spec.uidSource === 'image' ? `ambient-lab/pod-app:user-${spec.uid}` : 'ambient-lab/pod-app',
            securityContext: {
              ...(spec.uidSource === 'image' ? {} : { runAsUser: spec.uid }),
              capabilities: { drop: ['ALL'], add: [...spec.caps] },
            },
            ports: spec.tcpPorts.map((containerPort) => ({ containerPort, protocol: 'TCP' })),
            ...(spec.probePorts && spec.probePorts.length > 0
              ? { readinessProbe: { tcpSocket: { port: spec.probePorts[0]! } } }
              : {}),
          },
        ],
      },
    };
    const created = await this.api.create('Pod', pod);
    const p: LabPodState = {
      namespace: spec.namespace,
      name: spec.name,
      uid: created.metadata?.uid ?? '',
      node: spec.node,
      hostNetwork: spec.hostNetwork ?? false,
      short: undefined,
      netns: undefined,
      containerId: undefined,
      ips: [],
      app: undefined,
      appUid: spec.uid,
      appCaps: spec.caps,
      tcpPorts: spec.tcpPorts,
      udpPorts: spec.udpPorts ?? [],
      ...(spec.sysctls ? { sysctls: spec.sysctls } : {}),
      started: false,
      error: undefined,
    };
    this.state.pods[`${spec.namespace}/${spec.name}`] = p;
    this.save();
    await this.runSandbox(p);
    return p;
  }

  async deletePod(namespace: string, name: string): Promise<void> {
    const p = this.state.pods[`${namespace}/${name}`];
    if (!p) throw new Error(`no pod ${namespace}/${name} in lab ${this.state.name}`);
    await this.teardownSandbox(p);
    await this.api.delete('Pod', name, namespace).catch(unless(404)); // 404: already gone
    delete this.state.pods[`${namespace}/${name}`];
    this.save();
  }

  /**
   * Reboot approximation: the node netns itself stays (its bridge and routes stand for what the
   * node's boot scripts recreate), but everything a reboot loses goes: the agent and proxy are
   * stopped, every pod sandbox on the node is removed WITHOUT CNI DEL (the node died; the
   * runtime never ran DEL), the node's CNI result cache and host-local IPAM state are cleared
   * (they live on tmpfs /run or are reset on a real node), the node netns' iptables rules are
   * flushed and its ipsets destroyed; then the components start again and every pod gets a new sandbox (new netns and
   * ADD, same pod UID), as the kubelet does after a reboot.
   */
  async rebootNode(node: string): Promise<void> {
    const n = this.node(node);
    await this.stopComponent('proxy', node);
    await this.stopComponent('agent', node);
    const pods = Object.values(this.state.pods).filter((p) => p.node === node);
    for (const p of pods) await this.teardownSandbox(p, { cniDel: false });
    for (const d of ['cni-cache', 'ipam'])
      fs.rmSync(path.join(this.nodeDir(node), d), { recursive: true, force: true });
    // A reboot loses the node's netfilter state: its iptables rules (all the agent's; the lab adds
    // none to a node) and then its ipsets, which those rules held in use. Something left behind
    // would make this reboot something else, so a failure throws.
    for (const [save, restore] of [
      ['iptables-save', 'iptables-restore'],
      ['ip6tables-save', 'ip6tables-restore'],
    ] as const) {
      const tables = [...(await execIn(n.netns, [save])).matchAll(/^\*(\S+)$/gm)].map((m) => m[1]!);
      if (tables.length > 0) await execIn(n.netns, [restore], tables.map((t) => `*${t}\nCOMMIT\n`).join(''));
    }
    for (const set of (await execIn(n.netns, ['ipset', 'list', '-n']))
      .split('\n')
      .map((l) => l.trim())
      .filter((l) => l !== '')) {
      await execIn(n.netns, ['ipset', 'destroy', set]);
    }
    await this.startComponent('agent', node);
    await this.startComponent('proxy', node);
    for (const p of pods) await this.runSandbox(p);
  }

  /** Stop every process (by pid), remove every namespace; verify nothing is left. */
  async destroy(): Promise<void> {
    const errors: string[] = [];
    // No sandbox operation may run while (or after) the cluster goes.
    for (const t of this.sandboxRetries.values()) clearTimeout(t);
    this.sandboxRetries.clear();
    await Promise.all([...this.sandboxOps.values()]);
    for (const p of Object.values(this.state.pods)) await stopPid(p.app).catch((e: unknown) => errors.push(String(e)));
    if (this.backend) await this.backend.dispose(this).catch((e: unknown) => errors.push(String(e)));
    for (const p of Object.values(this.state.components))
      await stopPid(p).catch((e: unknown) => errors.push(String(e)));
    await stopPid(this.state.ca).catch((e: unknown) => errors.push(String(e)));
    await stopPid(this.state.tokenRefresher).catch((e: unknown) => errors.push(String(e)));
    await stopPid(this.state.api).catch((e: unknown) => errors.push(String(e)));
    if (this.cluster) await this.cluster.dispose().catch((e: unknown) => errors.push(String(e)));
    else {
      const { removeLeftovers } = await import('./leftovers.js');
      // Processes we did not record (a CNI plugin hung mid-run) can only live in our namespaces.
      await removeLeftovers(this.state.prefix, { killProcesses: true }).catch((e: unknown) => errors.push(String(e)));
    }
    const { listNetns } = await import('./ip.js');
    const left = (await listNetns()).filter((x) => x.startsWith(this.state.prefix));
    if (left.length > 0) errors.push(`namespaces left: ${left.join(', ')}`);
    const alive = [
      ...Object.values(this.state.pods).map((p) => p.app),
      ...Object.values(this.state.components),
      this.state.api,
      this.state.ca,
      this.state.tokenRefresher,
    ].filter((p): p is LabPid => p !== undefined && isOurs(p));
    if (alive.length > 0) errors.push(`processes still running: ${alive.map((p) => p.pid).join(', ')}`);
    if (errors.length === 0) fs.rmSync(this.state.runDir, { recursive: true, force: true });
    if (errors.length > 0)
      throw new Error(`ambient-lab ${this.state.name}: cleanup left things behind: ${errors.join('; ')}`);
  }
}
