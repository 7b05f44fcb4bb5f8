/**
 * The kind world's command lines: cluster lifecycle with `kind`, image builds with `docker`,
 * manifests with `kubectl` — run through execa so every argv is explicit (no shell). Tested
 * against fake binaries on PATH that record their argv (tests/sim/kind-cli/), so the exact
 * commands are checked here without Docker; the real run is the kind project in CI.
 */
import { execa } from 'execa';
import * as path from 'node:path';
import { rethrowAfterCleanup } from '../cleanup.js';
import { renderDeployment, type DeploymentChoice } from '../deployment/launch.js';
import { MeshCa } from '../../impl/linux/mesh-ca.js';

interface KindCliOptions {
  /** Cluster name; must start with `al-` so leftovers are recognisable. */
  readonly cluster: string;
  readonly repoRoot: string;
  /** Where `kind` writes the cluster's kubeconfig (never the user's ~/.kube/config). */
  readonly kubeconfig: string;
  /** kind config file, relative to the repo root. */
  readonly kindConfig?: string;
  /** kindest/node image, e.g. kindest/node:v1.31.0; kind's default when absent. */
  readonly nodeImage?: string;
  readonly tag?: string;
  /** Environment for the tools (PATH decides which kind/docker/kubectl run). */
  readonly env?: NodeJS.ProcessEnv;
}

export const SYSTEM_NAMESPACE = 'ambient-lab-system';
export const CRD_NAME = 'authorizationpolicies.security.istio.io';
/** The mesh root and its key, mounted by the CA only (deploy/base/ca.yaml); made at install time, never in the repo. */
const MESH_ROOT_SECRET = 'ambient-lab-mesh-root';
/** The root certificate alone, mounted by every proxy (deploy/base/proxy.yaml). */
const MESH_ROOT_CERT_CONFIGMAP = 'ambient-lab-mesh-root-cert';
/** The namespace of the world's own helper pods (host probes); never part of the mesh. */
export const E2E_NAMESPACE = 'ambient-lab-e2e';
/** In the agent image (ci/build.Dockerfile compiles e2e/ too): the probe and the pod app of the netns world. */
export const PROBE_PROGRAM = '/app/dist/e2e/netns/probe-program.js';
export const POD_APP = '/app/dist/e2e/netns/world-pod-app.js';
type KindComponent = 'agent' | 'proxy';
/**
 * Node label that takes a component off one node: the world patches each DaemonSet with a
 * required node affinity "label absent" (enableNodeStop), so labelling a node makes the DaemonSet
 * controller delete that node's pod (SIGTERM, grace period) and unlabelling brings it back.
 */
const stopLabel = (c: KindComponent): string => `ambient-lab.io/stop-${c}`;

interface CommandResult {
  readonly exitCode: number;
  readonly stdout: string;
  readonly stderr: string;
}

export class KindCli {
  readonly images: { readonly build: string; readonly agent: string; readonly proxy: string; readonly ca: string };

  constructor(private readonly o: KindCliOptions) {
    if (!/^al-[a-z0-9-]+$/.test(o.cluster))
      throw new Error(`kind cluster name ${JSON.stringify(o.cluster)} must match al-[a-z0-9-]+ (ours, recognisable)`);
    const tag = o.tag ?? 'dev';
    this.images = {
      build: `ambient-lab/build:${tag}`,
      agent: `ambient-lab/agent:${tag}`,
      proxy: `ambient-lab/proxy:${tag}`,
      ca: `ambient-lab/ca:${tag}`,
    };
  }

  private async run(
    cmd: string,
    args: readonly string[],
    opts: { reject?: boolean; input?: string } = {},
  ): Promise<CommandResult> {
    const r = await execa(cmd, [...args], {
      cwd: this.o.repoRoot,
      env: this.o.env ?? process.env,
      extendEnv: this.o.env === undefined,
      stripFinalNewline: false, // logs are returned exactly
      reject: false,
      ...(opts.input !== undefined ? { input: opts.input } : {}),
    });
    const res = { exitCode: r.exitCode ?? -1, stdout: String(r.stdout), stderr: String(r.stderr) };
    if (opts.reject !== false && res.exitCode !== 0) {
      // exit code -1: it did not start (e.g. ENOENT: the tool is not on PATH); execa's message says so
      const why = res.stderr.trim() || res.stdout.trim() || (res.exitCode === -1 ? r.shortMessage : '');
      throw new Error(`${cmd} ${args.join(' ')} failed with exit code ${res.exitCode}: ${why}`);
    }
    return res;
  }

