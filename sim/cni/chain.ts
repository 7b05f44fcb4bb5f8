/**
 * The runtime side of CNI (what libcni does for containerd and cri-o): run a configuration list
 * against one attachment (container id, netns, ifname) per the spec —
 *
 * - ADD: plugins in order, each given the previous plugin's result as prevResult (the first gets
 *   none), stop at the first error; the final result is cached.
 * - DEL: plugins in reverse order, each given the cached final ADD result (or none), stop at the
 *   first error; the cache entry goes only when every plugin succeeded.
 * - CHECK: plugins in order with the cached result; never before ADD, skipped when the list
 *   says disableCheck, refused for spec versions older than 0.4.0.
 * - VERSION: per plugin, with only CNI_COMMAND set.
 *
 * World-agnostic: plugins are reached through CniPluginExec (in process in the sim, a spawned
 * binary in the netns world) and results live in a CniResultCache (memory, or files).
 *
 * In-process calls (option inProcess, sim only): ADD/DEL/CHECK hand the derived configuration
 * to plugins that take it as a value (CniPluginExec.call) and take results back as values — the
 * exec protocol minus the JSON text on both sides. Everything else stays: the environment, the
 * plugin's checks of it and of the configuration, result validation, prevResult chaining, the
 * cached result for DEL, and failures, which are still error JSON in an exec output. Results
 * are copied and frozen, since chained plugins and the cache then share them. A plugin without `call`
 * (our own CNI plugin) is run through exec as before. VERSION always goes through exec.
 */
import { deepFreeze, jsonClone } from '../kube/json-value.js';
import {
  CNI_ERR_INTERNAL,
  CniError,
  CniErrorCode,
  cniEnv,
  compareVersions,
  effectiveVersion,
  execSuccess,
  parseErrorJson,
  parseResult,
  parseVersionResult,
  pluginNetConf,
  type CniCommand,
  type CniConfList,
  type CniExecOutput,
  type CniNetConf,
  type CniPlugin,
  type CniExecRequest,
  type CniResult,
  type CniVersionResult,
} from '../../impl/api/cni.js';

/** How the runtime runs plugin binaries by type (name on CNI_PATH). */
export interface CniPluginExec {
  /** Rejects only when the plugin cannot be run at all (not found, not executable). */
  exec(type: string, req: CniExecRequest): Promise<CniExecOutput>;
  /** In process only: the same invocation with the configuration and the result as values. */
  call?(type: string, req: CniCallRequest): Promise<CniCallOutcome>;
}

/** An in-process invocation: the environment as exec gets it, the derived configuration as a value. */
export interface CniCallRequest {
  readonly env: CniExecRequest['env'];
  readonly conf: CniNetConf;
}

/** What an in-process invocation gave: exit 0 with a value (ADD, VERSION), exit 0 with nothing (DEL, CHECK), or an exec output (failures). */
export type CniCallOutcome =
  | { readonly kind: 'value'; readonly value: unknown }
  | { readonly kind: 'empty' }
  | { readonly kind: 'output'; readonly output: CniExecOutput };

/** A plugin that can also be called in process (the sim plugins, through skel). */
export interface InProcessCniPlugin extends CniPlugin {
  call(req: CniCallRequest): Promise<CniCallOutcome>;
}

/** The exec output an outcome stands for (what the plugin would have printed). */
export function execOutputOf(o: CniCallOutcome): CniExecOutput {
  switch (o.kind) {
    case 'value':
      return execSuccess(o.value);
    case 'empty':
      return { exitCode: 0, stdout: '', stderr: '' };
    case 'output':
      return o.output;
  }
}

/** One network attachment of a sandbox. */
export interface CniAttachment {
  readonly containerId: string;
  /** CNI_NETNS; may be absent for DEL (the netns is already gone). */
  readonly netns: string | undefined;
  readonly ifname: string;
  readonly args?: ReadonlyArray<readonly [string, string]>;
  /** Values for plugins' capabilities (portMappings, ...), injected as runtimeConfig. */
  readonly capabilityArgs?: Readonly<Record<string, unknown>>;
}

export interface CachedAttachment {
  readonly network: string;
  readonly containerId: string;
  readonly ifname: string;
  readonly netns: string | undefined;
  readonly result: CniResult;
}

/** Where final ADD results live between ADD and DEL (libcni: <cacheDir>/results/<net>-<id>-<if>). */
export interface CniResultCache {
  get(network: string, containerId: string, ifname: string): Promise<CachedAttachment | undefined>;
  put(entry: CachedAttachment): Promise<void>;
  delete(network: string, containerId: string, ifname: string): Promise<void>;
  list(): Promise<CachedAttachment[]>;
}

export function cacheKey(network: string, containerId: string, ifname: string): string {
  return `${network}-${containerId}-${ifname}`;
}

