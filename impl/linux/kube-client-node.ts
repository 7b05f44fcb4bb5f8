/**
 * Real adapter of the Kube port over @kubernetes/client-node 1.4.0: typed API clients for the
 * calls, client-node's own ListWatch for informers, merge patches via
 * setHeaderOptions('Content-Type', PatchStrategy.MergePatch).
 *
 * Results are normalised to the wire form the port promises (Date → RFC 3339 string, as a
 * watch delivers them): client-node deserialises list/get/patch answers into model classes
 * with Date fields; a JSON round-trip turns them back. Note: for CustomResourceDefinition the
 * model renames a few schema keys ($ref, x-kubernetes-*); impl/ does not read CRD schemas.
 */
import {
  ApiException,
  ApiextensionsV1Api,
  AppsV1Api,
  AuthenticationV1Api,
  CoreV1Api,
  CustomObjectsApi,
  KubeConfig,
  ListWatch,
  PatchStrategy,
  Watch,
  setHeaderOptions,
  type KubernetesObject,
} from '@kubernetes/client-node';
import {
  KIND_INFO,
  KubeApiError,
  apiVersionOf,
  type EventInput,
  type Informer,
  type InformerObjectEvent,
  type KubeApi,
  type KubeKind,
  type KubeList,
  type KubeObjectOf,
  type MergePatch,
  type Selection,
  type TokenReviewStatus,
} from '../host/kube.js';
import { eventObject } from '../host/kube-event.js';

// The typed clients are generic over their model classes; this adapter passes wire-form JSON
// through them (the server is the validator), so bodies and answers are handled as `Json`.
type Json = { [k: string]: unknown };
interface ListResult {
  metadata?: { resourceVersion?: string };
  items: Json[];
}

interface KindOps {
  list(ns: string | undefined, labelSelector?: string, fieldSelector?: string): Promise<ListResult>;
  read(name: string, ns: string | undefined): Promise<Json>;
  create(body: Json, ns: string | undefined): Promise<Json>;
  replace(name: string, body: Json, ns: string | undefined): Promise<Json>;
  patch(name: string, body: Json, ns: string | undefined): Promise<Json>;
  patchStatus(name: string, body: Json, ns: string | undefined): Promise<Json>;
  delete(name: string, ns: string | undefined): Promise<unknown>;
}

const merge = setHeaderOptions('Content-Type', PatchStrategy.MergePatch);

/** A JSON round trip: model classes → plain wire-form objects (Date → string). */
function wire<T>(x: unknown): T {
  return JSON.parse(JSON.stringify(x)) as T;
}

function need(ns: string | undefined, kind: KubeKind): string {
  if (!ns) throw new KubeApiError(400, 'BadRequest', `a namespace is required for namespaced kind ${kind}`);
  return ns;
}

/* eslint-disable @typescript-eslint/no-explicit-any -- bodies are wire JSON validated by the server; the typed clients want their model classes */
type Call = (params: any, options?: any) => Promise<unknown>;
/* eslint-enable @typescript-eslint/no-explicit-any */

/**
 * A typed client's calls for the namespaced kind K, by client-node's naming (CoreV1Api for Pod,
 * AppsV1Api for DaemonSet, ...); the status patch only for kinds with a status subresource.
 */
type NamespacedClient<K extends string> = Record<
  | `listNamespaced${K}`
  | `list${K}ForAllNamespaces`
  | `readNamespaced${K}`
  | `createNamespaced${K}`
  | `replaceNamespaced${K}`
  | `patchNamespaced${K}`
  | `deleteNamespaced${K}`,
  Call
> &
  Partial<Record<`patchNamespaced${K}Status`, Call>>;

