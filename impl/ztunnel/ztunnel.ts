/**
 * The node proxy process: a NodeProxy driven by a ZdsClient. Ready when the ZDS snapshot has
 * been processed and no pod is half-started (as upstream ztunnel's in-pod readiness, src/inpod/workloadmanager.rs).
 */
import type { Random } from '../host/random.js';
import type { ZdsAddress, ZdsTransport } from '../host/zds-transport.js';
import { NodeProxy, type NodeProxyOptions } from './node-proxy.js';
import type { DrainMode } from './pod-proxy.js';
import { ZdsClient, type ZdsBackoff } from './zds-client.js';

interface ZtunnelOptions extends NodeProxyOptions {
  readonly zdsTransport: ZdsTransport;
  readonly zdsAddress: ZdsAddress;
  readonly random: Random;
  readonly zdsBackoff?: Partial<ZdsBackoff>;
}

export class Ztunnel {
  readonly proxy: NodeProxy;
  readonly zds: ZdsClient;

  constructor(opts: ZtunnelOptions) {
    this.proxy = new NodeProxy(opts);
    this.zds = new ZdsClient({
      transport: opts.zdsTransport,
      address: opts.zdsAddress,
      clock: opts.clock,
      random: opts.random,
      log: opts.log,
      handler: this.proxy,
      ...(opts.zdsBackoff ? { backoff: opts.zdsBackoff } : {}),
    });
  }

  start(): void {
    this.zds.start();
  }

  ready(): boolean {
    return this.zds.ready() && this.proxy.ready();
  }

  /** SIGTERM: stop talking to the agent, close listeners, drain live connections. */
  async stop(mode: DrainMode = 'graceful', drainMs?: number): Promise<void> {
    await this.zds.stop();
    await this.proxy.shutdown(mode, drainMs);
  }
}