/** The in-memory cache (the sim keeps it on the node's "disk", so it survives a runtime restart). */
export class MemoryResultCache implements CniResultCache {
  private readonly entries = new Map<string, CachedAttachment>();

  async get(network: string, containerId: string, ifname: string): Promise<CachedAttachment | undefined> {
    return this.entries.get(cacheKey(network, containerId, ifname));
  }

  async put(entry: CachedAttachment): Promise<void> {
    // No copy: results are fresh objects decoded from a plugin's stdout, or frozen in-process results.
    this.entries.set(cacheKey(entry.network, entry.containerId, entry.ifname), entry);
  }

  async delete(network: string, containerId: string, ifname: string): Promise<void> {
    this.entries.delete(cacheKey(network, containerId, ifname));
  }

  async list(): Promise<CachedAttachment[]> {
    return [...this.entries.values()];
  }

  get size(): number {
    return this.entries.size;
  }
}

/** One plugin invocation, as an observer sees it (tests assert ordering and chaining with it). */
export interface CniInvocation {
  readonly network: string;
  readonly command: CniCommand;
  readonly index: number;
  readonly type: string;
  readonly containerId: string | undefined;
  readonly stdin: string;
  readonly output: CniExecOutput | undefined;
  readonly failure: string | undefined;
}

/**
 * A failed chain operation: which plugin failed, doing what, with the CNI error code and message
 * it reported. The message reads like containerd's: `plugin type="X" name="N" failed (add): msg`.
 */
export class CniChainError extends Error {
  override readonly name = 'CniChainError';
  constructor(
    readonly network: string,
    readonly command: CniCommand,
    readonly pluginType: string,
    readonly pluginIndex: number,
    readonly code: number,
    readonly msg: string,
    readonly details: string | undefined,
  ) {
    super(
      `plugin type="${pluginType}" name="${network}" failed (${command.toLowerCase()}): ${details ? `${msg}: ${details}` : msg}${code !== CNI_ERR_INTERNAL ? ` (CNI error code ${code})` : ''}`,
    );
  }
}

interface CniChainOptions {
  /** CNI_PATH for the plugins (the exec adapter decides what it means). */
  readonly path?: readonly string[];
  readonly observe?: (inv: CniInvocation) => void;
  /** Call plugins in process where the exec adapter can (see the module comment); default false. */
  readonly inProcess?: boolean;
}

export class CniChain {
  readonly version: string;

  constructor(
    readonly list: CniConfList,
    private readonly plugins: CniPluginExec,
    private readonly cache: CniResultCache,
    private readonly opts: CniChainOptions = {},
  ) {
    this.version = effectiveVersion(list);
  }

  get network(): string {
    return this.list.name;
  }

  /** ADD the attachment; resolves with the final result (also cached). */
  async add(att: CniAttachment): Promise<CniResult> {
    if (!att.netns)
      throw new Error(`CNI ADD for ${att.containerId} on network ${this.network}: a netns path is required`);
    let prev: CniResult | undefined;
    for (let i = 0; i < this.list.plugins.length; i++) {
      const out = await this.invoke('ADD', i, att, prev);
      // A value is copied (it may share objects with the plugin's configuration) and frozen (the next
      // plugin and the cache share it), which is what decoding fresh text gives the exec path.
      prev =
        out.kind === 'value'
          ? deepFreeze(jsonClone(this.decodeResult(i, 'ADD', out.value)))
          : this.decodeResult(i, 'ADD', out.kind === 'output' ? out.output.stdout : '');
    }
    const result = prev ?? { cniVersion: this.version };
    await this.cache.put({
      network: this.network,
      containerId: att.containerId,
      ifname: att.ifname,
      netns: att.netns,
      result,
    });
    return result;
  }

  /**
   * DEL the attachment in reverse order with the cached result (none if ADD never finished).
   * Safe to repeat: plugins must succeed when their resources are already gone.
   */
  async del(att: CniAttachment): Promise<void> {
    const cached = await this.cache.get(this.network, att.containerId, att.ifname);
    const prev = compareVersions(this.version, '0.4.0') >= 0 ? cached?.result : undefined;
    for (let i = this.list.plugins.length - 1; i >= 0; i--) await this.invoke('DEL', i, att, prev);
    await this.cache.delete(this.network, att.containerId, att.ifname);
  }

  /** CHECK the attachment against its cached result. Resolves quietly when disableCheck is set. */
  async check(att: CniAttachment): Promise<void> {
    if (this.list.disableCheck) return;
    if (compareVersions(this.version, '0.4.0') < 0) {
      throw new CniChainError(
        this.network,
        'CHECK',
        this.list.plugins[0]!.type,
        0,
        CniErrorCode.IncompatibleVersion,
        `CHECK needs cniVersion 0.4.0 or later`,
        `network ${this.network} is ${this.version}`,
      );
    }
    const cached = await this.cache.get(this.network, att.containerId, att.ifname);
    if (!cached) {
      throw new CniChainError(
        this.network,
        'CHECK',
        this.list.plugins[0]!.type,
        0,
        CniErrorCode.UnknownContainer,
        `no cached result for ${att.containerId}/${att.ifname}`,
        'CHECK is only valid after a successful ADD and before DEL',
      );
    }
    for (let i = 0; i < this.list.plugins.length; i++) await this.invoke('CHECK', i, att, cached.result);
  }

