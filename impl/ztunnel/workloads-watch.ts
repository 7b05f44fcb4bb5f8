/**
 * Feeds a WorkloadIndex from the Kube port's Pod informer (all namespaces: cross-node
 * destinations must resolve too).
 *
 *   const w = new WorkloadWatcher({ kube, clock, log, index });
 *   w.start(); ... w.stop();
 *
 * After every successful (re)start the index is rebuilt from the informer cache and marked
 * synced. Until the first sync `index.synced` is false: the proxy must treat its own workload
 * as unknown and fail closed (issue 7). Errors restart the informer with backoff on the Clock
 * (informer-mirror.ts); the index keeps its last content meanwhile.
 */
import { InformerMirror, type WatcherOptions } from './informer-mirror.js';
import type { Pod, WorkloadIndex } from './workloads.js';

interface WorkloadWatcherOptions extends WatcherOptions {
  readonly index: WorkloadIndex;
}

export class WorkloadWatcher extends InformerMirror<Pod> {
  constructor(opts: WorkloadWatcherOptions) {
    const { index } = opts;
    super(
      opts.kube.informer('Pod'),
      {
        upsert: (p) => index.upsertPod(p),
        remove: (p) => index.deletePod(p),
        replaceAll: (pods) => index.replaceAll(pods),
        markSynced: () => index.markSynced(),
      },
      { ...opts, what: 'Pods' },
    );
  }
}
