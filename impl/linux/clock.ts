/** Real adapter of the Clock port: monotonic process time and Node timers; wall time from Date.now(). */
import type { Clock, TimerHandle, WallClock } from '../host/clock.js';

export class SystemClock implements Clock, WallClock {
  epochMs(): number {
    return Date.now();
  }

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
