/**
 * The container world (issue #17 item 3): the netns world's harness (NetnsLab, NetnsWorld: API,
 * topology, kubelet, probes, attribution) over nodes and components that are containers, driven
 * by the `testcontainers` package:
 *
 *   node container   per node, image `node`, network mode none: its network namespace is the
 *                    node's (named `<prefix>node-i` on this machine with `ip netns attach` and
 *                    wired to the fabric by veths, as the netns world wires its own); its host
 *                    paths (/opt/cni/bin, /etc/cni/net.d, /opt/ambient-lab, /var/run/ambient-lab,
 *                    /var/run/netns, /run/xtables.lock) are directories of the run dir, so the
 *                    agent's and the proxy's containers share them as kubelet's hostPath would.
 *   agent pod        the DaemonSet's two containers (install-cni, agent) from image `agent`, and
 *   proxy pod        the proxy from image `proxy`, each with exactly the rendered manifests'
 *                    settings (e2e/deployment/launch.ts): user, group, supplementary groups,
 *                    capabilities (drop ALL, add), no_new_privs for allowPrivilegeEscalation
 *                    false, read-only root, env, command; hostNetwork and hostPID join the node
 *                    container's namespaces (`container:<node>`); hostPath mounts are bind mounts
 *                    of the node's directories (HostToContainer: rslave); the service account is
 *                    mounted at /var/run/secrets/kubernetes.io/serviceaccount (token, ca.crt,
 *                    namespace) with KUBERNETES_SERVICE_HOST/PORT, so they use in-cluster config.
 *   mesh CA pod      the CA Deployment's pod: a sandbox container (network mode none) whose netns
 *                    is wired to the fabric at the Service's address (192.0.2.2), and the CA's
 *                    container from image `ca` in it, as the manifest launches it (startCa).
 *   API              the sim's HTTP facade (kube-api-process.ts) in the fabric netns, as in the
 *                    netns world, behind a TLS relay (client-node's in-cluster config and the CNI
 *                    installer speak https; the facade itself only speaks HTTP).
 *   pod sandboxes    network namespaces made by the lab's kubelet and bind-mounted into the node's
 *                    /var/run/netns (`cni-…` names as containerd's), wired by the CNI chain the
 *                    node's own configuration lists (bridge + host-local written by the world as
 *                    the primary; ambient-lab-cni chained in by the installer), run inside the
 *                    node container's mount and network namespaces (nsenter), as a runtime there.
 *
 * What the lab adds to the manifests' launch (as the netns world, NetnsLab.componentLaunch, less
 * what the pod's mounts place: no kubeconfig, CNI dir, root certificate or token flags): status
 * sockets, the connection log, the repair interval, the DNS upstream, the CA's address. The root
 * certificate and the projected token are the manifests' configMap and token volumes, mounted
 * from the lab's copies (NetnsLab.writeProxyVolumes); the CA's address is its Service's IP (the
 * lab has no cluster DNS); profile, stack and DNS capture are the rendered deployment's.
 *
 * Approximations, said plainly: pod apps are processes of this machine's programs in the pod netns
 * (as in the netns world), not containers, but in the node container's pid namespace, where the
 * agent (hostPID) finds them after a restart as it finds pods on a node; probes are processes of
 * this machine in the pod netns; the CNI plugins run with the harness's credentials (a runtime on
 * a node runs as root). Nothing is added to the root network namespace: containers
 * start with network mode none or join a node's; Ryuk is disabled (it needs a pulled image) and
 * every container is removed by id on every path.
 */
import * as fs from 'node:fs';
import * as path from 'node:path';
import { spawnSync } from 'node:child_process';
import { GenericContainer, Wait, getContainerRuntimeClient, type StartedTestContainer } from 'testcontainers';
import type { CniConfList } from '../../impl/api/cni.js';
import { CniChain } from '../../sim/cni/chain.js';
import type { World, WorldFactory, WorldOptions } from '../../scenarios/world.js';
import { localImages } from './images.js';
import { PRIMARY_CONFLIST_FILE, primaryConfList } from '../netns/primary-conflist.js';
import { FileResultCache, NetnsPluginExec } from '../netns/cni-exec.js';
import { reapProcessRuns, removeLeftovers } from '../netns/leftovers.js';
import { processRunStem } from '../netns/netns-run.js';
import { missingTools, missingToolsReason } from '../netns/required-tools.js';
import { NetnsLab, procStart, type LabBackend, type LabComponent, type LabPid } from '../netns/world-lab.js';
import { NetnsWorld } from '../netns/world.js';
import { CA_SERVICE_ADDRESS } from '../netns/addressing.js';

