/**
 * The mesh CA's HTTP API, as a pure function of one request (the transport — TLS, the body size
 * cap while reading, timeouts, concurrency — is impl/linux/mesh-ca-http.ts):
 *
 *   POST /v1/certificates
 *   Authorization: Bearer <bound service-account token>
 *   Content-Type: application/json
 *   {"csr": "<PEM>", "identity": "spiffe://...", "ttlSeconds": 86400}   (identity, ttlSeconds optional)
 *
 *   200 {"identity": "...", "certChain": ["<leaf PEM>", "<root PEM>"], "notAfter": "<RFC 3339>"}
 *   400 a malformed body or CSR (the reason)      401 no or a refused token, or not authorized
 *   404 another path    405 another method    413 a body over MAX_BODY_BYTES    415 not JSON
 *
 * Errors answer {"error": "..."}. Upstream serves the same request over gRPC
 * (istio.v1.auth.IstioCertificateService/CreateCertificate); this JSON form carries its fields.
 */
import type { CaService } from './ca-service.js';

export const CA_PATH = '/v1/certificates';
/** Largest request body: a CSR is at most 8 KiB (csr.ts), the rest is a few fields. */
export const MAX_BODY_BYTES = 16 * 1024;

export interface CaHttpRequest {
  readonly method: string;
  readonly path: string;
  readonly authorization: string | undefined;
  readonly contentType: string | undefined;
  readonly body: string;
}

interface CaHttpAnswer {
  readonly status: number;
  readonly body: Readonly<Record<string, unknown>>;
}

const error = (status: number, message: string): CaHttpAnswer => ({ status, body: { error: message } });

export async function handleCaRequest(ca: CaService, req: CaHttpRequest): Promise<CaHttpAnswer> {
  if (req.path !== CA_PATH) return error(404, `no such path; the CA serves POST ${CA_PATH}`);
  if (req.method !== 'POST') return error(405, `${req.method} is not supported; POST ${CA_PATH}`);
  if (Buffer.byteLength(req.body) > MAX_BODY_BYTES) return error(413, `the body is over ${MAX_BODY_BYTES} bytes`);
  if (!/^application\/json(\s*;.*)?$/i.test(req.contentType ?? ''))
    return error(415, 'the body must be application/json');
  const bearer = /^Bearer ([A-Za-z0-9._~+/=-]+)$/.exec(req.authorization ?? '');
  if (!bearer) return error(401, 'an Authorization: Bearer <service-account token> header is required');
  let doc: unknown;
  try {
    doc = JSON.parse(req.body);
  } catch (e) {
    return error(400, `the body is not JSON: ${e instanceof Error ? e.message : String(e)}`);
  }
  if (typeof doc !== 'object' || doc === null || Array.isArray(doc))
    return error(400, 'the body must be a JSON object');
  const o = doc as Record<string, unknown>;
  const unknown = Object.keys(o).filter((k) => !['csr', 'identity', 'ttlSeconds'].includes(k));
  if (unknown.length > 0)
    return error(400, `unknown field(s) ${unknown.join(', ')}; accepted: csr, identity, ttlSeconds`);
  if (typeof o['csr'] !== 'string') return error(400, 'csr: a PEM certificate request (string) is required');
  if (o['identity'] !== undefined && typeof o['identity'] !== 'string') return error(400, 'identity: a string');
  if (o['ttlSeconds'] !== undefined && typeof o['ttlSeconds'] !== 'number') return error(400, 'ttlSeconds: a number');
  const answer = await ca.createCertificate({
    token: bearer[1]!,
    csrPem: o['csr'],
    ...(o['identity'] !== undefined ? { identity: o['identity'] as string } : {}),
    ...(o['ttlSeconds'] !== undefined ? { ttlSeconds: o['ttlSeconds'] as number } : {}),
  });
  if (!answer.ok) return error(answer.code === 'unauthenticated' ? 401 : 400, answer.message);
  return {
    status: 200,
    body: {
      identity: answer.identity,
      certChain: answer.certChain,
      notAfter: new Date(answer.notAfterMs).toISOString(),
    },
  };
}
