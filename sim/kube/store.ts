/**
 * The sim API server: an in-memory object store with the Kubernetes API's semantics for the
 * kinds in impl/host/kube.ts — one global resourceVersion counter (as etcd), uid and
 * creationTimestamp from the Random/Clock ports, create/get/list/update/patch/delete, JSON merge
 * patch on the object and on the status subresource, selectors, 404/409/410/422, and watches
 * from a resourceVersion over a bounded event window.
 *
 * Delivery choice: watch events are never delivered inside the mutating call. Each event is
 * queued per watcher and delivered by a Clock timer (delay 0, or the fault-configured delay),
 * in mutation order. With the VirtualClock that makes delivery a scheduled step of the world
 * (deterministic, no reentrancy: a handler that writes to the store only queues further events);
 * with the SystemClock (HTTP facade) it is the next macrotask.
 *
 * Sharing choice: each stored version is one deep-frozen snapshot (json-value.ts), shared by the
 * object map, the event log and every watcher instead of a copy per watcher; a write builds the
 * next snapshot sharing the unchanged subtrees. Callers of get/list/create/update/patch/delete
 * get mutable copies.
 *
 * Simplifications (documented, tested where they matter): deletion is immediate (no graceful
 * deletion, no finalizers); deleting a Namespace deletes its namespaced objects first; a Pod's
 * spec is immutable after create except containers[*].image (set spec.nodeName at create — the
 * sim has no binding subresource); a /status patch changes only .status (the real API also
 * applies metadata changes sent to /status for some kinds).
 */
import type { Clock, TimerHandle } from '../../impl/host/clock.js';
import type { Random } from '../../impl/host/random.js';
import {
  KIND_INFO,
  KubeApiError,
  apiVersionOf,
  type KubeKind,
  type KubeList,
  type KubeObjectOf,
  type MergePatch,
  type Selection,
} from '../../impl/host/kube.js';
import { applyMergePatch, jsonEqual } from './merge-patch.js';
import { deepFreeze, jsonClone } from './json-value.js';
import { rfc3339Seconds } from './rfc3339.js';
import { TokenAuthority } from './token-authority.js';
import { parseFieldSelector, parseLabelSelector, type FieldPredicate, type LabelPredicate } from './selectors.js';
import { invalid, labelErrors, nameErrors, validateSchema, validateWrite, type FieldError } from './validation.js';

/** Objects as stored: JSON with metadata. */
interface StoredObject {
  apiVersion?: string;
  kind?: string;
  metadata?: {
    name?: string;
    generateName?: string;
    namespace?: string;
    uid?: string;
    resourceVersion?: string;
    creationTimestamp?: string;
    labels?: Record<string, string>;
    annotations?: Record<string, string>;
    [k: string]: unknown;
  };
  spec?: unknown;
  status?: unknown;
  [k: string]: unknown;
}

type WatchEventType = 'ADDED' | 'MODIFIED' | 'DELETED' | 'BOOKMARK' | 'ERROR';

export interface WatchEvent {
  readonly type: WatchEventType;
  /**
   * The object, or a Status for ERROR: a deep-frozen snapshot shared with the store and the other
   * watchers (writing to it throws a TypeError; copy it to change it).
   */
  readonly object: StoredObject;
}

interface WatchOptions extends Selection {
  /** '' / undefined / '0': synthetic ADDED for every current object, then live events. */
  resourceVersion?: string;
  allowWatchBookmarks?: boolean;
}

export interface StoreWatch {
  readonly id: number;
  /** Stop delivering; pending events are discarded. onClose is not called. */
  stop(): void;
}

type Verb = 'get' | 'list' | 'create' | 'update' | 'patch' | 'patchStatus' | 'delete' | 'watch';

interface RequestInfo {
  readonly verb: Verb;
  readonly kind: KubeKind;
  readonly name?: string;
  readonly namespace?: string;
}

interface StoreOptions {
  clock: Clock;
  random: Random;
  /** How many past events watches can resume from; older resourceVersions get 410 Gone. */
  eventWindow?: number;
  /** Wall-clock time (ms since 1970) at clock time 0, for creationTimestamp. */
  epochMs?: number;
}

