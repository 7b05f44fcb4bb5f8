/**
 * The mesh CA's request path end to end in the sim (impl/mesh-ca/ca-service.ts): a bearer token
 * reviewed by the sim API, node authorization on its pods, the CSR check, and a certificate
 * signed by a real root (impl/linux/mesh-ca.ts) that verifies against it — or an opaque refusal
 * whose reason is in the log. Positive control: the same requests that are refused here are
 * granted by a CA configured to trust every service account (the check is what refuses them).
 */
import { test, expect } from '@playwright/test';
import 'reflect-metadata';
import * as x509 from '@peculiar/x509';
import type { CaService } from '../../../impl/mesh-ca/ca-service.js';
import { csrFor, DB, PROXY_SA, setup, WEB } from './harness.js';

test('the node proxy gets a 24 h certificate for a pod of its node, signed by the root, naming exactly that identity', async () => {
  const s = await setup();
  const a = await s.ca.createCertificate({ token: s.proxyToken, csrPem: await csrFor(WEB), identity: WEB });
  expect(a.ok, JSON.stringify(a)).toBe(true);
  if (!a.ok) return;
  expect(a.certChain[1]).toBe(s.signer.rootPem);
  const cert = new x509.X509Certificate(a.certChain[0]!);
  const root = new x509.X509Certificate(s.signer.rootPem);
  expect(await cert.verify({ publicKey: await root.publicKey.export(), signatureOnly: true })).toBe(true);
  const san = cert.getExtension(x509.SubjectAlternativeNameExtension);
  expect(san?.names.toJSON()).toEqual([{ type: 'url', value: WEB }]);
  expect(cert.notAfter.getTime() - s.clock.epochMs()).toBe(24 * 3600 * 1000 - (s.clock.epochMs() % 1000));
  expect(s.log.entries.some((e) => e.msg === 'certificate issued' && e.fields['identity'] === WEB)).toBe(true);
});

test('another node’s identity, a workload asking for another, a wrong-audience or unknown token: opaque refusal, reason in the log; a positive control grants them', async () => {
  const s = await setup();
  const refused: [string, Parameters<CaService['createCertificate']>[0], RegExp][] = [
    [
      'another node',
      { token: s.proxyToken, csrPem: await csrFor(DB), identity: DB },
      /no pod of shop\/db runs on node node-0/,
    ],
    [
      'a workload for another',
      { token: s.webToken, csrPem: await csrFor(DB), identity: DB },
      /caller shop\/web .* is not allowed/,
    ],
    [
      'wrong audience',
      { token: s.otherAudience, csrPem: await csrFor(WEB), identity: WEB },
      /not valid for audience "istio-ca"|not authenticated/,
    ],
    [
      'a forged token',
      { token: 'sim-sa-token.forged', csrPem: await csrFor(WEB), identity: WEB },
      /not authenticated: invalid bearer token/,
    ],
    ['no token', { token: '', csrPem: await csrFor(WEB), identity: WEB }, /no bearer token/],
  ];
  for (const [why, req, reason] of refused) {
    const before = s.log.entries.length;
    expect(await s.ca.createCertificate(req), why).toEqual({
      ok: false,
      code: 'unauthenticated',
      message: 'request authenticate failure',
    });
    const line = s.log.entries.slice(before).find((e) => e.msg === 'certificate request refused');
    expect(String(line?.fields['reason']), why).toMatch(reason);
  }
  // Positive controls: a CA whose node check is skipped (a mutant) grants the proxy db's identity,
  // and one that trusts the workload's account lets it ask for another pod of its node.
  const mutant = await setup(new Set([PROXY_SA]), true);
  expect(
    (await mutant.ca.createCertificate({ token: mutant.proxyToken, csrPem: await csrFor(DB), identity: DB })).ok,
  ).toBe(true);
  const open = await setup(new Set([PROXY_SA, 'shop/web']));
  const proxyWeb = 'spiffe://cluster.local/ns/ambient-lab-system/sa/ambient-lab-proxy';
  expect(
    (await open.ca.createCertificate({ token: open.webToken, csrPem: await csrFor(proxyWeb), identity: proxyWeb })).ok,
  ).toBe(true);
});

test('a workload gets its own identity without asking for one; a CSR for more is refused with its reason; lifetimes are capped', async () => {
  const s = await setup();
  const own = await s.ca.createCertificate({ token: s.webToken, csrPem: await csrFor(WEB) });
  expect(own.ok && own.identity).toBe(WEB);
  const wider = await s.ca.createCertificate({ token: s.proxyToken, csrPem: await csrFor(DB), identity: WEB });
  expect(wider).toEqual({
    ok: false,
    code: 'invalid-argument',
    message: `the CSR names url:${DB}; it may name only url:${WEB}`,
  });
  const long = await s.ca.createCertificate({
    token: s.webToken,
    csrPem: await csrFor(WEB),
    ttlSeconds: 400 * 24 * 3600,
  });
  expect(long.ok && long.notAfterMs - s.clock.epochMs()).toBe(90 * 24 * 3600 * 1000);
  expect(await s.ca.createCertificate({ token: s.webToken, csrPem: await csrFor(WEB), ttlSeconds: -5 })).toMatchObject({
    ok: false,
    code: 'invalid-argument',
  });
});
