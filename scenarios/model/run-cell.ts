/**
 * Run one matrix cell — a property, a threat model, a rule profile — as a fast-check
 * model-based property: random histories of commands on a fresh World each, the property
 * evaluated after every connection and settle, shrinking on a violation. A violation is
 * replayed once from its seed + path + replayPath to capture the minimal run's step log and
 * packet trace (which is also the proof that the counterexample replays).
 */
import type { Backend } from '../../impl/api/backend.js';
import fc from 'fast-check';
import type { Profile, World, WorldFactory, WorldKind } from '../world.js';
import { commandArbitraries } from './arbitraries.js';
import type { CheckableProperty, RunViolation, ThreatSpec } from './contracts.js';
import { emptyModel, markSettled, type ClusterModel } from './model.js';
import { WorldPool, baselineOf, isResettable, restoreModel, type Baseline, type PoolStats } from './world-pool.js';
import { PropertyViolationError, checkState, record, type RunContext, type StepRecord } from './run-context.js';
import { CreateNamespace, CreatePod, Settle, type ModelCommand } from './commands.js';
import { Race } from './race.js';

interface CellRunOptions {
  readonly factory: WorldFactory;
  /** The factory for the one replay of a shrunk counterexample (e.g. with packet traces on). */
  readonly replayFactory?: WorldFactory;
  /** fast-check runs (histories) for this cell. */
  readonly runs: number;
  readonly seed: number;
  readonly maxCommands: number;
  readonly nodes: number;
  readonly ipv6: boolean;
  readonly dnsCapture: boolean;
  /** The agent's rules backend (absent: iptables). */
  readonly backend?: Backend;
  /** Replay: run exactly this case (from a counterexample file). */
  readonly path?: string;
  readonly replayPath?: string;
  /** Called after every history (progress, statistics); ctx is undefined when the World could not be created. */
  readonly onRun?: (ctx: RunContext | undefined) => void;
  /**
   * Reuse one world across the cell's histories, reset to the post-prelude state and verified
   * by digest (world-pool.ts; default true). Worlds that cannot be reset are used once anyway.
   * Shrinking and the counterexample's replay always run on fresh worlds.
   */
  readonly reuseWorlds?: boolean;
}

interface CellSpec {
  readonly property: CheckableProperty;
  readonly threat: ThreatSpec;
  readonly profile: Profile;
}

/** A shrunk counterexample, everything needed to replay it and to read it. */
export interface CellCounterexample {
  readonly seed: number;
  readonly path: string;
  readonly replayPath: string | undefined;
  readonly commands: readonly string[];
  readonly steps: readonly StepRecord[];
  readonly found: RunViolation;
  /** The scheduler's report of the minimal run (which racing operation was released when). */
  readonly schedule: string;
  readonly worldKind: WorldKind;
}

export type CellResult = (
  | { readonly status: 'holds'; readonly runs: number }
  | { readonly status: 'bypass'; readonly runs: number; readonly counterexample: CellCounterexample }
  /** The harness failed (a World call threw): not a verdict, always unexpected. */
  | {
      readonly status: 'error';
      readonly runs: number;
      readonly error: string;
      readonly seed: number;
      readonly path?: string;
      readonly replayPath?: string;
    }
) & { readonly worlds?: PoolStats };

/**
 * Every history starts in the same place — an ambient namespace and a plain one with a pod
 * each, settled — so random commands spend their budget on changes and attacks rather than on
 * building a cluster. The prelude is not shrunk (it is not drawn).
 */
function prelude(): ModelCommand[] {
  const pod = (nsIndex: number, nodeIndex: number): CreatePod =>
    new CreatePod({
      nsIndex,
      nodeIndex,
      mode: null,
      hostile: [],
      uidIndex: 0,
      caps: ['NET_ADMIN', 'NET_RAW'],
      hostNetwork: false,
    });
  // Namespaces sort as ambient-a, plain: index 0 and 1.
  return [
    new CreateNamespace('ambient-a', 'ambient'),
    new CreateNamespace('plain', null),
    pod(0, 0),
    pod(1, 1),
    pod(0, 1),
    new Settle(),
  ];
}

