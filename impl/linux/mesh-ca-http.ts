/**
 * The mesh CA's HTTPS endpoint: TLS with the CA's serving certificate, and the limits a
 * network-facing service needs, before a request reaches impl/mesh-ca/http-api.ts —
 *   - the body is read up to MAX_BODY_BYTES and no further (413, connection closed);
 *   - headers within 5 s, the whole request within 10 s (Node's headersTimeout/requestTimeout);
 *   - at most `maxInFlight` requests handled at once; more answer 503 with Retry-After, so a
 *     flood costs the CA a refusal each, not a TokenReview and a signature each;
 *   - at most `maxConnections` open connections.
 */
import * as https from 'node:https';
import type { AddressInfo } from 'node:net';
import type { IncomingMessage, ServerResponse } from 'node:http';
import { MAX_BODY_BYTES, type CaHttpRequest } from '../mesh-ca/http-api.js';

interface CaHttpsOptions {
  readonly host: string;
  readonly port: number;
  readonly certPem: string;
  readonly keyPem: string;
  readonly maxInFlight?: number;
  readonly maxConnections?: number;
}

interface CaHttpsServer {
  readonly port: number;
  close(): Promise<void>;
}

type Handler = (req: CaHttpRequest) => Promise<{ status: number; body: Readonly<Record<string, unknown>> }>;

function answer(res: ServerResponse, status: number, body: Readonly<Record<string, unknown>>, close = false): void {
  const text = JSON.stringify(body);
  res.writeHead(status, {
    'content-type': 'application/json',
    'content-length': Buffer.byteLength(text),
    ...(status === 503 ? { 'retry-after': '1' } : {}),
    ...(close ? { connection: 'close' } : {}),
  });
  res.end(text);
}

/** The body, or undefined once it passed `max` bytes (reading stops; the caller answers 413). */
function readCapped(req: IncomingMessage, max: number): Promise<string | undefined> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let size = 0;
    req.on('data', (c: Buffer) => {
      size += c.length;
      if (size > max) {
        req.pause();
        resolve(undefined);
        return;
      }
      chunks.push(c);
    });
    req.on('end', () => resolve(Buffer.concat(chunks).toString('utf8')));
    req.on('error', reject);
  });
}

export async function serveCaHttps(o: CaHttpsOptions, handle: Handler): Promise<CaHttpsServer> {
  const maxInFlight = o.maxInFlight ?? 32;
  let inFlight = 0;
  const server = https.createServer(
    { cert: o.certPem, key: o.keyPem, minVersion: 'TLSv1.2', headersTimeout: 5_000, requestTimeout: 10_000 },
    (req, res) => {
      if (inFlight >= maxInFlight) {
        answer(res, 503, { error: `busy: ${maxInFlight} requests in progress; retry` }, true);
        return;
      }
      inFlight++;
      void (async () => {
        try {
          const body = await readCapped(req, MAX_BODY_BYTES);
          if (body === undefined) {
            // The rest of the body is never read: the connection ends once the answer is out.
            res.on('finish', () => req.destroy());
            answer(res, 413, { error: `the body is over ${MAX_BODY_BYTES} bytes` }, true);
            return;
          }
          const a = await handle({
            method: req.method ?? '',
            path: req.url ?? '',
            authorization: req.headers.authorization,
            contentType: req.headers['content-type'],
            body,
          });
          answer(res, a.status, a.body);
        } catch (e) {
          // A failure of the CA itself (the API unreachable for the TokenReview, say): 500, said.
          answer(res, 500, {
            error: `the CA could not handle the request: ${e instanceof Error ? e.message : String(e)}`,
          });
        } finally {
          inFlight--;
        }
      })();
    },
  );
  server.maxConnections = o.maxConnections ?? 256;
  await new Promise<void>((resolve, reject) => {
    server.once('error', (e) => reject(new Error(`mesh CA: cannot listen on ${o.host}:${o.port}: ${e.message}`)));
    server.listen(o.port, o.host, () => resolve());
  });
  return {
    port: (server.address() as AddressInfo).port,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}
