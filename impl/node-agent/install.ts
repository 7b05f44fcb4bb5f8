/**
 * The node agent's CNI installer: puts our plugin on the node and keeps it there.
 *
 *   const inst = new CniInstaller(config, { fs, clock, log, credentials });
 *   await inst.start();   // install now, then watch the conf dir and resync periodically
 *   inst.stop();          // stop watching; everything stays installed (see below)
 *   await inst.uninstall();
 *
 * One pass (`ensure`) is idempotent and writes only what differs, in an order that never leaves
 * the runtime a config naming something absent: (1) the plugin executable (and its runtime
 * files) into the CNI bin dir, (2) the plugin's kubeconfig, (3) only then the CNI config —
 * chained (our entry appended to the primary conflist) or own (a copy of the primary list plus
 * our entry, in a file that sorts before it). Every write is temp file + rename.
 *
 * The primary CNI may rewrite its file at any time (kindnet, Calico and Cilium do on restart);
 * the conf dir watch re-runs the pass, which puts our entry back. When no primary config exists
 * yet, the installer waits for one (the same watch), and reports `waiting-for-primary`.
 *
 * Uninstall removes the config entry first and the executable last, for the same reason as the
 * install order. `stop()` alone deliberately leaves everything in place: an agent restart must
 * not open a window where new pods start without the plugin (fail closed — the plugin refuses
 * ambient pods while the agent is down); only a real uninstall removes it.
 */
import { NodeSelectorError, nodeSelectorMatches, requiredNodeAffinity, type NodeFacts } from '../api/node-affinity.js';
import * as path from 'node:path';
import type { Clock, TimerHandle } from '../host/clock.js';
import type { FileSystem, FileWatch } from '../host/files.js';
import type { Logger } from '../host/log.js';
import { CniError, type CniPluginConf } from '../api/cni.js';
import { PLUGIN_TYPE, SUPPORTED_VERSIONS, parsePluginConfig } from '../api/cni-plugin-config.js';
import {
  choosePrimary,
  insertChained,
  isConfFileName,
  mentionsPlugin,
  ownConfList,
  ownSortsFirst,
  readAsList,
  removeChained,
} from './install-conflist.js';

type InstallMode = 'chained' | 'own-conflist';

/** A file copied onto the node next to the plugin (e.g. the runtime the plugin launcher execs). */
export interface PayloadFile {
  /** Path in the agent's container. */
  readonly from: string;
  /** Path on the node, as mounted in the agent's container. */
  readonly to: string;
  readonly mode: number;
}

export interface CniInstallConfig {
  /** The node's CNI bin dir as mounted in the agent (e.g. /host/opt/cni/bin). */
  readonly cniBinDir: string;
  /** The node's CNI conf dir as mounted in the agent (e.g. /host/etc/cni/net.d). */
  readonly cniConfDir: string;
  readonly mode: InstallMode;
  /** Own-conflist mode: our file's name; it must sort before the primary's. */
  readonly ownConfListName: string;
  /** The plugin executable in the agent's image; installed as `<cniBinDir>/ambient-lab-cni`. */
  readonly pluginSource: string;
  /** More files the executable needs on the node. */
  readonly payload: readonly PayloadFile[];
  /** Where the plugin's kubeconfig is written (as mounted in the agent). */
  readonly kubeconfigFile: string;
  /**
   * The plugin's configuration fields (agentSocket, kubeconfig as the NODE sees it, exclusions,
   * ...), validated against the plugin's own parser when the installer is built.
   */
  readonly pluginFields: Readonly<Record<string, unknown>>;
  /** Resync period: repairs what the watch cannot see (a deleted executable, a rotated token). */
  readonly resyncMs: number;
}

/** What the plugin needs to reach the API server as the agent's service account. */
export interface PluginCredentials {
  /** https://host:port of the API server as seen from the node. */
  readonly server: string;
  /** PEM bundle of the API server's CA; absent means TLS verification uses system roots. */
  readonly caPem: string | undefined;
  readonly token: string;
}

interface CniInstallerDeps {
  readonly fs: FileSystem;
  readonly clock: Clock;
  readonly log: Logger;
  /** Read on every pass: service-account tokens rotate. */
  readonly credentials: () => Promise<PluginCredentials>;
}