  /** VERSION of every plugin in the list, in order. */
  async versions(): Promise<CniVersionResult[]> {
    const out: CniVersionResult[] = [];
    for (let i = 0; i < this.list.plugins.length; i++) {
      const o = execOutputOf(await this.invoke('VERSION', i, undefined, undefined));
      try {
        out.push(parseVersionResult(o.stdout));
      } catch (e) {
        throw this.asChainError('VERSION', i, e);
      }
    }
    return out;
  }

  /** The cached final ADD result, if any. */
  cached(att: Pick<CniAttachment, 'containerId' | 'ifname'>): Promise<CachedAttachment | undefined> {
    return this.cache.get(this.network, att.containerId, att.ifname);
  }

  private async invoke(
    command: CniCommand,
    index: number,
    att: CniAttachment | undefined,
    prev: CniResult | undefined,
  ): Promise<CniCallOutcome> {
    const plugin = this.list.plugins[index]!;
    const conf = att?.capabilityArgs
      ? pluginNetConf(this.list, index, { ...(prev ? { prevResult: prev } : {}), capabilityArgs: att.capabilityArgs })
      : this.derivedConf(index, prev);
    // Built field by field rather than from spreads: this runs for every plugin of every pod.
    const req: Parameters<typeof cniEnv>[0] = { command };
    if (att) {
      req.containerId = att.containerId;
      req.ifname = att.ifname;
      if (att.netns) req.netns = att.netns;
      if (att.args) req.args = att.args;
    }
    if (this.opts.path) req.path = this.opts.path;
    const env = cniEnv(req);
    const direct = this.opts.inProcess && command !== 'VERSION' ? this.plugins.call?.bind(this.plugins) : undefined;
    // In process, the text exists only for an observer.
    const stdin = direct && !this.opts.observe ? '' : JSON.stringify(conf);
    let outcome: CniCallOutcome;
    try {
      outcome = direct
        ? await direct(plugin.type, { env, conf })
        : { kind: 'output', output: await this.plugins.exec(plugin.type, { env, stdin }) };
    } catch (e) {
      const msg = e instanceof Error ? e.message : String(e);
      this.opts.observe?.({
        network: this.network,
        command,
        index,
        type: plugin.type,
        containerId: att?.containerId,
        stdin,
        output: undefined,
        failure: msg,
      });
      throw new CniChainError(
        this.network,
        command,
        plugin.type,
        index,
        CNI_ERR_INTERNAL,
        `failed to run plugin ${plugin.type}`,
        msg,
      );
    }
    this.opts.observe?.({
      network: this.network,
      command,
      index,
      type: plugin.type,
      containerId: att?.containerId,
      stdin,
      output: execOutputOf(outcome),
      failure: undefined,
    });
    if (outcome.kind !== 'output') return outcome;
    const output = outcome.output;
    if (output.exitCode !== 0) {
      const ej = parseErrorJson(output.stdout);
      if (ej) throw new CniChainError(this.network, command, plugin.type, index, ej.code, ej.msg, ej.details);
      const text = (output.stdout.trim() || output.stderr.trim()).slice(0, 500);
      throw new CniChainError(
        this.network,
        command,
        plugin.type,
        index,
        CNI_ERR_INTERNAL,
        `exited with code ${output.exitCode} without error JSON`,
        text || 'no output',
      );
    }
    return outcome;
  }

  /**
   * The derived configuration without capability args: the list's part is derived once per
   * plugin (a chain is built from one list), prevResult is set per call. Frozen at the top level,
   * since in-process plugins get it as it is.
   */
  private derivedConf(index: number, prev: CniResult | undefined): CniNetConf {
    const base = (this.baseConfs[index] ??= Object.freeze(pluginNetConf(this.list, index)));
    return prev ? { ...base, prevResult: prev } : base;
  }

  private readonly baseConfs: CniNetConf[] = [];

  private decodeResult(index: number, command: CniCommand, stdout: string | unknown): CniResult {
    try {
      return parseResult(stdout, `result of plugin ${this.list.plugins[index]!.type}`);
    } catch (e) {
      throw this.asChainError(command, index, e);
    }
  }

  private asChainError(command: CniCommand, index: number, e: unknown): CniChainError {
    const type = this.list.plugins[index]!.type;
    if (e instanceof CniError) return new CniChainError(this.network, command, type, index, e.code, e.msg, e.details);
    return new CniChainError(this.network, command, type, index, CNI_ERR_INTERNAL, 'unexpected failure', String(e));
  }
}
