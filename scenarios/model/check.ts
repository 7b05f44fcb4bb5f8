/**
 * `check` as a library: plan the matrix cells, run each cell's model-based histories and each
 * threat × profile's attack catalog (in worker threads, one shared queue), judge every cell
 * against the expected table, and return the report the CLI prints or writes as JSON.
 *
 * A cell's observation is "bypass" when either search found a violation of its property: the
 * random histories (shrunk, replayable counterexample file) or the deterministic attack catalog
 * (named action and phase). The check is ok when every cell matches the table.
 */
import { Worker } from 'node:worker_threads';
import { createHash } from 'node:crypto';
import type { PropertyName } from '../properties/index.js';
import type { Profile } from '../world.js';
import { defaultCatalog } from './catalog.js';
import type { ExpectedVerdict } from './contracts.js';
import type { CounterexampleFile } from './counterexample.js';
import type { Backend } from '../../impl/api/backend.js';
import {
  cellName,
  FAILING,
  judge,
  planCells,
  profileColumn,
  runsPerCell,
  type CellId,
  type CellStatus,
  type MatrixSelection,
} from './matrix.js';
import { runTask, type Settings, type Task, type TaskEnv, type TaskResult } from './tasks.js';
import {
  disposeWorlds,
  loadFactory,
  runsInProcess,
  unstageableThreat,
  worldGaps,
  worldLimits,
  type WorldChoice,
} from './worlds.js';

export const CHECK_REPORT_FORMAT = 'ambient-lab/check@1';

interface CheckOptions {
  readonly world: WorldChoice;
  readonly settings: Settings;
  /** Total model-based histories, spread evenly over the selected cells. */
  readonly runs: number;
  readonly seed: number;
  readonly selection: MatrixSelection;
  /** Worker threads (0: run in this thread). */
  readonly workers: number;
  readonly outDir: string | undefined;
  /** Also run the deterministic attack catalog per threat × profile (default on). */
  readonly attacks: boolean;
  readonly onProgress?: (p: Progress) => void;
  /**
   * Aborting stops the run: worker threads are terminated mid-history, then the world's factory
   * removes what they left (WorldFactory.reapInterrupted) and runCheck rejects with CheckInterrupted.
   */
  readonly signal?: AbortSignal;
}

/** The run was stopped (CheckOptions.signal); `reaped` lists what its worlds had left and was removed. */
export class CheckInterrupted extends Error {
  constructor(
    readonly reason: string,
    readonly reaped: readonly string[],
  ) {
    super(`check interrupted (${reason})`);
  }
}

export interface Progress {
  readonly doneRuns: number;
  readonly totalRuns: number;
  readonly doneTasks: number;
  readonly totalTasks: number;
  /** The task just finished, when one did. */
  readonly finished?: string;
}

export interface CellReport extends CellId {
  readonly expected: ExpectedVerdict | undefined;
  /** 'not run': the world cannot stage the cell (`skipped` says why); judged 'not evaluated', never 'holds'. */
  readonly observed: 'holds' | 'bypass' | 'error' | 'not run';
  readonly skipped?: string;
  readonly status: CellStatus;
  /** Histories run for this cell (fewer than the budget when a counterexample stopped it). */
  readonly runs: number;
  /** Which search found the bypass. */
  readonly foundBy?: readonly ('model' | 'attacks')[];
  readonly violation?: string;
  readonly counterexampleFile?: string;
  readonly attackFindings?: readonly string[];
  readonly error?: string;
}