interface ContainerImages {
  readonly node: string;
  readonly agent: string;
  readonly proxy: string;
  readonly ca: string;
}

/** The node's directories the world keeps in the run dir (kubelet's hostPath volumes point at them). */
const NODE_RUN_DIR = '/var/run/ambient-lab';
const NODE_NETNS_DIR = '/var/run/netns';
const SA_MOUNT = '/var/run/secrets/kubernetes.io/serviceaccount';
/** Where the node image's containernetworking-plugins are (Debian's package). */
const NODE_CNI_PLUGINS = '/usr/lib/cni';
const NODE_CNI_BIN = '/opt/cni/bin';
const NODE_CNI_CONF = '/etc/cni/net.d';

/** GenericContainer plus the host-config fields a pod's securityContext needs that testcontainers has no setter for. */
class PodContainer extends GenericContainer {
  withPodSettings(s: {
    pidMode?: string;
    groupAdd?: readonly number[];
    readonlyRootfs?: boolean;
    sysctls?: Readonly<Record<string, string>>;
  }): this {
    if (s.sysctls) this.hostConfig.Sysctls = { ...s.sysctls };
    if (s.pidMode !== undefined) this.hostConfig.PidMode = s.pidMode;
    if (s.groupAdd && s.groupAdd.length > 0) this.hostConfig.GroupAdd = s.groupAdd.map(String);
    if (s.readonlyRootfs) this.hostConfig.ReadonlyRootfs = true;
    return this;
  }
}

/**
 * testcontainers' process-wide settings for this machine, before its first call: no Ryuk (its
 * image would have to be pulled; this world removes its containers itself, by id), and the host
 * named outright — otherwise testcontainers looks for the docker bridge's gateway, and a daemon
 * run with --bridge=none (nothing in the root netns) has none. The host only serves mapped
 * ports, which no container here has.
 */
function testcontainersSettings(): void {
  process.env['TESTCONTAINERS_RYUK_DISABLED'] = 'true';
  process.env['TESTCONTAINERS_HOST_OVERRIDE'] ??= 'localhost';
}

function run(argv: readonly string[]): string {
  const r = spawnSync(argv[0]!, argv.slice(1), { encoding: 'utf8' });
  if (r.status !== 0)
    throw new Error(`${argv.join(' ')} failed (exit ${r.status ?? r.signal}): ${(r.stderr || r.stdout).trim()}`);
  return r.stdout;
}

const errText = (e: unknown): string => (e instanceof Error ? e.message : String(e));

export class ContainersBackend implements LabBackend {
  readonly kind = 'container world';
  private readonly nodes = new Map<string, { container: StartedTestContainer; pid: number }>();
  /** Running component containers by `node/component` (the agent pod: install-cni first, then agent). */
  private readonly components = new Map<string, StartedTestContainer[]>();
  /** Every container this world started and has not removed, by id (removed on every path). */
  private readonly live = new Map<string, StartedTestContainer>();
  private readonly sharedMounts: string[] = [];
  private seq = 0;

  constructor(private readonly images: ContainerImages) {}

  /** The node's directory for hostPath `hostPath` on this machine: the node run dir is the lab's node dir; the rest under `<node>-host/`. */
  hostDir(lab: NetnsLab, node: string, hostPath: string): string {
    if (hostPath === NODE_RUN_DIR) return lab.nodeDir(node);
    return path.join(lab.state.runDir, `${node}-host`, hostPath.replace(/^\/+/, ''));
  }

  private async track<T extends StartedTestContainer>(what: string, start: () => Promise<T>): Promise<T> {
    let c: T;
    try {
      c = await start();
    } catch (e) {
      throw new Error(`starting ${what} failed: ${errText(e)}`, { cause: e });
    }
    this.live.set(c.getId(), c);
    return c;
  }

  private async remove(c: StartedTestContainer, timeoutSec = 5): Promise<void> {
    await c.stop({ remove: true, timeout: timeoutSec * 1000 });
    this.live.delete(c.getId());
  }

  private followLogs(c: StartedTestContainer, file: string): void {
    void c.logs().then(
      (stream) => {
        const out = fs.createWriteStream(file, { flags: 'a' });
        stream.on('data', (d: Buffer | string) => out.write(d));
        stream.on('end', () => out.end());
        stream.on('error', () => out.end());
      },
      (e: unknown) => fs.appendFileSync(file, `(container logs unavailable: ${errText(e)})\n`),
    );
  }

