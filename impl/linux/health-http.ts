/**
 * The components' small HTTP endpoint (in the node's host netns, like upstream's readiness port):
 *   GET /healthz — 200 while the process is live
 *   GET /readyz  — 200 when ready, 503 otherwise, with the detail as text
 *   GET /metrics — Prometheus text
 *   GET /status  — JSON state for `ambient-lab status` and the netns world's observations
 * and, on the Unix status socket only (mode 0600: root on the node), the agent's operator action:
 *   POST /repair — run a repair pass now; answers when it has finished, with the passes begun and
 *                  finished so far (a harness waiting for "a pass after my change" need not wait
 *                  out the repair interval). Never on the TCP port, which the host network reaches.
 */
import * as fs from 'node:fs';
import * as http from 'node:http';
import type { AddressInfo } from 'node:net';

export interface HealthSource {
  live(): boolean;
  ready(): { readonly ready: boolean; readonly detail: string };
  metrics(): Promise<{ readonly contentType: string; readonly text: string }>;
  status(): unknown;
}

/** Actions served only on a Unix socket (see the file comment). */
interface AdminActions {
  repair(): Promise<unknown>;
}

interface HealthServer {
  /** TCP port, or 0 for a Unix socket. */
  readonly port: number;
  close(): Promise<void>;
}

/**
 * Serve on `host:port`, or on a Unix socket path when `host` starts with '/' (then `port` is
 * ignored); `admin` only on a Unix socket.
 */
export async function serveHealth(
  host: string,
  port: number,
  src: HealthSource,
  admin?: AdminActions,
): Promise<HealthServer> {
  if (admin && !host.startsWith('/'))
    throw new Error(`health endpoint: admin actions are served on a Unix socket only, not on ${host}:${port}`);
  const server = http.createServer((req, res) => {
    const send = (code: number, type: string, body: string): void => {
      res.writeHead(code, { 'content-type': type, 'content-length': Buffer.byteLength(body) });
      res.end(body);
    };
    void (async () => {
      try {
        if (admin && req.method === 'POST' && req.url === '/repair')
          return send(200, 'application/json', JSON.stringify(await admin.repair()));
        if (req.method !== 'GET') return send(405, 'text/plain', `GET only${admin ? ' (and POST /repair)' : ''}\n`);
        switch (req.url) {
          case '/healthz':
            return src.live() ? send(200, 'text/plain', 'ok\n') : send(503, 'text/plain', 'not live\n');
          case '/readyz': {
            const r = src.ready();
            return send(r.ready ? 200 : 503, 'text/plain', `${r.detail}\n`);
          }
          case '/metrics': {
            const m = await src.metrics();
            return send(200, m.contentType, m.text);
          }
          case '/status':
            return send(200, 'application/json', JSON.stringify(src.status()));
          default:
            return send(404, 'text/plain', 'endpoints: /healthz /readyz /metrics /status\n');
        }
      } catch (e) {
        send(500, 'text/plain', `${e instanceof Error ? e.message : String(e)}\n`);
      }
    })();
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', (e) => reject(new Error(`health endpoint: cannot listen on ${host}:${port}: ${e.message}`)));
    if (host.startsWith('/')) {
      fs.rmSync(host, { force: true });
      server.listen(host, () => {
        fs.chmodSync(host, 0o600);
        resolve();
      });
    } else server.listen(port, host, () => resolve());
  });
  return {
    port: host.startsWith('/') ? 0 : (server.address() as AddressInfo).port,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}