interface LoggedEvent {
  readonly rv: number;
  readonly type: 'ADDED' | 'MODIFIED' | 'DELETED';
  readonly kind: KubeKind;
  readonly object: StoredObject;
  /** The previous state, so selector watches can turn a MODIFIED into ADDED/DELETED. */
  readonly old: StoredObject | undefined;
}

interface Watcher {
  readonly id: number;
  readonly kind: KubeKind;
  readonly namespace: string | undefined;
  readonly labels: LabelPredicate;
  readonly fields: FieldPredicate;
  readonly bookmarks: boolean;
  readonly onEvent: (ev: WatchEvent) => void;
  readonly onClose: () => void;
  readonly timers: Set<TimerHandle>;
  /** For a Pod watch selecting exactly `spec.nodeName=<node>` (a kubelet's): the node, for the index. */
  readonly node: string | undefined;
  lastDue: number;
  closed: boolean;
}

interface FailRule {
  remaining: number;
  readonly code: number;
  readonly reason: string;
  readonly message: string;
  readonly match: (req: RequestInfo) => boolean;
}

const DEFAULT_EPOCH_MS = Date.UTC(2025, 0, 1);

const STATUS_REASONS: Record<number, string> = {
  400: 'BadRequest',
  403: 'Forbidden',
  404: 'NotFound',
  409: 'Conflict',
  410: 'Expired',
  422: 'Invalid',
  429: 'TooManyRequests',
  500: 'InternalError',
  503: 'ServiceUnavailable',
  504: 'Timeout',
};

function keyOf(kind: KubeKind, namespace: string | undefined, name: string): string {
  return `${kind}/${namespace ?? ''}/${name}`;
}

export function statusObject(err: KubeApiError): StoredObject {
  return {
    kind: 'Status',
    apiVersion: 'v1',
    metadata: {},
    status: 'Failure',
    message: err.message,
    reason: err.reason,
    code: err.code,
  };
}

export class ApiStore {
  private readonly clock: Clock;
  private readonly random: Random;
  private readonly epochMs: number;
  private eventWindow: number;
  private rv = 0;
  /** Every event with rv > compactedRv is in `log`. */
  private compactedRv = 0;
  private log: LoggedEvent[] = [];
  private readonly objects = new Map<string, StoredObject>();
  private readonly watchers = new Map<number, Watcher>();
  /**
   * Pod watches by the one node they select (every kubelet has one): an event is matched against
   * its node's watches and the unindexed ones, not against every kubelet's.
   */
  private readonly podWatchersByNode = new Map<string, Map<number, Watcher>>();
  private readonly unindexedWatchers = new Map<number, Watcher>();
  private nextWatchId = 1;
  private watchDelayMs = 0;
  private readonly failRules: FailRule[] = [];

  /** Service-account tokens: TokenRequest's minting and TokenReview's answers (token-authority.ts). */
  readonly tokens: TokenAuthority;

  constructor(opts: StoreOptions) {
    this.clock = opts.clock;
    this.random = opts.random;
    this.eventWindow = opts.eventWindow ?? 1000;
    this.epochMs = opts.epochMs ?? DEFAULT_EPOCH_MS;
    // A review reads the bound pod as the API server does: the stored object, no faults, no copy.
    this.tokens = new TokenAuthority(
      this.clock,
      this.random,
      (ns, name) => this.objects.get(keyOf('Pod', ns, name)) as KubeObjectOf<'Pod'> | undefined,
    );
  }

  /** The current global resourceVersion. */
  resourceVersion(): string {
    return String(this.rv);
  }

  // ---- fault hooks -------------------------------------------------------------------------

  /** Fail the next `n` requests matching `match` with `code` (checked before anything else). */
  failNext(opts: { n?: number; code: number; message?: string; match?: (req: RequestInfo) => boolean }): void {
    this.failRules.push({
      remaining: opts.n ?? 1,
      code: opts.code,
      reason: STATUS_REASONS[opts.code] ?? 'InternalError',
      message: opts.message ?? `injected fault: ${opts.code}`,
      match: opts.match ?? (() => true),
    });
  }

