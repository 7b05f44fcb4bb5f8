/**
 * Keeps an Informer running on the Clock: the Kube port's informer STOPS after any error other
 * than 410 (impl/host/kube.ts), so someone must restart it with a backoff; this does, and says
 * when a start completed (the cache holds a full list and the watch is open).
 *
 *   new SyncedInformer(informer, { clock, log, what, initialBackoffMs?, maxBackoffMs?,
 *                                  onStarted(), onNotFound?() })
 *   start(): void — first start now; restarts after errors with exponential backoff
 *   stop(): void  — stop the informer and any pending restart
 *
 * onStarted runs after EVERY successful (re)start, so the owner can rebuild its view from
 * informer.list() — the only way to stay right across a relist after an outage.
 * onNotFound runs when an error is a 404 (the kind is not served, e.g. a CRD is not installed).
 * Used by impl/ztunnel/informer-mirror.ts, which feeds the policy store and the workload index.
 */
import type { Clock, TimerHandle } from '../../host/clock.js';
import { isKubeApiError, type Informer } from '../../host/kube.js';
import type { Logger } from '../../host/log.js';

interface SyncedInformerOptions {
  readonly clock: Clock;
  readonly log: Logger;
  /** What is watched, for logs: e.g. "AuthorizationPolicies". */
  readonly what: string;
  readonly initialBackoffMs?: number;
  readonly maxBackoffMs?: number;
  readonly onStarted: () => void;
  readonly onNotFound?: () => void;
}

export class SyncedInformer<T> {
  private running = false;
  private errored = false;
  private timer: TimerHandle | undefined;
  private backoffMs: number;
  private readonly initialMs: number;
  private readonly maxMs: number;

  constructor(
    private readonly informer: Informer<T>,
    private readonly opts: SyncedInformerOptions,
  ) {
    this.initialMs = opts.initialBackoffMs ?? 1000;
    this.maxMs = opts.maxBackoffMs ?? 30_000;
    this.backoffMs = this.initialMs;
    informer.on('error', (err) => this.onError(err));
  }

  start(): void {
    if (this.running) return;
    this.running = true;
    void this.attempt();
  }

  stop(): void {
    this.running = false;
    this.timer?.cancel();
    this.timer = undefined;
    this.informer.stop();
  }

  private async attempt(): Promise<void> {
    this.timer = undefined;
    if (!this.running) return;
    this.errored = false;
    await this.informer.start();
    if (!this.running || this.errored) return;
    this.backoffMs = this.initialMs;
    this.opts.onStarted();
  }

  private onError(err: unknown): void {
    this.errored = true;
    if (!this.running) return;
    const notFound = isKubeApiError(err, 404);
    this.opts.log.warn(`watching ${this.opts.what} failed; retrying`, {
      error: err instanceof Error ? err.message : String(err),
      retryInMs: this.backoffMs,
      notFound,
    });
    if (notFound) this.opts.onNotFound?.();
    if (this.timer) return;
    const delay = this.backoffMs;
    this.backoffMs = Math.min(this.maxMs, this.backoffMs * 2);
    this.timer = this.opts.clock.setTimer(delay, () => void this.attempt());
  }
}
