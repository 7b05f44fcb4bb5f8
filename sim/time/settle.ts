/**
 * Drive a promise to completion in virtual time: let pending microtasks and I/O callbacks run,
 * and when nothing else can happen, fire the next timer. Throws if the promise can never settle
 * (no timers left), which in the sim means a deadlock.
 */
import type { VirtualClock } from './virtual-clock.js';

const tick = (): Promise<void> => new Promise((r) => setImmediate(r));

export async function settle<T>(clock: VirtualClock, p: Promise<T>, maxTimers = 100_000): Promise<T> {
  let done = false;
  let value: T | undefined;
  let error: unknown;
  let failed = false;
  p.then(
    (v) => {
      done = true;
      value = v;
    },
    (e: unknown) => {
      done = true;
      failed = true;
      error = e;
    },
  );
  for (let fired = 0; ; fired++) {
    for (let i = 0; i < 3 && !done; i++) await tick();
    if (done) break;
    if (fired >= maxTimers)
      throw new Error(`settle: promise still pending after ${maxTimers} timers (virtual time ${clock.now()} ms)`);
    if (!clock.fireNext()) {
      await tick();
      if (done) break;
      throw new Error(
        `settle: deadlock — the promise is pending and no timer is left (virtual time ${clock.now()} ms)`,
      );
    }
  }
  if (failed) throw error;
  return value as T;
}

/**
 * Let the world run for `ms` of virtual time: flush pending callbacks, fire every timer due
 * within the window in order (flushing after each), then move the clock to the window's end.
 */
export async function runFor(clock: VirtualClock, ms: number, maxTimers = 1_000_000): Promise<void> {
  const end = clock.now() + ms;
  for (let fired = 0; fired < maxTimers; fired++) {
    for (let i = 0; i < 3; i++) await tick();
    const due = clock.nextDue();
    if (due === undefined || due > end) break;
    clock.fireNext();
  }
  for (let i = 0; i < 3; i++) await tick();
  if (clock.now() < end) clock.advance(end - clock.now());
  for (let i = 0; i < 3; i++) await tick();
}
