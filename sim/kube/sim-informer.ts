/**
 * The sim Informer: client-node 1.4.0 ListWatch semantics (see Informer in impl/host/kube.ts)
 * straight over the ApiStore. Reconnects go through the Clock (a 0 ms timer by default), so a
 * dropped watch leaves a window in virtual time where a test can change the world before the
 * informer comes back — as a real network reconnect does.
 */
import type { Clock } from '../../impl/host/clock.js';
import {
  isKubeApiError,
  type Informer,
  type InformerObjectEvent,
  type KubeKind,
  type KubeObjectOf,
  type Selection,
} from '../../impl/host/kube.js';
import type { ApiStore, StoreWatch, WatchEvent } from './store.js';

type Obj = { metadata?: { name?: string; namespace?: string; resourceVersion?: string } };
type AnyCb = (x: never) => void;

export class SimInformer<K extends KubeKind> implements Informer<KubeObjectOf<K>> {
  private objects = new Map<string, Map<string, KubeObjectOf<K>>>();
  private rv = '';
  private stopped = true;
  private watch: StoreWatch | undefined;
  /** Bumped on every (re)connect and stop, so a late callback of an old watch is ignored. */
  private generation = 0;
  private readonly callbacks: Record<InformerObjectEvent | 'error' | 'connect', AnyCb[]> = {
    add: [],
    update: [],
    delete: [],
    error: [],
    connect: [],
  };

  constructor(
    private readonly store: ApiStore,
    private readonly clock: Clock,
    private readonly kind: K,
    private readonly selection: Selection = {},
    private readonly reconnectDelayMs = 0,
  ) {}

  on(event: InformerObjectEvent | 'error' | 'connect', cb: AnyCb): void {
    const list = this.callbacks[event];
    if (!list)
      throw new Error(`Informer.on: unknown event "${String(event)}" (use add, update, delete, error or connect)`);
    list.push(cb);
  }

  off(event: InformerObjectEvent | 'error' | 'connect', cb: AnyCb): void {
    const list = this.callbacks[event];
    const i = list ? list.indexOf(cb) : -1;
    if (i >= 0) list!.splice(i, 1);
  }

  async start(): Promise<void> {
    this.stopped = false;
    await this.connect();
  }

  stop(): void {
    this.stopped = true;
    this.generation++;
    this.watch?.stop();
    this.watch = undefined;
  }

  list(namespace?: string): KubeObjectOf<K>[] {
    if (namespace) return [...(this.objects.get(namespace)?.values() ?? [])];
    return [...this.objects.values()].flatMap((m) => [...m.values()]);
  }

  get(name: string, namespace?: string): KubeObjectOf<K> | undefined {
    return this.objects.get(namespace ?? '')?.get(name);
  }

  private emit(event: InformerObjectEvent | 'error' | 'connect', arg?: unknown): void {
    for (const cb of this.callbacks[event].slice()) (cb as (x: unknown) => void)(arg);
  }

  private async connect(): Promise<void> {
    const gen = ++this.generation;
    this.watch?.stop();
    this.watch = undefined;
    if (this.stopped) return;
    this.emit('connect');
    if (!this.rv) {
      let list;
      try {
        list = this.store.listShared(this.kind, this.selection);
      } catch (err) {
        this.emit('error', err);
        return;
      }
      this.replaceAll(list.items);
      this.rv = list.resourceVersion;
    }
    // Like client-node, the watch starts asynchronously after the list.
    await Promise.resolve();
    if (gen !== this.generation || this.stopped) return;
    try {
      this.watch = this.store.watch(
        this.kind,
        { ...this.selection, resourceVersion: this.rv, allowWatchBookmarks: true },
        (ev) => {
          if (gen === this.generation) this.onEvent(ev);
        },
        () => {
          if (gen === this.generation) this.onClosed();
        },
      );
    } catch (err) {
      if (isKubeApiError(err, 410)) {
        this.rv = '';
        this.scheduleReconnect(gen);
      } else {
        this.emit('error', err);
      }
    }
  }

  private onEvent(ev: WatchEvent): void {
    const obj = ev.object as unknown as KubeObjectOf<K> & Obj;
    switch (ev.type) {
      case 'ERROR':
        // A 410 Status makes the next connect relist; the server closes the watch after it.
        if ((ev.object as { code?: number }).code === 410) this.rv = '';
        return;
      case 'ADDED':
      case 'MODIFIED':
        this.addOrUpdate(obj);
        break;
      case 'DELETED':
        this.remove(obj);
        break;
      case 'BOOKMARK':
        break;
    }
    this.rv = obj.metadata?.resourceVersion ?? '';
  }

  private onClosed(): void {
    this.watch = undefined;
    this.scheduleReconnect(this.generation);
  }

  private scheduleReconnect(gen: number): void {
    this.clock.setTimer(this.reconnectDelayMs, () => {
      if (gen === this.generation && !this.stopped) void this.connect();
    });
  }

  private replaceAll(items: KubeObjectOf<K>[]): void {
    const fresh = new Set(items.map((o) => keyOf(o as Obj)));
    for (const [ns, m] of this.objects) {
      for (const [name, old] of m) {
        if (fresh.has(`${ns}/${name}`)) continue;
        m.delete(name);
        this.emit('delete', old);
      }
      if (m.size === 0) this.objects.delete(ns);
    }
    for (const o of items) this.addOrUpdate(o as KubeObjectOf<K> & Obj);
  }

  private addOrUpdate(obj: KubeObjectOf<K> & Obj): void {
    const ns = obj.metadata?.namespace ?? '';
    const name = obj.metadata?.name ?? '';
    let m = this.objects.get(ns);
    if (!m) this.objects.set(ns, (m = new Map()));
    const found = m.get(name) as Obj | undefined;
    if (!found) {
      m.set(name, obj);
      this.emit('add', obj);
    } else if (
      found.metadata?.resourceVersion === undefined ||
      found.metadata.resourceVersion !== obj.metadata?.resourceVersion
    ) {
      m.set(name, obj);
      this.emit('update', obj);
    }
  }

  private remove(obj: KubeObjectOf<K> & Obj): void {
    const ns = obj.metadata?.namespace ?? '';
    const m = this.objects.get(ns);
    if (!m?.delete(obj.metadata?.name ?? '')) return;
    if (m.size === 0) this.objects.delete(ns);
    this.emit('delete', obj);
  }
}

function keyOf(o: Obj): string {
  return `${o.metadata?.namespace ?? ''}/${o.metadata?.name ?? ''}`;
}
