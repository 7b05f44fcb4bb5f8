/**
 * The control socket of a cluster made by `ambient-lab up`: the daemon that made the cluster
 * (lab-daemon-main.ts) keeps it and serves these requests on RUNDIR/cluster.sock (HTTP over a
 * Unix socket, mode 0600: root only), so any later CLI process can drive it — add pods (which
 * go through the CNI chain and enrollment like the first ones), label, annotate, apply
 * policies, stop or restart components, reboot a node, break the API for the CNI plugin, and
 * take the cluster down.
 *
 *   POST /   {"op": ..., ...}  →  200 {"ok": true, "result": ...}
 *                               400 {"ok": false, "error": "..."}   the request is invalid
 *                               500 {"ok": false, "error": "..."}   the cluster could not do it
 *
 * parseLabRequest checks every field (names as Kubernetes checks them, labels, ports, uids,
 * capabilities): the CLI calls it before contacting the daemon (a bad flag exits 2 before any
 * work), and the daemon again on what arrives.
 */
import * as fs from 'node:fs';
import * as http from 'node:http';
import * as path from 'node:path';
import { DNS1123_LABEL, DNS1123_SUBDOMAIN } from '../../impl/api/dns-names.js';

const CONTROL_SOCKET = 'cluster.sock';

export function controlSocketOf(runDir: string): string {
  return path.join(runDir, CONTROL_SOCKET);
}

/** What `pod add` creates: an app container listening on its ports, as the lab's other pods. */
interface PodAddSpec {
  readonly namespace: string;
  readonly name: string;
  /** Absent: the first node. */
  readonly node?: string;
  readonly uid: number;
  readonly caps: readonly AppCap[];
  readonly labels: Readonly<Record<string, string>>;
  readonly annotations: Readonly<Record<string, string>>;
  readonly hostNetwork: boolean;
  readonly tcpPorts: readonly number[];
  readonly udpPorts: readonly number[];
  readonly probePorts: readonly number[];
}

/** The capabilities a lab pod's app can be given (the ones the attacks use). */
export const APP_CAPS = ['NET_ADMIN', 'NET_RAW'] as const;
type AppCap = (typeof APP_CAPS)[number];

export type LabRequest =
  | { readonly op: 'ping' }
  | { readonly op: 'pod-add'; readonly pod: PodAddSpec }
  | { readonly op: 'pod-delete'; readonly namespace: string; readonly name: string }
  | {
      readonly op: 'label' | 'annotate';
      readonly kind: 'pod' | 'namespace';
      readonly namespace?: string;
      readonly name: string;
      /** null removes the key. */
      readonly values: Readonly<Record<string, string | null>>;
    }
  | { readonly op: 'policy-apply'; readonly policy: Readonly<Record<string, unknown>> }
  | { readonly op: 'policy-delete'; readonly namespace: string; readonly name: string }
  | {
      readonly op: 'component';
      readonly action: 'stop' | 'start' | 'restart';
      readonly component: 'agent' | 'proxy';
      readonly node: string;
    }
  | { readonly op: 'node-reboot'; readonly node: string }
  | {
      readonly op: 'api-fault';
      readonly failing: boolean;
      /** unreachable (default): every call refused; error: every call answers 500. */
      readonly mode?: 'unreachable' | 'error';
      readonly node?: string;
    }
  | { readonly op: 'down' };

export class LabRequestError extends Error {
  override readonly name = 'LabRequestError';
}

type Json = Record<string, unknown>;
const isObj = (v: unknown): v is Json => typeof v === 'object' && v !== null && !Array.isArray(v);
const fail = (msg: string): never => {
  throw new LabRequestError(msg);
};

