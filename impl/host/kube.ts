/**
 * The Kube port: the only way impl/ talks to the Kubernetes API. Shaped after
 * @kubernetes/client-node 1.4.0's ListWatch informer so the real adapter is thin and the sim
 * adapter is held to the same semantics (see the Informer contract below).
 *
 * Objects are the JSON wire form of the API (client-node's V1* model types with every `Date`
 * replaced by its RFC 3339 string, see `Wire`): that is what a watch delivers in client-node,
 * so both adapters normalise list/get/patch results to it and impl/ sees one shape.
 *
 * No I/O here: types, the kind table and the error class only.
 */
import type {
  CoreV1Event,
  V1CustomResourceDefinition,
  V1DaemonSet,
  V1Namespace,
  V1Node,
  V1ObjectMeta,
  V1Pod,
  V1ServiceAccount,
} from '@kubernetes/client-node';
import type { IAuthorizationPolicy } from '@kubernetes-models/istio/security.istio.io/v1/AuthorizationPolicy';

/** client-node model type as it travels on the wire: Date fields are RFC 3339 strings. */
export type Wire<T> = T extends Date
  ? string
  : T extends ReadonlyArray<infer U>
    ? Wire<U>[]
    : T extends object
      ? { [K in keyof T]: Wire<T[K]> }
      : T;

export type ObjectMeta = Wire<V1ObjectMeta>;

/** security.istio.io/v1 AuthorizationPolicy (a namespaced custom resource with a status subresource). */
export interface AuthorizationPolicy {
  apiVersion?: string;
  kind?: string;
  metadata?: ObjectMeta;
  spec?: IAuthorizationPolicy['spec'];
  status?: Record<string, unknown>;
}

/** Every kind the port serves, with its object type. */
interface KubeObjects {
  Namespace: Wire<V1Namespace>;
  Pod: Wire<V1Pod>;
  ServiceAccount: Wire<V1ServiceAccount>;
  Node: Wire<V1Node>;
  Event: Wire<CoreV1Event>;
  CustomResourceDefinition: Wire<V1CustomResourceDefinition>;
  AuthorizationPolicy: AuthorizationPolicy;
  DaemonSet: Wire<V1DaemonSet>;
}
export type KubeKind = keyof KubeObjects;
export type KubeObjectOf<K extends KubeKind> = KubeObjects[K];

/** Where a kind lives in the REST API and how it behaves. */
export interface KindInfo {
  readonly kind: KubeKind;
  /** '' for the core group. */
  readonly group: string;
  readonly version: string;
  readonly plural: string;
  readonly namespaced: boolean;
  /** With a status subresource, a write to the object ignores .status and /status changes only .status. */
  readonly statusSubresource: boolean;
}

export const KIND_INFO: Readonly<Record<KubeKind, KindInfo>> = {
  Namespace: {
    kind: 'Namespace',
    group: '',
    version: 'v1',
    plural: 'namespaces',
    namespaced: false,
    statusSubresource: true,
  },
  Pod: { kind: 'Pod', group: '', version: 'v1', plural: 'pods', namespaced: true, statusSubresource: true },
  ServiceAccount: {
    kind: 'ServiceAccount',
    group: '',
    version: 'v1',
    plural: 'serviceaccounts',
    namespaced: true,
    statusSubresource: false,
  },
  Node: { kind: 'Node', group: '', version: 'v1', plural: 'nodes', namespaced: false, statusSubresource: true },
  Event: { kind: 'Event', group: '', version: 'v1', plural: 'events', namespaced: true, statusSubresource: false },
  CustomResourceDefinition: {
    kind: 'CustomResourceDefinition',
    group: 'apiextensions.k8s.io',
    version: 'v1',
    plural: 'customresourcedefinitions',
    namespaced: false,
    statusSubresource: true,
  },
  AuthorizationPolicy: {
    kind: 'AuthorizationPolicy',
    group: 'security.istio.io',
    version: 'v1',
    plural: 'authorizationpolicies',
    namespaced: true,
    statusSubresource: true,
  },
  DaemonSet: {
    kind: 'DaemonSet',
    group: 'apps',
    version: 'v1',
    plural: 'daemonsets',
    namespaced: true,
    statusSubresource: true,
  },
};

export function apiVersionOf(info: KindInfo): string {
  return info.group === '' ? info.version : `${info.group}/${info.version}`;
}

/**
 * Which objects a list or informer covers. Selector strings use the API syntax:
 * labels `a=b,c!=d,e in (x,y),f notin (z),g,!h`; fields `spec.nodeName=n1,status.phase!=Failed`
 * (fields supported: metadata.name, metadata.namespace, spec.nodeName, status.phase).
 */
export interface Selection {
  /** Omit for all namespaces (and for cluster-scoped kinds). */
  namespace?: string;
  labelSelector?: string;
  fieldSelector?: string;
}

export interface KubeList<T> {
  items: T[];
  /** The collection's resourceVersion: watch from here to see every later change. */
  resourceVersion: string;
}

/** JSON merge patch (RFC 7386): objects merge, `null` deletes a key, arrays and scalars replace. */
export type MergePatch = { [key: string]: unknown };

