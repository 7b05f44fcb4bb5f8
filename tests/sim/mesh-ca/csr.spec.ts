/**
 * The mesh CA's CSR check (impl/mesh-ca/csr.ts): one bounded PKCS #10 request, one URI SAN that
 * is the identity asked for, an accepted key, a signature by that key. Malformed input of any
 * kind is refused with a reason and never throws (fuzzed).
 */
import { test, expect } from '@playwright/test';
import fc from 'fast-check';
import 'reflect-metadata';
import * as x509 from '@peculiar/x509';
import { webcrypto } from 'node:crypto';
import { checkCsr, MAX_CSR_BYTES } from '../../../impl/mesh-ca/csr.js';

x509.cryptoProvider.set(webcrypto as unknown as Parameters<typeof x509.cryptoProvider.set>[0]);

const ID = 'spiffe://cluster.local/ns/shop/sa/web';
const EC = { name: 'ECDSA', namedCurve: 'P-256', hash: 'SHA-256' } as const;
const verify = (r: x509.Pkcs10CertificateRequest): Promise<boolean> =>
  r.verify(webcrypto as unknown as Parameters<typeof r.verify>[0]);

async function csr(
  names: { type: 'url' | 'dns' | 'ip'; value: string }[] | undefined,
  alg: webcrypto.RsaHashedKeyGenParams | webcrypto.EcKeyGenParams = EC,
): Promise<string> {
  const keys = (await webcrypto.subtle.generateKey(alg, true, ['sign', 'verify'])) as webcrypto.CryptoKeyPair;
  const signingAlgorithm = alg.name === 'ECDSA' ? EC : { name: 'RSASSA-PKCS1-v1_5', hash: 'SHA-256' };
  const r = await x509.Pkcs10CertificateRequestGenerator.create({
    name: 'O=cluster.local',
    keys,
    signingAlgorithm,
    extensions: names ? [new x509.SubjectAlternativeNameExtension(names)] : [],
  });
  return r.toString('pem');
}

const rsa = (bits: number): webcrypto.RsaHashedKeyGenParams => ({
  name: 'RSASSA-PKCS1-v1_5',
  modulusLength: bits,
  publicExponent: new Uint8Array([1, 0, 1]),
  hash: 'SHA-256',
});

test('a P-256 or RSA-2048 CSR for exactly the identity asked for is accepted', async () => {
  expect((await checkCsr(await csr([{ type: 'url', value: ID }]), ID, verify)).ok).toBe(true);
  expect((await checkCsr(await csr([{ type: 'url', value: ID }], rsa(2048)), ID, verify)).ok).toBe(true);
});

test('extra or other SANs, no SAN, weak keys, a bad signature and malformed text are refused with the reason', async () => {
  const good = await csr([{ type: 'url', value: ID }]);
  const cases: [string, string, RegExp][] = [
    [
      'an extra DNS SAN',
      await csr([
        { type: 'url', value: ID },
        { type: 'dns', value: 'web.shop.svc' },
      ]),
      /names url:.*, dns:web\.shop\.svc; it may name only url:spiffe/,
    ],
    [
      'another identity',
      await csr([{ type: 'url', value: 'spiffe://cluster.local/ns/kube-system/sa/admin' }]),
      /it may name only url:spiffe:\/\/cluster.local\/ns\/shop\/sa\/web/,
    ],
    ['no SAN', await csr(undefined), /0 subject alternative name extensions, not one/],
    [
      'RSA 1024',
      await csr([{ type: 'url', value: ID }], rsa(1024)),
      /RSASSA-PKCS1-v1_5 1024 bits; accepted: ECDSA P-256 or P-384, RSA of 2048 bits or more/,
    ],
    ['two requests', good + good, /not exactly one PEM block/],
    ['a certificate', good.replace(/CERTIFICATE REQUEST/g, 'CERTIFICATE'), /not exactly one PEM block/],
    ['not base64', good.replace(/\n[A-Za-z0-9+/]{10}/, '\n!!!!!!!!!!'), /not base64/],
    ['truncated DER', good.replace(/\n[^\n]*\n-----END/, '\n-----END'), /not a PKCS #10 request|not base64/],
    ['oversized', `${'x'.repeat(MAX_CSR_BYTES + 1)}`, /more than 8192/],
    ['empty', '', /not exactly one PEM block/],
  ];
  for (const [why, pem, reason] of cases) {
    const r = await checkCsr(pem, ID, verify);
    expect(r.ok, why).toBe(false);
    if (!r.ok) expect(r.reason, why).toMatch(reason);
  }
  // One bit of the signature flipped: the request info is intact, the signature is not its key's.
  const a = new x509.Pkcs10CertificateRequest(good);
  const der = Buffer.from(a.rawData);
  const sig = Buffer.from(a.signature);
  const at = der.lastIndexOf(sig);
  expect(at).toBeGreaterThan(0);
  const flipped = Buffer.from(der);
  const last = at + sig.length - 1;
  flipped.writeUInt8(flipped.readUInt8(last) ^ 0x01, last);
  const pemOf = (d: Buffer): string =>
    `-----BEGIN CERTIFICATE REQUEST-----\n${d.toString('base64').replace(/.{64}/g, '$&\n')}\n-----END CERTIFICATE REQUEST-----\n`;
  const r = await checkCsr(pemOf(flipped), ID, verify);
  expect(r.ok).toBe(false);
  if (!r.ok) expect(r.reason).toBe("the CSR's signature does not verify with its own key");
});

test('fuzz: random text and mutated requests never throw, and anything accepted names exactly the identity', async () => {
  const good = new x509.Pkcs10CertificateRequest(await csr([{ type: 'url', value: ID }]));
  const der = Buffer.from(good.rawData);
  const pemOf = (d: Uint8Array): string =>
    `-----BEGIN CERTIFICATE REQUEST-----\n${Buffer.from(d).toString('base64')}\n-----END CERTIFICATE REQUEST-----`;
  await fc.assert(
    fc.asyncProperty(
      fc.oneof(
        fc.string({ maxLength: 300 }),
        fc.uint8Array({ maxLength: 600 }).map(pemOf),
        fc
          .array(fc.tuple(fc.nat({ max: der.length - 1 }), fc.integer({ min: 0, max: 255 })), {
            minLength: 1,
            maxLength: 4,
          })
          .map((edits) => {
            const d = Buffer.from(der);
            for (const [i, v] of edits) d[i] = v;
            return pemOf(d);
          }),
      ),
      async (pem) => {
        const r = await checkCsr(pem, ID, verify);
        if (r.ok) {
          const san = r.request.extensions.find((e) => e.type === '2.5.29.17');
          expect(new x509.SubjectAlternativeNameExtension(san!.rawData).names.toJSON()).toEqual([
            { type: 'url', value: ID },
          ]);
        } else expect(r.reason.length).toBeGreaterThan(0);
      },
    ),
    { numRuns: 300, seed: 20261205 },
  );
});