  async startNodes(lab: NetnsLab): Promise<number[]> {
    testcontainersSettings();
    const pids: number[] = [];
    for (const n of lab.state.nodes) {
      const hostPaths = [NODE_CNI_BIN, NODE_CNI_CONF, '/opt/ambient-lab', NODE_RUN_DIR, NODE_NETNS_DIR];
      for (const hp of hostPaths) fs.mkdirSync(this.hostDir(lab, n.name, hp), { recursive: true, mode: 0o755 });
      const lock = this.hostDir(lab, n.name, '/run/xtables.lock');
      fs.mkdirSync(path.dirname(lock), { recursive: true });
      fs.writeFileSync(lock, '', { flag: 'a' });
      // The node's /var/run/netns is a shared mount here, mounted rslave into the node and the
      // agent: a sandbox namespace bound into it later (exposeSandbox) appears in both.
      const netnsDir = this.hostDir(lab, n.name, NODE_NETNS_DIR);
      run(['mount', '--bind', netnsDir, netnsDir]);
      this.sharedMounts.push(netnsDir);
      run(['mount', '--make-shared', netnsDir]);
      const c = await this.track(`node container ${n.name}`, () =>
        new PodContainer(this.images.node)
          .withName(`${lab.state.prefix}${n.name}`)
          .withNetworkMode('none')
          // Docker turns IPv6 off in a container's netns; a node is dual-stack (the fabric is).
          .withPodSettings({
            sysctls: { 'net.ipv6.conf.all.disable_ipv6': '0', 'net.ipv6.conf.default.disable_ipv6': '0' },
          })
          // What a runtime inside the node would need for pod networking (kind nodes run
          // privileged; explicit capabilities are what this machine allows). The harness enters
          // the node with nsenter for CNI, which runs with its own credentials.
          .withAddedCapabilities('NET_ADMIN', 'SYS_ADMIN')
          .withBindMounts([
            ...hostPaths.map((hp) => ({
              source: this.hostDir(lab, n.name, hp),
              target: hp,
              // testcontainers types the mode as rw/ro; Docker's bind options take a propagation too.
              mode: (hp === NODE_NETNS_DIR ? 'rw,rslave' : 'rw') as 'rw',
            })),
            { source: lock, target: '/run/xtables.lock', mode: 'rw' as const },
          ])
          .withEntrypoint(['sh', '-c'])
          .withCommand(['echo node-ready; exec sleep infinity'])
          .withWaitStrategy(Wait.forLogMessage('node-ready'))
          .withStartupTimeout(30_000)
          .start(),
      );
      const pid = await this.initPid(c);
      this.nodes.set(n.name, { container: c, pid });
      pids.push(pid);
      this.writePrimaryConflist(lab, n.name);
    }
    return pids;
  }

  private async initPid(c: StartedTestContainer): Promise<number> {
    const client = await getContainerRuntimeClient();
    const pid = (await client.container.inspect(client.container.getById(c.getId()))).State.Pid;
    if (typeof pid !== 'number' || pid <= 1)
      throw new Error(`container ${c.getName()} (${c.getId()}) has no running init process (State.Pid ${pid})`);
    return pid;
  }

  private node(name: string): { container: StartedTestContainer; pid: number } {
    const n = this.nodes.get(name);
    if (!n) throw new Error(`the container world has no node container for ${name}`);
    return n;
  }

  /** Service-account files a kubelet would mount for `sa` (token, ca.crt = the API's CA, namespace). */
  private serviceAccountDir(lab: NetnsLab, sa: string, namespace: string): string {
    const dir = path.join(lab.state.runDir, 'serviceaccounts', `${namespace}.${sa}`);
    fs.mkdirSync(dir, { recursive: true, mode: 0o755 });
    // No newline after the token: client-node sends the file as it is (a JWT has none). 0644: the proxy reads them as uid 1337 (kubelet's projected tokens default to 0644 too).
    fs.writeFileSync(path.join(dir, 'token'), `ambient-lab-${namespace}-${sa}`, { mode: 0o644 });
    fs.copyFileSync(lab.apiTlsFiles().cert, path.join(dir, 'ca.crt'));
    fs.chmodSync(path.join(dir, 'ca.crt'), 0o644);
    fs.writeFileSync(path.join(dir, 'namespace'), namespace, { mode: 0o644 });
    return dir;
  }

