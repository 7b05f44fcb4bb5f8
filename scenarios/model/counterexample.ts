/**
 * Counterexample files: one JSON document per bypass found, enough to replay it exactly
 * (world kind and options, fast-check seed + path + replayPath) and to read it without running
 * anything (the shrunk command list, the step log, the violation, the violating packet trace).
 */
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import * as path from 'node:path';
import type { Profile, WorldKind } from '../world.js';
import type { PropertyName } from '../properties/index.js';
import type { AttemptRecord } from './contracts.js';
import { describeOptions } from './commands.js';
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
  readonly settings: { readonly nodes: number; readonly ipv6: boolean; readonly dnsCapture: boolean; readonly maxCommands: number };
  readonly seed: number;
  readonly path: string;
  readonly replayPath: string | undefined;
  readonly commands: readonly string[];
  readonly steps: readonly StepRecord[];
  readonly violation: { readonly property: string; readonly message: string; readonly evidence: Readonly<Record<string, unknown>> };
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
    format: COUNTEREXAMPLE_FORMAT, ...cell, world: c.worldKind, ...(mutant !== undefined ? { mutant } : {}), settings,
    seed: c.seed, path: c.path, replayPath: c.replayPath,
    commands: c.commands, steps: c.steps,
    violation: { property: c.found.violation.property, message: c.found.violation.message, evidence: jsonSafe(c.found.violation.evidence) },
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

export function fileNameFor(cell: { property: string; threat: string; profile: string }, seed: number): string {
  return `${cell.property}--${cell.threat}--${cell.profile}--${seed}.json`;
}

export function saveCounterexample(dir: string, file: CounterexampleFile): string {
  mkdirSync(dir, { recursive: true });
  const full = path.join(dir, fileNameFor(file, file.seed));
  writeFileSync(full, JSON.stringify(file, null, 2) + '\n');
  return full;
}

export function loadCounterexample(file: string): CounterexampleFile {
  let text: string;
  try {
    text = readFileSync(file, 'utf8');
  } catch (e) {
    throw new Error(`cannot read counterexample ${file}: ${(e as NodeJS.ErrnoException).code ?? String(e)}`, { cause: e });
  }
  const doc = JSON.parse(text) as Partial<CounterexampleFile>;
  if (doc.format !== COUNTEREXAMPLE_FORMAT) {
    throw new Error(`${file} is not a counterexample file (format ${JSON.stringify(doc.format)}, expected ${COUNTEREXAMPLE_FORMAT}); use a file written by \`ambient-lab check\``);
  }
  for (const k of ['property', 'threat', 'profile', 'seed', 'path', 'settings'] as const) {
    if (doc[k] === undefined) throw new Error(`counterexample ${file} lacks "${k}"; it cannot be replayed`);
  }
  return doc as CounterexampleFile;
}

/** The text report of one counterexample: what broke, the shrunk history, the packets. */
export function renderCounterexample(f: CounterexampleFile, savedAs?: string): string {
  const lines: string[] = [];
  lines.push(`-- ${f.property} × ${f.threat} × ${f.profile} (${f.world}): ${f.violation.message}`);
  if (savedAs) lines.push(`   saved: ${savedAs}   replay: ambient-lab check --replay ${savedAs}`);
  lines.push(`   seed ${f.seed}, path ${f.path}`);
  lines.push('   history (shrunk):');
  for (const s of f.steps) lines.push(`     ${String(s.step).padStart(2)}. ${s.command}  →  ${s.detail}`);
  if (f.attempt) {
    const a = f.attempt;
    const from = a.from.kind === 'pod' ? `${a.from.pod.namespace}/${a.from.pod.name}` : a.from.kind === 'host' ? `host ${a.from.node} uid ${a.from.uid}` : 'outside';
    const to = a.to.kind === 'pod' ? `${a.to.pod.namespace}/${a.to.pod.name}:${a.to.port}` : `${a.to.ip}:${a.to.port}`;
    lines.push(`   violating attempt: ${from} -> ${to} ${describeOptions(a.opts)}`.trimEnd());
    lines.push(`     outcome ${a.result.outcome}, first hop ${a.result.acceptedBy ?? 'none'}, deliveries: ${a.result.deliveries.map((d) => `${d.pod.namespace}/${d.pod.name}:${d.port} from ${d.peer}${d.viaProxy ? ' via proxy' : ' DIRECT'}`).join('; ') || 'none'}`);
  }
  if (f.trace) {
    lines.push('   packet trace:');
    for (const l of f.trace.split('\n')) lines.push(`     ${l}`);
  }
  return lines.join('\n');
}
