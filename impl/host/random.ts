/**
 * The Random port: every random choice in impl/ (backoff jitter, ids) comes from here so the
 * sim can seed it and a failing history replays exactly.
 */
export interface Random {
  /** Uniform float in [0, 1). */
  next(): number;
  /** Uniform integer in [min, max] (inclusive). */
  int(min: number, max: number): number;
}
