/**
 * Real adapter of the plugin-event port: HTTP/1.1 over a Unix stream socket.
 *
 * Server: the socket's directory is created 0700 and the socket chmod'ed 0600 — only root (the
 * container runtime that runs CNI plugins) may connect; a stale socket file is replaced; bodies
 * are capped and must arrive within the request timeout; only `POST /v1/events` with a JSON body
 * is accepted. Client: one connection per event with an overall timeout.
 */
import * as fs from 'node:fs';
import * as http from 'node:http';
import * as path from 'node:path';
import {
  PluginEventTransportError,
  type PluginEventHandler,
  type PluginEventServeOptions,
  type PluginEventServer,
  type PluginEventTransport,
} from '../host/plugin-events.js';
import {
  PluginEventError,
  parsePluginEvent,
  parsePluginEventReply,
  type PluginEvent,
  type PluginEventReply,
} from '../api/plugin-event.js';

const PATH = '/v1/events';

export class HttpPluginEventTransport implements PluginEventTransport {
  async serve(address: string, handler: PluginEventHandler, opts: PluginEventServeOptions): Promise<PluginEventServer> {
    fs.mkdirSync(path.dirname(address), { recursive: true, mode: 0o700 });
    try {
      const st = fs.lstatSync(address);
      if (!st.isSocket()) throw new Error(`${address} exists and is not a socket; refusing to replace it`);
      fs.unlinkSync(address);
    } catch (e) {
      if ((e as NodeJS.ErrnoException).code !== 'ENOENT') throw e;
    }
    const server = http.createServer((req, res) => {
      const reply = (status: number, body: PluginEventReply): void => {
        const text = JSON.stringify(body);
        res.writeHead(status, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(text) });
        res.end(text);
      };
      if (req.method !== 'POST' || req.url !== PATH) {
        reply(404, { ok: false, error: `only POST ${PATH} is served`, retryable: false });
        return;
      }
      // Oversized bodies are drained (up to a hard cap) and then refused with 413, so the
      // client reads a clear answer instead of a reset; beyond the cap the connection is cut.
      const hardCap = Math.max(opts.maxBodyBytes * 4, 1 << 20);
      const chunks: Buffer[] = [];
      let size = 0;
      let tooBig = Number(req.headers['content-length'] ?? 0) > opts.maxBodyBytes;
      req.on('data', (c: Buffer) => {
        size += c.length;
        if (size > hardCap) {
          req.destroy();
          return;
        }
        if (size > opts.maxBodyBytes) tooBig = true;
        if (!tooBig) chunks.push(c);
      });
      req.on('end', () => {
        if (tooBig) {
          reply(413, {
            ok: false,
            error: `body of ${size} bytes exceeds the ${opts.maxBodyBytes}-byte limit`,
            retryable: false,
          });
          return;
        }
        let event: PluginEvent;
        try {
          event = parsePluginEvent(Buffer.concat(chunks).toString('utf8'));
        } catch (e) {
          reply(400, {
            ok: false,
            error: e instanceof PluginEventError ? e.message : 'malformed event',
            retryable: false,
          });
          return;
        }
        handler(event).then(
          (r) => reply(r.ok ? 200 : 500, r),
          (e: unknown) => reply(500, { ok: false, error: e instanceof Error ? e.message : String(e), retryable: true }),
        );
      });
    });
    server.requestTimeout = opts.requestTimeoutMs;
    server.headersTimeout = Math.min(opts.requestTimeoutMs, 60_000);
    await new Promise<void>((resolve, reject) => {
      server.once('error', reject);
      server.listen(address, () => resolve());
    });
    fs.chmodSync(address, 0o600);
    return {
      address,
      close: () =>
        new Promise<void>((resolve) => {
          server.close(() => resolve());
          server.closeAllConnections();
        }),
    };
  }

  send(address: string, event: PluginEvent, timeoutMs: number): Promise<PluginEventReply> {
    return new Promise((resolve, reject) => {
      const body = JSON.stringify(event);
      const req = http.request(
        {
          socketPath: address,
          path: PATH,
          method: 'POST',
          timeout: timeoutMs,
          headers: { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body) },
        },
        (res) => {
          const chunks: Buffer[] = [];
          res.on('data', (c: Buffer) => chunks.push(c));
          res.on('end', () => {
            clearTimeout(overall);
            try {
              resolve(parsePluginEventReply(Buffer.concat(chunks).toString('utf8')));
            } catch (e) {
              reject(
                new PluginEventTransportError(
                  'protocol',
                  `HTTP ${res.statusCode} from ${address}: ${(e as Error).message}`,
                ),
              );
            }
          });
        },
      );
      const overall = setTimeout(() => {
        req.destroy();
        reject(new PluginEventTransportError('timeout', `no answer from ${address} within ${timeoutMs} ms`));
      }, timeoutMs);
      req.on('error', (e: NodeJS.ErrnoException) => {
        clearTimeout(overall);
        reject(new PluginEventTransportError('unavailable', `cannot reach ${address}: ${e.code ?? e.message}`));
      });
      req.end(body);
    });
  }
}