  /**
   * A Secret volume's files as a kubelet would mount them (defaultMode, group the pods' fsGroup).
   * The lab holds one Secret, the mesh root (ambient-lab-mesh-root, keys ca.crt and ca.key, made
   * at install time as the README says), which only the CA's pod mounts (deploy/base/ca.yaml),
   * with the group `gid` its fsGroup gives it.
   */
  private secretDir(lab: NetnsLab, secretName: string, mode: number, gid: number): string {
    const files: Record<string, Record<string, string>> = {
      'ambient-lab-mesh-root': { 'ca.crt': 'mesh-ca.pem', 'ca.key': 'mesh-ca.key' },
    };
    const keys = files[secretName];
    if (!keys)
      throw new Error(
        `the container world has no Secret ${secretName} (it holds ${Object.keys(files).join(', ')}): a manifest mounts one it cannot provide`,
      );
    const dir = path.join(lab.state.runDir, 'secrets', secretName);
    fs.mkdirSync(dir, { recursive: true, mode: 0o755 });
    for (const [key, from] of Object.entries(keys)) {
      const to = path.join(dir, key);
      fs.copyFileSync(path.join(lab.state.runDir, from), to);
      fs.chownSync(to, 0, gid);
      fs.chmodSync(to, mode);
    }
    return dir;
  }

  /** One container of a DaemonSet pod on `node`, as the manifests launch it. */
  private async startPodContainer(
    lab: NetnsLab,
    node: string,
    name: string,
    image: string,
    launch: ReturnType<NetnsLab['componentLaunch']>['launch'],
    labArgs: readonly string[],
    logFile: string,
    wait: ReturnType<typeof Wait.forLogMessage> | undefined,
    /** A pod of its own (not hostNetwork): the sandbox container whose namespaces it joins. */
    sandbox?: StartedTestContainer,
  ): Promise<StartedTestContainer> {
    if (!sandbox && !launch.pod.hostNetwork)
      throw new Error(
        `${launch.source}: the container world runs node components with hostNetwork only (the manifest says false)`,
      );
    const host = sandbox ?? this.node(node).container;
    const sa = this.serviceAccountDir(lab, launch.pod.serviceAccount, launch.pod.namespace);
    const api = lab.apiService();
    let c = new PodContainer(image)
      .withName(`${lab.state.prefix}${node}-${name}-${this.seq++}`)
      .withNetworkMode(`container:${host.getId()}`)
      .withPodSettings({
        ...(launch.pod.hostPID ? { pidMode: `container:${host.getId()}` } : {}),
        groupAdd: launch.groups,
        readonlyRootfs: launch.readOnlyRootFilesystem,
      })
      .withUser(`${launch.uid}:${launch.gid}`)
      .withDroppedCapabilities('ALL')
      .withEnvironment({
        ...launch.env,
        KUBERNETES_SERVICE_HOST: api.host,
        KUBERNETES_SERVICE_PORT: String(api.port),
      })
      .withBindMounts([
        ...launch.hostPathMounts.map((m) => ({
          source: this.hostDir(lab, node, m.hostPath),
          target: m.mountPath,
          mode: (m.propagation === 'HostToContainer' ? 'rw,rslave' : 'rw') as 'rw',
        })),
        ...launch.secretMounts.map((m) => ({
          source: this.secretDir(lab, m.secretName, m.defaultMode, launch.gid),
          target: m.mountPath,
          mode: 'ro' as const,
        })),
        // the proxy's root certificate and projected token, as the lab wrote them for the node (NetnsLab.writeProxyVolumes)
        ...launch.configMapMounts.map((m) => ({
          source: path.join(lab.nodeDir(node), 'configmaps', m.configMapName),
          target: m.mountPath,
          mode: 'ro' as const,
        })),
        ...(launch.tokenMounts.length > 0
          ? [
              {
                source: path.join(lab.nodeDir(node), 'tokens'),
                target: launch.tokenMounts[0]!.mountPath,
                mode: 'ro' as const,
              },
            ]
          : []),
        { source: sa, target: SA_MOUNT, mode: 'ro' as const },
      ])
      .withEntrypoint([launch.binary])
      .withCommand([...launch.nodeFlags, `/app/${launch.program}`, ...launch.programArgs, ...labArgs])
      .withStartupTimeout(30_000);
    if (launch.caps.length > 0) c = c.withAddedCapabilities(...launch.caps.map((x) => x.toUpperCase()));
    if (!launch.allowPrivilegeEscalation) c = c.withSecurityOpt('no-new-privileges');
    if (wait) c = c.withWaitStrategy(wait);
    const started = await this.track(`${name} on ${node}`, () => c.start());
    this.followLogs(started, logFile);
    return started;
  }

  /** The mesh CA's pod: its sandbox container (whose netns is wired to the fabric) and the CA container. */
  private ca: { sandbox: StartedTestContainer; ca: StartedTestContainer; netns: string } | undefined;