/** The ops of a namespaced kind served by a typed client (`client` has the calls NamespacedClient names). */
function namespacedOps<K extends KubeKind>(client: NamespacedClient<K>, kind: K): KindOps {
  const c = client as unknown as Record<string, Call>;
  const call = (m: string, params: Json, options?: unknown): Promise<Json> => c[m]!(params, options).then(wire<Json>);
  return {
    list: (ns, labelSelector, fieldSelector) =>
      (ns
        ? c[`listNamespaced${kind}`]!({ namespace: ns, labelSelector, fieldSelector })
        : c[`list${kind}ForAllNamespaces`]!({ labelSelector, fieldSelector })
      ).then(wire<ListResult>),
    read: (name, ns) => call(`readNamespaced${kind}`, { name, namespace: need(ns, kind) }),
    create: (body, ns) => call(`createNamespaced${kind}`, { namespace: need(ns, kind), body }),
    replace: (name, body, ns) => call(`replaceNamespaced${kind}`, { name, namespace: need(ns, kind), body }),
    patch: (name, body, ns) => call(`patchNamespaced${kind}`, { name, namespace: need(ns, kind), body }, merge),
    patchStatus: (name, body, ns) =>
      KIND_INFO[kind].statusSubresource
        ? call(`patchNamespaced${kind}Status`, { name, namespace: need(ns, kind), body }, merge)
        : Promise.reject(new KubeApiError(404, 'NotFound', `${KIND_INFO[kind].plural} has no status subresource`)),
    delete: (name, ns) => c[`deleteNamespaced${kind}`]!({ name, namespace: need(ns, kind) }),
  };
}

/** Maps a client-node failure to KubeApiError; anything else (network errors) passes through. */
function toKubeApiError(err: unknown): unknown {
  if (err instanceof KubeApiError) return err;
  if (err instanceof ApiException) {
    let body: unknown = err.body;
    if (typeof body === 'string') {
      try {
        body = JSON.parse(body);
      } catch {
        /* not JSON: keep the text */
      }
    }
    const status = (typeof body === 'object' && body !== null ? body : {}) as { reason?: string; message?: string };
    return new KubeApiError(
      err.code,
      status.reason ?? 'Unknown',
      status.message ?? `HTTP ${err.code}: ${String(body)}`,
    );
  }
  const code = (err as { statusCode?: unknown; code?: unknown } | null)?.statusCode;
  if (typeof code === 'number')
    return new KubeApiError(code, 'Unknown', err instanceof Error ? err.message : `HTTP ${code}`);
  return err;
}

export class ClientNodeKubeApi implements KubeApi {
  private readonly ops: Record<KubeKind, KindOps>;
  private readonly authn: AuthenticationV1Api;

