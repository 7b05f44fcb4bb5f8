/**
 * The sim adapter of the Kube port: straight over the ApiStore, no HTTP. Every call answers
 * asynchronously (a resolved or rejected promise) like a network client, with the store's
 * KubeApiError on failure.
 */
import type { Clock } from '../../impl/host/clock.js';
import { eventObject } from '../../impl/host/kube-event.js';
import type {
  EventInput,
  Informer,
  KubeApi,
  KubeKind,
  KubeList,
  KubeObjectOf,
  MergePatch,
  Selection,
  TokenReviewStatus,
} from '../../impl/host/kube.js';
import type { ApiStore } from './store.js';
import { SimInformer } from './sim-informer.js';

interface SimKubeApiOptions {
  /** Delay before an informer re-watches after its watch closed (client-node 1.4.0: none). */
  reconnectDelayMs?: number;
}

export class SimKubeApi implements KubeApi {
  constructor(
    private readonly store: ApiStore,
    private readonly clock: Clock,
    private readonly opts: SimKubeApiOptions = {},
  ) {}

  informer<K extends KubeKind>(kind: K, selection?: Selection): Informer<KubeObjectOf<K>> {
    return new SimInformer(this.store, this.clock, kind, selection, this.opts.reconnectDelayMs ?? 0);
  }

  async get<K extends KubeKind>(kind: K, name: string, namespace?: string): Promise<KubeObjectOf<K>> {
    return this.store.get(kind, name, namespace);
  }

  async list<K extends KubeKind>(kind: K, selection?: Selection): Promise<KubeList<KubeObjectOf<K>>> {
    return this.store.list(kind, selection);
  }

  async create<K extends KubeKind>(kind: K, obj: KubeObjectOf<K>): Promise<KubeObjectOf<K>> {
    return this.store.create(kind, obj);
  }

  async update<K extends KubeKind>(kind: K, obj: KubeObjectOf<K>): Promise<KubeObjectOf<K>> {
    return this.store.update(kind, obj);
  }

  async patchMerge<K extends KubeKind>(
    kind: K,
    name: string,
    namespace: string | undefined,
    patch: MergePatch,
  ): Promise<KubeObjectOf<K>> {
    return this.store.patch(kind, name, namespace, patch);
  }

  async patchStatus<K extends KubeKind>(
    kind: K,
    name: string,
    namespace: string | undefined,
    patch: MergePatch,
  ): Promise<KubeObjectOf<K>> {
    return this.store.patch(kind, name, namespace, patch, 'status');
  }

  async delete(kind: KubeKind, name: string, namespace?: string): Promise<void> {
    this.store.delete(kind, name, namespace);
  }

  async createEvent(e: EventInput): Promise<void> {
    const ns = e.involvedObject.namespace ?? 'default';
    this.store.create('Event', eventObject(e, ns, this.store.nowTimestamp()));
  }

  async reviewToken(token: string, audiences: readonly string[]): Promise<TokenReviewStatus> {
    return this.store.tokens.review(token, audiences);
  }
}
