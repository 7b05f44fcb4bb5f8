/**
 * Counterexample files: one JSON document per bypass found, enough to replay it exactly
 * (world kind and options, fast-check seed + path + replayPath) and to read it without running
 * anything (the shrunk command list, the step log, the violation, the violating packet trace).
 */
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import * as path from 'node:path';
import type { Backend } from '../../impl/api/backend.js';
import type { Profile, WorldKind } from '../world.js';
import type { PropertyName } from '../properties/index.js';
import type { AttemptRecord } from './contracts.js';
import { describeOptions } from './commands.js';
import { findJsonSyntaxError } from './json-error.js';
import { DEFAULT_OUT } from './defaults.js';
import type { CellCounterexample } from './run-cell.js';
import type { StepRecord } from './run-context.js';

export const COUNTEREXAMPLE_FORMAT = 'ambient-lab/counterexample@1';

export interface CounterexampleFile {
  readonly format: typeof COUNTEREXAMPLE_FORMAT;
  readonly property: PropertyName;
  readonly threat: string;
  readonly profile: Profile;
  readonly world: WorldKind;
  /** The plan mutant the world applied (positive controls), when one did. */
  readonly mutant?: string;
  /** The generator settings the replay must reuse (the arbitraries depend on them). */
  readonly settings: {
    readonly nodes: number;
    readonly ipv6: boolean;
    readonly dnsCapture: boolean;
    readonly maxCommands: number;
    /** The agent's rules backend; absent: iptables. */
    readonly backend?: Backend;
  };
  readonly seed: number;
  readonly path: string;
  readonly replayPath: string | undefined;
  readonly commands: readonly string[];
  readonly steps: readonly StepRecord[];
  readonly violation: {
    readonly property: string;
    readonly message: string;
    readonly evidence: Readonly<Record<string, unknown>>;
  };
  /** The attempt that broke the property, without its trace (below, readable). */
  readonly attempt?: Omit<AttemptRecord, 'result'> & { readonly result: Omit<AttemptRecord['result'], 'trace'> };
  /** The violating packets, as the world traced them. */
  readonly trace?: string;
  readonly schedule: string;
  /** The command that replays it. */
  readonly replay: string;
}

export function toFile(
  cell: { property: PropertyName; threat: string; profile: Profile },
  settings: CounterexampleFile['settings'],
  c: CellCounterexample,
  fileName: string,
  mutant?: string,
): CounterexampleFile {
  const attempt = c.found.attempt;
  let strippedAttempt: CounterexampleFile['attempt'];
  if (attempt) {
    const { trace: _trace, ...result } = attempt.result;
    strippedAttempt = { from: attempt.from, to: attempt.to, opts: attempt.opts, result };
  }
  return {
    format: COUNTEREXAMPLE_FORMAT,
    ...cell,
    world: c.worldKind,
    ...(mutant !== undefined ? { mutant } : {}),
    settings,
    seed: c.seed,
    path: c.path,
    replayPath: c.replayPath,
    commands: c.commands,
    steps: c.steps,
    violation: {
      property: c.found.violation.property,
      message: c.found.violation.message,
      evidence: jsonSafe(c.found.violation.evidence),
    },
    ...(strippedAttempt ? { attempt: strippedAttempt } : {}),
    ...(attempt?.result.trace ? { trace: attempt.result.trace } : {}),
    schedule: c.schedule,
    replay: `ambient-lab check --replay ${fileName}`,
  };
}

/** Evidence may hold class instances or cycles; keep what JSON can say. */
function jsonSafe(v: Readonly<Record<string, unknown>>): Readonly<Record<string, unknown>> {
  try {
    return JSON.parse(JSON.stringify(v)) as Record<string, unknown>;
  } catch {
    return { unserialisable: String(v) };
  }
}

/** The cell a counterexample belongs to, as the matrix names it (`… × strict/nftables`). */
export function counterexampleCell(
  f: Pick<CounterexampleFile, 'property' | 'threat' | 'profile' | 'settings'>,
): string {
  const b = f.settings.backend;
  return `${f.property} × ${f.threat} × ${b === undefined || b === 'iptables' ? f.profile : `${f.profile}/${b}`}`;
}