type InstallState =
  | { readonly phase: 'not-started' }
  | { readonly phase: 'waiting-for-primary'; readonly detail: string }
  | { readonly phase: 'installed'; readonly confFile: string }
  | { readonly phase: 'error'; readonly error: string };

/** What one pass changed (for logs and tests). */
interface InstallReport {
  readonly state: InstallState;
  readonly wrote: readonly string[];
  readonly removed: readonly string[];
}

export const DEFAULT_OWN_CONFLIST = '01-ambient-lab.conflist';
const KUBECONFIG_MODE = 0o600;
const EXEC_MODE = 0o755;
const CONF_MODE = 0o644;

/** The plugin's kubeconfig: the agent's service account, token inline (the node cannot read the agent's token file). */
function pluginKubeconfig(c: PluginCredentials): string {
  const cluster: Record<string, unknown> = { server: c.server };
  if (c.caPem) cluster['certificate-authority-data'] = Buffer.from(c.caPem, 'utf8').toString('base64');
  const doc = {
    apiVersion: 'v1',
    kind: 'Config',
    clusters: [{ name: 'local', cluster }],
    users: [{ name: 'ambient-lab-cni', user: { token: c.token } }],
    contexts: [{ name: 'ambient-lab-cni', context: { cluster: 'local', user: 'ambient-lab-cni' } }],
    'current-context': 'ambient-lab-cni',
  };
  return `${JSON.stringify(doc, null, 2)}\n`;
}

/** The validated plugin entry. Throws an Error naming the bad field. */
export function pluginEntry(fields: Readonly<Record<string, unknown>>): CniPluginConf {
  if ('type' in fields)
    throw new Error('CNI installer: pluginFields must not set "type" (it is always ambient-lab-cni)');
  const entry: CniPluginConf = { type: PLUGIN_TYPE, ...fields };
  try {
    parsePluginConfig({ ...entry, cniVersion: '1.0.0', name: 'validate' });
  } catch (e) {
    const msg = e instanceof CniError ? `${e.msg}${e.details ? `: ${e.details}` : ''}` : (e as Error).message;
    throw new Error(`CNI installer: the plugin configuration is invalid (${msg}); fix the agent's CNI settings`, {
      cause: e,
    });
  }
  return entry;
}

function bytesEqual(a: Uint8Array | undefined, b: Uint8Array): boolean {
  if (!a || a.length !== b.length) return false;
  for (let i = 0; i < a.length; i++) if (a[i] !== b[i]) return false;
  return true;
}

export class CniInstaller {
  private readonly entry: CniPluginConf;
  private watch: FileWatch | undefined;
  private timer: TimerHandle | undefined;
  private running: Promise<InstallReport> | undefined;
  private again = false;
  private stopped = true;
  private lastState: InstallState = { phase: 'not-started' };

  constructor(
    private readonly config: CniInstallConfig,
    private readonly deps: CniInstallerDeps,
  ) {
    this.entry = pluginEntry(config.pluginFields);
    if (config.mode === 'own-conflist' && !isConfFileName(config.ownConfListName)) {
      throw new Error(
        `CNI installer: own conflist name ${JSON.stringify(config.ownConfListName)} must end in .conflist and not start with a dot`,
      );
    }
  }

  get state(): InstallState {
    return this.lastState;
  }

  private get pluginPath(): string {
    return path.posix.join(this.config.cniBinDir, PLUGIN_TYPE);
  }

  /** Install now, then keep it installed until stop() or uninstall(). */
  async start(): Promise<InstallReport> {
    this.stopped = false;
    await this.deps.fs.mkdirp(this.config.cniConfDir);
    this.watch = this.deps.fs.watch(this.config.cniConfDir, () => this.kick('conf dir changed'));
    const report = await this.pass();
    this.schedule();
    return report;
  }

  /** Stop watching and resyncing; leaves the plugin installed (an agent restart must not open a bypass window). */
  stop(): void {
    this.stopped = true;
    this.watch?.close();
    this.watch = undefined;
    this.timer?.cancel();
    this.timer = undefined;
  }