  /**
   * The CA Deployment's pod, as a cluster runs it: a sandbox container (network mode none, as a
   * pod's pause container) whose network namespace the lab wires to the fabric at the Service's
   * address (NetnsLab.attachCaPod), and the CA's container in it from image `ca`, exactly as the
   * manifest launches it (user, group, no capabilities, no_new_privs, read-only root, env,
   * command; the root Secret mounted with its defaultMode and the pod's group; the service
   * account mounted for in-cluster config). The lab adds only `--ips` with the Service address
   * the proxies dial (no cluster DNS here).
   */
  async startCa(lab: NetnsLab, logFile: string): Promise<LabPid> {
    if (this.ca) await this.stopCa(lab);
    const launch = lab.deploymentLaunch(lab.state.nodes[0]?.name ?? 'node-0').ca;
    const sandbox = await this.track('the CA pod sandbox', () =>
      new PodContainer(this.images.node)
        .withName(`${lab.state.prefix}ca-sandbox-${this.seq++}`)
        .withNetworkMode('none')
        .withPodSettings({
          sysctls: { 'net.ipv6.conf.all.disable_ipv6': '0', 'net.ipv6.conf.default.disable_ipv6': '0' },
        })
        .withEntrypoint(['sh', '-c'])
        .withCommand(['echo sandbox-ready; exec sleep infinity'])
        .withWaitStrategy(Wait.forLogMessage('sandbox-ready'))
        .withStartupTimeout(30_000)
        .start(),
    );
    const netns = await lab.attachCaPod(await this.initPid(sandbox));
    // No node: the pod's own sandbox; the lab adds the Service address the proxies dial (no DNS).
    const started = await this.startPodContainer(
      lab,
      'mesh',
      'ca',
      this.images.ca,
      launch,
      ['--ips', CA_SERVICE_ADDRESS.ipv4],
      logFile,
      undefined,
      sandbox,
    );
    this.ca = { sandbox, ca: started, netns };
    const pid = await this.initPid(started);
    const st = procStart(pid);
    if (!st) throw new Error(`the mesh CA container exited at once; see ${logFile}`);
    return { pid, marker: `ca container ${started.getId().slice(0, 12)}`, startTime: st.startTime };
  }

  async stopCa(lab: NetnsLab): Promise<void> {
    const pod = this.ca;
    this.ca = undefined;
    if (!pod) return;
    const errors: string[] = [];
    await this.remove(pod.ca).catch((e: unknown) => errors.push(errText(e)));
    await this.remove(pod.sandbox).catch((e: unknown) => errors.push(errText(e)));
    await lab.detachCaPod(pod.netns).catch((e: unknown) => errors.push(errText(e)));
    if (errors.length > 0) throw new Error(`stopping the mesh CA's pod: ${errors.join('; ')}`);
  }

  async startComponent(lab: NetnsLab, component: LabComponent, node: string, logFile: string): Promise<LabPid> {
    const key = `${node}/${component}`;
    if (this.components.has(key)) await this.stopComponent(lab, component, node);
    const dir = lab.nodeDir(node);
    const where = { dir: NODE_RUN_DIR, node: true };
    const started: StartedTestContainer[] = [];
    this.components.set(key, started);
    if (component === 'agent') {
      const agent = lab.componentLaunch('agent', node, where);
      // The pod's other container: the CNI installer (the netns world has none; here it installs
      // and chains the plugin into the node's CNI configuration, as on a cluster).
      const launch = lab.deploymentLaunch(node).installCni;
      started.push(
        await this.startPodContainer(
          lab,
          node,
          'install-cni',
          this.images.agent,
          launch,
          // Exactly as the manifests run it: at exit it removes the plugin only when its DaemonSet
          // is gone (AMBIENT_LAB_UNINSTALL_ON_EXIT when-daemonset-gone). The lab's API holds the
          // deployment's DaemonSets (NetnsLab.createDaemonSets), so a stop or restart here is a
          // rollout with the DaemonSet present: the plugin stays (fail closed while the agent is
          // down). uninstall() deletes the DaemonSets first.
          [],
          path.join(dir, 'install-cni.log'),
          // The installer says so once the plugin is installed and chained (cni-installer-main.ts).
          Wait.forLogMessage(/cni installer running/),
        ),
      );
      started.push(
        await this.startPodContainer(
          lab,
          node,
          'agent',
          this.images.agent,
          agent.launch,
          agent.labArgs,
          logFile,
          undefined,
        ),
      );
    } else {
      const l = lab.componentLaunch('proxy', node, where);
      started.push(
        await this.startPodContainer(lab, node, 'proxy', this.images.proxy, l.launch, l.labArgs, logFile, undefined),
      );
    }
    const main = started[started.length - 1]!;
    const pid = await this.initPid(main);
    const st = procStart(pid);
    if (!st) throw new Error(`the ${component} container on ${node} exited at once; see ${logFile}`);
    return { pid, marker: `${component} container ${main.getId().slice(0, 12)}`, startTime: st.startTime };
  }

