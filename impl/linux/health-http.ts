/**
 * The components' small HTTP endpoint (in the node's host netns, like upstream's readiness port):
 *   GET /healthz — 200 while the process is live
 *   GET /readyz  — 200 when ready, 503 otherwise, with the detail as text
 *   GET /metrics — Prometheus text
 *   GET /status  — JSON state for `ambient-lab status` and the netns world's observations
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

interface HealthServer {
  /** TCP port, or 0 for a Unix socket. */
  readonly port: number;
  close(): Promise<void>;
}

/** Serve on `host:port`, or on a Unix socket path when `host` starts with '/' (then `port` is ignored). */
export async function serveHealth(host: string, port: number, src: HealthSource): Promise<HealthServer> {
  const server = http.createServer((req, res) => {
    const send = (code: number, type: string, body: string): void => {
      res.writeHead(code, { 'content-type': type, 'content-length': Buffer.byteLength(body) });
      res.end(body);
    };
    void (async () => {
      try {
        if (req.method !== 'GET') return send(405, 'text/plain', 'GET only\n');
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