/**
 * Does the history hold a Race? Such a history always gets a fresh world. How a race resolves
 * depends on what else is due in the world while its operations are in flight — timers of the
 * agents, proxies and kubelets (repair passes, retries, backoffs) at their phase since boot, and
 * the world's own seed — and a reset world restores the cluster's state, not those phases nor
 * the seed fast-check drew for the history. A race on a reused world resolved one way (a pod's
 * CNI ADD completed before its agent stopped) and on the fresh world of the replay the other, so
 * its violation could not be replayed and the cell ended in ERROR (check --seed 809551270,
 * fail-closed × app-net-raw-6.1 × strict). fast-check hands the commands wrapped (`cmd`).
 */
function racesIn(commands: Iterable<ModelCommand>): boolean {
  for (const c of commands) {
    const inner = (c as { cmd?: unknown }).cmd ?? c;
    if (inner instanceof Race) return true;
  }
  return false;
}

interface LastRun {
  ctx?: RunContext;
  commands?: string[];
}

function buildProperty(
  spec: CellSpec,
  o: CellRunOptions,
  last: LastRun,
  pool?: WorldPool,
): fc.IAsyncPropertyWithHooks<[Iterable<ModelCommand>, fc.Scheduler, number]> {
  const arbs = commandArbitraries({ threat: spec.threat, nodes: o.nodes, ipv6: o.ipv6 });
  const cmds = fc.commands(arbs, {
    maxCommands: o.maxCommands,
    ...(o.replayPath !== undefined ? { replayPath: o.replayPath } : {}),
  });
  return fc.asyncProperty(
    cmds,
    fc.scheduler(),
    fc.integer({ min: 1, max: 0x7fffffff }),
    async (commands, scheduler, worldSeed) => {
      let world: World | undefined;
      let runCtx: RunContext | undefined;
      let baseline: Baseline | undefined;
      let clean = false;
      try {
        const reused = pool?.enabled && !racesIn(commands) ? await pool.take() : undefined;
        world =
          reused?.world ??
          (await o.factory.create({
            nodes: o.nodes,
            profile: spec.profile,
            kernelVersion: spec.threat.kernelVersion,
            ipv6: o.ipv6,
            dnsCapture: o.dnsCapture,
            ...(o.backend === 'nftables' ? { rulesBackend: o.backend } : {}),
            seed: worldSeed,
          }));
        const w = world;
        const model: ClusterModel = reused
          ? restoreModel(reused.baseline, await w.pods())
          : emptyModel(w.nodes, spec.profile, spec.threat);
        const ctx: RunContext = {
          world: w,
          property: spec.property,
          dnsCapture: o.dnsCapture,
          scheduler,
          steps: [],
          attempts: [],
        };
        last.ctx = ctx;
        runCtx = ctx;
        last.commands = undefined;
        const executed: ModelCommand[] = [];
        const start = prelude();
        try {
          if (reused) {
            baseline = reused.baseline;
            record(ctx, 'Prelude(reused world)', 'reset to the post-prelude state; state digest verified');
          } else {
            await fc.asyncModelRun(() => ({ model, real: ctx }), start);
            if (pool?.enabled && isResettable(w)) baseline = baselineOf(w, model);
            pool?.countFresh();
          }
          const random = (function* () {
            for (const c of commands) {
              executed.push(c);
              yield c;
            }
          })();
          await fc.asyncModelRun(() => ({ model, real: ctx }), random);
          // Every history ends quiescent: convergence and fail-closed are judged there.
          await w.settle();
          markSettled(model);
          record(ctx, 'Settle(final)', 'quiescent');
          await checkState(ctx, model);
          clean = true;
        } finally {
          last.commands = [
            ...(reused ? ['Prelude(reused world)'] : start.map((c) => c.toString())),
            ...executed.map((c) => c.toString()),
          ];
        }
      } finally {
        if (clean && pool?.enabled && baseline && world && isResettable(world)) await pool.park(world, baseline);
        else {
          // A violation or a harness error leaves a world in a state nobody verified: never reused.
          if (!clean) pool?.markFailure();
          await world?.close();
        }
        o.onRun?.(runCtx);
      }
    },
  );
}

function replayPathOf(counterexample: unknown): string | undefined {
  const text = String(counterexample);
  return /replayPath="([^"]*)"/.exec(text)?.[1];
}