  private schedule(): void {
    if (this.stopped) return;
    this.timer = this.deps.clock.setTimer(this.config.resyncMs, () => {
      this.timer = undefined;
      this.kick('resync');
      this.schedule();
    });
  }

  private kick(why: string): void {
    if (this.stopped) return;
    this.deps.log.debug('cni install pass requested', { why });
    void this.pass();
  }

  /** Run one pass; concurrent requests coalesce into at most one more pass after the current one. */
  pass(): Promise<InstallReport> {
    if (this.running) {
      this.again = true;
      return this.running;
    }
    this.running = (async () => {
      const wrote: string[] = [];
      const removed: string[] = [];
      let state: InstallState;
      do {
        this.again = false;
        const r = await this.ensure();
        wrote.push(...r.wrote);
        removed.push(...r.removed);
        state = r.state;
      } while (this.again && !this.stopped);
      this.running = undefined;
      // Everything the coalesced passes did (our own write re-triggers the watch once).
      return { state, wrote, removed };
    })();
    return this.running;
  }

  /** One idempotent pass. Never throws: failures are reported (and retried on the next pass). */
  async ensure(): Promise<InstallReport> {
    const wrote: string[] = [];
    const removed: string[] = [];
    let state: InstallState;
    try {
      state = await this.ensureOrThrow(wrote, removed);
    } catch (e) {
      state = { phase: 'error', error: (e as Error).message };
    }
    if (state.phase === 'error')
      this.deps.log.error('cni install failed', { error: state.error, confDir: this.config.cniConfDir });
    else if (wrote.length || removed.length || state.phase !== this.lastState.phase)
      this.deps.log.info('cni install pass', { state: state.phase, wrote, removed });
    this.lastState = state;
    return { state, wrote, removed };
  }

  private async writeIfDifferent(file: string, data: Uint8Array, mode: number, wrote: string[]): Promise<void> {
    if (bytesEqual(await this.deps.fs.readBytes(file), data)) return;
    await this.deps.fs.mkdirp(path.posix.dirname(file));
    await this.deps.fs.writeAtomic(file, data, mode);
    wrote.push(file);
  }

