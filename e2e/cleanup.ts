/**
 * Cleanup after a failure, without losing either failure. The first error is what the caller
 * sees; a cleanup that fails too (a namespace or cluster that could not be removed: a leak) is
 * added to its message instead of being dropped, and the first error stays as `cause`.
 */
export async function rethrowAfterCleanup(
  primary: unknown,
  ...cleanups: ReadonlyArray<readonly [string, () => Promise<unknown>]>
): Promise<never> {
  const failed: string[] = [];
  for (const [what, run] of cleanups) {
    try {
      await run();
    } catch (e) {
      failed.push(`${what}: ${e instanceof Error ? e.message : String(e)}`);
    }
  }
  if (failed.length === 0) throw primary;
  const msg = primary instanceof Error ? primary.message : String(primary);
  throw new Error(`${msg} — and cleaning up after it failed too (${failed.join('; ')}); remove what is left by hand`, {
    cause: primary,
  });
}
