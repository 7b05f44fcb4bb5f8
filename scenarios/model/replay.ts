/**
 * Replay a saved counterexample: rebuild the same cell and generators from the file, run
 * fast-check with its seed + path (+ the commands' replayPath), and say whether the same
 * property broke with the same message.
 */
import { defaultCatalog } from './catalog.js';
import type { CounterexampleFile } from './counterexample.js';
import { toFile } from './counterexample.js';
import { runCell } from './run-cell.js';
import { loadFactory, type CheckWorldName, type WorldModule } from './worlds.js';

interface ReplayOutcome {
  /** The same property broke with the same message. */
  readonly same: boolean;
  readonly original: string;
  /** What the replay observed (violation message, "holds", or the harness error). */
  readonly observed: string;
  /** The replayed counterexample (with a fresh step log and packet trace), when it broke. */
  readonly replayed?: CounterexampleFile;
  /** The harness failed during the replay (a World call threw): no answer either way. */
  readonly error?: string;
}

/**
 * `modules` names the real worlds' factory modules (the caller's, e2e/world-modules.ts); a
 * replay on the sim needs none.
 */
export async function replayCounterexample(
  f: CounterexampleFile,
  opts: {
    world?: CheckWorldName;
    mutant?: string;
    modules?: Readonly<Partial<Record<CheckWorldName, WorldModule>>>;
  } = {},
): Promise<ReplayOutcome> {
  const catalog = defaultCatalog();
  const property = catalog.properties.find((p) => p.name === f.property);
  const threat = catalog.threats.find((t) => t.id === f.threat);
  if (!property)
    throw new Error(
      `counterexample names unknown property ${JSON.stringify(f.property)}; known: ${catalog.properties.map((p) => p.name).join(', ')}`,
    );
  if (!threat)
    throw new Error(
      `counterexample names unknown threat ${JSON.stringify(f.threat)}; known: ${catalog.threats.map((t) => t.id).join(', ')}`,
    );
  const world = opts.world ?? (f.world === 'netns' ? 'netns' : 'sim');
  const mutant = opts.mutant ?? f.mutant;
  const module = opts.modules?.[world];
  const choice = { world, ...(mutant !== undefined ? { mutant } : {}), ...(module !== undefined ? { module } : {}) };
  const factory = await loadFactory({ ...choice, trace: true });
  const r = await runCell(
    { property, threat, profile: f.profile },
    {
      factory,
      runs: 1,
      seed: f.seed,
      path: f.path,
      ...(f.replayPath !== undefined ? { replayPath: f.replayPath } : {}),
      ...f.settings,
    },
  );
  const original = f.violation.message;
  if (r.status === 'holds') return { same: false, original, observed: 'holds (the replay found no violation)' };
  if (r.status === 'error') return { same: false, original, observed: `error: ${r.error}`, error: r.error };
  const replayed = toFile(
    { property: f.property, threat: f.threat, profile: f.profile },
    f.settings,
    r.counterexample,
    '(replay)',
    mutant,
  );
  const observed = r.counterexample.found.violation.message;
  return {
    same: observed === original && r.counterexample.found.violation.property === f.violation.property,
    original,
    observed,
    replayed,
  };
}