  /** Delay every event delivered from now on by `ms` (order is kept). */
  setWatchDelay(ms: number): void {
    if (!(ms >= 0)) throw new Error(`ApiStore.setWatchDelay: invalid delay ${ms}`);
    this.watchDelayMs = ms;
  }

  /**
   * Drop open watches (all, or those matching): pending undelivered events are discarded and
   * the watcher's onClose runs on a 0-delay timer, like a connection closed by the server.
   * Returns how many were dropped.
   */
  dropWatches(match?: (w: { kind: KubeKind; namespace: string | undefined }) => boolean): number {
    let n = 0;
    for (const w of [...this.watchers.values()]) {
      if (match && !match({ kind: w.kind, namespace: w.namespace })) continue;
      this.closeWatcher(w, true);
      n++;
    }
    return n;
  }

  /** Forget every logged event (etcd compaction): any watch from an older resourceVersion gets 410. */
  compact(): void {
    this.compactedRv = this.rv;
    this.log = [];
  }

  setEventWindow(n: number): void {
    this.eventWindow = n;
    this.trimLog();
  }

  /** Send a BOOKMARK (current resourceVersion) to every watch that allows bookmarks. */
  sendBookmarks(): void {
    for (const w of this.watchers.values()) {
      if (!w.bookmarks) continue;
      const info = KIND_INFO[w.kind];
      this.enqueue(w, {
        type: 'BOOKMARK',
        object: deepFreeze({
          kind: info.kind,
          apiVersion: apiVersionOf(info),
          metadata: { resourceVersion: String(this.rv) },
        }),
      });
    }
  }

  openWatches(): number {
    return this.watchers.size;
  }

  // ---- reads ---------------------------------------------------------------------------------

  get<K extends KubeKind>(kind: K, name: string, namespace?: string): KubeObjectOf<K> {
    const ns = this.scope(kind, namespace, 'get');
    this.checkFaults({ verb: 'get', kind, name, namespace: ns });
    return jsonClone(this.mustFind(kind, ns, name)) as KubeObjectOf<K>;
  }

  list<K extends KubeKind>(kind: K, sel: Selection = {}): KubeList<KubeObjectOf<K>> {
    return this.listItems(kind, sel, jsonClone);
  }

  /**
   * list() for an in-process informer: the same request (faults, selectors, order), but the
   * items are the store's frozen snapshots, as its watch events are, rather than copies.
   */
  listShared<K extends KubeKind>(kind: K, sel: Selection = {}): KubeList<KubeObjectOf<K>> {
    return this.listItems(kind, sel, (o) => o);
  }

  private listItems<K extends KubeKind>(
    kind: K,
    sel: Selection,
    copy: (o: StoredObject) => StoredObject,
  ): KubeList<KubeObjectOf<K>> {
    const ns = KIND_INFO[kind].namespaced ? sel.namespace : undefined;
    this.checkFaults({ verb: 'list', kind, namespace: ns });
    const labels = parseLabelSelector(sel.labelSelector);
    const fields = parseFieldSelector(sel.fieldSelector, kind);
    const items: KubeObjectOf<K>[] = [];
    for (const obj of this.objects.values()) {
      if (obj.kind !== kind) continue;
      if (ns !== undefined && obj.metadata?.namespace !== ns) continue;
      if (!labels(obj.metadata?.labels) || !fields(obj)) continue;
      items.push(copy(obj) as KubeObjectOf<K>);
    }
    items.sort((a, b) => {
      const ka = `${a.metadata?.namespace ?? ''}/${a.metadata?.name ?? ''}`;
      const kb = `${b.metadata?.namespace ?? ''}/${b.metadata?.name ?? ''}`;
      return ka < kb ? -1 : ka > kb ? 1 : 0;
    });
    return { items, resourceVersion: String(this.rv) };
  }

  // ---- writes --------------------------------------------------------------------------------