  private kubectl(args: readonly string[], opts: { reject?: boolean; input?: string } = {}): Promise<CommandResult> {
    return this.run('kubectl', ['--kubeconfig', this.o.kubeconfig, ...args], opts);
  }

  async createCluster(): Promise<void> {
    const args = [
      'create',
      'cluster',
      '--name',
      this.o.cluster,
      '--config',
      path.join(this.o.repoRoot, this.o.kindConfig ?? 'fixtures/kind/cluster.yaml'),
      '--kubeconfig',
      this.o.kubeconfig,
      '--wait',
      '180s',
    ];
    if (this.o.nodeImage) args.push('--image', this.o.nodeImage);
    await this.run('kind', args);
  }

  async buildImages(): Promise<void> {
    await this.run('docker', ['build', '-f', 'ci/build.Dockerfile', '-t', this.images.build, '.']);
    for (const c of ['agent', 'proxy', 'ca'] as const) {
      await this.run('docker', [
        'build',
        '-f',
        `ci/${c}.Dockerfile`,
        '--build-arg',
        `BUILD_IMAGE=${this.images.build}`,
        '-t',
        this.images[c],
        '.',
      ]);
    }
  }

  async loadImages(): Promise<void> {
    for (const img of [this.images.agent, this.images.proxy, this.images.ca])
      await this.run('kind', ['load', 'docker-image', img, '--name', this.o.cluster]);
  }

  /**
   * Install as a user would: the CRD only when absent (`kubectl create -k deploy/crd`: never
   * overwrites Istio's), deploy/ rendered for `choice` by the one loader (e2e/deployment/launch.ts)
   * and applied, then the mesh root Secret (for the CA) and its certificate's ConfigMap (for the
   * proxies) when absent (generated here, as README "Install" says).
   */
  async applyManifests(choice: DeploymentChoice): Promise<{ readonly crdCreated: boolean }> {
    const crd = await this.kubectl(['get', 'crd', CRD_NAME, '-o', 'name'], { reject: false });
    let crdCreated = false;
    if (crd.exitCode !== 0) {
      await this.kubectl(['create', '-k', path.join(this.o.repoRoot, 'deploy', 'crd')]);
      await this.kubectl(['wait', '--for', 'condition=Established', `crd/${CRD_NAME}`, '--timeout', '60s']);
      crdCreated = true;
    }
    await this.applyDeployment(choice);
    const secret = await this.kubectl(['-n', SYSTEM_NAMESPACE, 'get', 'secret', MESH_ROOT_SECRET, '-o', 'name'], {
      reject: false,
    });
    let rootCert: string | undefined;
    if (secret.exitCode !== 0) {
      const root = await (await MeshCa.create('cluster.local')).exportRoot();
      const manifest = {
        apiVersion: 'v1',
        kind: 'Secret',
        metadata: { name: MESH_ROOT_SECRET, namespace: SYSTEM_NAMESPACE },
        type: 'Opaque',
        stringData: { 'ca.crt': root.certPem, 'ca.key': root.keyPem },
      };
      // on stdin: the key never touches a file or an argv
      await this.kubectl(['create', '-f', '-'], { input: JSON.stringify(manifest) });
      rootCert = root.certPem;
    }
    const configMap = await this.kubectl(
      ['-n', SYSTEM_NAMESPACE, 'get', 'configmap', MESH_ROOT_CERT_CONFIGMAP, '-o', 'name'],
      { reject: false },
    );
    if (configMap.exitCode !== 0) {
      // the certificate of the Secret's root, whoever made the Secret
      rootCert ??= Buffer.from(
        (
          await this.kubectl([
            '-n',
            SYSTEM_NAMESPACE,
            'get',
            'secret',
            MESH_ROOT_SECRET,
            '-o',
            'jsonpath={.data.ca\\.crt}',
          ])
        ).stdout.trim(),
        'base64',
      ).toString('utf8');
      if (!rootCert.includes('BEGIN CERTIFICATE'))
        throw new Error(`the Secret ${SYSTEM_NAMESPACE}/${MESH_ROOT_SECRET} has no PEM certificate under ca.crt`);
      const manifest = {
        apiVersion: 'v1',
        kind: 'ConfigMap',
        metadata: { name: MESH_ROOT_CERT_CONFIGMAP, namespace: SYSTEM_NAMESPACE },
        data: { 'ca.crt': rootCert },
      };
      await this.kubectl(['create', '-f', '-'], { input: JSON.stringify(manifest) });
    }
    return { crdCreated };
  }

