/**
 * In-memory plugin-event transport for the sim world: the CNI plugin's request reaches the
 * agent's handler after a configurable delay on the virtual clock. Fault hooks make the agent
 * unreachable, slow, or drop requests, to exercise the plugin's fail-closed paths.
 */
import type { Clock } from '../../impl/host/clock.js';
import {
  PluginEventTransportError,
  type PluginEventHandler,
  type PluginEventServeOptions,
  type PluginEventServer,
  type PluginEventTransport,
} from '../../impl/host/plugin-events.js';
import { parsePluginEvent, type PluginEvent, type PluginEventReply } from '../../impl/api/plugin-event.js';

interface PluginEventFaults {
  /** Added to every request's delivery, in virtual milliseconds. */
  delayMs: number;
  /** Requests vanish (the agent never answers). */
  blackhole: boolean;
  /**
   * Rewrite a request on its way to the server at `address` (e.g. a pod uid the agent does not
   * know: the plugin and the agent disagree). Undefined: delivered as sent.
   */
  rewrite?: ((address: string, event: PluginEvent) => PluginEvent) | undefined;
}

export class SimPluginEventTransport implements PluginEventTransport {
  private readonly servers = new Map<string, { handler: PluginEventHandler; opts: PluginEventServeOptions }>();
  readonly faults: PluginEventFaults = { delayMs: 1, blackhole: false };
  /** Every event delivered to a handler, in order (for assertions). */
  readonly delivered: PluginEvent[] = [];

  constructor(private readonly clock: Clock) {}

  async serve(address: string, handler: PluginEventHandler, opts: PluginEventServeOptions): Promise<PluginEventServer> {
    if (this.servers.has(address)) throw new Error(`plugin-event address ${address} is already being served`);
    this.servers.set(address, { handler, opts });
    return {
      address,
      close: async () => {
        if (this.servers.get(address)?.handler === handler) this.servers.delete(address);
      },
    };
  }

  send(address: string, event: PluginEvent, timeoutMs: number): Promise<PluginEventReply> {
    return new Promise((resolve, reject) => {
      let done = false;
      const finish = (f: () => void): void => {
        if (!done) {
          done = true;
          timer.cancel();
          f();
        }
      };
      const timer = this.clock.setTimer(timeoutMs, () =>
        finish(() =>
          reject(new PluginEventTransportError('timeout', `no answer from ${address} within ${timeoutMs} ms`)),
        ),
      );
      const server = this.servers.get(address);
      if (!server) {
        finish(() => reject(new PluginEventTransportError('unavailable', `nothing listens on ${address}`)));
        return;
      }
      if (this.faults.blackhole) return;
      // Serialise like the wire does, so the agent validates exactly what a real client sends.
      const body = JSON.stringify(this.faults.rewrite ? this.faults.rewrite(address, event) : event);
      this.clock.setTimer(this.faults.delayMs, () => {
        if (done) return;
        let parsed: PluginEvent;
        try {
          if (body.length > server.opts.maxBodyBytes)
            throw new Error(`body of ${body.length} bytes exceeds ${server.opts.maxBodyBytes}`);
          parsed = parsePluginEvent(body);
        } catch (e) {
          finish(() => resolve({ ok: false, error: (e as Error).message, retryable: false }));
          return;
        }
        this.delivered.push(parsed);
        server.handler(parsed).then(
          (reply) => finish(() => resolve(reply)),
          (e: unknown) =>
            finish(() => resolve({ ok: false, error: e instanceof Error ? e.message : String(e), retryable: true })),
        );
      });
    });
  }
}