export function fileNameFor(
  cell: { property: string; threat: string; profile: string; backend?: string; settings?: { backend?: string } },
  seed: number,
): string {
  const backend = cell.backend ?? cell.settings?.backend;
  const profile = backend === undefined || backend === 'iptables' ? cell.profile : `${cell.profile}-${backend}`;
  return `${cell.property}--${cell.threat}--${profile}--${seed}.json`;
}

export function saveCounterexample(dir: string, file: CounterexampleFile): string {
  mkdirSync(dir, { recursive: true });
  const full = path.join(dir, fileNameFor(file, file.seed));
  writeFileSync(full, JSON.stringify(file, null, 2) + '\n');
  return full;
}

/**
 * A file `--replay` cannot use: unreadable, not JSON, not a counterexample, or missing what a
 * replay needs. The message names the file and the problem; the CLI reports it as a usage error.
 */
export class CounterexampleFileError extends Error {
  constructor(
    readonly file: string,
    readonly problem: string,
    options?: ErrorOptions,
  ) {
    super(`${file}: ${problem}`, options);
  }
}

type Check = (v: unknown) => string | undefined;
const isString: Check = (v) => (typeof v === 'string' ? undefined : 'a string');
const isBool: Check = (v) => (typeof v === 'boolean' ? undefined : 'true or false');
const isInt =
  (min: number): Check =>
  (v) =>
    typeof v === 'number' && Number.isSafeInteger(v) && v >= min ? undefined : `an integer >= ${min}`;
const isStringList: Check = (v) =>
  Array.isArray(v) && v.every((x) => typeof x === 'string') ? undefined : 'a list of strings';
const isObject: Check = (v) => (typeof v === 'object' && v !== null && !Array.isArray(v) ? undefined : 'an object');

/** What a replay reads from the file, field by field (the rest is for people reading it). */
const REQUIRED: ReadonlyArray<readonly [string, Check]> = [
  ['property', isString],
  ['threat', isString],
  ['profile', (v) => (v === 'upstream' || v === 'strict' ? undefined : '"upstream" or "strict"')],
  ['world', isString],
  ['seed', isInt(0)],
  ['path', isString],
  ['settings', isObject],
  ['settings.nodes', isInt(1)],
  ['settings.ipv6', isBool],
  ['settings.dnsCapture', isBool],
  ['settings.maxCommands', isInt(1)],
  ['violation', isObject],
  ['violation.property', isString],
  ['violation.message', isString],
  ['commands', isStringList],
];
const OPTIONAL: ReadonlyArray<readonly [string, Check]> = [
  ['replayPath', isString],
  ['mutant', isString],
  ['settings.backend', (v) => (v === 'iptables' || v === 'nftables' ? undefined : '"iptables" or "nftables"')],
];

function at(doc: Record<string, unknown>, dotted: string): unknown {
  let v: unknown = doc;
  for (const k of dotted.split('.'))
    v = typeof v === 'object' && v !== null ? (v as Record<string, unknown>)[k] : undefined;
  return v;
}

