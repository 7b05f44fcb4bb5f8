/**
 * The default budget of `ambient-lab check`, shared by the CLI and bench:check (figures in
 * docs/check.md, "Budget and speed"). 13,200 histories are 95 per cell over the 140 cells. A
 * cell stops at its first counterexample, so about 125 cells (those that hold, and the expected
 * bypasses only the attack catalog finds) run the full 95, which alone is more than 10,000
 * model-based cases whatever the seed (a random seed ran 12,018). With world reuse this cost
 * about 119 s of CPU per core on a 2-core machine (2026-12-06; 50 s before the search-power
 * commands). Raise --runs for longer searches. Tests never run
 * this budget (they pass --runs).
 */
export const DEFAULT_RUNS = 13_200;
export const DEFAULT_MAX_COMMANDS = 12;
export const DEFAULT_NODES = 2;
export const DEFAULT_OUT = '.ambient-lab/counterexamples';