  /**
   * deploy/ rendered for `choice`, applied (`kubectl apply -f -`): at install, and again when the
   * settings change (another overlay; the DaemonSets roll). The images are the ones built (the
   * manifests name the :dev tags).
   */
  async applyDeployment(choice: DeploymentChoice): Promise<void> {
    await this.kubectl(['apply', '-f', '-'], { input: renderDeployment(choice) });
    if (
      this.images.agent !== 'ambient-lab/agent:dev' ||
      this.images.proxy !== 'ambient-lab/proxy:dev' ||
      this.images.ca !== 'ambient-lab/ca:dev'
    ) {
      for (const [ds, containers, img] of [
        ['ambient-lab-agent', ['install-cni', 'agent'], this.images.agent],
        ['ambient-lab-proxy', ['proxy'], this.images.proxy],
      ] as const) {
        await this.kubectl([
          '-n',
          SYSTEM_NAMESPACE,
          'set',
          'image',
          `daemonset/${ds}`,
          ...containers.map((c) => `${c}=${img}`),
        ]);
      }
      await this.kubectl(['-n', SYSTEM_NAMESPACE, 'set', 'image', 'deployment/ambient-lab-ca', `ca=${this.images.ca}`]);
    }
  }

  /** The node-stop hook (stopLabel) on both DaemonSets; a template change, so before waitReady. */
  async enableNodeStop(): Promise<void> {
    for (const c of ['agent', 'proxy'] as const) {
      const patch = {
        spec: {
          template: {
            spec: {
              affinity: {
                nodeAffinity: {
                  requiredDuringSchedulingIgnoredDuringExecution: {
                    nodeSelectorTerms: [{ matchExpressions: [{ key: stopLabel(c), operator: 'DoesNotExist' }] }],
                  },
                },
              },
            },
          },
        },
      };
      await this.kubectl([
        '-n',
        SYSTEM_NAMESPACE,
        'patch',
        'daemonset',
        `ambient-lab-${c}`,
        '--type',
        'merge',
        '-p',
        JSON.stringify(patch),
      ]);
    }
  }

  /** Take a component off a node (stopped) or let it back (running); does not wait. */
  async setComponentOnNode(c: KindComponent, node: string, running: boolean): Promise<void> {
    await this.kubectl([
      'label',
      'node',
      node,
      running ? `${stopLabel(c)}-` : `${stopLabel(c)}=true`,
      ...(running ? [] : ['--overwrite']),
    ]);
  }

  /** The component's pods on a node: name, whether every container is ready, whether it is terminating. */
  async componentPods(
    c: KindComponent,
    node: string,
  ): Promise<{ name: string; ready: boolean; terminating: boolean }[]> {
    const r = await this.kubectl([
      '-n',
      SYSTEM_NAMESPACE,
      'get',
      'pods',
      '-l',
      `app.kubernetes.io/name=ambient-lab-${c}`,
      '--field-selector',
      `spec.nodeName=${node}`,
      '-o',
      'jsonpath={range .items[*]}{.metadata.name}{"|"}{.status.containerStatuses[*].ready}{"|"}{.metadata.deletionTimestamp}{"\\n"}{end}',
    ]);
    return r.stdout
      .split('\n')
      .filter((l) => l.trim() !== '')
      .map((l) => {
        const [name = '', ready = '', deleting = ''] = l.split('|');
        const flags = ready
          .trim()
          .split(/\s+/)
          .filter((x) => x !== '');
        return {
          name,
          ready: flags.length > 0 && flags.every((x) => x === 'true'),
          terminating: deleting.trim() !== '',
        };
      });
  }