  private async ensureOrThrow(wrote: string[], removed: string[]): Promise<InstallState> {
    const { fs } = this.deps;
    const c = this.config;
    // (1) executables before any config names them
    const source = await fs.readBytes(c.pluginSource);
    if (!source) throw new Error(`the plugin executable ${c.pluginSource} is missing from the agent's image`);
    for (const p of c.payload) {
      const bytes = await fs.readBytes(p.from);
      if (!bytes) throw new Error(`the plugin payload file ${p.from} is missing from the agent's image`);
      await this.writeIfDifferent(p.to, bytes, p.mode, wrote);
    }
    await this.writeIfDifferent(this.pluginPath, source, EXEC_MODE, wrote);
    // (2) credentials before the config that makes the runtime call the plugin
    const kubeconfig = pluginKubeconfig(await this.deps.credentials());
    await this.writeIfDifferent(c.kubeconfigFile, new TextEncoder().encode(kubeconfig), KUBECONFIG_MODE, wrote);
    // (3) the config
    const names = (await fs.list(c.cniConfDir)) ?? [];
    const own = c.mode === 'own-conflist' ? c.ownConfListName : undefined;
    // Our own file never counts as the primary, in either mode (a mode switch leaves it behind once).
    const primary = choosePrimary(names, c.ownConfListName);
    if (!primary) {
      if (own && names.includes(own)) {
        // The primary vanished: our copy would now be the only network config; remove it rather than run a stale primary.
        if (await fs.remove(path.posix.join(c.cniConfDir, own))) removed.push(own);
      }
      return {
        phase: 'waiting-for-primary',
        detail: `no CNI config in ${c.cniConfDir} yet (the primary CNI writes one when it starts)`,
      };
    }
    const primaryPath = path.posix.join(c.cniConfDir, primary);
    const primaryText = await fs.readText(primaryPath);
    if (primaryText === undefined)
      return { phase: 'waiting-for-primary', detail: `${primary} disappeared while reading it` };
    const version = readAsList(primaryText, primary).doc['cniVersion'];
    if (!(SUPPORTED_VERSIONS as readonly unknown[]).includes(version)) {
      // Chaining into a list our plugin would reject would block every pod on the node.
      throw new Error(
        `the primary CNI config ${primary} has cniVersion ${String(version)}, which ${PLUGIN_TYPE} does not support (${SUPPORTED_VERSIONS.join(', ')}); not installing`,
      );
    }
    // Strip our entry from every other conf file: exactly one place names us.
    for (const n of names) {
      if (!isConfFileName(n) || n === primary || n === own) continue;
      if (n === c.ownConfListName) {
        if (await fs.remove(path.posix.join(c.cniConfDir, n))) removed.push(n);
        continue;
      }
      const text = await fs.readText(path.posix.join(c.cniConfDir, n));
      const stripped =
        text === undefined || !mentionsPlugin(text, PLUGIN_TYPE) ? undefined : removeChained(text, n, PLUGIN_TYPE);
      if (stripped !== undefined) {
        await fs.writeAtomic(path.posix.join(c.cniConfDir, n), stripped, CONF_MODE);
        wrote.push(n);
      }
    }
    if (own) {
      if (!ownSortsFirst(own, primary)) {
        throw new Error(
          `own conflist ${own} sorts after the primary ${primary}, so the runtime would ignore it; choose a name that sorts first (e.g. 00-ambient-lab.conflist)`,
        );
      }
      // The primary must not name us too (a switch from chained mode).
      const stripped = removeChained(primaryText, primary, PLUGIN_TYPE);
      if (stripped !== undefined) {
        await fs.writeAtomic(primaryPath, stripped, CONF_MODE);
        wrote.push(primary);
      }
      const text = ownConfList(stripped ?? primaryText, primary, this.entry);
      await this.writeIfDifferent(path.posix.join(c.cniConfDir, own), new TextEncoder().encode(text), CONF_MODE, wrote);
      return { phase: 'installed', confFile: own };
    }
    const updated = insertChained(primaryText, primary, this.entry);
    if (updated !== undefined) {
      await fs.writeAtomic(primaryPath, updated, CONF_MODE);
      wrote.push(primary);
    }
    return { phase: 'installed', confFile: primary };
  }

  /**
   * Remove everything we installed: config entries (every conf file, whatever the mode), then
   * the kubeconfig, then the executables. Idempotent. Throws when something could not be
   * removed — a half-uninstall must be visible.
   */
  async uninstall(): Promise<InstallReport> {
    this.stop();
    await this.running;
    const { fs } = this.deps;
    const c = this.config;
    const wrote: string[] = [];
    const removed: string[] = [];
    for (const n of (await fs.list(c.cniConfDir)) ?? []) {
      if (!isConfFileName(n)) continue;
      const file = path.posix.join(c.cniConfDir, n);
      if (n === c.ownConfListName) {
        if (await fs.remove(file)) removed.push(n);
        continue;
      }
      const text = await fs.readText(file);
      if (text === undefined || !mentionsPlugin(text, PLUGIN_TYPE)) continue;
      const stripped = removeChained(text, n, PLUGIN_TYPE);
      if (stripped !== undefined) {
        await fs.writeAtomic(file, stripped, CONF_MODE);
        wrote.push(n);
      }
    }
    for (const f of [c.kubeconfigFile, this.pluginPath, ...c.payload.map((p) => p.to)]) {
      if (await fs.remove(f)) removed.push(f);
    }
    const state: InstallState = { phase: 'not-started' };
    this.lastState = state;
    this.deps.log.info('cni uninstalled', { wrote, removed });
    return { state, wrote, removed };
  }
}

/**
 * What the API says about the DaemonSet that runs the installer (its owner). `unscheduled`: it
 * exists, but its required node affinity no longer selects this node, so no replacement comes here.
 */
export type OwnerState = 'present' | 'deleting' | 'absent' | 'unauthorized' | 'unscheduled';

/**
 * The owner's state from the DaemonSet the API returned, as upstream istio-cni's ShouldStopCleanup
 * reads it: being deleted, or present — unless its pod template's required node affinity no longer
 * selects this node (`node` is read only then). Like upstream, the template's nodeSelector and the
 * node's taints are not considered. A malformed affinity or an unreadable node throws (the caller
 * cannot say, and leaves the plugin in place).
 */