  create<K extends KubeKind>(kind: K, input: KubeObjectOf<K>, namespace?: string): KubeObjectOf<K> {
    const info = KIND_INFO[kind];
    const obj = jsonClone(input) as StoredObject;
    const meta = (obj.metadata ??= {});
    const ns = info.namespaced ? (namespace ?? meta.namespace) : undefined;
    this.checkFaults({ verb: 'create', kind, name: meta.name, namespace: ns });
    this.checkTypeMeta(kind, obj);
    if (info.namespaced) {
      if (!ns) throw invalid(kind, meta.name ?? '', [{ field: 'metadata.namespace', message: 'Required value' }]);
      if (meta.namespace !== undefined && meta.namespace !== ns) {
        throw new KubeApiError(
          400,
          'BadRequest',
          `the namespace of the provided object (${meta.namespace}) does not match the namespace sent on the request (${ns})`,
        );
      }
      meta.namespace = ns;
      if (!this.objects.has(keyOf('Namespace', undefined, ns))) {
        throw new KubeApiError(
          404,
          'NotFound',
          `namespaces "${ns}" not found (create the Namespace before ${kind} ${meta.name ?? ''})`,
        );
      }
    } else if (meta.namespace) {
      delete meta.namespace; // cluster-scoped: the API server clears it
    }
    if (!meta.name && meta.generateName) meta.name = meta.generateName + this.randomSuffix();
    const name = meta.name ?? '';
    const errs: FieldError[] = [...nameErrors(kind, name), ...labelErrors(meta.labels)];
    if (errs.length) throw invalid(kind, name, errs);
    const key = keyOf(kind, ns, name);
    if (this.objects.has(key)) {
      throw new KubeApiError(409, 'AlreadyExists', `${info.plural} "${name}" already exists`);
    }
    obj.apiVersion = apiVersionOf(info);
    obj.kind = kind;
    meta.uid = this.uuid();
    meta.creationTimestamp = this.timestamp();
    delete meta.resourceVersion;
    this.initStatus(kind, obj);
    admissionDefaults(kind, obj);
    validateSchema(kind, name, obj);
    meta.resourceVersion = String(++this.rv);
    deepFreeze(obj);
    this.objects.set(key, obj);
    this.record('ADDED', kind, obj, undefined);
    return jsonClone(obj) as KubeObjectOf<K>;
  }

  /** PUT. A set metadata.resourceVersion is a precondition (409 when stale). */
  update<K extends KubeKind>(kind: K, input: KubeObjectOf<K>, namespace?: string): KubeObjectOf<K> {
    const obj = jsonClone(input) as StoredObject;
    const name = obj.metadata?.name ?? '';
    const ns = this.scope(kind, namespace ?? obj.metadata?.namespace, 'update');
    this.checkFaults({ verb: 'update', kind, name, namespace: ns });
    this.checkTypeMeta(kind, obj);
    const old = this.mustFind(kind, ns, name);
    this.checkPrecondition(kind, old, obj.metadata?.resourceVersion);
    if (KIND_INFO[kind].statusSubresource) obj.status = old.status; // frozen: shared, not copied
    return this.commitUpdate(kind, old, obj) as KubeObjectOf<K>;
  }

