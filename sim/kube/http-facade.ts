/**
 * A small Kubernetes REST API over the ApiStore, on 127.0.0.1 and an ephemeral port, enough
 * for @kubernetes/client-node 1.4.0 to run unchanged against the sim store (netns world, tests):
 *
 * - /api/v1/... and /apis/{group}/{version}/... for the kinds in KIND_INFO, namespaced and
 *   cluster-wide collections: GET (get, list, `?watch=1|true`), POST, PUT, PATCH, DELETE, and
 *   PATCH/PUT/GET of `/status`.
 * - list/watch query: labelSelector, fieldSelector, resourceVersion, allowWatchBookmarks.
 *   Watches stream JSON lines `{"type","object"}` (chunked) and end when the store closes the
 *   watch (drop fault, or after a 410 ERROR event) or the client goes away.
 * - PATCH takes application/merge-patch+json; application/strategic-merge-patch+json is applied
 *   as a merge patch (equal for the maps and scalars we patch; lists would be replaced, not
 *   merged by key); json-patch and apply-patch are 415.
 * - Discovery: /api, /apis, /api/v1, /apis/{group}/{version}, /version.
 * - Errors are Status objects with code and reason (400, 404, 405, 409, 410, 415, 422, 5xx).
 *
 * The facade runs in the test (or harness) process: real sockets, and a real Clock for the store.
 */
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { writeFileSync } from 'node:fs';
import { stringify } from 'yaml';
import {
  KIND_INFO,
  KubeApiError,
  apiVersionOf,
  isKubeApiError,
  type KindInfo,
  type KubeKind,
  type KubeObjectOf,
  type MergePatch,
} from '../../impl/host/kube.js';
import { statusObject, type ApiStore, type StoreWatch } from './store.js';

interface Route {
  readonly info: KindInfo;
  readonly namespace: string | undefined;
  readonly name: string | undefined;
  readonly status: boolean;
}

const KINDS = Object.values(KIND_INFO);

function groupVersions(): Map<string, KindInfo[]> {
  const m = new Map<string, KindInfo[]>();
  for (const k of KINDS) {
    const gv = apiVersionOf(k);
    m.set(gv, [...(m.get(gv) ?? []), k]);
  }
  return m;
}

/** Parses `/api/v1/...` or `/apis/g/v/...` into a route, or undefined when it is no resource path. */
function parseRoute(pathname: string): Route | undefined {
  const parts = pathname
    .split('/')
    .filter((p) => p !== '')
    .map(decodeURIComponent);
  let group: string;
  let version: string;
  let rest: string[];
  if (parts[0] === 'api' && parts.length >= 3) {
    group = '';
    version = parts[1]!;
    rest = parts.slice(2);
  } else if (parts[0] === 'apis' && parts.length >= 4) {
    group = parts[1]!;
    version = parts[2]!;
    rest = parts.slice(3);
  } else return undefined;
  let namespace: string | undefined;
  // namespaces/{ns}/{plural}/... is a namespaced path; namespaces[/{name}[/status]] is the Namespace kind.
  if (rest[0] === 'namespaces' && rest.length >= 3) {
    namespace = rest[1];
    rest = rest.slice(2);
  }
  const [plural, name, sub, ...extra] = rest;
  if (extra.length > 0 || (sub !== undefined && sub !== 'status')) return undefined;
  const info = KINDS.find((k) => k.group === group && k.version === version && k.plural === plural);
  if (!info) return undefined;
  if (namespace !== undefined && !info.namespaced) return undefined;
  return { info, namespace, name, status: sub === 'status' };
}

function send(res: ServerResponse, code: number, body: unknown): void {
  const text = JSON.stringify(body);
  res.writeHead(code, { 'Content-Type': 'application/json', 'Content-Length': Buffer.byteLength(text) });
  res.end(text);
}

function sendError(res: ServerResponse, err: unknown): void {
  const e = isKubeApiError(err)
    ? err
    : new KubeApiError(500, 'InternalError', `sim API facade: ${err instanceof Error ? err.message : String(err)}`);
  send(res, e.code, statusObject(e));
}

async function readJson(req: IncomingMessage): Promise<unknown> {
  const chunks: Buffer[] = [];
  for await (const c of req) chunks.push(c as Buffer);
  const text = Buffer.concat(chunks).toString('utf8');
  if (text.trim() === '') return {};
  try {
    return JSON.parse(text);
  } catch {
    throw new KubeApiError(400, 'BadRequest', `request body is not valid JSON: ${text.slice(0, 80)}`);
  }
}