export interface CheckReport {
  readonly format: typeof CHECK_REPORT_FORMAT;
  readonly world: string;
  readonly mutant?: string;
  readonly seed: number;
  readonly budget: {
    readonly runs: number;
    readonly runsPerCell: number;
    readonly maxCommands: number;
    readonly attacks: boolean;
  };
  readonly settings: Settings;
  readonly shard?: { readonly index: number; readonly count: number };
  readonly cells: readonly CellReport[];
  readonly counterexamples: readonly CounterexampleFile[];
  /** Attack-catalog phases a world could not stage, as "threat × profile: phase: skipped (why)"; such cells were judged without them. */
  readonly catalogSkipped: readonly string[];
  /** What the whole run left out because the world cannot stage it (e.g. IPv6 on kind). */
  readonly worldGaps?: readonly string[];
  readonly totals: {
    readonly cells: number;
    readonly histories: number;
    readonly attackRuns: number;
    readonly seconds: number;
    readonly historiesPerSecond: number;
    readonly mismatches: number;
    /** CPU time of this process and its worker threads (on a shared machine, wall time says little). */
    readonly cpuSeconds: number;
    /** Worlds of the histories: fresh (boot + prelude), reused after a verified reset, resets rejected. */
    readonly worlds: {
      readonly fresh: number;
      readonly reused: number;
      readonly rejected: number;
      readonly shrinking: number;
    };
  };
  readonly ok: boolean;
}

/** Per-cell seed from the run seed and the cell's name: stable under sharding and selection. */
function cellSeed(seed: number, c: CellId): number {
  // iptables cells keep the seeds they had before the backend axis existed
  const backend = c.backend === 'iptables' ? '' : `|${c.backend}`;
  const h = createHash('sha256').update(`${seed}|${c.property}|${c.threat}|${c.profile}${backend}`).digest();
  return h.readUInt32BE(0) & 0x7fffffff;
}

function workerUrl(): URL | undefined {
  // Worker threads need compiled JavaScript; from TypeScript sources (tests) run in-process.
  return import.meta.url.endsWith('.js') ? new URL('./check-worker.js', import.meta.url) : undefined;
}

async function runQueue(
  tasks: readonly Task[],
  env: TaskEnv,
  workers: number,
  onRuns: (n: number) => void,
  onResult: (r: TaskResult) => void,
  signal: AbortSignal | undefined,
): Promise<void> {
  const url = workerUrl();
  // Resolves when the signal aborts: the run stops waiting for its tasks and throws.
  const aborted = new Promise<typeof ABORTED>((resolve) => {
    if (signal?.aborted) resolve(ABORTED);
    else signal?.addEventListener('abort', () => resolve(ABORTED), { once: true });
  });
  if (workers <= 0 || !url) {
    // In this thread a task cannot be cut short: an abort stops the run at the next await.
    for (const t of tasks) {
      const r = await Promise.race([runTask(t, env, () => onRuns(1)), aborted]);
      if (r === ABORTED) throw new Error('aborted');
      onResult(r);
    }
    return;
  }
  const queue = [...tasks];
  const n = Math.min(workers, queue.length);
  const live = new Set<Worker>();
  // One lane per worker. A worker that crashes (an exception escaping the world, outside any
  // awaited promise) fails only its current task, reported as an error, and is replaced.
  const lane = (): Promise<void> =>
    new Promise<void>((resolve) => {
      const w = new Worker(url, { workerData: env });
      live.add(w);
      w.once('exit', () => live.delete(w));
      let current: Task | undefined;
      const next = (): void => {
        current = queue.shift();
        if (current) w.postMessage({ task: current });
        else void w.terminate().then(() => resolve());
      };
      w.on('message', (m: { runs?: number; result?: TaskResult; failed?: string }) => {
        if (m.runs) onRuns(m.runs);
        if (m.result || m.failed !== undefined) {
          if (m.result) onResult(m.result);
          else if (current) onResult(crashed(current, m.failed ?? 'unknown failure'));
          next();
        }
      });
      w.on('error', (e) => {
        if (current) onResult(crashed(current, `worker crashed: ${e.message}`));
        current = undefined;
        void w
          .terminate()
          .then(() => lane())
          .then(resolve);
      });
      next();
    });
  if ((await Promise.race([Promise.all(Array.from({ length: n }, () => lane())), aborted])) === ABORTED) {
    // Interrupted: end every worker thread now (their worlds are reaped by the caller).
    await Promise.all([...live].map((w) => w.terminate()));
    throw new Error('aborted');
  }
}

