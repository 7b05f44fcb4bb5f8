/**
 * In-process plugins by type: the sim's CNI_PATH. A node's runtime runs its chain through one of
 * these; tests and scenarios register extra plugins (our own CNI plugin, a failing fake) next to
 * the sim primary plugins.
 */
import {
  CNI_ERR_INTERNAL,
  CniError,
  type CniExecOutput,
  type CniExecRequest,
  type CniPlugin,
  type CniResult,
} from '../../impl/api/cni.js';
import type { SimKernel } from '../kernel/kernel.js';
import type { CniCallOutcome, CniCallRequest, CniPluginExec, InProcessCniPlugin } from './chain.js';
import { bridgePlugin, loopbackPlugin } from './bridge.js';
import { hostLocalPlugin, type IpamDisk } from './host-local.js';
import { skelPlugin } from './skel.js';

export class InProcessPlugins implements CniPluginExec {
  private readonly plugins = new Map<string, CniPlugin | InProcessCniPlugin>();

  register(type: string, plugin: CniPlugin): this {
    this.plugins.set(type, plugin);
    return this;
  }

  unregister(type: string): void {
    this.plugins.delete(type);
  }

  has(type: string): boolean {
    return this.plugins.has(type);
  }

  types(): string[] {
    return [...this.plugins.keys()];
  }

  async exec(type: string, req: CniExecRequest): Promise<CniExecOutput> {
    return this.find(type, req.env).exec(req);
  }

  /** In process where the plugin can be (skel plugins); through exec, with the JSON text, where it cannot. */
  async call(type: string, req: CniCallRequest): Promise<CniCallOutcome> {
    const p = this.find(type, req.env);
    if ('call' in p) return p.call(req);
    return { kind: 'output', output: await p.exec({ env: req.env, stdin: JSON.stringify(req.conf) }) };
  }

  private find(type: string, env: CniExecRequest['env']): CniPlugin | InProcessCniPlugin {
    const p = this.plugins.get(type);
    if (!p)
      throw new Error(
        `failed to find plugin "${type}" in path [${env['CNI_PATH'] ?? ''}] (registered: ${this.types().join(', ') || 'none'})`,
      );
    return p;
  }
}

/** bridge, host-local and loopback for one node, running in its host netns. */
export function simPrimaryPlugins(ctx: { kernel: SimKernel; hostNetns: string; ipam: IpamDisk }): InProcessPlugins {
  const reg = new InProcessPlugins();
  reg.register('host-local', hostLocalPlugin(ctx.ipam));
  reg.register('bridge', bridgePlugin({ kernel: ctx.kernel, hostNetns: ctx.hostNetns, delegate: reg }));
  reg.register('loopback', loopbackPlugin({ kernel: ctx.kernel }));
  return reg;
}

/**
 * A chained plugin that passes prevResult through unchanged, and fails any command for which
 * `fail` returns an error (a stand-in for a chained plugin whose backend is down, e.g. an
 * ambient CNI plugin that cannot reach its node agent). `calls` counts commands seen.
 */
export class FakeChainedPlugin implements InProcessCniPlugin {
  readonly calls: Record<'ADD' | 'DEL' | 'CHECK', number> = { ADD: 0, DEL: 0, CHECK: 0 };
  fail: ((command: 'ADD' | 'DEL' | 'CHECK') => CniError | undefined) | undefined;
  private readonly inner: InProcessCniPlugin;

  constructor(fail?: (command: 'ADD' | 'DEL' | 'CHECK') => CniError | undefined) {
    this.fail = fail;
    const step = (command: 'ADD' | 'DEL' | 'CHECK'): void => {
      this.calls[command]++;
      const err = this.fail?.(command);
      if (err) throw err;
    };
    this.inner = skelPlugin({
      async add(_env, conf): Promise<CniResult> {
        step('ADD');
        if (!conf.prevResult)
          throw new CniError(CNI_ERR_INTERNAL, 'must be called as a chained plugin (no prevResult)');
        return conf.prevResult;
      },
      async del(): Promise<void> {
        step('DEL');
      },
      async check(): Promise<void> {
        step('CHECK');
      },
    });
  }

  exec(req: CniExecRequest): Promise<CniExecOutput> {
    return this.inner.exec(req);
  }

  call(req: CniCallRequest): Promise<CniCallOutcome> {
    return this.inner.call(req);
  }
}
