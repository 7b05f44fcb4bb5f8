/**
 * Feeds a PolicyStore from the Kube port's AuthorizationPolicy informer (all namespaces).
 *
 *   const w = new AuthorizationPolicyWatcher({ kube, clock, log, store });
 *   w.start(); ... w.stop();
 *
 * - Object events upsert/remove single policies (each bumps the store's generation, so live
 *   connections are re-checked).
 * - After every successful (re)start the store is rebuilt from the informer cache and marked
 *   synced; before the first one the store is unsynced and the authorizer denies everything
 *   (fail closed: issue 7 "fail closed when its own workload ... is unknown"; upstream ztunnel
 *   is likewise not ready before its first Authorization response).
 * - Errors: the informer is restarted with backoff on the Clock; the store keeps its last
 *   synced content meanwhile (stale but known, as an informer cache).
 * - 404 on the list (the AuthorizationPolicy CRD is not installed): no policy can exist, so the
 *   store becomes empty and synced (default allow, as upstream with no policies), and the
 *   watcher keeps retrying to pick the CRD up when it is installed.
 */
import type { AuthorizationPolicy } from '../../host/kube.js';
import { InformerMirror, type WatcherOptions } from '../informer-mirror.js';
import type { PolicyStore } from './policy-store.js';

interface AuthorizationPolicyWatcherOptions extends WatcherOptions {
  readonly store: PolicyStore;
}

export class AuthorizationPolicyWatcher extends InformerMirror<AuthorizationPolicy> {
  constructor(opts: AuthorizationPolicyWatcherOptions) {
    const { store } = opts;
    super(
      opts.kube.informer('AuthorizationPolicy'),
      {
        upsert: (o) => store.upsert(o),
        remove: (o) => store.remove(o.metadata?.namespace ?? '', o.metadata?.name ?? ''),
        replaceAll: (objs) => store.replaceAll(objs),
        markSynced: () => store.markSynced(),
      },
      { ...opts, what: 'AuthorizationPolicies', emptyWhenNotServed: true },
    );
  }
}
