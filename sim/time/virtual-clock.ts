/**
 * Virtual time for the sim world: an implementation of the Clock port (impl/host/clock.ts) whose
 * time moves only when the world advances it. Timers due at the same instant fire in the order
 * they were set, so a history replays exactly.
 */
import type { Clock, TimerHandle, WallClock } from '../../impl/host/clock.js';

interface Timer {
  readonly due: number;
  readonly seq: number;
  readonly fn: () => void;
  cancelled: boolean;
}

/** Wall time at virtual time 0: a fixed instant, so certificate dates replay too. */
const VIRTUAL_EPOCH_MS = Date.UTC(2026, 0, 1);

export class VirtualClock implements Clock, WallClock {
  private t = 0;

  epochMs(): number {
    return VIRTUAL_EPOCH_MS + this.t;
  }

  private seq = 0;
  private readonly timers: Timer[] = []; // binary min-heap on (due, seq)

  now(): number {
    return this.t;
  }

  setTimer(ms: number, fn: () => void): TimerHandle {
    if (!Number.isFinite(ms) || ms < 0) throw new Error(`VirtualClock.setTimer: invalid delay ${ms}`);
    const timer: Timer = { due: this.t + ms, seq: this.seq++, fn, cancelled: false };
    this.push(timer);
    return {
      cancel: () => {
        timer.cancelled = true;
      },
    };
  }

  sleep(ms: number): Promise<void> {
    return new Promise((resolve) => this.setTimer(ms, resolve));
  }

  /** Time of the next pending timer, or undefined when none is pending. */
  nextDue(): number | undefined {
    this.dropCancelled();
    return this.timers[0]?.due;
  }

  /** Fire the earliest pending timer (moving time to it); false when there is none. */
  fireNext(): boolean {
    this.dropCancelled();
    const top = this.pop();
    if (!top) return false;
    this.t = Math.max(this.t, top.due);
    top.fn();
    return true;
  }

  /** Fire every timer due at or before now + ms, in order, then set time to now + ms. */
  advance(ms: number): void {
    if (!Number.isFinite(ms) || ms < 0) throw new Error(`VirtualClock.advance: invalid duration ${ms}`);
    const until = this.t + ms;
    for (;;) {
      const due = this.nextDue();
      if (due === undefined || due > until) break;
      this.fireNext();
    }
    this.t = until;
  }

  pending(): number {
    return this.timers.filter((x) => !x.cancelled).length;
  }

  private dropCancelled(): void {
    while (this.timers[0]?.cancelled) this.pop();
  }

  private less(a: Timer, b: Timer): boolean {
    return a.due < b.due || (a.due === b.due && a.seq < b.seq);
  }

  private push(x: Timer): void {
    const h = this.timers;
    h.push(x);
    let i = h.length - 1;
    while (i > 0) {
      const p = (i - 1) >> 1;
      if (!this.less(h[i]!, h[p]!)) break;
      [h[i], h[p]] = [h[p]!, h[i]!];
      i = p;
    }
  }

  private pop(): Timer | undefined {
    const h = this.timers;
    const top = h[0];
    const last = h.pop();
    if (h.length > 0 && last) {
      h[0] = last;
      let i = 0;
      for (;;) {
        const l = 2 * i + 1;
        const r = l + 1;
        let m = i;
        if (l < h.length && this.less(h[l]!, h[m]!)) m = l;
        if (r < h.length && this.less(h[r]!, h[m]!)) m = r;
        if (m === i) break;
        [h[i], h[m]] = [h[m]!, h[i]!];
        i = m;
      }
    }
    return top;
  }
}
