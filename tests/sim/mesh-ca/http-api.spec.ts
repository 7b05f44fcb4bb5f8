/**
 * The mesh CA's HTTP API as a function of one request (impl/mesh-ca/http-api.ts): each status
 * it answers, and a fuzzed stream of hostile requests that never throws and never gets a
 * certificate.
 */
import { test, expect } from '@playwright/test';
import fc from 'fast-check';
import { CA_PATH, handleCaRequest, MAX_BODY_BYTES, type CaHttpRequest } from '../../../impl/mesh-ca/http-api.js';
import { csrFor, setup, WEB } from './harness.js';

const req = (over: Partial<CaHttpRequest>): CaHttpRequest => ({
  method: 'POST',
  path: CA_PATH,
  authorization: undefined,
  contentType: 'application/json',
  body: '{}',
  ...over,
});

test('POST /v1/certificates: 200 with the chain; 400, 401, 404, 405, 413, 415 with a reason', async () => {
  const s = await setup();
  const csr = await csrFor(WEB);
  const auth = `Bearer ${s.proxyToken}`;
  const ok = await handleCaRequest(s.ca, req({ authorization: auth, body: JSON.stringify({ csr, identity: WEB }) }));
  expect(ok.status).toBe(200);
  expect(ok.body['identity']).toBe(WEB);
  expect((ok.body['certChain'] as string[]).length).toBe(2);
  expect(ok.body['notAfter']).toMatch(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/);
  const cases: [string, CaHttpRequest, number, RegExp][] = [
    ['another path', req({ path: '/v1/other' }), 404, /POST \/v1\/certificates/],
    ['GET', req({ method: 'GET' }), 405, /GET is not supported/],
    ['oversized', req({ authorization: auth, body: 'x'.repeat(MAX_BODY_BYTES + 1) }), 413, /over 16384 bytes/],
    ['not JSON type', req({ authorization: auth, contentType: 'text/plain' }), 415, /application\/json/],
    ['no token', req({ body: JSON.stringify({ csr }) }), 401, /Authorization: Bearer/],
    [
      'refused token',
      req({ authorization: 'Bearer sim-sa-token.forged', body: JSON.stringify({ csr }) }),
      401,
      /^request authenticate failure$/,
    ],
    ['not JSON', req({ authorization: auth, body: '{csr' }), 400, /not JSON/],
    ['an array', req({ authorization: auth, body: '[]' }), 400, /JSON object/],
    [
      'unknown field',
      req({ authorization: auth, body: JSON.stringify({ csr, sans: ['x'] }) }),
      400,
      /unknown field\(s\) sans/,
    ],
    ['no csr', req({ authorization: auth, body: JSON.stringify({ identity: WEB }) }), 400, /csr: a PEM/],
    [
      'bad ttl type',
      req({ authorization: auth, body: JSON.stringify({ csr, ttlSeconds: '1' }) }),
      400,
      /ttlSeconds: a number/,
    ],
    [
      'bad CSR',
      req({ authorization: auth, body: JSON.stringify({ csr: 'nope', identity: WEB }) }),
      400,
      /not exactly one PEM block/,
    ],
  ];
  for (const [why, r, status, message] of cases) {
    const a = await handleCaRequest(s.ca, r);
    expect(a.status, why).toBe(status);
    expect(String(a.body['error']), why).toMatch(message);
  }
});

test('fuzz: hostile requests never throw and never get a certificate', async () => {
  const s = await setup();
  const csr = await csrFor('spiffe://cluster.local/ns/shop/sa/db');
  await fc.assert(
    fc.asyncProperty(
      fc.record({
        method: fc.constantFrom('POST', 'GET', 'PUT', ''),
        path: fc.constantFrom(CA_PATH, '/', `${CA_PATH}/`, '/v1/certificates?x=1'),
        authorization: fc.option(fc.oneof(fc.string(), fc.constant(`Bearer ${s.proxyToken}`)), { nil: undefined }),
        contentType: fc.option(fc.constantFrom('application/json', 'application/json; charset=utf-8', 'text/plain'), {
          nil: undefined,
        }),
        body: fc.oneof(
          fc.string(),
          fc.json(),
          fc.constant(JSON.stringify({ csr, identity: 'spiffe://cluster.local/ns/shop/sa/db' })),
          fc.record({ csr: fc.string(), identity: fc.string(), ttlSeconds: fc.double() }).map((o) => JSON.stringify(o)),
        ),
      }),
      async (r) => {
        const a = await handleCaRequest(s.ca, r);
        // db runs on node-1 only: nothing here may be granted
        expect([400, 401, 404, 405, 413, 415]).toContain(a.status);
        expect(typeof a.body['error']).toBe('string');
      },
    ),
    { numRuns: 300, seed: 20261205 },
  );
});
