/**
 * Crash safety: remove what a run that died without dispose() left behind. Everything a run
 * creates lives in namespaces named `<prefix>...`, so the prefix alone finds it.
 */
import * as fs from 'node:fs';
import * as path from 'node:path';
import { listNetns, run } from './ip.js';
import { NETNS_STEM, processRunStem } from './netns-run.js';

export interface LeftoverOptions {
  /**
   * Also SIGKILL the processes still running inside those namespaces (found with
   * `ip netns pids`). Off by default: they belong to the dead run, but a namespace is only really
   * freed when they are gone, so callers cleaning a CI machine usually want this.
   */
  readonly killProcesses?: boolean;
  /** Allow the bare stem `al-` (every ambient-lab run on this machine, including live ones). */
  readonly allRuns?: boolean;
}

export interface LeftoverReport {
  readonly removed: readonly string[];
  /** Pids found inside removed namespaces (killed only with `killProcesses`). */
  readonly pids: readonly number[];
}

export async function removeLeftovers(prefix: string, opts: LeftoverOptions = {}): Promise<LeftoverReport> {
  if (!prefix.startsWith(NETNS_STEM) || !/^[a-z0-9-]+$/.test(prefix)) {
    throw new Error(
      `refusing to clean up prefix ${JSON.stringify(prefix)}: only ambient-lab prefixes ('${NETNS_STEM}...') are ours`,
    );
  }
  if (prefix === NETNS_STEM && !opts.allRuns) {
    throw new Error(
      `prefix '${NETNS_STEM}' matches every ambient-lab run, including ones in progress; pass { allRuns: true } if that is meant`,
    );
  }
  const names = (await listNetns()).filter((n) => n.startsWith(prefix));
  const pids: number[] = [];
  for (const name of names) {
    // A namespace removed since the listing (a run cleaning up its own) has no processes; any other
    // failure leaves its processes unknown, and a cleanup that cannot see them must say so.
    const out = await run(['ip', 'netns', 'pids', name]).catch(async (e: unknown) => {
      if (!(await listNetns()).includes(name)) return '';
      throw new Error(
        `cannot list the processes of netns ${name} (ip netns pids): ${e instanceof Error ? e.message : String(e)}`,
      );
    });
    for (const tok of out.split(/\s+/)) if (/^\d+$/.test(tok)) pids.push(Number(tok));
  }
  if (opts.killProcesses) {
    for (const pid of pids) {
      try {
        process.kill(pid, 'SIGKILL');
      } catch (e) {
        if ((e as NodeJS.ErrnoException).code !== 'ESRCH') throw e;
      }
    }
  }
  const errors: string[] = [];
  for (const name of names) {
    await run(['ip', 'netns', 'del', name]).catch((e: unknown) =>
      errors.push(e instanceof Error ? e.message : String(e)),
    );
  }
  const left = (await listNetns()).filter((n) => n.startsWith(prefix));
  if (left.length > 0 || errors.length > 0) {
    throw new Error(
      `cleanup of leftovers with prefix ${prefix} incomplete; still present: ${left.join(', ') || '(none)'}; errors: ${errors.join('; ') || '(none)'}`,
    );
  }
  return { removed: names, pids };
}

/**
 * What an interrupted run of THIS process left (World factories' reapInterrupted): its namespaces
 * (processes in them killed) and its run directories under `stateRoot`, found by the process's
 * run stem. `beforeDirs` runs first on each run directory (the container world removes its
 * containers and mounts there). Lines for the report, one per thing removed.
 */
export async function reapProcessRuns(
  stateRoot: string,
  beforeDirs: (prefix: string, runDir: string) => Promise<readonly string[]> = () => Promise.resolve([]),
): Promise<string[]> {
  const stem = processRunStem();
  const lines: string[] = [];
  const dirs = fs.existsSync(stateRoot) ? fs.readdirSync(stateRoot).filter((n) => n.startsWith(stem)) : [];
  for (const name of dirs) {
    const runDir = path.join(stateRoot, name);
    lines.push(...(await beforeDirs(`${name}-`, runDir)));
  }
  const { removed, pids } = await removeLeftovers(stem, { killProcesses: true });
  lines.push(...removed.map((n) => `network namespace ${n}`), ...pids.map((p) => `process ${p} (killed)`));
  for (const name of dirs) {
    fs.rmSync(path.join(stateRoot, name), { recursive: true, force: true });
    lines.push(`run directory ${path.join(stateRoot, name)}`);
  }
  return lines;
}
