/**
 * World reuse between the histories of one cell. Booting a cluster and running the prelude
 * costs more than most histories, so after a history that ended without a violation the world
 * is parked; the next history resets it to the post-prelude state (SimMeshWorld.resetTo) and
 * uses it only when its state digest equals the digest taken right after the prelude on the
 * fresh world. A reset that cannot be verified closes the world and the history gets a fresh
 * one. A run that failed never parks its world. Shrinking reuses worlds too; the shrunk case is
 * then replayed on a fresh world, exactly as `--replay` will, and when that does not reproduce
 * it, run-cell shrinks again from the search's failing case with fresh worlds only.
 *
 * A reused world differs from a fresh one only in identities the digest abstracts (pod uids and
 * addresses, sandbox names, virtual time, API resourceVersions, proxy incarnations) and in state
 * it cannot see (e.g. informer caches, which the settle re-synchronises); docs/check.md argues
 * why that does not weaken the check.
 */
import type { PodObservation, PodSpec, World } from '../world.js';
import { podKey } from '../world.js';
import type { ResetBaseline } from '../worlds/sim-world.js';
import { cloneModel, type ClusterModel, type ModelView } from './model.js';

/** A world that can be reset to a baseline and compared with it (the sim world). */
interface ResettableWorld extends World {
  resetTo(baseline: ResetBaseline): Promise<void>;
  stateDigest(): string;
}

export function isResettable(w: World): w is ResettableWorld {
  const r = w as Partial<ResettableWorld>;
  return typeof r.resetTo === 'function' && typeof r.stateDigest === 'function';
}

/** The post-prelude state of a cell's first world: what every reset must reproduce. */
export interface Baseline {
  readonly digest: string;
  readonly spec: ResetBaseline;
  readonly model: ModelView;
}

export interface PoolStats {
  /** Histories of the search that ran on a fresh world (boot + prelude). */
  fresh: number;
  /** Runs after the first violation (shrinking), on fresh or reused worlds; not counted as histories. */
  shrinking: number;
  /** Histories that ran on a reset, verified world. */
  reused: number;
  /** Resets whose digest differed from the baseline (or that threw): the world was dropped. */
  rejected: number;
}

/** The baseline of a world right after the prelude (the model says what the prelude asked for). */
export function baselineOf(world: ResettableWorld, model: ModelView): Baseline {
  const namespaces: Record<string, Record<string, string>> = {};
  for (const [n, l] of model.namespaces) namespaces[n] = { ...l };
  const pods: PodSpec[] = [...model.pods.values()].map((p) => ({
    namespace: p.ref.namespace,
    name: p.ref.name,
    node: p.node,
    labels: { ...p.labels },
    annotations: { ...p.annotations },
    hostNetwork: p.hostNetwork,
    app: p.app,
  }));
  return { digest: world.stateDigest(), spec: { namespaces, pods }, model: cloneModel(model) };
}

/** The baseline model with what the reused world observes now (uids and addresses may be new). */
export function restoreModel(baseline: Baseline, observed: readonly PodObservation[]): ClusterModel {
  const m = cloneModel(baseline.model);
  for (const [key, p] of m.pods) {
    const o = observed.find((x) => podKey(x) === key);
    if (!o)
      throw new Error(
        `world pool: pod ${key} of the baseline is missing after a verified reset (the digest should have caught this)`,
      );
    m.pods.set(key, { ...p, uid: o.uid, node: o.node, ips: o.ips, started: o.started });
  }
  return m;
}

export class WorldPool {
  readonly stats: PoolStats = { fresh: 0, shrinking: 0, reused: 0, rejected: 0 };
  private parked: { world: ResettableWorld; baseline: Baseline } | undefined;
  private on = true;
  /** After the first failed run fast-check shrinks: its runs are counted apart, not as histories. */
  private shrinkingPhase = false;

  get enabled(): boolean {
    return this.on;
  }

  /** No more reuse. */
  async disable(): Promise<void> {
    this.on = false;
    await this.close();
  }

  /** A run failed (violation or harness error): its world is closed, and fast-check starts shrinking. */
  markFailure(): void {
    this.shrinkingPhase = true;
  }

  /** A run got a fresh world. */
  countFresh(): void {
    if (this.shrinkingPhase) this.stats.shrinking++;
    else this.stats.fresh++;
  }

  /** The parked world, reset and verified; undefined when there is none or it failed verification. */
  async take(): Promise<{ world: ResettableWorld; baseline: Baseline } | undefined> {
    const p = this.parked;
    this.parked = undefined;
    if (!p || !this.on) {
      await p?.world.close();
      return undefined;
    }
    let ok: boolean;
    try {
      await p.world.resetTo(p.baseline.spec);
      const now = p.world.stateDigest();
      ok = now === p.baseline.digest;
      if (!ok && process.env['AMBIENT_LAB_POOL_DEBUG']) {
        const a = new Set(p.baseline.digest.split('\n'));
        const b = new Set(now.split('\n'));
        console.error(
          `world pool: reset rejected\n${[...a]
            .filter((x) => !b.has(x))
            .map((x) => `- ${x}`)
            .join('\n')}\n${[...b]
            .filter((x) => !a.has(x))
            .map((x) => `+ ${x}`)
            .join('\n')}`,
        );
      }
    } catch {
      ok = false; // a reset that throws is a world we do not trust: drop it, the history gets a fresh one
    }
    if (!ok) {
      this.stats.rejected++;
      await p.world.close();
      return undefined;
    }
    if (this.shrinkingPhase) this.stats.shrinking++;
    else this.stats.reused++;
    return p;
  }

  /** Keep a world whose history ended cleanly for the next history (closes any other). */
  async park(world: ResettableWorld, baseline: Baseline): Promise<void> {
    if (!this.on) {
      await world.close();
      return;
    }
    const old = this.parked;
    this.parked = { world, baseline };
    if (old && old.world !== world) await old.world.close();
  }

  async close(): Promise<void> {
    const p = this.parked;
    this.parked = undefined;
    await p?.world.close();
  }
}