export interface KubeApiFacade {
  /** e.g. http://127.0.0.1:41234 */
  readonly url: string;
  readonly port: number;
  /** Open watch streams right now. */
  openWatches(): number;
  close(): Promise<void>;
}

export async function startKubeApiFacade(store: ApiStore, opts: { port?: number } = {}): Promise<KubeApiFacade> {
  const watches = new Set<{ watch: StoreWatch; res: ServerResponse }>();
  const server: Server = createServer((req, res) => {
    handle(store, req, res, watches).catch((err: unknown) => {
      if (!res.headersSent) sendError(res, err);
      else res.destroy();
    });
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(opts.port ?? 0, '127.0.0.1', () => resolve());
  });
  const port = (server.address() as AddressInfo).port;
  return {
    url: `http://127.0.0.1:${port}`,
    port,
    openWatches: () => watches.size,
    close: async () => {
      for (const w of watches) {
        w.watch.stop();
        w.res.destroy();
      }
      watches.clear();
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}

const TOKEN_REVIEWS = '/apis/authentication.k8s.io/v1/tokenreviews';

/** POST a TokenReview: create-only, nothing stored; the answer is the store's token authority's. */
async function tokenReview(store: ApiStore, req: IncomingMessage, res: ServerResponse, method: string): Promise<void> {
  if (method !== 'POST') throw new KubeApiError(405, 'MethodNotAllowed', `${method} is not supported on tokenreviews`);
  const body = (await readJson(req)) as { spec?: { token?: unknown; audiences?: unknown } } | null;
  const token = body?.spec?.token;
  const audiences = body?.spec?.audiences ?? [];
  if (typeof token !== 'string' || token === '')
    throw new KubeApiError(422, 'Invalid', 'TokenReview.authentication.k8s.io is invalid: spec.token: Required value');
  if (!Array.isArray(audiences) || !audiences.every((a): a is string => typeof a === 'string'))
    throw new KubeApiError(
      422,
      'Invalid',
      'TokenReview.authentication.k8s.io is invalid: spec.audiences: must be a list of strings',
    );
  return send(res, 201, {
    apiVersion: 'authentication.k8s.io/v1',
    kind: 'TokenReview',
    metadata: {},
    spec: { token, audiences },
    status: store.tokens.review(token, audiences),
  });
}

const TOKEN_REQUEST = /^\/api\/v1\/namespaces\/([^/]+)\/serviceaccounts\/([^/]+)\/token\/?$/;

/**
 * POST a TokenRequest (the serviceaccounts/token subresource), as kubelet does for a projected
 * token: bound to a pod, which must exist with that uid and run as that service account; the
 * token names the pod's node. The sim has no ServiceAccount objects, so the account itself is
 * not looked up.
 */
async function tokenRequest(
  store: ApiStore,
  req: IncomingMessage,
  res: ServerResponse,
  method: string,
  namespace: string,
  serviceAccount: string,
): Promise<void> {
  if (method !== 'POST')
    throw new KubeApiError(405, 'MethodNotAllowed', `${method} is not supported on serviceaccounts/token`);
  const invalid = (what: string): never => {
    throw new KubeApiError(422, 'Invalid', `TokenRequest.authentication.k8s.io is invalid: ${what}`);
  };
  const body = (await readJson(req)) as {
    spec?: {
      audiences?: unknown;
      expirationSeconds?: unknown;
      boundObjectRef?: { kind?: unknown; name?: unknown; uid?: unknown };
    };
  } | null;
  const spec = body?.spec ?? {};
  const audiences = spec.audiences ?? [];
  if (!Array.isArray(audiences) || !audiences.every((a): a is string => typeof a === 'string'))
    invalid('spec.audiences: must be a list of strings');
  const ttl = spec.expirationSeconds ?? 3600;
  if (typeof ttl !== 'number' || !Number.isInteger(ttl)) invalid('spec.expirationSeconds: must be an integer');
  const ref = spec.boundObjectRef;
  if (!ref || ref.kind !== 'Pod' || typeof ref.name !== 'string')
    invalid('spec.boundObjectRef: the sim binds tokens to a Pod (kind Pod, name, uid)');
  const pod = store.list('Pod', { namespace }).items.find((p) => p.metadata?.name === ref!.name);
  if (!pod) throw new KubeApiError(404, 'NotFound', `pods "${String(ref!.name)}" not found`);
  if (ref!.uid !== undefined && ref!.uid !== pod.metadata?.uid)
    invalid(
      `spec.boundObjectRef.uid: the UID in the bound object reference (${String(ref!.uid)}) does not match the pod's (${pod.metadata?.uid})`,
    );
  if ((pod.spec?.serviceAccountName ?? 'default') !== serviceAccount)
    invalid(
      `spec.boundObjectRef: pod ${String(ref!.name)} runs as service account ${pod.spec?.serviceAccountName ?? 'default'}, not ${serviceAccount}`,
    );
  let token: string;
  try {
    token = store.tokens.issue({
      namespace,
      serviceAccount,
      pod: {
        name: ref!.name as string,
        uid: pod.metadata!.uid!,
        ...(pod.spec?.nodeName ? { node: pod.spec.nodeName } : {}),
      },
      audiences: audiences as string[],
      expirationSeconds: ttl as number,
    });
  } catch (e) {
    return invalid((e as Error).message);
  }
  return send(res, 201, {
    apiVersion: 'authentication.k8s.io/v1',
    kind: 'TokenRequest',
    metadata: { name: serviceAccount, namespace },
    spec: { audiences, expirationSeconds: ttl, boundObjectRef: ref },
    status: { token },
  });
}

async function handle(
  store: ApiStore,
  req: IncomingMessage,
  res: ServerResponse,
  watches: Set<{ watch: StoreWatch; res: ServerResponse }>,
): Promise<void> {
  const url = new URL(req.url ?? '/', 'http://127.0.0.1');
  const q = url.searchParams;
  const method = req.method ?? 'GET';
  const discovery = discover(url.pathname);
  if (discovery !== undefined && method === 'GET') return send(res, 200, discovery);
  if (url.pathname.replace(/\/+$/, '') === TOKEN_REVIEWS) return tokenReview(store, req, res, method);
  const tr = TOKEN_REQUEST.exec(url.pathname);
  if (tr) return tokenRequest(store, req, res, method, decodeURIComponent(tr[1]!), decodeURIComponent(tr[2]!));
  const route = parseRoute(url.pathname);
  if (!route) {
    throw new KubeApiError(
      404,
      'NotFound',
      `the server could not find the requested resource (${method} ${url.pathname}); the sim facade serves ${KINDS.map((k) => k.plural).join(', ')}`,
    );
  }
  const { info, namespace, name } = route;
  const kind = info.kind;
  if (name === undefined) {
    if (method === 'GET' && (q.get('watch') === '1' || q.get('watch') === 'true'))
      return watch(store, route, q, res, watches);
    if (method === 'GET') {
      const list = store.list(kind, {
        namespace,
        labelSelector: q.get('labelSelector') ?? undefined,
        fieldSelector: q.get('fieldSelector') ?? undefined,
      });
      return send(res, 200, {
        kind: `${kind}List`,
        apiVersion: apiVersionOf(info),
        metadata: { resourceVersion: list.resourceVersion },
        items: list.items,
      });
    }
    if (method === 'POST') {
      const body = (await readJson(req)) as KubeObjectOf<KubeKind>;
      return send(res, 201, store.create(kind, body, namespace));
    }
    throw new KubeApiError(405, 'MethodNotAllowed', `${method} is not supported on the ${info.plural} collection`);
  }
  switch (method) {
    case 'GET':
      return send(res, 200, store.get(kind, name, namespace));
    case 'PUT': {
      const body = (await readJson(req)) as KubeObjectOf<KubeKind>;
      if (body.metadata?.name !== undefined && body.metadata.name !== name) {
        throw new KubeApiError(
          400,
          'BadRequest',
          `the name of the object (${body.metadata.name}) does not match the name on the URL (${name})`,
        );
      }
      if (route.status) {
        // PUT /status: only .status of the body counts.
        const patch: MergePatch = { status: (body as { status?: unknown }).status ?? null };
        if (body.metadata?.resourceVersion) patch['metadata'] = { resourceVersion: body.metadata.resourceVersion };
        return send(res, 200, store.patch(kind, name, namespace, patch, 'status'));
      }
      return send(
        res,
        200,
        store.update(
          kind,
          { ...body, metadata: { ...body.metadata, name, namespace } } as KubeObjectOf<KubeKind>,
          namespace,
        ),
      );
    }
    case 'PATCH': {
      const type = (req.headers['content-type'] ?? '').split(';')[0]!.trim();
      if (type !== 'application/merge-patch+json' && type !== 'application/strategic-merge-patch+json') {
        throw new KubeApiError(
          415,
          'UnsupportedMediaType',
          `the sim facade supports merge patch only (application/merge-patch+json, strategic merge treated as merge); got "${type}"`,
        );
      }
      const body = await readJson(req);
      return send(
        res,
        200,
        store.patch(kind, name, namespace, body as MergePatch, route.status ? 'status' : undefined),
      );
    }
    case 'DELETE': {
      const gone = store.delete(kind, name, namespace);
      return send(res, 200, gone);
    }
    default:
      throw new KubeApiError(405, 'MethodNotAllowed', `${method} is not supported on ${info.plural}/${name}`);
  }
}

function watch(
  store: ApiStore,
  route: Route,
  q: URLSearchParams,
  res: ServerResponse,
  watches: Set<{ watch: StoreWatch; res: ServerResponse }>,
): void {
  // The entry exists only once the store accepted the watch; `end` may run before that never.
  const holder: { entry?: { watch: StoreWatch; res: ServerResponse } } = {};
  const end = (): void => {
    if (holder.entry) watches.delete(holder.entry);
    if (!res.writableEnded) res.end();
  };
  // Faults and bad selectors throw here, before any header: an HTTP error status, as the API server does.
  const w = store.watch(
    route.info.kind,
    {
      namespace: route.namespace,
      labelSelector: q.get('labelSelector') ?? undefined,
      fieldSelector: q.get('fieldSelector') ?? undefined,
      resourceVersion: q.get('resourceVersion') ?? undefined,
      allowWatchBookmarks: q.get('allowWatchBookmarks') === 'true' || q.get('allowWatchBookmarks') === '1',
    },
    (ev) => {
      if (!res.writableEnded) res.write(`${JSON.stringify({ type: ev.type, object: ev.object })}\n`);
    },
    end,
  );
  const entry = { watch: w, res };
  holder.entry = entry;
  watches.add(entry);
  res.writeHead(200, {
    'Content-Type': 'application/json',
    'Transfer-Encoding': 'chunked',
    'Cache-Control': 'no-cache',
  });
  res.flushHeaders();
  // A client that goes away stops the store watch. (Not req 'close': that fires once the
  // request body is read, long before the client leaves.)
  res.on('close', () => {
    w.stop();
    watches.delete(entry);
  });
}

function discover(pathname: string): unknown {
  const p = pathname.replace(/\/+$/, '');
  const gvs = groupVersions();
  if (p === '/version')
    return { major: '1', minor: '34', gitVersion: 'v1.34.0-ambient-lab-sim', platform: 'linux/amd64' };
  if (p === '/api') return { kind: 'APIVersions', versions: ['v1'], serverAddressByClientCIDRs: [] };
  if (p === '/apis') {
    const groups = [...new Set(KINDS.filter((k) => k.group !== '').map((k) => k.group))].map((g) => {
      const versions = [...gvs.keys()]
        .filter((gv) => gv.startsWith(`${g}/`))
        .map((gv) => ({ groupVersion: gv, version: gv.split('/')[1] }));
      return { name: g, versions, preferredVersion: versions[0] };
    });
    return { kind: 'APIGroupList', apiVersion: 'v1', groups };
  }
  const m = /^\/(?:api\/(v1)|apis\/([^/]+)\/([^/]+))$/.exec(p);
  if (!m) return undefined;
  const gv = m[1] ?? `${m[2]}/${m[3]}`;
  const kinds = gvs.get(gv);
  if (!kinds) return undefined;
  const resources = kinds.flatMap((k) => {
    const verbs = ['create', 'delete', 'get', 'list', 'patch', 'update', 'watch'];
    const main = { name: k.plural, singularName: k.kind.toLowerCase(), namespaced: k.namespaced, kind: k.kind, verbs };
    return k.statusSubresource
      ? [
          main,
          {
            name: `${k.plural}/status`,
            singularName: '',
            namespaced: k.namespaced,
            kind: k.kind,
            verbs: ['get', 'patch', 'update'],
          },
        ]
      : [main];
  });
  return { kind: 'APIResourceList', apiVersion: 'v1', groupVersion: gv, resources };
}

/**
 * A kubeconfig for the facade. `insecure-skip-tls-verify: true` is required: client-node 1.4.0
 * refuses an http: server without it ("HTTP protocol is not allowed when skipTLSVerify is not
 * set or false"). Written to `path` when given; the YAML text is returned either way.
 */
export function facadeKubeconfig(url: string, path?: string): string {
  const text = stringify({
    apiVersion: 'v1',
    kind: 'Config',
    clusters: [{ name: 'ambient-lab-sim', cluster: { server: url, 'insecure-skip-tls-verify': true } }],
    users: [{ name: 'ambient-lab-sim', user: { token: 'sim' } }],
    contexts: [
      {
        name: 'ambient-lab-sim',
        context: { cluster: 'ambient-lab-sim', user: 'ambient-lab-sim', namespace: 'default' },
      },
    ],
    'current-context': 'ambient-lab-sim',
  });
  if (path) writeFileSync(path, text, { mode: 0o600 });
  return text;
}