/** A label or annotation key: [prefix/]name, as Kubernetes accepts it. */
function checkKey(key: string, what: string): string {
  const slash = key.lastIndexOf('/');
  const prefix = slash >= 0 ? key.slice(0, slash) : undefined;
  const name = slash >= 0 ? key.slice(slash + 1) : key;
  if (prefix !== undefined && !DNS1123_SUBDOMAIN.test(prefix))
    fail(`${what} key ${JSON.stringify(key)}: the prefix must be a DNS subdomain (lower case, digits, '-', '.')`);
  if (!/^[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?$/.test(name))
    fail(
      `${what} key ${JSON.stringify(key)}: the name must be 1-63 letters, digits, '-', '_' or '.', beginning and ending with a letter or digit`,
    );
  return key;
}

function checkLabelValue(key: string, v: string): string {
  if (v !== '' && !/^[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?$/.test(v))
    fail(`label ${key}=${JSON.stringify(v)}: a value is empty or 1-63 letters, digits, '-', '_' or '.'`);
  return v;
}

function checkName(v: unknown, what: string, re: RegExp = DNS1123_SUBDOMAIN): string {
  if (typeof v !== 'string' || !re.test(v))
    return fail(
      `${what} ${JSON.stringify(v)}: not a Kubernetes name (lower-case letters, digits, '-'${re === DNS1123_LABEL ? '' : " and '.'"})`,
    );
  return v;
}

function int(v: unknown, what: string, min: number, max: number): number {
  if (typeof v !== 'number' || !Number.isInteger(v) || v < min || v > max)
    return fail(`${what} ${JSON.stringify(v)}: expected an integer ${min}..${max}`);
  return v;
}

function ports(v: unknown, what: string): number[] {
  if (!Array.isArray(v)) return fail(`${what}: expected a list of ports`);
  return v.map((p) => int(p, what, 1, 65535));
}

function values(v: unknown, what: 'label' | 'annotation', allowNull: boolean): Record<string, string | null> {
  if (!isObj(v)) return fail(`${what}s: expected an object`);
  const out: Record<string, string | null> = {};
  for (const [k, x] of Object.entries(v)) {
    checkKey(k, what);
    if (x === null && allowNull) out[k] = null;
    else if (typeof x !== 'string') fail(`${what} ${k}: expected a string${allowNull ? ' or null (remove)' : ''}`);
    else out[k] = what === 'label' ? checkLabelValue(k, x) : x;
  }
  return out;
}

function podSpec(v: unknown): PodAddSpec {
  if (!isObj(v)) return fail('pod: expected an object');
  const caps = Array.isArray(v['caps']) ? v['caps'] : fail('caps: expected a list');
  for (const c of caps)
    if (!(APP_CAPS as readonly unknown[]).includes(c))
      fail(`capability ${JSON.stringify(c)}: accepted: ${APP_CAPS.join(', ')} (or none)`);
  return {
    namespace: checkName(v['namespace'], 'namespace', DNS1123_LABEL),
    name: checkName(v['name'], 'pod name'),
    ...(v['node'] !== undefined ? { node: checkName(v['node'], 'node') } : {}),
    uid: int(v['uid'], 'uid', 0, 65534),
    caps: caps as AppCap[],
    labels: values(v['labels'] ?? {}, 'label', false) as Record<string, string>,
    annotations: values(v['annotations'] ?? {}, 'annotation', false) as Record<string, string>,
    hostNetwork: v['hostNetwork'] === true,
    tcpPorts: ports(v['tcpPorts'] ?? [], 'tcp port'),
    udpPorts: ports(v['udpPorts'] ?? [], 'udp port'),
    probePorts: ports(v['probePorts'] ?? [], 'probe port'),
  };
}

/** Check a request (from the CLI's flags, or as it arrives at the daemon); throws LabRequestError. */
export function parseLabRequest(x: unknown): LabRequest {
  if (!isObj(x)) return fail('request: expected a JSON object');
  const op = x['op'];
  switch (op) {
    case 'ping':
    case 'down':
      return { op };
    case 'pod-add':
      return { op, pod: podSpec(x['pod']) };
    case 'pod-delete':
    case 'policy-delete':
      return {
        op,
        namespace: checkName(x['namespace'], 'namespace', DNS1123_LABEL),
        name: checkName(x['name'], op === 'pod-delete' ? 'pod name' : 'policy name'),
      };
    case 'label':
    case 'annotate': {
      const kind = x['kind'] === 'pod' || x['kind'] === 'namespace' ? x['kind'] : fail('kind: pod or namespace');
      return {
        op,
        kind,
        ...(kind === 'pod' ? { namespace: checkName(x['namespace'], 'namespace', DNS1123_LABEL) } : {}),
        name: checkName(
          x['name'],
          kind === 'pod' ? 'pod name' : 'namespace',
          kind === 'pod' ? DNS1123_SUBDOMAIN : DNS1123_LABEL,
        ),
        values: values(x['values'], op === 'label' ? 'label' : 'annotation', true),
      };
    }
    case 'policy-apply': {
      const p = x['policy'];
      if (!isObj(p)) return fail('policy: expected an object');
      if (p['kind'] !== 'AuthorizationPolicy' || p['apiVersion'] !== 'security.istio.io/v1')
        fail(
          `policy: expected apiVersion security.istio.io/v1 and kind AuthorizationPolicy, got ${JSON.stringify(p['apiVersion'])} ${JSON.stringify(p['kind'])}`,
        );
      const meta = isObj(p['metadata']) ? p['metadata'] : fail('policy: metadata is required');
      checkName(meta['name'], 'policy name');
      checkName(meta['namespace'], 'policy namespace', DNS1123_LABEL);
      return { op, policy: p };
    }
    case 'component': {
      const action = ['stop', 'start', 'restart'].includes(x['action'] as string)
        ? (x['action'] as 'stop' | 'start' | 'restart')
        : fail(`action ${JSON.stringify(x['action'])}: stop, start or restart`);
      const component =
        x['component'] === 'agent' || x['component'] === 'proxy'
          ? x['component']
          : fail(`component ${JSON.stringify(x['component'])}: agent or proxy`);
      return { op, action, component, node: checkName(x['node'], 'node') };
    }
    case 'node-reboot':
      return { op, node: checkName(x['node'], 'node') };
    case 'api-fault':
      if (typeof x['failing'] !== 'boolean') fail('failing: expected true or false');
      if (x['mode'] !== undefined && x['mode'] !== 'unreachable' && x['mode'] !== 'error')
        fail(`mode ${JSON.stringify(x['mode'])}: unreachable or error`);
      return {
        op,
        failing: x['failing'] as boolean,
        ...(x['mode'] !== undefined ? { mode: x['mode'] as 'unreachable' | 'error' } : {}),
        ...(x['node'] !== undefined ? { node: checkName(x['node'], 'node') } : {}),
      };
    default:
      return fail(
        `op ${JSON.stringify(op)}: unknown; known: ping, pod-add, pod-delete, label, annotate, policy-apply, policy-delete, component, node-reboot, api-fault, down`,
      );
  }
}

/** The daemon is not there (no socket, or nothing answers on it). */
export class LabDaemonUnavailable extends Error {
  override readonly name = 'LabDaemonUnavailable';
}

/** Send one request; resolves with the result, throws LabRequestError (400) or Error (500, transport). */
export function labControl(socketPath: string, req: LabRequest, timeoutMs = 600_000): Promise<unknown> {
  return new Promise((resolve, reject) => {
    if (!fs.existsSync(socketPath)) {
      reject(new LabDaemonUnavailable(`no control socket at ${socketPath}`));
      return;
    }
    const body = JSON.stringify(req);
    const r = http.request(
      {
        socketPath,
        method: 'POST',
        path: '/',
        headers: { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body) },
        timeout: timeoutMs,
      },
      (res) => {
        let text = '';
        res.setEncoding('utf8');
        res.on('data', (d: string) => (text += d));
        res.on('end', () => {
          let answer: { ok?: boolean; result?: unknown; error?: string };
          try {
            answer = JSON.parse(text) as typeof answer;
          } catch {
            reject(
              new Error(
                `the cluster's control socket answered ${res.statusCode} with something not JSON: ${text.slice(0, 200)}`,
              ),
            );
            return;
          }
          if (answer.ok === true) resolve(answer.result);
          else if (res.statusCode === 400) reject(new LabRequestError(answer.error ?? 'invalid request'));
          else reject(new Error(answer.error ?? `the cluster answered ${res.statusCode}`));
        });
      },
    );
    r.on('timeout', () => r.destroy(new Error(`no answer from the cluster's control socket within ${timeoutMs} ms`)));
    r.on('error', (e: NodeJS.ErrnoException) =>
      reject(
        e.code === 'ECONNREFUSED' || e.code === 'ENOENT'
          ? new LabDaemonUnavailable(`nothing answers on ${socketPath} (${e.code})`)
          : e,
      ),
    );
    r.end(body);
  });
}

/** Serve `handle` on `socketPath` (mode 0600); bad requests are 400, failures 500 with the message. */
export async function serveLabControl(
  socketPath: string,
  handle: (req: LabRequest) => Promise<unknown>,
): Promise<{ close(): Promise<void> }> {
  const server = http.createServer((req, res) => {
    const send = (code: number, v: unknown): void => {
      const text = JSON.stringify(v);
      res.writeHead(code, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(text) });
      res.end(text);
    };
    let body = '';
    req.setEncoding('utf8');
    req.on('data', (d: string) => (body += d));
    req.on('end', () => {
      void (async () => {
        let parsed: LabRequest;
        try {
          parsed = parseLabRequest(JSON.parse(body));
        } catch (e) {
          return send(400, { ok: false, error: (e as Error).message });
        }
        try {
          send(200, { ok: true, result: (await handle(parsed)) ?? null });
        } catch (e) {
          send(e instanceof LabRequestError ? 400 : 500, { ok: false, error: (e as Error).message });
        }
      })();
    });
  });
  fs.rmSync(socketPath, { force: true });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(socketPath, () => {
      fs.chmodSync(socketPath, 0o600);
      resolve();
    });
  });
  return {
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}