export async function runCell(spec: CellSpec, o: CellRunOptions): Promise<CellResult> {
  const last: LastRun = {};
  const pool = o.reuseWorlds !== false && o.path === undefined ? new WorldPool() : undefined;
  const prop = buildProperty(spec, o, last, pool);
  const params: fc.Parameters<[Iterable<ModelCommand>, fc.Scheduler, number]> =
    o.path !== undefined
      ? { seed: o.seed, path: o.path, endOnFailure: true, numRuns: 1 }
      : { seed: o.seed, numRuns: o.runs, endOnFailure: false };
  let out: fc.RunDetails<[Iterable<ModelCommand>, fc.Scheduler, number]>;
  try {
    out = await fc.check(prop, params);
  } finally {
    await pool?.close();
  }
  const worlds = (): { worlds?: PoolStats } => (pool ? { worlds: { ...pool.stats } } : {});
  if (!out.failed) return { status: 'holds', runs: out.numRuns, ...worlds() };
  const runs = out.numRuns;
  let found = await replayed(spec, o, out);
  if (found.status === 'not-reproduced' && pool) {
    // Shrinking reused worlds too; its result did not replay on a fresh world. Shrink again from
    // the search's failing case with a fresh world for every run, as before world reuse.
    const first = (out.counterexamplePath ?? '').split(':')[0] ?? '';
    const again = await fc.check(buildProperty(spec, o, {}), { seed: o.seed, path: first, endOnFailure: false });
    if (!again.failed) {
      return {
        status: 'error',
        runs,
        seed: o.seed,
        path: first,
        ...worlds(),
        error: `a violation found on a reused world (run ${first}) does not happen on a fresh world: the reset left state its digest does not see (${found.message})`,
      };
    }
    found = await replayed(spec, o, again);
  }
  if (found.status === 'bypass') return { status: 'bypass', runs, counterexample: found.counterexample, ...worlds() };
  if (found.status === 'not-reproduced') {
    return {
      status: 'error',
      runs,
      error: `the shrunk counterexample did not replay on a fresh world (seed ${o.seed}, path ${found.path}): ${found.message}`,
      seed: o.seed,
      path: found.path,
      ...worlds(),
    };
  }
  return {
    status: 'error',
    runs,
    error: found.message,
    seed: o.seed,
    path: found.path,
    ...(found.replayPath !== undefined ? { replayPath: found.replayPath } : {}),
    ...worlds(),
  };
}

type Replayed =
  | { readonly status: 'bypass'; readonly counterexample: CellCounterexample }
  | {
      readonly status: 'not-reproduced' | 'harness-error';
      readonly message: string;
      readonly path: string;
      readonly replayPath?: string;
    };

/** Replay a failed check's shrunk case on a fresh world: its step log, attempts and schedule are the counterexample's. */
async function replayed(
  spec: CellSpec,
  o: CellRunOptions,
  out: fc.RunDetails<[Iterable<ModelCommand>, fc.Scheduler, number]>,
): Promise<Replayed> {
  const err = out.errorInstance;
  const path = out.counterexamplePath ?? o.path ?? '';
  const replayPath = out.counterexample ? (replayPathOf(out.counterexample[0]) ?? o.replayPath) : o.replayPath;
  if (!(err instanceof PropertyViolationError)) {
    return {
      status: 'harness-error',
      message: err instanceof Error ? err.message : String(err),
      path,
      ...(replayPath !== undefined ? { replayPath } : {}),
    };
  }
  const replay: LastRun = {};
  const again = await fc.check(
    buildProperty(
      spec,
      { ...o, factory: o.replayFactory ?? o.factory, ...(replayPath !== undefined ? { replayPath } : {}) },
      replay,
    ),
    {
      seed: o.seed,
      path,
      endOnFailure: true,
      numRuns: 1,
    },
  );
  const ctx = replay.ctx;
  if (!again.failed || !ctx?.violation) return { status: 'not-reproduced', message: err.message, path };
  return {
    status: 'bypass',
    counterexample: {
      seed: o.seed,
      path,
      replayPath,
      commands: replay.commands ?? [],
      steps: ctx.steps,
      found: ctx.violation,
      schedule: ctx.scheduler
        .report()
        .map((r) => `${r.status}: ${r.label}`)
        .join('\n'),
      worldKind: o.factory.kind,
    },
  };
}
