/**
 * The units of work of `check`, runnable in-process or in a worker thread: a model-based cell
 * (random histories for one property × threat × profile) or an attack-catalog run (the
 * deterministic attacker actions of one threat × profile, scenarios/attacks). Results are plain
 * JSON so they cross thread boundaries.
 */
import type { Backend } from '../../impl/api/backend.js';
import type { Profile } from '../world.js';
import type { PropertyName } from '../properties/index.js';
import { defaultCatalog } from './catalog.js';
import { fileNameFor, saveCounterexample, toFile, type CounterexampleFile } from './counterexample.js';
import { runCell, type CellResult } from './run-cell.js';
import type { PoolStats } from './world-pool.js';
import { loadFactory, type WorldChoice } from './worlds.js';

export interface Settings {
  readonly nodes: number;
  readonly ipv6: boolean;
  readonly dnsCapture: boolean;
  readonly maxCommands: number;
}

export type Task =
  | {
      readonly kind: 'model';
      readonly property: PropertyName;
      readonly threat: string;
      readonly profile: Profile;
      readonly backend: Backend;
      readonly runs: number;
      readonly seed: number;
    }
  | {
      readonly kind: 'attack';
      readonly threat: string;
      readonly profile: Profile;
      readonly backend: Backend;
      readonly seed: number;
    };

export interface TaskEnv {
  readonly world: WorldChoice;
  readonly settings: Settings;
  /** Where counterexample files go (none saved when undefined). */
  readonly outDir: string | undefined;
}

export type TaskResult =
  | {
      readonly kind: 'model';
      readonly property: PropertyName;
      readonly threat: string;
      readonly profile: Profile;
      readonly backend: Backend;
      readonly status: CellResult['status'];
      readonly runs: number;
      readonly counterexample?: CounterexampleFile;
      readonly savedAs?: string;
      readonly error?: string;
      /** How the cell's histories got their worlds (fresh, reused after a verified reset, resets rejected). */
      readonly worlds?: PoolStats;
    }
  | {
      readonly kind: 'attack';
      readonly threat: string;
      readonly profile: Profile;
      readonly backend: Backend;
      /** Violations per property: the first few, as action @ phase: message. */
      readonly found: Readonly<Partial<Record<PropertyName, readonly string[]>>>;
      /** Catalog phases the world could not stage (catalog-phases.ts `catalogLog`), e.g. "rogue-zds: skipped (the World has no zdsClient)". */
      readonly skipped?: readonly string[];
      readonly error?: string;
    };

/** The lines of a catalog log that say a phase was skipped (the world lacks what it needs). */
export function catalogSkips(catalogLog: readonly string[]): string[] {
  return catalogLog.filter((line) => /^[a-z0-9-]+: skipped\b/.test(line));
}

export async function runTask(t: Task, env: TaskEnv, onRun: () => void): Promise<TaskResult> {
  const catalog = defaultCatalog();
  if (t.kind === 'attack') {
    try {
      const { runThreatDetailed } = await import('../attacks/matrix.js');
      const { threat } = await import('../threats/threats.js');
      const factory = await loadFactory(env.world);
      const { found, catalogLog } = await runThreatDetailed(factory, t.profile, threat(t.threat), {
        seed: t.seed,
        ipv6: env.settings.ipv6,
        backend: t.backend,
      });
      const skipped = catalogSkips(catalogLog);
      const byProp: Partial<Record<PropertyName, string[]>> = {};
      for (const f of found) {
        const list = (byProp[f.violation.property] ??= []);
        if (list.length < 5) list.push(`${f.action ?? 'state'} @ ${f.phase}: ${f.violation.message}`);
      }
      onRun();
      return {
        kind: 'attack',
        threat: t.threat,
        profile: t.profile,
        backend: t.backend,
        found: byProp,
        ...(skipped.length ? { skipped } : {}),
      };
    } catch (e) {
      return {
        kind: 'attack',
        threat: t.threat,
        profile: t.profile,
        backend: t.backend,
        found: {},
        error: e instanceof Error ? e.message : String(e),
      };
    }
  }
  const property = catalog.properties.find((p) => p.name === t.property);
  const threat = catalog.threats.find((x) => x.id === t.threat);
  if (!property || !threat) throw new Error(`unknown cell ${t.property} × ${t.threat}`);
  const base = {
    kind: 'model' as const,
    property: t.property,
    threat: t.threat,
    profile: t.profile,
    backend: t.backend,
  };
  // The backend travels with the generator settings, so a counterexample replays on it.
  const settings = { ...env.settings, ...(t.backend === 'nftables' ? { backend: t.backend } : {}) };
  try {
    const factory = await loadFactory(env.world);
    const replayFactory = await loadFactory({ ...env.world, trace: true });
    const r = await runCell(
      { property, threat, profile: t.profile },
      {
        factory,
        replayFactory,
        runs: t.runs,
        seed: t.seed,
        ...settings,
        onRun: () => onRun(),
      },
    );
    const worlds = r.worlds ? { worlds: r.worlds } : {};
    if (r.status === 'holds') return { ...base, status: 'holds', runs: r.runs, ...worlds };
    if (r.status === 'error')
      return {
        ...base,
        status: 'error',
        runs: r.runs,
        error: `${r.error} (seed ${r.seed}${r.path ? `, path ${r.path}` : ''})`,
        ...worlds,
      };
    const name = env.outDir !== undefined ? `${env.outDir}/${fileNameFor(base, t.seed)}` : fileNameFor(base, t.seed);
    const file = toFile(
      { property: t.property, threat: t.threat, profile: t.profile },
      settings,
      r.counterexample,
      name,
      env.world.mutant,
    );
    const savedAs = env.outDir !== undefined ? saveCounterexample(env.outDir, file) : undefined;
    return {
      ...base,
      status: 'bypass',
      runs: r.runs,
      counterexample: file,
      ...(savedAs ? { savedAs } : {}),
      ...worlds,
    };
  } catch (e) {
    return { ...base, status: 'error', runs: 0, error: e instanceof Error ? e.message : String(e) };
  }
}
