/**
 * A run's private set of network namespaces. Every name carries the run prefix so leftovers of a
 * crashed run are easy to find (`ip netns list | grep ^al-`); `dispose()` removes everything the
 * run created and is safe to call twice.
 */
import { randomBytes } from 'node:crypto';
import { ipIn, listNetns, run } from './ip.js';

/** Common stem of every run prefix; `ambient-lab` leftovers are `al-<id>-...`. */
export const NETNS_STEM = 'al-';

/**
 * The start of every run prefix this process makes: `al-` and its pid in base 36, zero-padded to
 * five characters (pids stay below 36^5) so that no other process's stem starts with it.
 */
export function processRunStem(pid: number = process.pid): string {
  return `${NETNS_STEM}${pid.toString(36).padStart(5, '0')}`;
}

export function newRunPrefix(): string {
  return `${processRunStem()}${randomBytes(3).toString('hex')}-`;
}

export class NetnsRun {
  private readonly created: string[] = [];
  private disposed = false;

  constructor(readonly prefix: string = newRunPrefix()) {
    if (!prefix.startsWith(NETNS_STEM) || !/^[a-z0-9-]+$/.test(prefix) || prefix.length > 20) {
      throw new Error(
        `invalid run prefix ${JSON.stringify(prefix)}: expected '${NETNS_STEM}' + [a-z0-9-], at most 20 characters`,
      );
    }
  }

  /** Create a namespace `<prefix><short>` with `lo` up, and return its name. */
  async create(short: string): Promise<string> {
    if (this.disposed) throw new Error(`netns run ${this.prefix} is already disposed`);
    if (!/^[a-z0-9-]{1,20}$/.test(short)) throw new Error(`invalid namespace short name ${JSON.stringify(short)}`);
    const name = this.prefix + short;
    await run(['ip', 'netns', 'add', name]);
    this.created.push(name);
    await ipIn(name, ['link', 'set', 'lo', 'up']);
    return name;
  }

  /**
   * Name the network namespace of process `pid` `<prefix><short>` (`ip netns attach`): a
   * namespace someone else made (a container's), handled from here on like one this run created.
   * Removing the name later leaves the namespace to its owner (it lives as long as the process).
   */
  async attach(short: string, pid: number): Promise<string> {
    if (this.disposed) throw new Error(`netns run ${this.prefix} is already disposed`);
    if (!/^[a-z0-9-]{1,20}$/.test(short)) throw new Error(`invalid namespace short name ${JSON.stringify(short)}`);
    if (!Number.isInteger(pid) || pid <= 1) throw new Error(`netns attach ${short}: invalid pid ${pid}`);
    const name = this.prefix + short;
    await run(['ip', 'netns', 'attach', name, String(pid)]);
    this.created.push(name);
    await ipIn(name, ['link', 'set', 'lo', 'up']);
    return name;
  }

  /**
   * Delete one namespace this run created (e.g. a pod going away). Unknown names are refused so
   * a caller can never delete a namespace of another run through this object.
   */
  async remove(name: string): Promise<void> {
    const i = this.created.indexOf(name);
    if (i < 0)
      throw new Error(
        `namespace ${JSON.stringify(name)} was not created by netns run ${this.prefix}; refusing to delete it`,
      );
    await run(['ip', 'netns', 'del', name]);
    this.created.splice(i, 1);
  }

  /** Names this run created and has not removed yet, in creation order. */
  names(): readonly string[] {
    return [...this.created];
  }

  /** Namespaces of this run that still exist. */
  async remaining(): Promise<string[]> {
    return (await listNetns()).filter((n) => n.startsWith(this.prefix));
  }

  async dispose(): Promise<void> {
    this.disposed = true;
    const errors: string[] = [];
    // Deleting a netns destroys its veth ends, so the peers in other namespaces go too.
    for (const name of this.created.reverse()) {
      try {
        await run(['ip', 'netns', 'del', name]);
      } catch (e) {
        errors.push(e instanceof Error ? e.message : String(e));
      }
    }
    this.created.length = 0;
    const left = await this.remaining();
    if (left.length > 0) errors.push(`namespaces left behind: ${left.join(', ')}`);
    if (errors.length > 0) throw new Error(`cleanup of netns run ${this.prefix} failed: ${errors.join('; ')}`);
  }
}