export async function daemonSetOwnerState(
  ds: { readonly deleting: boolean; readonly podSpec: unknown },
  node: () => Promise<NodeFacts>,
): Promise<OwnerState> {
  if (ds.deleting) return 'deleting';
  const affinity = requiredNodeAffinity(ds.podSpec);
  if (affinity === undefined) return 'present';
  const facts = await node();
  try {
    return nodeSelectorMatches(affinity, facts) ? 'present' : 'unscheduled';
  } catch (e) {
    if (e instanceof NodeSelectorError)
      throw new Error(`the DaemonSet's required node affinity cannot be read: ${e.message}`, { cause: e });
    throw e;
  }
}

/**
 * When the installer exits (SIGTERM): uninstall or leave the plugin in place.
 *   never                — leave it (an installer outside Kubernetes, or an operator who removes it by hand)
 *   always               — uninstall (upstream's AMBIENT_DISABLE_SAFE_UPGRADE=true)
 *   when-daemonset-gone  — upstream's safe upgrade (istio-cni ShouldStopCleanup): leave it while
 *                          the owning DaemonSet exists and is not being deleted (an upgrade, a
 *                          node reboot, an eviction: the replacement must find it, and pods keep
 *                          failing closed meanwhile); uninstall when the DaemonSet is gone or being
 *                          deleted, no longer selects this node by its required node affinity, or
 *                          the API refuses the installer's own credentials (401/403: the service
 *                          account or its role was removed with it)
 */
export type UninstallOnExit = 'never' | 'always' | 'when-daemonset-gone';

interface ExitDecisionDeps {
  /** The owner's state; throws when the API cannot say (unreachable, 5xx). */
  readonly owner: () => Promise<OwnerState>;
  readonly clock: Clock;
  readonly log: Logger;
  /** Lookups before giving up (default 3, as upstream's retries), `delayMs` apart (default 1000). */
  readonly attempts?: number;
  readonly delayMs?: number;
}

/**
 * Decide whether to uninstall at exit. When the API cannot say, the plugin stays: unlike
 * upstream (which cleans up a chained install then), an unknown answer during an upgrade must
 * not open a window in which new pods start uncaptured; a node left so keeps refusing ambient
 * pods (fail closed) until an agent returns or `cni-installer-main.js uninstall` runs there.
 */
export async function decideUninstallOnExit(
  policy: UninstallOnExit,
  deps: ExitDecisionDeps,
): Promise<{ readonly uninstall: boolean; readonly why: string }> {
  if (policy === 'never') return { uninstall: false, why: 'uninstall-on-exit is never' };
  if (policy === 'always') return { uninstall: true, why: 'uninstall-on-exit is always' };
  const attempts = deps.attempts ?? 3;
  let last = '';
  for (let i = 0; i < attempts; i++) {
    if (i > 0) await deps.clock.sleep(deps.delayMs ?? 1000);
    let owner: OwnerState;
    try {
      owner = await deps.owner();
    } catch (e) {
      last = e instanceof Error ? e.message : String(e);
      deps.log.warn('cannot read the owning DaemonSet at exit; retrying', { attempt: i + 1, error: last });
      continue;
    }
    switch (owner) {
      case 'present':
        return {
          uninstall: false,
          why: 'the DaemonSet is still present: an upgrade or a node restart, plugin left in place',
        };
      case 'deleting':
        return { uninstall: true, why: 'the DaemonSet is being deleted' };
      case 'absent':
        return { uninstall: true, why: 'the DaemonSet is gone' };
      case 'unauthorized':
        return { uninstall: true, why: "the API refuses the installer's credentials (removed with the DaemonSet)" };
      case 'unscheduled':
        return {
          uninstall: true,
          why: "the DaemonSet's required node affinity no longer selects this node: no replacement comes here",
        };
    }
  }
  return {
    uninstall: false,
    why: `the API could not say whether the DaemonSet is still there (${last}); plugin left in place (fail closed)`,
  };
}
