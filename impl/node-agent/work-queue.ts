/**
 * A keyed work queue on the Clock port: at most one run per key at a time, a key enqueued while
 * running runs again afterwards (coalesced), and a retryable failure is retried with per-key
 * exponential backoff without limit (the proxy may connect at any time, so pending work must
 * keep trying; upstream does the same). Non-retryable failures are reported and dropped.
 */
import type { Clock, TimerHandle } from '../host/clock.js';

export class RetryableError extends Error {
  override readonly name = 'RetryableError';
}

interface Slot {
  running: boolean;
  again: boolean;
  failures: number;
  timer: TimerHandle | undefined;
}

interface WorkQueueOptions {
  readonly initialBackoffMs: number;
  readonly maxBackoffMs: number;
  readonly onError: (key: string, err: unknown, willRetry: boolean) => void;
}

export class WorkQueue {
  private readonly slots = new Map<string, Slot>();
  private stopped = false;
  private inFlight = 0;
  private idleWaiters: (() => void)[] = [];

  constructor(
    private readonly clock: Clock,
    private readonly work: (key: string) => Promise<void>,
    private readonly opts: WorkQueueOptions,
  ) {}

  enqueue(key: string): void {
    if (this.stopped) return;
    let s = this.slots.get(key);
    if (!s) this.slots.set(key, (s = { running: false, again: false, failures: 0, timer: undefined }));
    if (s.running) {
      s.again = true;
      return;
    }
    if (s.timer) {
      // A fresh event overrides the backoff wait: run now.
      s.timer.cancel();
      s.timer = undefined;
    }
    void this.run(key, s);
  }

  private async run(key: string, s: Slot): Promise<void> {
    s.running = true;
    s.again = false;
    this.inFlight++;
    try {
      await this.work(key);
      s.failures = 0;
    } catch (err) {
      const retry = err instanceof RetryableError && !this.stopped;
      this.opts.onError(key, err, retry);
      if (retry) {
        const delay = Math.min(this.opts.maxBackoffMs, this.opts.initialBackoffMs * 2 ** Math.min(s.failures, 20));
        s.failures++;
        s.timer = this.clock.setTimer(delay, () => {
          s.timer = undefined;
          if (!s.running) void this.run(key, s);
        });
      } else s.failures = 0;
    } finally {
      s.running = false;
      this.inFlight--;
      if (s.again && !this.stopped) {
        if (s.timer) {
          s.timer.cancel();
          s.timer = undefined;
        }
        void this.run(key, s);
      } else if (!s.timer) this.slots.delete(key);
      if (this.inFlight === 0) for (const w of this.idleWaiters.splice(0)) w();
    }
  }

  /**
   * What is queued, for a harness deciding whether the agent has settled: runs in progress, and
   * each key waiting for a retry with its consecutive failures so far (it grows by one per failed
   * attempt, so an observer can tell that an attempt ran, and failed again, after some moment).
   */
  state(): { inFlight: number; retrying: { key: string; failures: number }[] } {
    const retrying = [...this.slots.entries()]
      .filter(([, s]) => s.timer !== undefined)
      .map(([key, s]) => ({ key, failures: s.failures }));
    return { inFlight: this.inFlight, retrying };
  }

  /** Keys waiting for a retry. */
  pending(): string[] {
    return [...this.slots.entries()].filter(([, s]) => s.timer !== undefined).map(([k]) => k);
  }

  stop(): void {
    this.stopped = true;
    for (const s of this.slots.values()) s.timer?.cancel();
    this.slots.clear();
  }
}
