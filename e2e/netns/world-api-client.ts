/**
 * The harness's client of the netns world's API process: JSON over HTTP on its Unix sockets
 * (kube-api-process.ts). Paths are the Kubernetes REST paths; errors carry the Status message.
 */
import * as http from 'node:http';
import type { KubeKind, KubeObjectOf, MergePatch } from '../../impl/host/kube.js';
import { KIND_INFO, apiVersionOf } from '../../impl/host/kube.js';

export class WorldApiError extends Error {
  constructor(
    readonly code: number,
    message: string,
  ) {
    super(message);
  }
}

export function request(
  socketPath: string,
  method: string,
  path: string,
  body?: unknown,
  contentType = 'application/json',
): Promise<unknown> {
  const text = body === undefined ? undefined : JSON.stringify(body);
  return new Promise((resolve, reject) => {
    const req = http.request(
      {
        socketPath,
        method,
        path,
        headers: text ? { 'content-type': contentType, 'content-length': Buffer.byteLength(text) } : {},
        timeout: 15_000,
      },
      (res) => {
        let data = '';
        res.setEncoding('utf8');
        res.on('data', (d: string) => {
          data += d;
        });
        res.on('end', () => {
          let parsed: unknown;
          try {
            parsed = data === '' ? undefined : JSON.parse(data);
          } catch {
            parsed = data;
          }
          const code = res.statusCode ?? 0;
          if (code >= 200 && code < 300) resolve(parsed);
          else
            reject(
              new WorldApiError(
                code,
                `${method} ${path} → ${code}: ${(parsed as { message?: string } | undefined)?.message ?? data}`,
              ),
            );
        });
      },
    );
    req.on('timeout', () => req.destroy(new Error(`${method} ${path}: no answer from the API process within 15 s`)));
    req.on('error', (e) =>
      reject(new Error(`${method} ${path} via ${socketPath}: ${e.message}; is the cluster's API process running?`)),
    );
    req.end(text);
  });
}

function pathOf(kind: KubeKind, namespace: string | undefined, name?: string, status = false): string {
  const info = KIND_INFO[kind];
  const gv = apiVersionOf(info);
  const base = info.group === '' ? `/api/${gv}` : `/apis/${gv}`;
  const ns = info.namespaced && namespace !== undefined ? `/namespaces/${encodeURIComponent(namespace)}` : '';
  return `${base}${ns}/${info.plural}${name !== undefined ? `/${encodeURIComponent(name)}` : ''}${status ? '/status' : ''}`;
}

export class WorldApi {
  constructor(
    readonly apiSocket: string,
    readonly controlSocket: string,
  ) {}

  create<K extends KubeKind>(kind: K, obj: KubeObjectOf<K>): Promise<KubeObjectOf<K>> {
    const ns = (obj as { metadata?: { namespace?: string } }).metadata?.namespace;
    return request(this.apiSocket, 'POST', pathOf(kind, ns), {
      apiVersion: apiVersionOf(KIND_INFO[kind]),
      kind,
      ...obj,
    }) as Promise<KubeObjectOf<K>>;
  }

  /** A TokenRequest (serviceaccounts/token), as kubelet asks for a projected token bound to a pod. */
  async requestToken(
    namespace: string,
    serviceAccount: string,
    pod: { name: string; uid: string },
    audience: string,
    expirationSeconds: number,
  ): Promise<string> {
    const r = (await request(
      this.apiSocket,
      'POST',
      `/api/v1/namespaces/${encodeURIComponent(namespace)}/serviceaccounts/${encodeURIComponent(serviceAccount)}/token`,
      {
        apiVersion: 'authentication.k8s.io/v1',
        kind: 'TokenRequest',
        spec: { audiences: [audience], expirationSeconds, boundObjectRef: { apiVersion: 'v1', kind: 'Pod', ...pod } },
      },
    )) as { status?: { token?: unknown } };
    const token = r.status?.token;
    if (typeof token !== 'string' || token === '')
      throw new Error(`TokenRequest for ${namespace}/${serviceAccount} answered without status.token`);
    return token;
  }

  get<K extends KubeKind>(kind: K, name: string, namespace?: string): Promise<KubeObjectOf<K>> {
    return request(this.apiSocket, 'GET', pathOf(kind, namespace, name)) as Promise<KubeObjectOf<K>>;
  }

  async list<K extends KubeKind>(kind: K, namespace?: string): Promise<KubeObjectOf<K>[]> {
    const r = (await request(this.apiSocket, 'GET', pathOf(kind, namespace))) as
      { items?: KubeObjectOf<K>[] } | undefined;
    // A list without items is not "none": the answer is not a list.
    if (!Array.isArray(r?.items))
      throw new Error(
        `GET ${pathOf(kind, namespace)}: the API process answered without an items list: ${JSON.stringify(r).slice(0, 200)}`,
      );
    return r.items;
  }

  patch<K extends KubeKind>(
    kind: K,
    name: string,
    namespace: string | undefined,
    patch: MergePatch,
    status = false,
  ): Promise<KubeObjectOf<K>> {
    return request(
      this.apiSocket,
      'PATCH',
      pathOf(kind, namespace, name, status),
      patch,
      'application/merge-patch+json',
    ) as Promise<KubeObjectOf<K>>;
  }

  replace<K extends KubeKind>(kind: K, obj: KubeObjectOf<K>): Promise<KubeObjectOf<K>> {
    const m = (obj as { metadata?: { namespace?: string; name?: string } }).metadata;
    return request(this.apiSocket, 'PUT', pathOf(kind, m?.namespace, m?.name), {
      apiVersion: apiVersionOf(KIND_INFO[kind]),
      kind,
      ...obj,
    }) as Promise<KubeObjectOf<K>>;
  }

  async delete(kind: KubeKind, name: string, namespace?: string): Promise<void> {
    await request(this.apiSocket, 'DELETE', pathOf(kind, namespace, name));
  }

  async dropWatches(): Promise<number> {
    const r = (await request(this.controlSocket, 'POST', '/drop-watches')) as { dropped: number };
    return r.dropped;
  }
}