  /** Poll componentPods until `done` holds; the error says what was last seen. */
  async waitComponent(
    c: KindComponent,
    node: string,
    want: 'gone' | 'ready',
    opts: { readonly attempts?: number; readonly intervalMs?: number } = {},
  ): Promise<void> {
    let last: Awaited<ReturnType<KindCli['componentPods']>> = [];
    for (let i = 0; i < (opts.attempts ?? 120); i++) {
      last = await this.componentPods(c, node);
      if (want === 'gone' ? last.length === 0 : last.some((p) => p.ready && !p.terminating)) return;
      await new Promise((r) => setTimeout(r, opts.intervalMs ?? 1000));
    }
    throw new Error(`ambient-lab-${c} on node ${node} did not become ${want}; last seen: ${JSON.stringify(last)}`);
  }

  /** argv that runs `command` in a pod's container with stdin attached (the container's uid, capabilities and netns). */
  execArgv(namespace: string, pod: string, container: string, command: readonly string[]): string[] {
    return [
      'kubectl',
      '--kubeconfig',
      this.o.kubeconfig,
      '-n',
      namespace,
      'exec',
      '-i',
      pod,
      '-c',
      container,
      '--',
      ...command,
    ];
  }

  /** argv of a throwaway container on the kind network that routes `cidr` via `via` (a node), then runs `command`. */
  outsideArgv(
    image: string,
    route: { readonly cidr: string; readonly via: string },
    command: readonly string[],
  ): string[] {
    if (!/^[0-9a-f.:/]+$/i.test(route.cidr) || !/^[0-9a-f.:]+$/i.test(route.via))
      throw new Error(`outside route ${route.cidr} via ${route.via}: not an address`);
    // the shell only adds the route; the command is exec'd with its own argv (quoted)
    const quoted = command.map((a) => `'${a.replace(/'/g, `'\\''`)}'`).join(' ');
    return [
      'docker',
      'run',
      '--rm',
      '-i',
      '--network',
      'kind',
      '--cap-add',
      'NET_ADMIN',
      image,
      'sh',
      '-c',
      `ip route add ${route.cidr} via ${route.via} && exec ${quoted}`,
    ];
  }

  /** Run a command in a pod's container and return its output (a failure is an exit code, not a throw). */
  async exec(namespace: string, pod: string, container: string, command: readonly string[]): Promise<CommandResult> {
    return this.kubectl(['-n', namespace, 'exec', pod, '-c', container, '--', ...command], { reject: false });
  }

  /** A container's log, optionally only since an RFC 3339 time. */
  async podLog(namespace: string, pod: string, container: string, sinceTime?: string): Promise<string> {
    return (
      await this.kubectl([
        '-n',
        namespace,
        'logs',
        pod,
        '-c',
        container,
        ...(sinceTime ? [`--since-time=${sinceTime}`] : []),
      ])
    ).stdout;
  }

  /** Run a shell script on a kind node (the node container). */
  async onNode(node: string, script: string): Promise<string> {
    return (await this.run('docker', ['exec', node, 'sh', '-c', script])).stdout;
  }

  /** Reboot a node: restart its container, wait for its kubelet and its Ready condition. */
  async rebootNode(
    node: string,
    opts: { readonly attempts?: number; readonly intervalMs?: number } = {},
  ): Promise<void> {
    await this.run('docker', ['restart', node]);
    for (let i = 0; ; i++) {
      const r = await this.run('docker', ['exec', node, 'systemctl', 'is-active', 'kubelet'], { reject: false });
      if (r.stdout.trim() === 'active') break;
      if (i + 1 >= (opts.attempts ?? 120))
        throw new Error(
          `node ${node}: kubelet not active after docker restart (${r.stdout.trim() || r.stderr.trim()})`,
        );
      await new Promise((res) => setTimeout(res, opts.intervalMs ?? 1000));
    }
    await this.kubectl(['wait', '--for=condition=Ready', `node/${node}`, '--timeout', '180s']);
  }

  /**
   * Drop every API watch: stop the kube-apiserver container on the control plane (the kubelet
   * restarts its static pod at once), then wait until the API server is ready again. Every
   * client's watch breaks, as in an API server restart or upgrade; informers must re-list.
   */
  async restartApiServer(opts: { readonly attempts?: number; readonly intervalMs?: number } = {}): Promise<void> {
    const cp = `${this.o.cluster}-control-plane`;
    await this.run('docker', ['exec', cp, 'sh', '-c', 'crictl stop $(crictl ps -q --name kube-apiserver)']);
    for (let i = 0; ; i++) {
      const r = await this.kubectl(['get', '--raw', '/readyz'], { reject: false });
      if (r.exitCode === 0 && r.stdout.trim() === 'ok') return;
      if (i + 1 >= (opts.attempts ?? 120))
        throw new Error(`kube-apiserver not ready again after the restart: ${r.stderr.trim() || r.stdout.trim()}`);
      await new Promise((res) => setTimeout(res, opts.intervalMs ?? 1000));
    }
  }

  async waitReady(timeout = '300s'): Promise<void> {
    // the CA first: the proxies become ready without it, but hold no certificate until it serves
    for (const w of ['deployment/ambient-lab-ca', 'daemonset/ambient-lab-agent', 'daemonset/ambient-lab-proxy']) {
      await this.kubectl(['-n', SYSTEM_NAMESPACE, 'rollout', 'status', w, '--timeout', timeout]);
    }
  }

  /** The proxy's log on one node (its connection log goes to stdout). */
  async proxyLog(node: string): Promise<string> {
    const pods = await this.kubectl([
      '-n',
      SYSTEM_NAMESPACE,
      'get',
      'pods',
      '-l',
      'app.kubernetes.io/name=ambient-lab-proxy',
      '--field-selector',
      `spec.nodeName=${node}`,
      '-o',
      'jsonpath={.items[*].metadata.name}',
    ]);
    const name = pods.stdout.trim().split(/\s+/)[0];
    if (!name) throw new Error(`no ambient-lab-proxy pod on node ${node}`);
    return (await this.kubectl(['-n', SYSTEM_NAMESPACE, 'logs', name, '-c', 'proxy'])).stdout;
  }

  async deleteCluster(): Promise<void> {
    // CI keeps every cluster's logs (the kind job uploads them when it fails): a deleted cluster's
    // are gone, and the world deletes its cluster on a failed bring-up too. A failed export is
    // reported and the cluster deleted all the same.
    const logs = (this.o.env ?? process.env)['AMBIENT_LAB_KIND_LOGS'];
    if (logs) {
      const r = await this.run('kind', ['export', 'logs', path.join(logs, this.o.cluster), '--name', this.o.cluster], {
        reject: false,
      });
      if (r.exitCode !== 0)
        console.error(`kind export logs for ${this.o.cluster} failed (exit ${r.exitCode}): ${r.stderr.trim()}`);
    }
    await this.run('kind', ['delete', 'cluster', '--name', this.o.cluster, '--kubeconfig', this.o.kubeconfig]);
  }

  /** Everything up: create, build, load, apply, wait. Deletes the cluster if any step fails. */
  async up(
    opts: {
      readonly build?: boolean;
      readonly nodeStop?: boolean;
      /** The settings deploy/ is rendered for (default: the base, profile upstream with IPv6 and DNS capture). */
      readonly deployment?: DeploymentChoice;
    } = {},
  ): Promise<void> {
    await this.createCluster();
    try {
      if (opts.build !== false) await this.buildImages();
      await this.loadImages();
      await this.applyManifests(opts.deployment ?? { profile: 'upstream', ipv6: true, dnsCapture: true });
      if (opts.nodeStop !== false) await this.enableNodeStop();
      await this.waitReady();
    } catch (e) {
      return rethrowAfterCleanup(e, ['delete the kind cluster', () => this.deleteCluster()]);
    }
  }
}
