/**
 * The components' small HTTP endpoints: a fixed table of routes served on a TCP address or a
 * Unix socket. Each route says how far it may be reached, and the server refuses to start when
 * its address is farther than that (a mistake in a flag must not publish a pod list):
 *   public    — any address (metrics and readiness: Prometheus and the kubelet reach them over
 *               the node's network, as upstream's 15020 / 15021 / 15014 / 8000);
 *   loopback  — 127.0.0.0/8, ::1 or a Unix socket (the proxy's admin port, as upstream's
 *               localhost:15000: workload identities, config dump, log level);
 *   unix      — a Unix socket only (mode 0600: root on the node), for operator actions such as
 *               the agent's POST /repair.
 * Unknown paths answer 404 with the list of this server's paths; a known path with another
 * method answers 405 naming the allowed ones.
 */
import * as fs from 'node:fs';
import * as http from 'node:http';
import { isIP, type AddressInfo } from 'node:net';

type Reach = 'public' | 'loopback' | 'unix';

export interface Reply {
  readonly code: number;
  readonly type: string;
  readonly body: string;
}

export interface Route {
  readonly method: 'GET' | 'POST';
  readonly path: string;
  readonly reach: Reach;
  handle(query: URLSearchParams): Reply | Promise<Reply>;
}

/** A TCP address, or a Unix socket path (made mode 0600). */
type Listen = { readonly host: string; readonly port: number } | { readonly socket: string };

interface EndpointServer {
  /** The TCP port (the bound one when 0 was asked), or 0 on a Unix socket. */
  readonly port: number;
  close(): Promise<void>;
}

export const text = (code: number, body: string): Reply => ({ code, type: 'text/plain; charset=utf-8', body });
/** `pretty`: indented, for what people read (a config dump). */
export const json = (value: unknown, pretty = false): Reply => ({
  code: 200,
  type: 'application/json',
  body: pretty ? `${JSON.stringify(value, null, 2)}\n` : JSON.stringify(value),
});

/** 127.0.0.0/8 or ::1 (and their IPv4-mapped form): reached only from this network namespace. */
export function isLoopbackHost(host: string): boolean {
  if (host === 'localhost') return true;
  const h = host.toLowerCase();
  if (isIP(h) === 4) return h.startsWith('127.');
  if (isIP(h) === 6) return h === '::1' || /^::ffff:127\./.test(h);
  return false;
}

function reachOf(listen: Listen): Reach {
  if ('socket' in listen) return 'unix';
  return isLoopbackHost(listen.host) ? 'loopback' : 'public';
}

const ORDER: Readonly<Record<Reach, number>> = { public: 0, loopback: 1, unix: 2 };

function where(listen: Listen): string {
  return 'socket' in listen ? listen.socket : `${listen.host}:${listen.port}`;
}

export async function serveEndpoints(name: string, listen: Listen, routes: readonly Route[]): Promise<EndpointServer> {
  const at = reachOf(listen);
  for (const r of routes)
    if (ORDER[at] < ORDER[r.reach])
      throw new Error(
        `${name}: ${r.method} ${r.path} may be served on ${r.reach === 'unix' ? 'a Unix socket' : 'a loopback address or a Unix socket'} only, not on ${where(listen)}`,
      );
  const paths = [...new Set(routes.map((r) => r.path))];
  const server = http.createServer((req, res) => {
    const send = (r: Reply): void => {
      res.writeHead(r.code, { 'content-type': r.type, 'content-length': Buffer.byteLength(r.body) });
      res.end(r.body);
    };
    void (async () => {
      try {
        const url = new URL(req.url ?? '/', 'http://endpoint');
        const forPath = routes.filter((r) => r.path === url.pathname);
        if (forPath.length === 0) return send(text(404, `${name}: no such path; paths: ${paths.join(' ')}\n`));
        const route = forPath.find((r) => r.method === req.method);
        if (!route)
          return send(text(405, `${name}: ${url.pathname} takes ${forPath.map((r) => r.method).join(', ')} only\n`));
        send(await route.handle(url.searchParams));
      } catch (e) {
        send(text(500, `${name}: ${e instanceof Error ? e.message : String(e)}\n`));
      }
    })();
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', (e) => reject(new Error(`${name}: cannot listen on ${where(listen)}: ${e.message}`)));
    if ('socket' in listen) {
      fs.rmSync(listen.socket, { force: true });
      server.listen(listen.socket, () => {
        fs.chmodSync(listen.socket, 0o600);
        resolve();
      });
    } else server.listen(listen.port, listen.host, () => resolve());
  });
  return {
    port: 'socket' in listen ? 0 : (server.address() as AddressInfo).port,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}
