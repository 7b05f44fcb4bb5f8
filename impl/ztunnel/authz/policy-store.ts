/**
 * The proxy's set of translated authorization policies, keyed "ns/name" (ztunnel's PolicyStore,
 * istio/ztunnel src/state/policy.rs). Fed by AuthorizationPolicyWatcher (policy-watcher.ts) or directly in tests.
 *
 *   new PolicyStore({ rootNamespace?, log? })
 *   upsert(obj): Translation        — add or replace by key; a scope change replaces the old
 *                                     entry entirely (the bug fixed by ztunnel PR #1247 cannot occur)
 *   remove(namespace, name): void
 *   replaceAll(objs): void           — one generation bump for a whole relist
 *   markSynced(): void               — the first complete list arrived; until then `synced` is
 *                                      false and the authorizer fails closed
 *   candidates(namespace): L4Policy[] — policies stored in `namespace` or the root namespace
 *   translation(key), generation, synced, onChange(listener)
 *
 * onChange listeners run after every change once synced (and once at markSynced); changes
 * before the first sync are silent because nothing is decided before it (SyncedStore).
 */
import type { AuthorizationPolicy } from '../../host/kube.js';
import type { Logger } from '../../host/log.js';
import { policyKey, type L4Policy } from './policy.js';
import { DEFAULT_ROOT_NAMESPACE, translatePolicy, type Translation } from './translate.js';
import { SyncedStore } from '../synced-store.js';

interface PolicyStoreOptions {
  readonly rootNamespace?: string;
  readonly log?: Logger;
}

export class PolicyStore extends SyncedStore {
  readonly rootNamespace: string;
  private readonly log: Logger | undefined;
  private readonly translations = new Map<string, Translation>();
  /** namespace → key → enforceable policy (accepted or invalid stand-in). */
  private readonly byNamespace = new Map<string, Map<string, L4Policy>>();

  constructor(opts: PolicyStoreOptions = {}) {
    super();
    this.rootNamespace = opts.rootNamespace ?? DEFAULT_ROOT_NAMESPACE;
    this.log = opts.log;
  }

  translation(key: string): Translation | undefined {
    return this.translations.get(key);
  }

  /** Every stored translation (accepted, ignored and invalid), for status reporting. */
  allTranslations(): ReadonlyMap<string, Translation> {
    return this.translations;
  }

  candidates(namespace: string): L4Policy[] {
    const own = [...(this.byNamespace.get(namespace)?.values() ?? [])];
    if (namespace === this.rootNamespace) return own;
    return [...own, ...(this.byNamespace.get(this.rootNamespace)?.values() ?? [])];
  }

  upsert(obj: AuthorizationPolicy): Translation {
    const t = this.put(obj);
    this.changed();
    return t;
  }

  remove(namespace: string, name: string): void {
    if (this.drop(policyKey(namespace, name))) this.changed();
  }

  replaceAll(objs: readonly AuthorizationPolicy[]): void {
    for (const key of [...this.translations.keys()]) this.drop(key);
    for (const o of objs) this.put(o);
    this.changed();
  }

  private put(obj: AuthorizationPolicy): Translation {
    const t = translatePolicy(obj, this.rootNamespace);
    const key = t.outcome === 'ignored' ? t.key : t.policy.key;
    this.drop(key);
    this.translations.set(key, t);
    if (t.outcome === 'ignored') {
      this.log?.info('authorization policy not enforced by the node proxy', { policy: key, reason: t.reason });
      return t;
    }
    if (t.outcome === 'invalid') {
      this.log?.warn('invalid authorization policy: enforcing its fail-closed form', {
        policy: key,
        action: t.policy.action,
        errors: t.errors,
      });
    } else if (t.warnings.length > 0) {
      this.log?.warn('authorization policy partly unenforceable at L4', { policy: key, warnings: t.warnings });
    }
    let m = this.byNamespace.get(t.policy.namespace);
    if (!m) this.byNamespace.set(t.policy.namespace, (m = new Map()));
    m.set(key, t.policy);
    return t;
  }

  private drop(key: string): boolean {
    const t = this.translations.get(key);
    if (!t) return false;
    this.translations.delete(key);
    if (t.outcome !== 'ignored') {
      const m = this.byNamespace.get(t.policy.namespace);
      m?.delete(key);
      if (m?.size === 0) this.byNamespace.delete(t.policy.namespace);
    }
    return true;
  }
}
