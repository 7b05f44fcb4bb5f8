/**
 * Feeds an informer-fed cache of the proxy (PolicyStore, WorkloadIndex) from a Kube port
 * informer. Used by authz/policy-watcher.ts and workloads-watch.ts, which say what each cache
 * does with an object.
 *
 * - After every successful (re)start the cache is rebuilt from the informer's list and marked
 *   synced; object events reach it only after that first rebuild.
 * - Errors restart the informer with backoff on the Clock (authz/synced-informer.ts); the cache
 *   keeps its last content meanwhile.
 * - With emptyWhenNotServed, a 404 (the kind is not served, e.g. its CRD is not installed) means
 *   no object can exist: the cache becomes empty and synced, and the restarts go on.
 */
import type { Clock } from '../host/clock.js';
import type { Informer, KubeApi, ObjectMeta } from '../host/kube.js';
import type { Logger } from '../host/log.js';
import { SyncedInformer } from './authz/synced-informer.js';

/** What the mirror does to the cache. */
interface MirrorSink<T> {
  upsert(obj: T): void;
  remove(obj: T): void;
  replaceAll(objs: readonly T[]): void;
  markSynced(): void;
}

/** What a watcher built on the mirror takes, besides its cache. */
export interface WatcherOptions {
  readonly kube: KubeApi;
  readonly clock: Clock;
  readonly log: Logger;
  readonly initialBackoffMs?: number;
  readonly maxBackoffMs?: number;
}

interface InformerMirrorOptions extends Omit<WatcherOptions, 'kube'> {
  /** What is watched, for logs: e.g. "Pods". */
  readonly what: string;
  readonly emptyWhenNotServed?: boolean;
}

export class InformerMirror<T extends { metadata?: ObjectMeta }> {
  private readonly runner: SyncedInformer<T>;

  constructor(informer: Informer<T>, sink: MirrorSink<T>, opts: InformerMirrorOptions) {
    let started = false;
    /** The kind is not served: synced, with no objects. */
    let absent = false;
    this.versions = (): Record<string, string> | undefined =>
      started
        ? Object.fromEntries(
            informer
              .list()
              .map((o) => [
                `${o.metadata?.namespace ?? ''}/${o.metadata?.name ?? ''}`,
                o.metadata?.resourceVersion ?? '',
              ]),
          )
        : absent
          ? {}
          : undefined;
    informer.on('add', (o) => {
      if (started) sink.upsert(o);
    });
    informer.on('update', (o) => {
      if (started) sink.upsert(o);
    });
    informer.on('delete', (o) => {
      if (started) sink.remove(o);
    });
    this.runner = new SyncedInformer(informer, {
      clock: opts.clock,
      log: opts.log,
      what: opts.what,
      initialBackoffMs: opts.initialBackoffMs,
      maxBackoffMs: opts.maxBackoffMs,
      onStarted: () => {
        sink.replaceAll(informer.list());
        started = true;
        absent = false;
        sink.markSynced();
      },
      ...(opts.emptyWhenNotServed
        ? {
            onNotFound: () => {
              sink.replaceAll([]);
              started = false;
              absent = true;
              sink.markSynced();
            },
          }
        : {}),
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
