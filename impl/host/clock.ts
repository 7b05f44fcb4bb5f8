/**
 * The Clock port: the only way impl/ learns the time or waits. The sim adapter is virtual time
 * (deterministic, replayable); the Linux adapter uses the process clock and real timers.
 */
export interface TimerHandle {
  cancel(): void;
}

export interface Clock {
  /** Milliseconds since an arbitrary, monotonic epoch. */
  now(): number;
  /** Run `fn` once after `ms` milliseconds; cancel() before it fires to drop it. */
  setTimer(ms: number, fn: () => void): TimerHandle;
  /** Resolve after `ms` milliseconds. */
  sleep(ms: number): Promise<void>;
}

/**
 * Wall-clock time: milliseconds since the Unix epoch. Only for what another party compares with
 * its own clock (a certificate's validity); intervals and timers use Clock's monotonic time.
 */
export interface WallClock {
  epochMs(): number;
}
