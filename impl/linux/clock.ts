/** Real adapter of the Clock port: monotonic process time and Node timers. */
import type { Clock, TimerHandle } from '../host/clock.js';

export class SystemClock implements Clock {
  now(): number {
    return performance.now();
  }

  setTimer(ms: number, fn: () => void): TimerHandle {
    const t = setTimeout(fn, ms);
    return { cancel: () => clearTimeout(t) };
  }

  sleep(ms: number): Promise<void> {
    return new Promise((resolve) => setTimeout(resolve, ms));
  }
}
