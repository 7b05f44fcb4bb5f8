/**
 * The exit-code contract of every `ambient-lab` command (docs/check.md, "Exit codes"):
 *
 *   0  the command did what was asked and the result matches (check: every cell as the table says)
 *   1  the result differs (check: a cell differs from the table; replay: not reproduced;
 *      trace --kernel: the kernel and the simulation disagree)
 *   2  usage error: a bad flag, flag value, argument or input file; nothing was run
 *   3  harness error: the harness could not give an answer (an ERROR cell, a world that cannot
 *      start, a replay that errors, a command that needs root)
 *   130, 143  check was interrupted by SIGINT, SIGTERM (128 + the signal's number, as a shell
 *      reports it) after removing what its worlds had made; no verdict
 *
 * Scripts (CI, the soak) branch on these, so a usage mistake must never look like a verdict and
 * a harness failure must never look like a difference.
 */

export const EXIT_OK = 0;
export const EXIT_DIFFERS = 1;
export const EXIT_USAGE = 2;
export const EXIT_HARNESS = 3;
/** check stopped by a signal, its worlds reaped: 128 + the signal number. */
export const EXIT_INTERRUPTED = { SIGINT: 130, SIGTERM: 143 } as const;

/** A mistake in what the user typed or gave (flag, value, file); thrown before any work starts. */
export class UsageError extends Error {
  readonly exitCode = EXIT_USAGE;
}

/** The harness could not run or could not answer (not root, a world that cannot start). */
export class HarnessError extends Error {
  readonly exitCode = EXIT_HARNESS;
}

/** The exit-code paragraph shared by `--help` texts. */
export const EXIT_CODES_HELP = [
  'Exit codes:',
  '  0  matches: the result is what was expected (check: every cell as the expected table says)',
  '  1  differs: check found a cell that differs from the table; a replay did not reproduce;',
  '     trace --kernel found a difference between the kernel and the simulation',
  '  2  usage error: bad flag, flag value, argument or input file (nothing was run)',
  '  3  harness error: an ERROR cell, a world that cannot start, a replay that errors, not root',
  '  130/143  check interrupted by SIGINT/SIGTERM, after removing what its worlds made (no verdict)',
].join('\n');

/** A comma-separated list of names, each checked against the accepted ones. */
export function parseNameList(flag: string, text: string, accepted: readonly string[]): string[] {
  const names = text.split(',').map((s) => s.trim());
  if (names.every((n) => n === ''))
    throw new UsageError(`${flag} ${JSON.stringify(text)}: empty list; accepted: ${accepted.join(', ')}`);
  const unknown = names.filter((n) => n === '' || !accepted.includes(n));
  if (unknown.length > 0) {
    throw new UsageError(
      `${flag} ${JSON.stringify(text)}: unknown ${unknown.map((n) => JSON.stringify(n)).join(', ')}; accepted: ${accepted.join(', ')}`,
    );
  }
  return [...new Set(names)];
}

/**
 * A decimal integer in [min, max]. Stricter than Number(): "1e3", "0x10", " 5" and "" are
 * refused, so what the user typed is what runs.
 */
export function parseIntFlag(flag: string, text: string, min: number, max: number = Number.MAX_SAFE_INTEGER): number {
  const n = /^\d+$/.test(text) ? Number(text) : NaN;
  if (!Number.isSafeInteger(n) || n < min || n > max) {
    const range = max === Number.MAX_SAFE_INTEGER ? `>= ${min}` : `in ${min}..${max}`;
    throw new UsageError(`${flag} ${JSON.stringify(text)}: expected a decimal integer ${range}`);
  }
  return n;
}