/** What the caller says about an Event; the adapter fills names, timestamps and count. */
export interface EventInput {
  involvedObject: { kind: KubeKind; name: string; namespace?: string; uid?: string };
  type: 'Normal' | 'Warning';
  /** UpperCamelCase machine reason, e.g. FailedCreatePodSandBox. */
  reason: string;
  message: string;
  /** Reporting component, e.g. kubelet or ambient-node-agent. */
  component: string;
}

/**
 * A failed API request. `code` is the HTTP status (404 NotFound, 409 Conflict/AlreadyExists,
 * 410 Gone/Expired, 422 Invalid, 400 BadRequest, 5xx); `reason` the Status reason.
 */
export class KubeApiError extends Error {
  override readonly name = 'KubeApiError';
  constructor(
    readonly code: number,
    readonly reason: string,
    message: string,
  ) {
    super(message);
  }
}

export function isKubeApiError(e: unknown, code?: number): e is KubeApiError {
  return e instanceof KubeApiError && (code === undefined || e.code === code);
}

export type InformerObjectEvent = 'add' | 'update' | 'delete';

/**
 * A list+watch cache of one kind, with client-node 1.4.0 ListWatch semantics:
 *
 * - start(): emits 'connect', lists (when it has no resourceVersion), diffs the list against the
 *   cache — 'delete' for cached objects absent from the list, 'add' for new ones, 'update' for
 *   changed ones — then watches from the list's resourceVersion. Resolves once the cache holds
 *   the list and the watch is open. It never rejects: a failure is emitted as 'error'.
 * - 'update' fires only when the object's resourceVersion differs from the cached one.
 * - The watch ending normally (server closed it, connection dropped) → 'connect' and re-watch
 *   from the last seen resourceVersion, no relist, no event lost.
 * - 410 Gone (watch ERROR event or HTTP 410) → forget the resourceVersion, 'connect', relist
 *   (emitting 'delete' for objects that vanished meanwhile), watch again.
 * - Any other error (list or watch failure) → 'error' once and the informer STOPS. The caller
 *   must call start() again (after a backoff of its choosing); the cache is kept and the next
 *   start relists and diffs, so no delete is missed.
 * - stop(): no further events; the cache is kept.
 * - Object-event callbacks run in event order; an informer never emits before start().
 */
export interface Informer<T> {
  on(event: InformerObjectEvent, cb: (obj: T) => void): void;
  on(event: 'error', cb: (err: unknown) => void): void;
  on(event: 'connect', cb: () => void): void;
  off(event: InformerObjectEvent, cb: (obj: T) => void): void;
  off(event: 'error', cb: (err: unknown) => void): void;
  off(event: 'connect', cb: () => void): void;
  start(): Promise<void>;
  stop(): void;
  /** Cached objects, optionally of one namespace. */
  list(namespace?: string): T[];
  get(name: string, namespace?: string): T | undefined;
}

/**
 * The `status` of an authentication.k8s.io/v1 TokenReview as the API answers it: whether the
 * bearer token is valid (signature, expiry, its bound object still there) for one of the
 * audiences asked about, which of them (`audiences`), and the user it stands for. A bound
 * service-account token carries its pod in `user.extra` (`authentication.kubernetes.io/pod-name`,
 * `pod-uid`, and `node-name` on Kubernetes 1.30+).
 */
export interface TokenReviewStatus {
  readonly authenticated?: boolean;
  readonly user?: {
    readonly username?: string;
    readonly uid?: string;
    readonly groups?: readonly string[];
    readonly extra?: Readonly<Record<string, readonly string[]>>;
  };
  readonly audiences?: readonly string[];
  readonly error?: string;
}

/**
 * The API. Every method rejects with KubeApiError on an API failure. Cluster-scoped kinds take
 * no namespace; namespaced kinds require one (except list/informer, where omitting it means
 * all namespaces).
 */
export interface KubeApi {
  informer<K extends KubeKind>(kind: K, selection?: Selection): Informer<KubeObjectOf<K>>;
  get<K extends KubeKind>(kind: K, name: string, namespace?: string): Promise<KubeObjectOf<K>>;
  list<K extends KubeKind>(kind: K, selection?: Selection): Promise<KubeList<KubeObjectOf<K>>>;
  create<K extends KubeKind>(kind: K, obj: KubeObjectOf<K>): Promise<KubeObjectOf<K>>;
  /** PUT: with metadata.resourceVersion set, 409 Conflict unless it is the current one. */
  update<K extends KubeKind>(kind: K, obj: KubeObjectOf<K>): Promise<KubeObjectOf<K>>;
  /** Merge patch of the object; .status is ignored for kinds with a status subresource. */
  patchMerge<K extends KubeKind>(
    kind: K,
    name: string,
    namespace: string | undefined,
    patch: MergePatch,
  ): Promise<KubeObjectOf<K>>;
  /** Merge patch of the status subresource: only .status changes. */
  patchStatus<K extends KubeKind>(
    kind: K,
    name: string,
    namespace: string | undefined,
    patch: MergePatch,
  ): Promise<KubeObjectOf<K>>;
  delete(kind: KubeKind, name: string, namespace?: string): Promise<void>;
  /** Records a core/v1 Event about an object (best effort: callers usually log and ignore failures). */
  createEvent(event: EventInput): Promise<void>;
  /** POST a TokenReview of `token` for `audiences` (the API's own audience when empty); its status. */
  reviewToken(token: string, audiences: readonly string[]): Promise<TokenReviewStatus>;
}
