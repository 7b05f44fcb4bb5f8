/**
 * What the proxy's informer-fed caches (authz/policy-store.ts PolicyStore, workloads.ts
 * WorkloadIndex) share: a generation bumped on every change, a synced flag set once the first
 * complete list arrived, and change listeners.
 *
 * Listeners run after every change once synced (and once at markSynced); changes before the
 * first sync are silent because nothing is decided before it.
 */
export class SyncedStore {
  private readonly listeners = new Set<() => void>();
  private gen = 0;
  private isSynced = false;

  get synced(): boolean {
    return this.isSynced;
  }

  get generation(): number {
    return this.gen;
  }

  onChange(listener: () => void): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }

  markSynced(): void {
    if (this.isSynced) return;
    this.isSynced = true;
    this.changed();
  }

  /** A subclass calls this after each change of its content. */
  protected changed(): void {
    this.gen++;
    if (!this.isSynced) return;
    for (const l of [...this.listeners]) l();
  }
}