  constructor(private readonly kc: KubeConfig) {
    this.authn = kc.makeApiClient(AuthenticationV1Api);
    const core = kc.makeApiClient(CoreV1Api);
    const ext = kc.makeApiClient(ApiextensionsV1Api);
    const apps = kc.makeApiClient(AppsV1Api);
    const custom = kc.makeApiClient(CustomObjectsApi);
    /* eslint-disable @typescript-eslint/no-explicit-any -- bodies are wire JSON validated by the server; the typed clients want their model classes */
    const b = (x: Json): any => x;
    /* eslint-enable @typescript-eslint/no-explicit-any */
    const ap = KIND_INFO.AuthorizationPolicy;
    const cr = { group: ap.group, version: ap.version, plural: ap.plural };
    this.ops = {
      Namespace: {
        list: (_ns, labelSelector, fieldSelector) =>
          core.listNamespace({ labelSelector, fieldSelector }).then(wire<ListResult>),
        read: (name) => core.readNamespace({ name }).then(wire<Json>),
        create: (body) => core.createNamespace({ body: b(body) }).then(wire<Json>),
        replace: (name, body) => core.replaceNamespace({ name, body: b(body) }).then(wire<Json>),
        patch: (name, body) => core.patchNamespace({ name, body }, merge).then(wire<Json>),
        patchStatus: (name, body) => core.patchNamespaceStatus({ name, body }, merge).then(wire<Json>),
        delete: (name) => core.deleteNamespace({ name }),
      },
      Node: {
        list: (_ns, labelSelector, fieldSelector) =>
          core.listNode({ labelSelector, fieldSelector }).then(wire<ListResult>),
        read: (name) => core.readNode({ name }).then(wire<Json>),
        create: (body) => core.createNode({ body: b(body) }).then(wire<Json>),
        replace: (name, body) => core.replaceNode({ name, body: b(body) }).then(wire<Json>),
        patch: (name, body) => core.patchNode({ name, body }, merge).then(wire<Json>),
        patchStatus: (name, body) => core.patchNodeStatus({ name, body }, merge).then(wire<Json>),
        delete: (name) => core.deleteNode({ name }),
      },
      Pod: namespacedOps(core, 'Pod'),
      ServiceAccount: namespacedOps(core, 'ServiceAccount'),
      Event: namespacedOps(core, 'Event'),
      DaemonSet: namespacedOps(apps, 'DaemonSet'),
      CustomResourceDefinition: {
        list: (_ns, labelSelector, fieldSelector) =>
          ext.listCustomResourceDefinition({ labelSelector, fieldSelector }).then(wire<ListResult>),
        read: (name) => ext.readCustomResourceDefinition({ name }).then(wire<Json>),
        create: (body) => ext.createCustomResourceDefinition({ body: b(body) }).then(wire<Json>),
        replace: (name, body) => ext.replaceCustomResourceDefinition({ name, body: b(body) }).then(wire<Json>),
        patch: (name, body) => ext.patchCustomResourceDefinition({ name, body }, merge).then(wire<Json>),
        patchStatus: (name, body) => ext.patchCustomResourceDefinitionStatus({ name, body }, merge).then(wire<Json>),
        delete: (name) => ext.deleteCustomResourceDefinition({ name }),
      },
      AuthorizationPolicy: {
        list: (ns, labelSelector, fieldSelector) =>
          (ns
            ? custom.listNamespacedCustomObject({ ...cr, namespace: ns, labelSelector, fieldSelector })
            : custom.listClusterCustomObject({ ...cr, labelSelector, fieldSelector })
          ).then(wire<ListResult>),
        read: (name, ns) =>
          custom
            .getNamespacedCustomObject({ ...cr, name, namespace: need(ns, 'AuthorizationPolicy') })
            .then(wire<Json>),
        create: (body, ns) =>
          custom
            .createNamespacedCustomObject({ ...cr, namespace: need(ns, 'AuthorizationPolicy'), body })
            .then(wire<Json>),
        replace: (name, body, ns) =>
          custom
            .replaceNamespacedCustomObject({ ...cr, name, namespace: need(ns, 'AuthorizationPolicy'), body })
            .then(wire<Json>),
        patch: (name, body, ns) =>
          custom
            .patchNamespacedCustomObject({ ...cr, name, namespace: need(ns, 'AuthorizationPolicy'), body }, merge)
            .then(wire<Json>),
        patchStatus: (name, body, ns) =>
          custom
            .patchNamespacedCustomObjectStatus({ ...cr, name, namespace: need(ns, 'AuthorizationPolicy'), body }, merge)
            .then(wire<Json>),
        delete: (name, ns) =>
          custom.deleteNamespacedCustomObject({ ...cr, name, namespace: need(ns, 'AuthorizationPolicy') }),
      },
    };
  }

  private async call<T>(fn: () => Promise<T>): Promise<T> {
    try {
      return await fn();
    } catch (err) {
      throw toKubeApiError(err);
    }
  }

