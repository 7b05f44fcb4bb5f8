/** The long runs' sizes and seeds come from the environment; a bad value stops the run before any test. */

/** `name` as a positive integer, `dflt` when unset; anything else throws naming the variable. */
export function positiveInt(name: string, dflt: number): number {
  const raw = process.env[name];
  if (raw === undefined) return dflt;
  const v = Number(raw);
  if (!Number.isInteger(v) || v < 1) throw new Error(`${name}=${JSON.stringify(raw)}: expected a positive integer`);
  return v;
}