/** What the abort promise of runQueue resolves to. */
const ABORTED = Symbol('aborted');

function crashed(t: Task, error: string): TaskResult {
  return t.kind === 'model'
    ? {
        kind: 'model',
        property: t.property,
        threat: t.threat,
        profile: t.profile,
        backend: t.backend,
        status: 'error',
        runs: 0,
        error,
      }
    : { kind: 'attack', threat: t.threat, profile: t.profile, backend: t.backend, found: {}, error };
}

export async function runCheck(o: CheckOptions): Promise<CheckReport> {
  const t0 = performance.now();
  const cpu0 = process.cpuUsage();
  const catalog = defaultCatalog();
  const cells = planCells(catalog, o.selection);
  const perCell = runsPerCell(o.runs, cells.length);
  // A world that cannot stage a threat (its kernel, raw sockets) runs none of its cells: they are
  // reported as not run, with the reason, instead of passing on what the world left out.
  const unstageable = new Map<string, string>();
  for (const t of catalog.threats) {
    const why = unstageableThreat(o.world.world, t);
    if (why !== undefined) unstageable.set(t.id, why);
  }
  const runnable = cells.filter((c) => !unstageable.has(c.threat));
  const settings: Settings = worldLimits(o.world.world).ipv6 ? o.settings : { ...o.settings, ipv6: false };
  const tasks: Task[] = [];
  const pairs = new Map<string, { threat: string; profile: Profile; backend: Backend }>();
  for (const c of runnable)
    pairs.set(`${c.threat}|${c.profile}|${c.backend}`, { threat: c.threat, profile: c.profile, backend: c.backend });
  if (o.attacks) for (const p of pairs.values()) tasks.push({ kind: 'attack', ...p, seed: o.seed });
  // Expensive-looking cells first would be better; the queue already balances across workers.
  for (const c of runnable) tasks.push({ kind: 'model', ...c, runs: perCell, seed: cellSeed(o.seed, c) });
  const totalRuns = perCell * runnable.length + (o.attacks ? pairs.size : 0);
  let doneRuns = 0;
  let doneTasks = 0;
  const results: TaskResult[] = [];
  const env: TaskEnv = { world: o.world, settings, outDir: o.outDir };
  // Such worlds share one cluster across the run: in this thread, in sequence, disposed at the end.
  const inProcess = runsInProcess(o.world.world);
  const report = (finished?: string): void =>
    o.onProgress?.({
      doneRuns: Math.min(doneRuns, totalRuns),
      totalRuns,
      doneTasks,
      totalTasks: tasks.length,
      ...(finished ? { finished } : {}),
    });
  try {
    await runQueue(
      tasks,
      env,
      inProcess ? 0 : o.workers,
      (n) => {
        doneRuns += n;
        report();
      },
      (r) => {
        results.push(r);
        doneTasks++;
        // A cell stopped by a counterexample leaves its unused budget: count it as done for the bar.
        if (r.kind === 'model') doneRuns += Math.max(0, perCell - r.runs);
        report(
          r.kind === 'model'
            ? `${cellName(r)}: ${r.status}`
            : `attacks ${r.threat} × ${profileColumn(r)}${r.error ? ': error' : ''}`,
        );
      },
      o.signal,
    );
  } catch (e) {
    if (!o.signal?.aborted) throw e;
    const reason = String(o.signal.reason ?? 'aborted');
    const factory = o.world.world === 'sim' ? undefined : await loadFactory(o.world);
    throw new CheckInterrupted(reason, (await factory?.reapInterrupted?.()) ?? []);
  } finally {
    if (inProcess) await disposeWorlds();
  }

  const cellReports: CellReport[] = [];
  const counterexamples: CounterexampleFile[] = [];
  let histories = 0;
  const worlds = { fresh: 0, reused: 0, rejected: 0, shrinking: 0 };
  for (const r of results) {
    if (r.kind !== 'model' || !r.worlds) continue;
    worlds.fresh += r.worlds.fresh;
    worlds.reused += r.worlds.reused;
    worlds.rejected += r.worlds.rejected;
    worlds.shrinking += r.worlds.shrinking;
  }
  for (const c of cells) {
    const m = results.find(
      (r): r is Extract<TaskResult, { kind: 'model' }> =>
        r.kind === 'model' &&
        r.property === c.property &&
        r.threat === c.threat &&
        r.profile === c.profile &&
        r.backend === c.backend,
    );
    const a = results.find(
      (r): r is Extract<TaskResult, { kind: 'attack' }> =>
        r.kind === 'attack' && r.threat === c.threat && r.profile === c.profile && r.backend === c.backend,
    );
    const expected = catalog.expected(c.property, c.threat, c.profile, c.backend);
    const skipped = unstageable.get(c.threat);
    if (skipped !== undefined) {
      cellReports.push({
        ...c,
        expected,
        observed: 'not run',
        status: expected ? 'not evaluated' : 'no expectation',
        runs: 0,
        skipped,
      });
      continue;
    }
    histories += m?.runs ?? 0;
    const attackFindings = a?.found[c.property as PropertyName] ?? [];
    const error = m?.status === 'error' ? m.error : a?.error;
    const foundBy: ('model' | 'attacks')[] = [];
    if (m?.status === 'bypass') foundBy.push('model');
    if (attackFindings.length > 0) foundBy.push('attacks');
    const observed = error !== undefined ? 'error' : foundBy.length > 0 ? 'bypass' : 'holds';
    const status = judge(observed, expected);
    if (m?.counterexample) counterexamples.push(m.counterexample);
    cellReports.push({
      ...c,
      expected,
      observed,
      status,
      runs: m?.runs ?? 0,
      ...(foundBy.length ? { foundBy } : {}),
      ...(m?.counterexample
        ? { violation: m.counterexample.violation.message }
        : attackFindings[0]
          ? { violation: attackFindings[0] }
          : {}),
      ...(m?.savedAs ? { counterexampleFile: m.savedAs } : {}),
      ...(attackFindings.length ? { attackFindings } : {}),
      ...(error !== undefined ? { error } : {}),
    });
  }
  const catalogSkipped = results.flatMap((r) =>
    r.kind === 'attack' ? (r.skipped ?? []).map((line) => `${r.threat} × ${profileColumn(r)}: ${line}`) : [],
  );
  const seconds = (performance.now() - t0) / 1000;
  const cpu = process.cpuUsage(cpu0);
  const cpuSeconds = (cpu.user + cpu.system) / 1e6;
  const mismatches = cellReports.filter((c) => FAILING.has(c.status)).length;
  return {
    format: CHECK_REPORT_FORMAT,
    world: o.world.world,
    ...(o.world.mutant !== undefined ? { mutant: o.world.mutant } : {}),
    seed: o.seed,
    budget: { runs: o.runs, runsPerCell: perCell, maxCommands: o.settings.maxCommands, attacks: o.attacks },
    settings,
    ...(o.selection.shard ? { shard: o.selection.shard } : {}),
    cells: cellReports,
    counterexamples,
    catalogSkipped,
    worldGaps: worldGaps(o.world.world, settings, o.settings.ipv6),
    totals: {
      cells: cells.length,
      histories,
      attackRuns: o.attacks ? pairs.size : 0,
      seconds,
      historiesPerSecond: histories / Math.max(seconds, 1e-9),
      mismatches,
      cpuSeconds,
      worlds,
    },
    ok: mismatches === 0,
  };
}