  /** JSON merge patch of the object (status ignored for kinds with a status subresource) or of /status. */
  patch<K extends KubeKind>(
    kind: K,
    name: string,
    namespace: string | undefined,
    patch: MergePatch,
    subresource?: 'status',
  ): KubeObjectOf<K> {
    const ns = this.scope(kind, namespace, 'patch');
    this.checkFaults({ verb: subresource === 'status' ? 'patchStatus' : 'patch', kind, name, namespace: ns });
    if (typeof patch !== 'object' || patch === null || Array.isArray(patch)) {
      throw new KubeApiError(
        400,
        'BadRequest',
        `merge patch for ${kind} "${name}" must be a JSON object, got ${JSON.stringify(patch)}`,
      );
    }
    const old = this.mustFind(kind, ns, name);
    const rvPre = (patch['metadata'] as StoredObject['metadata'] | undefined)?.resourceVersion;
    this.checkPrecondition(kind, old, rvPre);
    const merged = applyMergePatch(old, patch) as StoredObject;
    let next: StoredObject;
    if (subresource === 'status') {
      if (!KIND_INFO[kind].statusSubresource) {
        throw new KubeApiError(404, 'NotFound', `${KIND_INFO[kind].plural} has no status subresource`);
      }
      next = { ...old, status: merged.status }; // a new top level over old's frozen subtrees
      if (merged.status === undefined) delete next.status;
      if (kind === 'Pod') {
        // pods/status keeps metadata changes other than owner references (podStatusStrategy
        // resets only spec, deletionTimestamp and ownerReferences): istio-cni writes its
        // redirection annotation this way so it needs no update right on pods.
        const meta = { ...merged.metadata, ownerReferences: old.metadata?.ownerReferences };
        if (meta.ownerReferences === undefined) delete meta.ownerReferences;
        next.metadata = meta as StoredObject['metadata'];
      }
    } else {
      next = merged;
      if (KIND_INFO[kind].statusSubresource) next.status = old.status;
      if (next.status === undefined) delete next.status;
    }
    return this.commitUpdate(kind, old, next) as KubeObjectOf<K>;
  }

  delete<K extends KubeKind>(kind: K, name: string, namespace?: string): KubeObjectOf<K> {
    const ns = this.scope(kind, namespace, 'delete');
    this.checkFaults({ verb: 'delete', kind, name, namespace: ns });
    const old = this.mustFind(kind, ns, name);
    if (kind === 'Namespace') {
      // No Terminating phase in the sim: the namespace's content goes first, then the namespace.
      for (const obj of [...this.objects.values()]) {
        if (obj.metadata?.namespace === name && KIND_INFO[obj.kind as KubeKind].namespaced) {
          this.remove(obj.kind as KubeKind, name, obj);
        }
      }
    }
    return this.remove(kind, ns, old) as KubeObjectOf<K>;
  }

  // ---- watch ---------------------------------------------------------------------------------

  /**
   * Watch one kind. Throws (synchronously) only for faults and bad selectors. An expired
   * resourceVersion is answered like the API server: an ERROR event carrying a 410 Status, then
   * the watch closes (onClose).
   */
  watch(kind: KubeKind, opts: WatchOptions, onEvent: (ev: WatchEvent) => void, onClose: () => void): StoreWatch {
    const ns = KIND_INFO[kind].namespaced ? opts.namespace : undefined;
    this.checkFaults({ verb: 'watch', kind, namespace: ns });
    const w: Watcher = {
      id: this.nextWatchId++,
      kind,
      namespace: ns,
      labels: parseLabelSelector(opts.labelSelector),
      fields: parseFieldSelector(opts.fieldSelector, kind),
      bookmarks: opts.allowWatchBookmarks === true,
      onEvent,
      onClose,
      timers: new Set(),
      node: kind === 'Pod' ? nodeOfSelector(opts.fieldSelector) : undefined,
      lastDue: -Infinity,
      closed: false,
    };
    this.addWatcher(w);
    const from = opts.resourceVersion ?? '';
    if (from === '' || from === '0') {
      for (const obj of this.objects.values()) {
        if (this.matches(w, obj)) this.enqueue(w, { type: 'ADDED', object: obj });
      }
    } else {
      const rv = Number(from);
      if (!Number.isInteger(rv) || rv < 0) {
        this.removeWatcher(w);
        throw new KubeApiError(
          400,
          'BadRequest',
          `invalid resourceVersion "${from}" for watch of ${kind}: expected a non-negative integer`,
        );
      }
      if (rv < this.compactedRv) {
        const gone = new KubeApiError(410, 'Expired', `too old resource version: ${rv} (${this.compactedRv})`);
        this.enqueue(w, { type: 'ERROR', object: statusObject(gone) });
        this.closeWatcher(w, true, false);
      } else {
        for (const ev of this.log) if (ev.rv > rv) this.deliverLogged(w, ev);
      }
    }
    return { id: w.id, stop: () => this.closeWatcher(w, false) };
  }

