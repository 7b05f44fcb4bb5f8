/**
 * What the cluster commands share: the root check, where a lab's state lives, and the request to
 * the cluster's daemon (e2e/netns/lab-control.ts) with its errors mapped to exit codes.
 */
import * as fs from 'node:fs';
import * as path from 'node:path';
import {
  controlSocketOf,
  labControl,
  LabDaemonUnavailable,
  LabRequestError,
  parseLabRequest,
  type LabRequest,
} from '../../e2e/netns/lab-control.js';
import { DEFAULT_STATE_ROOT } from '../../e2e/netns/world-lab.js';
import { requireTools } from '../../e2e/netns/required-tools.js';
import { HarnessError, UsageError } from '../errors.js';

export const DEFAULT_LAB = 'default';

export function requireRoot(cmd: string): void {
  if (process.getuid?.() !== 0) {
    throw new HarnessError(
      `ambient-lab ${cmd} needs root: it creates network namespaces, runs iptables and starts processes as other users. Try: sudo ambient-lab ${cmd} ...`,
    );
  }
}

/** Root, and every tool the real-kernel side runs (e2e/netns/required-tools.ts), checked before any work. */
export function requireRootAndTools(cmd: string): void {
  requireRoot(cmd);
  requireTools(`ambient-lab ${cmd}`);
}

/** The state directory of lab NAME; a name that could escape it or clash is a usage error. */
export function labDir(name: string): string {
  if (!/^[a-z0-9][a-z0-9-]{0,30}$/.test(name))
    throw new UsageError(
      `--name ${JSON.stringify(name)}: invalid lab name; accepted: [a-z0-9][a-z0-9-]*, at most 31 characters`,
    );
  return path.join(DEFAULT_STATE_ROOT, name);
}

/**
 * Send one request to the daemon of lab `name` (e2e/netns/lab-control.ts). The request is checked
 * first (a bad value is a UsageError, exit 2, before anything is contacted); the daemon's refusal
 * of a value is a UsageError too; a cluster that is not up, or has no daemon answering, is a
 * HarnessError (exit 3) saying what to do.
 */
export async function controlLab(cmd: string, name: string, request: unknown): Promise<unknown> {
  const dir = labDir(name);
  let req: LabRequest;
  try {
    req = parseLabRequest(request);
  } catch (e) {
    if (e instanceof LabRequestError) throw new UsageError(e.message, { cause: e });
    throw e;
  }
  requireRoot(cmd);
  if (!fs.existsSync(path.join(dir, 'state.json')))
    throw new HarnessError(
      `lab ${name} is not up (no ${path.join(dir, 'state.json')}); start it with \`ambient-lab up\``,
    );
  try {
    return await labControl(controlSocketOf(dir), req);
  } catch (e) {
    if (e instanceof LabRequestError) throw new UsageError(e.message, { cause: e });
    if (e instanceof LabDaemonUnavailable)
      throw new HarnessError(
        `lab ${name} has no daemon answering (${e.message}): it ended (see ${path.join(dir, 'daemon.log')}); run \`ambient-lab down --name ${name}\` and \`up\` again`,
        { cause: e },
      );
    throw new HarnessError(`${cmd}: ${(e as Error).message}`, { cause: e });
  }
}

/** `NAMESPACE/NAME`, or NAME in namespace `demo` (the demo pods' namespace). */
export function podRefOf(arg: string): { namespace: string; name: string } {
  const [namespace, name] = arg.includes('/') ? (arg.split('/', 2) as [string, string]) : ['demo', arg];
  return { namespace, name };
}

/** `key=value` sets, `key-` removes (as kubectl label / annotate). */
export function keyValues(args: readonly string[], what: string): Record<string, string | null> {
  const out: Record<string, string | null> = {};
  for (const a of args) {
    const eq = a.indexOf('=');
    if (eq > 0) out[a.slice(0, eq)] = a.slice(eq + 1);
    else if (a.endsWith('-') && a.length > 1) out[a.slice(0, -1)] = null;
    else throw new UsageError(`${what} ${JSON.stringify(a)}: expected KEY=VALUE to set or KEY- to remove`);
  }
  if (Object.keys(out).length === 0) throw new UsageError(`no ${what}s given: KEY=VALUE to set, KEY- to remove`);
  return out;
}

/** Print a daemon's answer: JSON with --json, else one line per field. */
export function printResult(result: unknown, json: boolean | undefined): void {
  if (json) {
    process.stdout.write(`${JSON.stringify(result, null, 2)}\n`);
    return;
  }
  if (result && typeof result === 'object')
    for (const [k, v] of Object.entries(result as Record<string, unknown>))
      process.stdout.write(`${k}: ${typeof v === 'string' ? v : JSON.stringify(v)}\n`);
  else process.stdout.write(`${String(result)}\n`);
}