  /**
   * Remove the plugin from `node` as a user removing the DaemonSets would (`kubectl delete -k`),
   * with the agent pod stopped before (World.stop): an installer container exactly as the
   * manifests define it (AMBIENT_LAB_UNINSTALL_ON_EXIT when-daemonset-gone, cni-installer-main.ts)
   * runs as the pod being removed; the DaemonSets are deleted from the lab's API
   * (NetnsLab.deleteDaemonSets); then the installer gets SIGTERM, finds its DaemonSet gone (404)
   * and removes the plugin at exit. Throws unless its log says it did.
   */
  async uninstall(lab: NetnsLab, node: string): Promise<void> {
    const launch = lab.deploymentLaunch(node).installCni;
    const log = path.join(lab.nodeDir(node), 'uninstall-cni.log');
    const c = await this.startPodContainer(
      lab,
      node,
      'uninstall-cni',
      this.images.agent,
      launch,
      [],
      log,
      Wait.forLogMessage(/cni installer running/),
    );
    await lab.deleteDaemonSets();
    await this.remove(c, 20);
    // The log stream ends with the container; read what the installer said at exit.
    const said = await waitForText(log, /cni installer exiting/, 5000);
    if (!/"uninstall":\s*true/.test(said))
      throw new Error(
        `the installer on ${node} exited without removing the plugin with the DaemonSet gone; see ${log}: ${said.slice(-400)}`,
      );
  }

  async stopComponent(_lab: NetnsLab, component: LabComponent, node: string): Promise<void> {
    const key = `${node}/${component}`;
    const cs = this.components.get(key) ?? [];
    this.components.delete(key);
    const errors: string[] = [];
    for (const c of [...cs].reverse()) await this.remove(c).catch((e: unknown) => errors.push(errText(e)));
    if (errors.length > 0) throw new Error(`stopping the ${component} on ${node}: ${errors.join('; ')}`);
  }

  async chains(lab: NetnsLab, node: string): Promise<{ chain: CniChain; ifname: string }[]> {
    const n = this.node(node);
    const confDir = this.hostDir(lab, node, NODE_CNI_CONF);
    // libcni's choice: the first configuration file in lexical order.
    const first = fs
      .readdirSync(confDir)
      .filter((f) => f.endsWith('.conflist'))
      .sort()[0];
    if (!first) throw new Error(`node ${node} has no CNI configuration in ${NODE_CNI_CONF} (${confDir})`);
    const podnet = JSON.parse(fs.readFileSync(path.join(confDir, first), 'utf8')) as CniConfList;
    const dirs = [NODE_CNI_BIN, NODE_CNI_PLUGINS];
    const exec = new NetnsPluginExec({
      netns: lab.node(node).netns,
      dirs,
      // Mount, network and pid namespaces of the node: the plugins read /proc (the node's) for
      // their own threads' namespaces, so they must be processes of the node's pid namespace.
      enter: { argv: ['nsenter', '-t', String(n.pid), '-m', '-n', '-p', '--'], root: `/proc/${n.pid}/root` },
    });
    const cache = new FileResultCache(path.join(lab.nodeDir(node), 'cni-cache'));
    const loopback: CniConfList = { cniVersion: '1.0.0', name: 'cni-loopback', plugins: [{ type: 'loopback' }] };
    return [
      { chain: new CniChain(loopback, exec, cache, { path: dirs }), ifname: 'lo' },
      { chain: new CniChain(podnet, exec, cache, { path: dirs }), ifname: 'eth0' },
    ];
  }

  /** The node's primary network (bridge + host-local), as its own CNI set-up would leave it. */
  writePrimaryConflist(lab: NetnsLab, node: string): void {
    const n = lab.node(node);
    const conf = primaryConfList({
      node: n.index,
      ipv6: lab.state.ipv6 === true,
      // Under the node's run dir: a reboot clears it (NetnsLab.rebootNode), as tmpfs /run would.
      dataDir: `${NODE_RUN_DIR}/ipam`,
    });
    fs.writeFileSync(
      path.join(this.hostDir(lab, node, NODE_CNI_CONF), PRIMARY_CONFLIST_FILE),
      `${JSON.stringify(conf, null, 2)}\n`,
    );
  }