  // ---- internals -----------------------------------------------------------------------------

  private scope(kind: KubeKind, namespace: string | undefined, verb: string): string | undefined {
    if (!KIND_INFO[kind].namespaced) return undefined;
    if (!namespace)
      throw new KubeApiError(400, 'BadRequest', `${verb} ${kind}: a namespace is required for namespaced kind ${kind}`);
    return namespace;
  }

  private mustFind(kind: KubeKind, ns: string | undefined, name: string): StoredObject {
    const obj = this.objects.get(keyOf(kind, ns, name));
    if (!obj)
      throw new KubeApiError(
        404,
        'NotFound',
        `${KIND_INFO[kind].plural} "${name}" not found${ns ? ` in namespace "${ns}"` : ''}`,
      );
    return obj;
  }

  private checkFaults(req: RequestInfo): void {
    const i = this.failRules.findIndex((r) => r.remaining > 0 && r.match(req));
    if (i < 0) return;
    const r = this.failRules[i]!;
    if (--r.remaining <= 0) this.failRules.splice(i, 1);
    throw new KubeApiError(r.code, r.reason, `${r.message} (${req.verb} ${req.kind}${req.name ? ` ${req.name}` : ''})`);
  }

  private checkTypeMeta(kind: KubeKind, obj: StoredObject): void {
    const want = apiVersionOf(KIND_INFO[kind]);
    if ((obj.kind !== undefined && obj.kind !== kind) || (obj.apiVersion !== undefined && obj.apiVersion !== want)) {
      throw new KubeApiError(
        400,
        'BadRequest',
        `object is ${obj.apiVersion}/${obj.kind}, but the request is for ${want}/${kind}`,
      );
    }
  }

  private checkPrecondition(kind: KubeKind, old: StoredObject, rv: string | undefined): void {
    if (rv !== undefined && rv !== '' && rv !== old.metadata?.resourceVersion) {
      throw new KubeApiError(
        409,
        'Conflict',
        `Operation cannot be fulfilled on ${KIND_INFO[kind].plural} "${old.metadata?.name}": the object has been modified; please apply your changes to the latest version (resourceVersion ${old.metadata?.resourceVersion}, you sent ${rv}) and try again`,
      );
    }
  }

  private initStatus(kind: KubeKind, obj: StoredObject): void {
    switch (kind) {
      case 'Pod':
        obj.status = { phase: 'Pending' };
        break;
      case 'Namespace':
        obj.status = { phase: 'Active' };
        break;
      case 'Node':
        break; // the kubelet registers its Node with status
      default:
        if (KIND_INFO[kind].statusSubresource) delete obj.status;
    }
  }

  private commitUpdate(kind: KubeKind, old: StoredObject, next: StoredObject): StoredObject {
    const oldMeta = old.metadata ?? {};
    // A new metadata object: next may share old's frozen one (a patch that did not touch metadata).
    const meta: NonNullable<StoredObject['metadata']> = (next.metadata = { ...next.metadata });
    const name = oldMeta.name ?? '';
    // Identity and server-owned metadata cannot change.
    for (const k of ['name', 'namespace', 'uid', 'creationTimestamp'] as const) {
      if (meta[k] !== undefined && meta[k] !== oldMeta[k]) {
        throw invalid(kind, name, [
          { field: `metadata.${k}`, message: `Invalid value: ${JSON.stringify(meta[k])}: field is immutable` },
        ]);
      }
      if (oldMeta[k] !== undefined) meta[k] = oldMeta[k];
    }
    next.apiVersion = old.apiVersion;
    next.kind = old.kind;
    const errs = labelErrors(meta.labels);
    if (kind === 'Pod' && next.spec !== old.spec) errs.push(...podSpecUpdateErrors(old.spec, next.spec));
    if (errs.length) throw invalid(kind, name, errs);
    meta.resourceVersion = oldMeta.resourceVersion;
    if (jsonEqual(old, next)) return jsonClone(old); // no-op: no new resourceVersion, no event
    validateWrite(kind, name, next, old);
    meta.resourceVersion = String(++this.rv);
    deepFreeze(next);
    this.objects.set(keyOf(kind, oldMeta.namespace, name), next);
    this.record('MODIFIED', kind, next, old);
    return jsonClone(next);
  }

