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
 * (authz/synced-informer.ts); the index keeps its last content meanwhile.
 */
import type { Clock } from '../host/clock.js';
import type { KubeApi } from '../host/kube.js';
import type { Logger } from '../host/log.js';
import { SyncedInformer } from './authz/synced-informer.js';
import type { Pod, WorkloadIndex } from './workloads.js';

export interface WorkloadWatcherOptions {
  readonly kube: KubeApi;
  readonly clock: Clock;
  readonly log: Logger;
  readonly index: WorkloadIndex;
  readonly initialBackoffMs?: number;
  readonly maxBackoffMs?: number;
}

export class WorkloadWatcher {
  private readonly runner: SyncedInformer<Pod>;

  constructor(opts: WorkloadWatcherOptions) {
    const { index } = opts;
    const informer = opts.kube.informer('Pod');
    let started = false;
    this.versions = (): Record<string, string> | undefined => (started
      ? Object.fromEntries(informer.list().map((o) => [`${o.metadata?.namespace ?? ''}/${o.metadata?.name ?? ''}`, o.metadata?.resourceVersion ?? '']))
      : undefined);
    informer.on('add', (p) => { if (started) index.upsertPod(p); });
    informer.on('update', (p) => { if (started) index.upsertPod(p); });
    informer.on('delete', (p) => { if (started) index.deletePod(p); });
    this.runner = new SyncedInformer(informer, {
      clock: opts.clock,
      log: opts.log,
      what: 'Pods',
      initialBackoffMs: opts.initialBackoffMs,
      maxBackoffMs: opts.maxBackoffMs,
      onStarted: () => {
        index.replaceAll(informer.list());
        started = true;
        index.markSynced();
      },
    });
  }

  /**
   * The resourceVersion of every object the cache holds, by namespace/name (undefined before the
   * first sync): compared with the API, it tells a harness whether this proxy has seen every change.
   */
  readonly versions: () => Record<string, string> | undefined;

  start(): void {
    this.runner.start();
  }

  stop(): void {
    this.runner.stop();
  }
}