  async exposeSandbox(lab: NetnsLab, node: string, netns: string): Promise<string> {
    const target = path.join(this.hostDir(lab, node, NODE_NETNS_DIR), sandboxName(netns));
    fs.writeFileSync(target, '', { flag: 'a' });
    run(['mount', '--bind', `/run/netns/${netns}`, target]);
    return this.sandboxPath(lab, node, netns);
  }

  sandboxPath(_lab: NetnsLab, _node: string, netns: string): string {
    return `${NODE_NETNS_DIR}/${sandboxName(netns)}`;
  }

  async hideSandbox(lab: NetnsLab, node: string, netns: string): Promise<void> {
    const target = path.join(this.hostDir(lab, node, NODE_NETNS_DIR), sandboxName(netns));
    // Detached (as `ip netns del` does): the agent or a plugin may still hold the namespace open,
    // which makes a plain umount fail with EBUSY; the namespace lives on until they close it.
    run(['umount', '--lazy', target]);
    fs.rmSync(target, { force: true });
  }

  podPidNamespace(_lab: NetnsLab, node: string): number {
    return this.node(node).pid;
  }

  hostPid(lab: NetnsLab, component: LabComponent, node: string, pid: number): number {
    const p = lab.state.components[`${node}/${component}`];
    if (!p) throw new Error(`the ${component} on ${node} is not running`);
    // The component is its container's init: its pid in its own namespace is the last NSpid field.
    const status = fs.readFileSync(`/proc/${p.pid}/status`, 'utf8');
    const ns = /^NSpid:\s+(.*)$/m.exec(status)?.[1]?.trim().split(/\s+/).map(Number);
    if (ns?.[ns.length - 1] === pid) return p.pid;
    throw new Error(
      `the ${component} on ${node} reported pid ${pid}, which is not its container's init (host pid ${p.pid}, NSpid ${ns?.join(' ')})`,
    );
  }

  async dispose(_lab: NetnsLab): Promise<void> {
    const errors: string[] = [];
    for (const c of [...this.live.values()].reverse())
      await this.remove(c, 2).catch((e: unknown) => errors.push(`container ${c.getId()}: ${errText(e)}`));
    this.components.clear();
    this.nodes.clear();
    for (const dir of this.sharedMounts.splice(0).reverse()) {
      for (const f of fs.existsSync(dir) ? fs.readdirSync(dir) : []) {
        try {
          run(['umount', '--lazy', path.join(dir, f)]);
        } catch (e) {
          // A file that was never mounted (exposeSandbox failed at mount) is only removed.
          if (!/not mounted/.test(errText(e))) errors.push(errText(e));
        }
      }
      try {
        run(['umount', dir]);
      } catch (e) {
        errors.push(errText(e));
      }
    }
    if (errors.length > 0) throw new Error(`container world cleanup: ${errors.join('; ')}`);
  }
}