  private remove(kind: KubeKind, ns: string | undefined, old: StoredObject): StoredObject {
    this.objects.delete(keyOf(kind, ns, old.metadata?.name ?? ''));
    // The deletion has its own resourceVersion, carried by the DELETED event's object.
    const gone = deepFreeze({ ...old, metadata: { ...old.metadata, resourceVersion: String(++this.rv) } });
    this.record('DELETED', kind, gone, old);
    return jsonClone(gone);
  }

  private record(type: LoggedEvent['type'], kind: KubeKind, object: StoredObject, old: StoredObject | undefined): void {
    const ev: LoggedEvent = { rv: this.rv, type, kind, object, old };
    this.log.push(ev);
    this.trimLog();
    for (const w of this.candidates(ev)) this.deliverLogged(w, ev);
  }

  /** The watches an event can concern, in watch order (the order events were always queued in). */
  private candidates(ev: LoggedEvent): Iterable<Watcher> {
    if (ev.kind !== 'Pod' || this.podWatchersByNode.size === 0) return this.watchers.values();
    const nodeOf = (o: StoredObject | undefined): string => {
      const n = (o?.spec as { nodeName?: unknown } | undefined)?.nodeName;
      return typeof n === 'string' ? n : '';
    };
    const sets = [this.unindexedWatchers, this.podWatchersByNode.get(nodeOf(ev.object))];
    const oldNode = nodeOf(ev.old);
    if (ev.old && oldNode !== nodeOf(ev.object)) sets.push(this.podWatchersByNode.get(oldNode));
    const out: Watcher[] = [];
    for (const set of sets) if (set) for (const w of set.values()) out.push(w);
    return out.sort((a, b) => a.id - b.id);
  }

  private addWatcher(w: Watcher): void {
    this.watchers.set(w.id, w);
    if (w.node === undefined) {
      this.unindexedWatchers.set(w.id, w);
      return;
    }
    let m = this.podWatchersByNode.get(w.node);
    if (!m) this.podWatchersByNode.set(w.node, (m = new Map()));
    m.set(w.id, w);
  }

  private removeWatcher(w: Watcher): void {
    this.watchers.delete(w.id);
    this.unindexedWatchers.delete(w.id);
    if (w.node === undefined) return;
    const m = this.podWatchersByNode.get(w.node);
    m?.delete(w.id);
    if (m?.size === 0) this.podWatchersByNode.delete(w.node);
  }

  private trimLog(): void {
    const excess = this.log.length - this.eventWindow;
    if (excess <= 0) return;
    this.compactedRv = this.log[excess - 1]!.rv;
    this.log = this.log.slice(excess);
  }

  private matches(w: Watcher, obj: StoredObject | undefined): boolean {
    if (!obj || obj.kind !== w.kind) return false;
    if (w.namespace !== undefined && obj.metadata?.namespace !== w.namespace) return false;
    return w.labels(obj.metadata?.labels) && w.fields(obj);
  }

  /** A selector watch sees an object entering its selection as ADDED and leaving it as DELETED. */
  private deliverLogged(w: Watcher, ev: LoggedEvent): void {
    if (ev.kind !== w.kind || w.closed) return;
    const now = this.matches(w, ev.object);
    if (ev.type === 'ADDED') {
      if (now) this.enqueue(w, { type: 'ADDED', object: ev.object });
    } else if (ev.type === 'DELETED') {
      if (this.matches(w, ev.old)) this.enqueue(w, { type: 'DELETED', object: ev.object });
    } else {
      const before = this.matches(w, ev.old);
      if (before && now) this.enqueue(w, { type: 'MODIFIED', object: ev.object });
      else if (now) this.enqueue(w, { type: 'ADDED', object: ev.object });
      else if (before) this.enqueue(w, { type: 'DELETED', object: ev.object });
    }
  }

