/**
 * One kind cluster for a whole `check --world kind` run. Bringing a cluster up (create, build,
 * load, apply, rollout) takes minutes, so the factory brings it up on the first create() and
 * every later world runs on it: a world's close() clears what it did (KindWorld.clear: its
 * namespaces deleted, stopped components started) and hands the cluster back. A different
 * profile or DNS setting is applied to the agent DaemonSet (`kubectl set env`, rollout) instead
 * of a new cluster. One world at a time: the check runs kind cells in one thread, in sequence.
 * dispose() deletes the cluster at the end of the run.
 *
 * Attaching to an existing cluster is not supported: the world needs the node-stop hook and the
 * agent settings it applies itself at bring-up, and it deletes what it created.
 */
import { mkdtemp, rm } from 'node:fs/promises';
import * as os from 'node:os';
import * as path from 'node:path';
import * as k8s from '@kubernetes/client-node';
import type { World, WorldFactory, WorldOptions } from '../../scenarios/world.js';
import { repoRoot as findRepoRoot } from '../netns/world-lab.js';
import { KindCli } from './kind-cli.js';
import { KindWorld, kindDeployment, kindConfigFor, kindWorldFactory } from './kind-world.js';
import { rethrowAfterCleanup } from '../cleanup.js';

// From source or from dist/ (the CLI): fixtures/, ci/ and the manifests are at the repository root.
const repoRoot = findRepoRoot();

interface SharedKindOptions {
  /** Cluster name (al-...); default from the pid. */
  readonly cluster?: string;
  /** Where the kubeconfig goes (`<workDir>/kubeconfig`); default a fresh temporary directory, removed by dispose(). */
  readonly workDir?: string;
  /** Environment of kind/docker/kubectl (tests put fakes on PATH). */
  readonly env?: NodeJS.ProcessEnv;
  /** Build the images (default: unless AMBIENT_LAB_SKIP_IMAGE_BUILD=1, as kindWorldFactory). */
  readonly build?: boolean;
  /** Availability (default: kindWorldFactory's, KIND=1). */
  readonly available?: () => { readonly ok: boolean; readonly reason: string };
  /** Polling of clear() between worlds (tests shorten it). */
  readonly clearPolling?: { readonly attempts?: number; readonly intervalMs?: number };
}

interface Up {
  readonly cli: KindCli;
  readonly kc: k8s.KubeConfig;
  readonly nodes: readonly string[];
  /** Dual-stack (the first world's ipv6 decides the cluster's stack for the run). */
  readonly ipv6: boolean;
  /** The settings deploy/ was last rendered and applied for (JSON of kindDeployment). */
  deployment: string;
  prepared: boolean;
}

/** The reasons a world option cannot be staged on kind, as create() errors (the catalog skips on 'unsupported'). */
function kindUnsupported(o: WorldOptions): string | undefined {
  if (o.meshV6 !== undefined && o.meshV6 !== o.ipv6)
    return `kind world: meshV6 ${o.meshV6} with ipv6 ${o.ipv6} is unsupported (the agent and proxy follow the cluster's stack); run it on the sim world`;
  return undefined;
}

export class SharedKindCluster implements WorldFactory {
  readonly kind = 'kind' as const;
  private up: Promise<Up> | undefined;
  private current: KindWorld | undefined;
  private tmp: string | undefined;
  /** Worlds handed out (the first brings the cluster up). */
  created = 0;

  constructor(private readonly o: SharedKindOptions = {}) {}

  available(): { readonly ok: boolean; readonly reason: string } {
    return (this.o.available ?? kindWorldFactory.available)();
  }

  async create(options: WorldOptions): Promise<World> {
    const why = kindUnsupported(options);
    if (why) throw new Error(why);
    if (this.current)
      throw new Error(
        'kind world: the shared cluster already has a world; close it first (the check runs kind cells one at a time)',
      );
    // A failed bring-up stays failed: every later create() reports it instead of retrying for minutes.
    const u = await (this.up ??= this.bringUp(options));
    if (u.ipv6 !== options.ipv6) {
      throw new Error(
        `kind world: ipv6 ${options.ipv6} is unsupported on this run's ${u.ipv6 ? 'dual-stack' : 'single-stack'} shared cluster (the first world chose its stack); run such worlds in a separate check run`,
      );
    }
    // other settings: deploy/ rendered for them and applied, as a user applies another overlay
    const deployment = kindDeployment(options);
    if (JSON.stringify(deployment) !== u.deployment) {
      await u.cli.applyDeployment(deployment);
      await u.cli.waitReady();
      u.deployment = JSON.stringify(deployment);
    }
    const world: KindWorld = new KindWorld(options, u.nodes, u.cli, u.kc, undefined, this.o.env, async () => {
      try {
        await world.clear(this.o.clearPolling);
      } finally {
        this.current = undefined;
      }
    });
    if (u.prepared) await world.loadNodeAddresses();
    else {
      await world.prepare();
      u.prepared = true;
    }
    this.current = world;
    this.created++;
    return world;
  }

  private async bringUp(options: WorldOptions): Promise<Up> {
    this.tmp = this.o.workDir ?? (await mkdtemp(path.join(os.tmpdir(), 'al-kind-')));
    const kubeconfig = path.join(this.tmp, 'kubeconfig');
    const cluster = this.o.cluster ?? `al-check-${process.pid.toString(36)}`;
    const cli = new KindCli({
      cluster,
      repoRoot,
      kubeconfig,
      kindConfig: kindConfigFor(options),
      ...(this.o.env ? { env: this.o.env } : {}),
    });
    const deployment = kindDeployment(options);
    await cli.up({
      build: this.o.build ?? process.env['AMBIENT_LAB_SKIP_IMAGE_BUILD'] !== '1',
      deployment,
    });
    try {
      const kc = new k8s.KubeConfig();
      kc.loadFromFile(kubeconfig);
      const nodes = (await kc.makeApiClient(k8s.CoreV1Api).listNode()).items.map((n) => n.metadata!.name!).sort();
      return { cli, kc, nodes, ipv6: options.ipv6, deployment: JSON.stringify(deployment), prepared: false };
    } catch (e) {
      return rethrowAfterCleanup(e, ['delete the kind cluster', () => cli.deleteCluster()]);
    }
  }

  /** Delete the cluster (if one came up) and the kubeconfig's directory (if it was ours). */
  async dispose(): Promise<void> {
    const up = this.up;
    this.up = undefined;
    try {
      // A bring-up that failed has removed its own cluster, and its error already reached every
      // create() that awaited it: there is nothing left to delete.
      const u = await up?.then(
        (x) => x,
        () => undefined,
      );
      if (u) await u.cli.deleteCluster();
    } finally {
      if (this.tmp && this.o.workDir === undefined) await rm(this.tmp, { recursive: true, force: true });
      this.tmp = undefined;
    }
  }
}

/** A fresh shared-cluster factory, as check loads it by module (e2e/world-modules.ts). */
export function createSharedKindCluster(): SharedKindCluster {
  return new SharedKindCluster();
}