  informer<K extends KubeKind>(kind: K, selection: Selection = {}): Informer<KubeObjectOf<K>> {
    const info = KIND_INFO[kind];
    const prefix = info.group === '' ? `/api/${info.version}` : `/apis/${info.group}/${info.version}`;
    const ns = info.namespaced ? selection.namespace : undefined;
    const path = ns ? `${prefix}/namespaces/${encodeURIComponent(ns)}/${info.plural}` : `${prefix}/${info.plural}`;
    const ops = this.ops[kind];
    // ListWatch wants a KubernetesListObject; the list is in wire form so the cache holds one shape.
    const listFn = async (): Promise<{ metadata?: { resourceVersion?: string }; items: KubernetesObject[] }> => {
      const l = await this.call(() => ops.list(ns, selection.labelSelector, selection.fieldSelector));
      return { metadata: l.metadata, items: l.items as KubernetesObject[] };
    };
    const lw = new ListWatch<KubernetesObject>(
      path,
      new Watch(this.kc),
      listFn,
      false,
      selection.labelSelector,
      selection.fieldSelector,
    );
    return new ListWatchInformer<KubeObjectOf<K>>(lw);
  }

  async get<K extends KubeKind>(kind: K, name: string, namespace?: string): Promise<KubeObjectOf<K>> {
    return (await this.call(() => this.ops[kind].read(name, namespace))) as KubeObjectOf<K>;
  }

  async list<K extends KubeKind>(kind: K, selection: Selection = {}): Promise<KubeList<KubeObjectOf<K>>> {
    const ns = KIND_INFO[kind].namespaced ? selection.namespace : undefined;
    const l = await this.call(() => this.ops[kind].list(ns, selection.labelSelector, selection.fieldSelector));
    return { items: l.items as KubeObjectOf<K>[], resourceVersion: l.metadata?.resourceVersion ?? '' };
  }

  async create<K extends KubeKind>(kind: K, obj: KubeObjectOf<K>): Promise<KubeObjectOf<K>> {
    const info = KIND_INFO[kind];
    const body = { apiVersion: apiVersionOf(info), kind, ...(obj as Json) };
    return (await this.call(() => this.ops[kind].create(body, obj.metadata?.namespace))) as KubeObjectOf<K>;
  }

  async update<K extends KubeKind>(kind: K, obj: KubeObjectOf<K>): Promise<KubeObjectOf<K>> {
    const info = KIND_INFO[kind];
    const body = { apiVersion: apiVersionOf(info), kind, ...(obj as Json) };
    const name = obj.metadata?.name ?? '';
    return (await this.call(() => this.ops[kind].replace(name, body, obj.metadata?.namespace))) as KubeObjectOf<K>;
  }

  async patchMerge<K extends KubeKind>(
    kind: K,
    name: string,
    namespace: string | undefined,
    patch: MergePatch,
  ): Promise<KubeObjectOf<K>> {
    return (await this.call(() => this.ops[kind].patch(name, patch, namespace))) as KubeObjectOf<K>;
  }

  async patchStatus<K extends KubeKind>(
    kind: K,
    name: string,
    namespace: string | undefined,
    patch: MergePatch,
  ): Promise<KubeObjectOf<K>> {
    return (await this.call(() => this.ops[kind].patchStatus(name, patch, namespace))) as KubeObjectOf<K>;
  }

  async delete(kind: KubeKind, name: string, namespace?: string): Promise<void> {
    await this.call(() => this.ops[kind].delete(name, namespace));
  }

  async createEvent(e: EventInput): Promise<void> {
    const ns = e.involvedObject.namespace ?? 'default';
    // Spread: Json's index signature does not accept the closed Event interface as it is.
    const body: Json = { ...eventObject(e, ns, new Date().toISOString()) };
    await this.call(() => this.ops.Event.create(body, ns));
  }

  async reviewToken(token: string, audiences: readonly string[]): Promise<TokenReviewStatus> {
    const review = await this.call(() =>
      this.authn.createTokenReview({
        body: {
          apiVersion: 'authentication.k8s.io/v1',
          kind: 'TokenReview',
          spec: { token, audiences: [...audiences] },
        },
      }),
    );
    return wire<{ status?: TokenReviewStatus }>(review).status ?? {};
  }
}

type AnyCb = (x: never) => void;

/**
 * The port's Informer over client-node's ListWatch. Adds only: errors mapped to KubeApiError,
 * and silence after stop() (1.4.0 reports the abort of its own watch as an 'error').
 */
