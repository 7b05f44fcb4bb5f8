/**
 * A minimal Kubernetes GET client for the CNI plugin, which runs once per pod sandbox and must
 * start fast: loading @kubernetes/client-node costs over a second of start-up here, for two GET
 * requests. It reads a kubeconfig (current context: server, CA, client certificate or token,
 * insecure-skip-tls-verify) and serves `get` for Pods and Namespaces only.
 */
import { readFileSync } from 'node:fs';
import * as http from 'node:http';
import * as https from 'node:https';
import { parse as parseYaml } from 'yaml';
import { KubeApiError, type KubeApi, type KubeKind, type KubeObjectOf } from '../host/kube.js';

type KubeReader = Pick<KubeApi, 'get'>;

interface Conn {
  readonly server: URL;
  readonly ca: Buffer | undefined;
  readonly cert: Buffer | undefined;
  readonly key: Buffer | undefined;
  readonly token: string | undefined;
  readonly insecure: boolean;
}

type Named<T> = { name?: string } & T;

function pickNamed<T>(list: unknown, name: string, what: string, file: string): T {
  const found = Array.isArray(list) ? (list as Named<T>[]).find((x) => x && x.name === name) : undefined;
  if (!found) throw new Error(`kubeconfig ${file}: ${what} ${JSON.stringify(name)} not found`);
  return found;
}

function data(inline: unknown, path: unknown, what: string, file: string): Buffer | undefined {
  if (typeof inline === 'string') return Buffer.from(inline, 'base64');
  if (typeof path === 'string') {
    try {
      return readFileSync(path);
    } catch (e) {
      throw new Error(
        `kubeconfig ${file}: cannot read ${what} ${path}: ${(e as NodeJS.ErrnoException).code ?? (e as Error).message}`,
        { cause: e },
      );
    }
  }
  return undefined;
}

function readKubeconfig(file: string): Conn {
  const doc = parseYaml(readFileSync(file, 'utf8')) as Record<string, unknown> | null;
  if (!doc || typeof doc !== 'object') throw new Error(`kubeconfig ${file}: not a YAML mapping`);
  const ctxName = doc['current-context'];
  if (typeof ctxName !== 'string') throw new Error(`kubeconfig ${file}: no current-context`);
  const ctx =
    pickNamed<{ context?: { cluster?: string; user?: string } }>(doc['contexts'], ctxName, 'context', file).context ??
    {};
  const cluster =
    pickNamed<{ cluster?: Record<string, unknown> }>(doc['clusters'], ctx.cluster ?? '', 'cluster', file).cluster ?? {};
  const user = ctx.user
    ? (pickNamed<{ user?: Record<string, unknown> }>(doc['users'], ctx.user, 'user', file).user ?? {})
    : {};
  const server = cluster['server'];
  if (typeof server !== 'string') throw new Error(`kubeconfig ${file}: cluster ${ctx.cluster} has no server`);
  let token = typeof user['token'] === 'string' ? user['token'] : undefined;
  if (!token && typeof user['tokenFile'] === 'string') token = readFileSync(user['tokenFile'], 'utf8').trim();
  return {
    server: new URL(server),
    ca: data(cluster['certificate-authority-data'], cluster['certificate-authority'], 'certificate authority', file),
    cert: data(user['client-certificate-data'], user['client-certificate'], 'client certificate', file),
    key: data(user['client-key-data'], user['client-key'], 'client key', file),
    token,
    insecure: cluster['insecure-skip-tls-verify'] === true,
  };
}

export class LiteKubeReader implements KubeReader {
  private readonly conn: Conn;

  constructor(
    kubeconfig: string,
    private readonly timeoutMs = 5000,
  ) {
    this.conn = readKubeconfig(kubeconfig);
  }

  get<K extends KubeKind>(kind: K, name: string, namespace?: string): Promise<KubeObjectOf<K>> {
    const enc = encodeURIComponent;
    let p: string;
    if (kind === 'Pod') {
      if (!namespace) return Promise.reject(new Error('get Pod needs a namespace'));
      p = `/api/v1/namespaces/${enc(namespace)}/pods/${enc(name)}`;
    } else if (kind === 'Namespace') p = `/api/v1/namespaces/${enc(name)}`;
    else return Promise.reject(new Error(`LiteKubeReader serves only Pods and Namespaces, not ${kind}`));
    const c = this.conn;
    const url = new URL(p, c.server);
    const secure = url.protocol === 'https:';
    const mod = secure ? https : http;
    const headers: Record<string, string> = { accept: 'application/json' };
    if (c.token) headers['authorization'] = `Bearer ${c.token}`;
    return new Promise((resolve, reject) => {
      const req = mod.request(
        url,
        {
          method: 'GET',
          headers,
          timeout: this.timeoutMs,
          ...(secure ? { ca: c.ca, cert: c.cert, key: c.key, rejectUnauthorized: !c.insecure } : {}),
        },
        (res) => {
          const chunks: Buffer[] = [];
          res.on('data', (d: Buffer) => chunks.push(d));
          res.on('end', () => {
            const text = Buffer.concat(chunks).toString('utf8');
            let body: Record<string, unknown> = {};
            try {
              body = JSON.parse(text) as Record<string, unknown>;
            } catch {
              // non-JSON error bodies are reported by status below
            }
            const status = res.statusCode ?? 0;
            if (status >= 200 && status < 300) resolve(body as KubeObjectOf<K>);
            else
              reject(
                new KubeApiError(
                  status,
                  typeof body['reason'] === 'string' ? body['reason'] : 'Unknown',
                  typeof body['message'] === 'string' ? body['message'] : `GET ${url.pathname}: HTTP ${status}`,
                ),
              );
          });
        },
      );
      req.on('timeout', () => req.destroy(new Error(`GET ${url.pathname}: no answer within ${this.timeoutMs} ms`)));
      req.on('error', (e) => reject(new KubeApiError(503, 'ServiceUnavailable', `GET ${url.href}: ${e.message}`)));
      req.end();
    });
  }
}
