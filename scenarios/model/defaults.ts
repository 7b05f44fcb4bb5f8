/**
 * The default budget of `ambient-lab check`, shared by the CLI and bench:check. Chosen so the
 * default run finishes in about a minute on a 2-core machine (bench:check measures it; the
 * numbers are in docs/check.md). Raise --runs for longer searches.
 */
export const DEFAULT_RUNS = 600;
export const DEFAULT_MAX_COMMANDS = 12;
export const DEFAULT_NODES = 2;
export const DEFAULT_OUT = '.ambient-lab/counterexamples';