class ListWatchInformer<T> implements Informer<T> {
  private stopped = true;
  private readonly wrapped = new Map<AnyCb, (x: unknown) => void>();

  constructor(private readonly lw: ListWatch<KubernetesObject>) {}

  on(event: InformerObjectEvent | 'error' | 'connect', cb: AnyCb): void {
    const w = (x: unknown): void => {
      if (this.stopped) return;
      if (event === 'error') {
        if ((x as { name?: string } | null)?.name === 'AbortError') return;
        (cb as (e: unknown) => void)(toKubeApiError(x));
      } else if (event === 'connect') {
        (cb as () => void)();
      } else {
        (cb as (o: unknown) => void)(x);
      }
    };
    this.wrapped.set(cb, w);
    if (event === 'error' || event === 'connect') this.lw.on(event, w);
    else this.lw.on(event, w);
  }

  off(event: InformerObjectEvent | 'error' | 'connect', cb: AnyCb): void {
    const w = this.wrapped.get(cb);
    if (!w) return;
    this.wrapped.delete(cb);
    if (event === 'error' || event === 'connect') this.lw.off(event, w);
    else this.lw.off(event, w);
  }

  async start(): Promise<void> {
    this.stopped = false;
    await this.lw.start();
  }

  stop(): void {
    this.stopped = true;
    void this.lw.stop();
  }

  list(namespace?: string): T[] {
    return this.lw.list(namespace) as T[];
  }

  get(name: string, namespace?: string): T | undefined {
    return this.lw.get(name, namespace) as T | undefined;
  }
}

/** client-node reads the service account from here in a pod (loadFromCluster). */
export const SERVICE_ACCOUNT_TOKEN = '/var/run/secrets/kubernetes.io/serviceaccount/token';

/** Where the components' API credentials come from. */
type KubeConfigSource =
  | { readonly kind: 'file'; readonly path: string }
  /** The pod's service account: KUBERNETES_SERVICE_HOST/PORT and the mounted token file, CA and namespace. */
  | { readonly kind: 'in-cluster' };

/**
 * Decide where the API credentials come from: an explicit kubeconfig (--kubeconfig), else
 * $KUBECONFIG, else the pod's service account when its token is mounted and the service
 * variables are set. Never client-node's silent last resort (http://localhost:8080): a component
 * with no credentials must say so at start-up.
 */
export function kubeConfigSource(
  path: string | undefined,
  env: Readonly<Record<string, string | undefined>>,
  exists: (file: string) => boolean,
): KubeConfigSource {
  if (path) return { kind: 'file', path };
  const fromEnv = env['KUBECONFIG']?.split(':').find((p) => p !== '');
  if (fromEnv) return { kind: 'file', path: fromEnv };
  if (env['KUBERNETES_SERVICE_HOST'] && env['KUBERNETES_SERVICE_PORT'] && exists(SERVICE_ACCOUNT_TOKEN))
    return { kind: 'in-cluster' };
  const missing = [
    ...(env['KUBERNETES_SERVICE_HOST'] ? [] : ['KUBERNETES_SERVICE_HOST']),
    ...(env['KUBERNETES_SERVICE_PORT'] ? [] : ['KUBERNETES_SERVICE_PORT']),
    ...(exists(SERVICE_ACCOUNT_TOKEN) ? [] : [SERVICE_ACCOUNT_TOKEN]),
  ];
  throw new Error(
    `no Kubernetes API credentials: give --kubeconfig PATH (or AMBIENT_LAB_KUBECONFIG / KUBECONFIG), or run in a pod with its service-account token mounted (in-cluster config is missing ${missing.join(', ')})`,
  );
}

/** A KubeConfig for a source (kubeConfigSource); in-cluster follows token rotation (client-node re-reads the token file). */
export function loadKubeConfig(source: KubeConfigSource): KubeConfig {
  const kc = new KubeConfig();
  if (source.kind === 'file') kc.loadFromFile(source.path);
  else kc.loadFromCluster();
  return kc;
}
