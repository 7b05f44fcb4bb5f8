/**
 * Is our CNI plugin installed on this node, as the container runtime will use it? The agent's
 * readiness (NodeAgent.health) includes this, as upstream istio-cni's /readyz stays not-ready
 * until its installer has put the plugin in place: a node whose agent is "ready" but whose
 * runtime does not call the plugin would start ambient pods uncaptured.
 *
 *   const check = new PluginInstallCheck({ cniBinDir, cniConfDir }, { fs, clock, log });
 *   await check.start();   // check now, then on every change in the two dirs and every resyncMs
 *   check.state            // { installed, detail }
 *   check.stop();
 *
 * Installed means both, read from the node's files (the installer writes them; this only reads):
 *   - the plugin executable `<cniBinDir>/ambient-lab-cni` exists, and
 *   - the conf file the runtime uses (the first conf file by name, install-conflist.ts) is a
 *     config list whose plugins include ours — chained into the primary, or our own conflist
 *     that sorts first. A config naming us in any other file is not used by the runtime.
 */
import * as path from 'node:path';
import type { Clock, TimerHandle } from '../host/clock.js';
import type { FileSystem, FileWatch } from '../host/files.js';
import type { Logger } from '../host/log.js';
import { PLUGIN_TYPE } from '../api/cni-plugin-config.js';
import { choosePrimary, readAsList } from './install-conflist.js';

interface PluginInstallCheckConfig {
  /** The node's CNI bin dir as this process sees it (the agent mounts it read-only). */
  readonly cniBinDir: string;
  /** The node's CNI conf dir as this process sees it. */
  readonly cniConfDir: string;
  /** Re-check period (what a watch may miss: a deleted executable on another mount). Default 5000. */
  readonly resyncMs?: number;
}

interface PluginInstallCheckDeps {
  readonly fs: FileSystem;
  readonly clock: Clock;
  readonly log: Logger;
}

interface InstallCheckState {
  readonly installed: boolean;
  readonly detail: string;
}

/** One evaluation of the node's CNI dirs. Never throws: an unreadable file is a not-installed reason. */
export async function pluginInstallState(fs: FileSystem, c: PluginInstallCheckConfig): Promise<InstallCheckState> {
  const plugin = path.posix.join(c.cniBinDir, PLUGIN_TYPE);
  try {
    if ((await fs.readBytes(plugin)) === undefined)
      return { installed: false, detail: `the CNI plugin ${plugin} is not installed (yet): install-cni writes it` };
    const names = await fs.list(c.cniConfDir);
    const used = choosePrimary(names ?? [], undefined);
    if (used === undefined)
      return {
        installed: false,
        detail: `no CNI config in ${c.cniConfDir} (yet): the primary CNI writes one, then install-cni chains the plugin into it`,
      };
    const file = path.posix.join(c.cniConfDir, used);
    const text = await fs.readText(file);
    if (text === undefined) return { installed: false, detail: `${file} disappeared while reading it` };
    const plugins = readAsList(text, used).doc['plugins'];
    const chained =
      Array.isArray(plugins) &&
      plugins.some(
        (p: unknown) => typeof p === 'object' && p !== null && (p as { type?: unknown }).type === PLUGIN_TYPE,
      );
    if (!chained)
      return {
        installed: false,
        detail: `${file}, the CNI config the runtime uses, does not chain ${PLUGIN_TYPE} (yet): install-cni adds it`,
      };
    return { installed: true, detail: `${PLUGIN_TYPE} installed and chained in ${file}` };
  } catch (e) {
    return {
      installed: false,
      detail: `cannot tell whether ${PLUGIN_TYPE} is installed: ${e instanceof Error ? e.message : String(e)}`,
    };
  }
}

export class PluginInstallCheck {
  private current: InstallCheckState = { installed: false, detail: 'not checked yet' };
  private watches: FileWatch[] = [];
  private timer: TimerHandle | undefined;
  private running: Promise<void> | undefined;
  private again = false;
  private stopped = true;

  constructor(
    private readonly config: PluginInstallCheckConfig,
    private readonly deps: PluginInstallCheckDeps,
  ) {}

  get state(): InstallCheckState {
    return this.current;
  }

  async start(): Promise<void> {
    this.stopped = false;
    // A dir that does not exist yet cannot be watched; the resync sees it appear.
    for (const dir of [this.config.cniConfDir, this.config.cniBinDir]) {
      if ((await this.deps.fs.list(dir)) !== undefined) this.watches.push(this.deps.fs.watch(dir, () => this.kick()));
    }
    await this.check();
    this.schedule();
  }

  stop(): void {
    this.stopped = true;
    for (const w of this.watches) w.close();
    this.watches = [];
    this.timer?.cancel();
    this.timer = undefined;
  }

  /** Evaluate now; concurrent requests coalesce into at most one more evaluation. */
  check(): Promise<void> {
    if (this.running) {
      this.again = true;
      return this.running;
    }
    this.running = (async () => {
      do {
        this.again = false;
        const next = await pluginInstallState(this.deps.fs, this.config);
        if (next.installed !== this.current.installed || next.detail !== this.current.detail)
          this.deps.log.info('cni plugin install state', { installed: next.installed, detail: next.detail });
        this.current = next;
      } while (this.again && !this.stopped);
      this.running = undefined;
    })();
    return this.running;
  }

  private kick(): void {
    if (!this.stopped) void this.check();
  }

  private schedule(): void {
    if (this.stopped) return;
    this.timer = this.deps.clock.setTimer(this.config.resyncMs ?? 5000, () => {
      this.timer = undefined;
      this.kick();
      this.schedule();
    });
  }
}