/** The names of every container of the Docker engine, exited ones too (leftover checks). */
export async function containerNames(): Promise<string[]> {
  testcontainersSettings();
  const client = await getContainerRuntimeClient();
  return (await client.container.dockerode.listContainers({ all: true })).flatMap((c) =>
    c.Names.map((n) => n.replace(/^\//, '')),
  );
}

/**
 * Stop and remove (by id) every container whose name starts with `prefix` (a run prefix or a
 * process's run stem, e2e/netns/netns-run.ts), exited ones too; returns their ids.
 */
async function removeContainers(prefix: string): Promise<string[]> {
  if (!/^al-[a-z0-9]+-?$/.test(prefix))
    throw new Error(`refusing to remove containers by ${JSON.stringify(prefix)}: not a run prefix or stem`);
  testcontainersSettings();
  const client = await getContainerRuntimeClient();
  const ids: string[] = [];
  // Exited containers too: one that ended by itself is not running but still exists.
  for (const info of await client.container.dockerode.listContainers({ all: true })) {
    if (!info.Names.some((n) => n.replace(/^\//, '').startsWith(prefix))) continue;
    const c = client.container.getById(info.Id);
    if (info.State === 'running') await client.container.stop(c, { timeout: 0 });
    await client.container.remove(c);
    ids.push(info.Id);
  }
  return ids;
}

/**
 * Crash safety for a run that died without close() (killed): remove its containers (found by the
 * run prefix in their names, removed by id), its mounts under `runDir` and its namespaces and
 * processes (removeLeftovers), then the run dir. Returns what it removed.
 */
export async function removeContainerWorldLeftovers(
  prefix: string,
  runDir: string,
): Promise<{ containers: string[]; mounts: string[]; namespaces: readonly string[] }> {
  if (!/^al-[a-z0-9]+-$/.test(prefix))
    throw new Error(`refusing to clean up ${JSON.stringify(prefix)}: not a run prefix`);
  const containers = await removeContainers(prefix);
  const mounts = fs
    .readFileSync('/proc/self/mountinfo', 'utf8')
    .split('\n')
    .map((l) => l.split(' ')[4])
    .filter((m): m is string => m !== undefined && m.startsWith(`${runDir}/`))
    .sort()
    .reverse();
  for (const m of mounts) run(['umount', m]);
  const { removed } = await removeLeftovers(prefix, { killProcesses: true });
  fs.rmSync(runDir, { recursive: true, force: true });
  return { containers, mounts, namespaces: removed };
}

/** The contents of `file` once they match `re` (a log written by a stream that may still be flushing). */
async function waitForText(file: string, re: RegExp, timeoutMs: number): Promise<string> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const text = fs.existsSync(file) ? fs.readFileSync(file, 'utf8') : '';
    if (re.test(text) || Date.now() > deadline) return text;
    await new Promise((r) => setTimeout(r, 50));
  }
}

/** The sandbox's name in the node's /var/run/netns (containerd names them cni-<id>). */
function sandboxName(netns: string): string {
  return `cni-${netns}`;
}

/** The images: built or reused offline (e2e/containers/images.ts); the build's progress goes to stderr. */
export function containerImages(): Promise<ContainerImages> {
  return localImages({ log: (line) => process.stderr.write(`[container world] images: ${line}\n`) });
}

/** Can this machine run the container world? Docker answering is the container-specific part. */
function dockerReason(): string | undefined {
  const r = spawnSync('docker', ['info', '--format', '{{.ServerVersion}}'], { encoding: 'utf8', timeout: 20_000 });
  if (r.error) return `docker is not installed or not runnable (${r.error.message})`;
  if (r.status !== 0) return `docker info failed: ${(r.stderr || r.stdout).trim().split('\n')[0]}`;
  return undefined;
}

/** Where the container world's labs keep their run directories (the nodes' host paths are under them). */
const CONTAINER_WORLDS_ROOT = '/run/ambient-lab/container-worlds';

export const containersWorldFactory: WorldFactory = {
  kind: 'containers',
  available() {
    if (process.platform !== 'linux') return { ok: false, reason: 'the container world needs Linux' };
    if (process.getuid?.() !== 0)
      return { ok: false, reason: 'the container world needs root (network namespaces, mounts, nsenter)' };
    const missing = missingTools();
    if (missing.length > 0)
      return {
        ok: false,
        reason: `the container world needs tools this machine lacks — ${missingToolsReason(missing)}`,
      };
    const d = dockerReason();
    if (d) return { ok: false, reason: `the container world needs Docker: ${d}` };
    return { ok: true, reason: '' };
  },
  async create(options: WorldOptions): Promise<World> {
    if (options.meshV6 !== undefined && options.meshV6 !== options.ipv6)
      throw new Error(
        `container world: meshV6 ${options.meshV6} with ipv6 ${options.ipv6} is unsupported (the agent and proxy follow the cluster's stack); run that case on the sim world`,
      );
    const backend = new ContainersBackend(await containerImages());
    const lab = await NetnsLab.create({
      nodes: options.nodes,
      profile: options.profile,
      ipv6: options.ipv6,
      dnsCapture: options.dnsCapture,
      ...(options.rulesBackend === 'nftables' ? { rulesBackend: options.rulesBackend } : {}),
      stateRoot: CONTAINER_WORLDS_ROOT,
      backend,
    });
    return new NetnsWorld(lab, options, 'containers');
  },
  reapInterrupted: async () => {
    const lines = await reapProcessRuns(CONTAINER_WORLDS_ROOT, async (prefix, runDir) => {
      const left = await removeContainerWorldLeftovers(prefix, runDir);
      return [
        ...left.containers.map((c) => `container ${c.slice(0, 12)}`),
        ...left.mounts.map((m) => `mount ${m}`),
        ...left.namespaces.map((n) => `network namespace ${n}`),
      ];
    });
    // A node container whose lab had not made its run directory yet (interrupted in create).
    const stray = await removeContainers(processRunStem());
    return [...stray.map((c) => `container ${c.slice(0, 12)}`), ...lines];
  },
};

/** The container world's factory, as check loads it by module (e2e/world-modules.ts). */
export function createContainersWorldFactory(): WorldFactory {
  return containersWorldFactory;
}