/** Parse and check a counterexample file; every failure is a CounterexampleFileError naming the problem. */
export function parseCounterexample(file: string, text: string): CounterexampleFile {
  let doc: unknown;
  try {
    doc = JSON.parse(text);
  } catch (e) {
    const p = findJsonSyntaxError(text);
    const where = p ? `line ${p.line}, column ${p.column}: ${p.problem}` : (e as Error).message;
    throw new CounterexampleFileError(
      file,
      `not valid JSON (${where}); a counterexample file is the JSON \`ambient-lab check\` saves`,
      { cause: e },
    );
  }
  if (isObject(doc) !== undefined)
    throw new CounterexampleFileError(
      file,
      `not a counterexample file: the JSON is ${Array.isArray(doc) ? 'an array' : typeof doc}, expected an object with "format": "${COUNTEREXAMPLE_FORMAT}"`,
    );
  const o = doc as Record<string, unknown>;
  if (o['format'] !== COUNTEREXAMPLE_FORMAT) {
    throw new CounterexampleFileError(
      file,
      `not a counterexample file: "format" is ${JSON.stringify(o['format'])}, expected "${COUNTEREXAMPLE_FORMAT}"; use a file written by \`ambient-lab check\` (see its counterexampleFile)`,
    );
  }
  for (const [key, check] of REQUIRED) {
    const v = at(o, key);
    if (v === undefined)
      throw new CounterexampleFileError(file, `counterexample lacks "${key}"; it cannot be replayed`);
    const want = check(v);
    if (want !== undefined)
      throw new CounterexampleFileError(
        file,
        `counterexample field "${key}" is ${JSON.stringify(v)}, expected ${want}; it cannot be replayed`,
      );
  }
  for (const [key, check] of OPTIONAL) {
    const v = at(o, key);
    const want = v === undefined ? undefined : check(v);
    if (want !== undefined)
      throw new CounterexampleFileError(
        file,
        `counterexample field "${key}" is ${JSON.stringify(v)}, expected ${want}; it cannot be replayed`,
      );
  }
  return o as unknown as CounterexampleFile;
}

export function loadCounterexample(file: string): CounterexampleFile {
  let text: string;
  try {
    text = readFileSync(file, 'utf8');
  } catch (e) {
    const code = (e as NodeJS.ErrnoException).code;
    const why =
      code === 'ENOENT'
        ? 'no such file'
        : code === 'EISDIR'
          ? 'a directory, not a file'
          : code === 'EACCES'
            ? 'permission denied'
            : String(e);
    throw new CounterexampleFileError(
      file,
      `cannot read counterexample (${code ?? 'error'}: ${why}); counterexamples are saved under ${DEFAULT_OUT}/ by \`ambient-lab check\``,
      { cause: e },
    );
  }
  return parseCounterexample(file, text);
}

/** The text report of one counterexample: what broke, the shrunk history, the packets. */
/** The violating attempt's ends and deliveries in words (the text report and the HTML explorer). */
export function describeAttempt(a: NonNullable<CounterexampleFile['attempt']>): {
  readonly from: string;
  readonly to: string;
  readonly deliveries: string;
} {
  const from =
    a.from.kind === 'pod'
      ? `${a.from.pod.namespace}/${a.from.pod.name}`
      : a.from.kind === 'host'
        ? `host ${a.from.node} uid ${a.from.uid}`
        : 'outside';
  const to = a.to.kind === 'pod' ? `${a.to.pod.namespace}/${a.to.pod.name}:${a.to.port}` : `${a.to.ip}:${a.to.port}`;
  const deliveries =
    a.result.deliveries
      .map((d) => `${d.pod.namespace}/${d.pod.name}:${d.port} from ${d.peer}${d.viaProxy ? ' via proxy' : ' DIRECT'}`)
      .join('; ') || 'none';
  return { from, to, deliveries };
}

export function renderCounterexample(f: CounterexampleFile, savedAs?: string): string {
  const lines: string[] = [];
  lines.push(`-- ${counterexampleCell(f)} (${f.world}): ${f.violation.message}`);
  if (savedAs) lines.push(`   saved: ${savedAs}   replay: ambient-lab check --replay ${savedAs}`);
  lines.push(`   seed ${f.seed}, path ${f.path}`);
  lines.push('   history (shrunk):');
  for (const s of f.steps) lines.push(`     ${String(s.step).padStart(2)}. ${s.command}  →  ${s.detail}`);
  if (f.attempt) {
    const a = f.attempt;
    const { from, to, deliveries } = describeAttempt(a);
    lines.push(`   violating attempt: ${from} -> ${to} ${describeOptions(a.opts)}`.trimEnd());
    lines.push(
      `     outcome ${a.result.outcome}, first hop ${a.result.acceptedBy ?? 'none'}, deliveries: ${deliveries}`,
    );
  }
  if (f.trace) {
    lines.push('   packet trace:');
    for (const l of f.trace.split('\n')) lines.push(`     ${l}`);
  }
  return lines.join('\n');
}
