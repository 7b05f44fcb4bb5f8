/**
 * The kubelet's sandbox retry after a failed CNI ADD, as every world runs it: short (the real
 * kubelet's pod-worker backoff is 10 s doubling to 5 min) and below the worlds' settle windows, so
 * a settle sees retries. One value for all worlds, so a pod the plugin refuses comes back alike.
 */
export const KUBELET_SANDBOX_BACKOFF = { initialMs: 1000, maxMs: 4000 } as const;

/** The wait before the retry that follows `failures` failed attempts in a row (1, 2, ...). */
export function sandboxRetryDelayMs(failures: number): number {
  return Math.min(KUBELET_SANDBOX_BACKOFF.maxMs, KUBELET_SANDBOX_BACKOFF.initialMs * 2 ** Math.max(0, failures - 1));
}
