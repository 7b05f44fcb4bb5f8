/**
 * The kind world's command lines: cluster lifecycle with `kind`, image builds with `docker`,
 * manifests with `kubectl` — run through execa so every argv is explicit (no shell). Tested
 * against fake binaries on PATH that record their argv (tests/sim/kind-cli/), so the exact
 * commands are checked here without Docker; the real run is the kind project in CI.
 */
import { execa } from 'execa';
import * as path from 'node:path';

export interface KindCliOptions {
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
/** Applied in this order; the CRD file is created only when absent (never overwrites Istio's). */
export const MANIFESTS = ['00-namespace.yaml', '02-rbac.yaml', '10-agent.yaml', '20-proxy.yaml'] as const;
export const CRD_MANIFEST = '01-authorizationpolicy-crd.yaml';

export interface CommandResult {
  readonly exitCode: number;
  readonly stdout: string;
  readonly stderr: string;
}

export class KindCli {
  readonly images: { readonly build: string; readonly agent: string; readonly proxy: string };

  constructor(private readonly o: KindCliOptions) {
    if (!/^al-[a-z0-9-]+$/.test(o.cluster)) throw new Error(`kind cluster name ${JSON.stringify(o.cluster)} must match al-[a-z0-9-]+ (ours, recognisable)`);
    const tag = o.tag ?? 'dev';
    this.images = { build: `ambient-lab/build:${tag}`, agent: `ambient-lab/agent:${tag}`, proxy: `ambient-lab/proxy:${tag}` };
  }

  private async run(cmd: string, args: readonly string[], opts: { reject?: boolean; input?: string } = {}): Promise<CommandResult> {
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
      throw new Error(`${cmd} ${args.join(' ')} failed with exit code ${res.exitCode}: ${res.stderr.trim() || res.stdout.trim()}`);
    }
    return res;
  }

  private kubectl(args: readonly string[], opts: { reject?: boolean; input?: string } = {}): Promise<CommandResult> {
    return this.run('kubectl', ['--kubeconfig', this.o.kubeconfig, ...args], opts);
  }

  async createCluster(): Promise<void> {
    const args = ['create', 'cluster', '--name', this.o.cluster, '--config', path.join(this.o.repoRoot, this.o.kindConfig ?? 'fixtures/kind/cluster.yaml'),
      '--kubeconfig', this.o.kubeconfig, '--wait', '180s'];
    if (this.o.nodeImage) args.push('--image', this.o.nodeImage);
    await this.run('kind', args);
  }

  async buildImages(): Promise<void> {
    await this.run('docker', ['build', '-f', 'ci/build.Dockerfile', '-t', this.images.build, '.']);
    for (const c of ['agent', 'proxy'] as const) {
      await this.run('docker', ['build', '-f', `ci/${c}.Dockerfile`, '--build-arg', `BUILD_IMAGE=${this.images.build}`, '-t', this.images[c], '.']);
    }
  }

  async loadImages(): Promise<void> {
    for (const img of [this.images.agent, this.images.proxy]) await this.run('kind', ['load', 'docker-image', img, '--name', this.o.cluster]);
  }

  /** The CRD only when absent, then the rest; the images are the ones built (the manifests name the :dev tags). */
  async applyManifests(): Promise<{ readonly crdCreated: boolean }> {
    const dir = path.join(this.o.repoRoot, 'fixtures/manifests');
    const crd = await this.kubectl(['get', 'crd', CRD_NAME, '-o', 'name'], { reject: false });
    let crdCreated = false;
    if (crd.exitCode !== 0) {
      await this.kubectl(['create', '-f', path.join(dir, CRD_MANIFEST)]);
      await this.kubectl(['wait', '--for', 'condition=Established', `crd/${CRD_NAME}`, '--timeout', '60s']);
      crdCreated = true;
    }
    for (const m of MANIFESTS) await this.kubectl(['apply', '-f', path.join(dir, m)]);
    if (this.images.agent !== 'ambient-lab/agent:dev' || this.images.proxy !== 'ambient-lab/proxy:dev') {
      for (const [ds, containers, img] of [
        ['ambient-lab-agent', ['install-cni', 'agent'], this.images.agent],
        ['ambient-lab-proxy', ['proxy'], this.images.proxy],
      ] as const) {
        await this.kubectl(['-n', SYSTEM_NAMESPACE, 'set', 'image', `daemonset/${ds}`, ...containers.map((c) => `${c}=${img}`)]);
      }
    }
    return { crdCreated };
  }

  async waitReady(timeout = '300s'): Promise<void> {
    for (const ds of ['ambient-lab-agent', 'ambient-lab-proxy']) {
      await this.kubectl(['-n', SYSTEM_NAMESPACE, 'rollout', 'status', `daemonset/${ds}`, '--timeout', timeout]);
    }
  }

  /** The proxy's log on one node (its connection log goes to stdout). */
  async proxyLog(node: string): Promise<string> {
    const pods = await this.kubectl(['-n', SYSTEM_NAMESPACE, 'get', 'pods', '-l', 'app.kubernetes.io/name=ambient-lab-proxy',
      '--field-selector', `spec.nodeName=${node}`, '-o', 'jsonpath={.items[*].metadata.name}']);
    const name = pods.stdout.trim().split(/\s+/)[0];
    if (!name) throw new Error(`no ambient-lab-proxy pod on node ${node}`);
    return (await this.kubectl(['-n', SYSTEM_NAMESPACE, 'logs', name, '-c', 'proxy'])).stdout;
  }

  async deleteCluster(): Promise<void> {
    await this.run('kind', ['delete', 'cluster', '--name', this.o.cluster, '--kubeconfig', this.o.kubeconfig]);
  }

  /** Everything up: create, build, load, apply, wait. Deletes the cluster if any step fails. */
  async up(opts: { readonly build?: boolean } = {}): Promise<void> {
    await this.createCluster();
    try {
      if (opts.build !== false) await this.buildImages();
      await this.loadImages();
      await this.applyManifests();
      await this.waitReady();
    } catch (e) {
      await this.deleteCluster().catch(() => undefined);
      throw e;
    }
  }
}