  private enqueue(w: Watcher, ev: WatchEvent): void {
    const now = this.clock.now();
    const due = Math.max(now + this.watchDelayMs, w.lastDue);
    w.lastDue = due;
    const object = ev.object; // a frozen snapshot, shared (see the module comment)
    const handle = this.clock.setTimer(due - now, () => {
      w.timers.delete(handle);
      if (!w.closed || ev.type === 'ERROR') w.onEvent({ type: ev.type, object });
    });
    w.timers.add(handle);
  }

  /**
   * Close a watcher. `notify`: call onClose on a timer after what is already queued (when
   * `discard` is false) or right away with pending events dropped (a broken connection).
   */
  private closeWatcher(w: Watcher, notify: boolean, discard = true): void {
    if (w.closed) return;
    w.closed = true;
    this.removeWatcher(w);
    if (discard) {
      for (const t of w.timers) t.cancel();
      w.timers.clear();
    }
    if (notify) {
      const now = this.clock.now();
      const due = discard ? now : Math.max(now, w.lastDue);
      this.clock.setTimer(due - now, () => w.onClose());
    }
  }

  private randomSuffix(): string {
    const alphabet = 'bcdfghjklmnpqrstvwxz2456789';
    let s = '';
    for (let i = 0; i < 5; i++) s += alphabet[this.random.int(0, alphabet.length - 1)];
    return s;
  }

  private uuid(): string {
    // 32 bits per draw (the seeded generator is costly per call), then the v4 version and variant nibbles.
    let h = '';
    for (let i = 0; i < 4; i++) h += this.random.int(0, 0xffffffff).toString(16).padStart(8, '0');
    const variant = (8 + (parseInt(h[16]!, 16) & 3)).toString(16);
    return `${h.slice(0, 8)}-${h.slice(8, 12)}-4${h.slice(13, 16)}-${variant}${h.slice(17, 20)}-${h.slice(20, 32)}`;
  }

  /** The store's current time as an RFC 3339 timestamp (what creationTimestamp gets). */
  nowTimestamp(): string {
    return this.timestamp();
  }

  private timestamp(): string {
    return rfc3339Seconds(this.epochMs, this.clock.now());
  }
}

/** `spec.nodeName=<node>` (or ==) as the whole field selector: the node; anything else: undefined. */
function nodeOfSelector(selector: string | undefined): string | undefined {
  const m = /^\s*spec\.nodeName\s*==?\s*([^\s,]*)\s*$/.exec(selector ?? '');
  return m ? m[1] : undefined;
}

/** The real API's rule, narrowed to what we model: a Pod's spec may change only in containers[*].image. */
function podSpecUpdateErrors(oldSpec: unknown, newSpec: unknown): FieldError[] {
  const strip = (spec: unknown): unknown => {
    if (typeof spec !== 'object' || spec === null) return spec;
    const s = { ...spec } as { containers?: unknown };
    if (Array.isArray(s.containers))
      s.containers = s.containers.map((c: unknown) =>
        typeof c === 'object' && c !== null ? { ...c, image: undefined } : c,
      );
    return s;
  };
  if (jsonEqual(strip(oldSpec), strip(newSpec))) return [];
  return [
    {
      field: 'spec',
      message:
        'Forbidden: pod updates may not change fields other than spec.containers[*].image (set spec.nodeName when creating the Pod)',
    },
  ];
}

/**
 * What the API server's admission sets on a new object: a Pod without a service account gets
 * `default` (the ServiceAccount admission plugin). The sim does not require the account to exist
 * (see token-authority.ts).
 */
function admissionDefaults(kind: KubeKind, obj: StoredObject): void {
  if (kind !== 'Pod') return;
  const spec = obj['spec'];
  if (typeof spec === 'object' && spec !== null && !Array.isArray(spec)) {
    const s = spec as Record<string, unknown>;
    if (s['serviceAccountName'] === undefined || s['serviceAccountName'] === '') s['serviceAccountName'] = 'default';
  }
}
