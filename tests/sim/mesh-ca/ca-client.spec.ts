/**
 * The proxy's side of mesh identity: CaClient (the CertificateFetcher adapter: key, CSR, token
 * file, HTTPS to the CA, the answer checked against the mesh root) against the CA's real HTTPS
 * endpoint in this process, and ManagedCertificates feeding the real TLS HBONE transport from
 * the certificate manager — no CA key in the proxy, and no certificate (fail closed) for an
 * identity whose pod does not run on the proxy's node.
 */
import { test, expect } from '@playwright/test';
import 'reflect-metadata';
import * as x509 from '@peculiar/x509';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { webcrypto } from 'node:crypto';
import { SystemClock } from '../../../impl/linux/clock.js';
import { CaClient, parseCaAddress } from '../../../impl/linux/ca-client.js';
import { ManagedCertificates } from '../../../impl/linux/managed-certificates.js';
import { MeshCa } from '../../../impl/linux/mesh-ca.js';
import { serveCaHttps } from '../../../impl/linux/mesh-ca-http.js';
import { TlsHbone } from '../../../impl/linux/hbone-tls.js';
import { CaService, CA_DEFAULTS } from '../../../impl/mesh-ca/ca-service.js';
import { handleCaRequest, type CaHttpRequest } from '../../../impl/mesh-ca/http-api.js';
import { storePodView } from '../../../sim/kube/store-pod-view.js';
import { CertificateManager } from '../../../impl/ztunnel/cert-manager.js';
import { ApiStore } from '../../../sim/kube/store.js';
import { SimKubeApi } from '../../../sim/kube/sim-kube-api.js';
import { MemoryLogger } from '../../../sim/log/memory-logger.js';
import { SeededRandom } from '../../../sim/time/seeded-random.js';
import { buildMesh, echoServer, exchange, TRUST_DOMAIN } from '../../../sim/proxy-mesh/proxy-mesh.js';
import { setup, DB, WEB } from './harness.js';

type Handler = (req: CaHttpRequest) => Promise<{ status: number; body: Readonly<Record<string, unknown>> }>;

async function serve(signer: MeshCa, handler: Handler) {
  const serving = await signer.servingCertificate([], ['127.0.0.1']);
  return serveCaHttps({ host: '127.0.0.1', port: 0, certPem: serving.certPem, keyPem: serving.keyPem }, handler);
}

function tokenFile(token: string): string {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'al-ca-client-'));
  const file = path.join(dir, 'istio-token');
  fs.writeFileSync(file, `${token}\n`, { mode: 0o600 });
  return file;
}

test('CaClient: a certificate for a pod on its node, checked against the root; refusals and bad answers are errors', async () => {
  const { ca, signer, proxyToken } = await setup(undefined, false, new SystemClock());
  const server = await serve(signer, (req) => handleCaRequest(ca, req));
  const address = `https://127.0.0.1:${server.port}`;
  try {
    const client = new CaClient({ address, rootPem: signer.rootPem, tokenFile: tokenFile(proxyToken) });
    const cert = await client.fetch(WEB);
    expect(cert.identity).toBe(WEB);
    const leaf = new x509.X509Certificate(cert.certPem);
    expect(leaf.getExtension(x509.SubjectAlternativeNameExtension)!.names.items.map((n) => n.value)).toEqual([WEB]);
    expect(cert.notAfterMs - cert.notBeforeMs).toBeGreaterThanOrEqual(CA_DEFAULTS.defaultTtlSeconds * 1000);
    expect(cert.chainPem).toEqual([]); // the root itself is not part of the chain kept
    // the key is the one the leaf certifies
    const key = await webcrypto.subtle.importKey(
      'pkcs8',
      Buffer.from(cert.keyPem.replace(/-----[A-Z ]+-----|\s/g, ''), 'base64'),
      { name: 'ECDSA', namedCurve: 'P-256' },
      true,
      ['sign'],
    );
    expect(key.type).toBe('private');

    // db runs on node-1, not on this proxy's node-0
    await expect(client.fetch(DB)).rejects.toThrow(/refused spiffe:\/\/cluster\.local\/ns\/shop\/sa\/db: 401/);
    // another root bundle: the CA's serving certificate does not verify
    const stranger = await MeshCa.create('cluster.local');
    await expect(
      new CaClient({ address, rootPem: stranger.rootPem, tokenFile: tokenFile(proxyToken) }).fetch(WEB),
    ).rejects.toThrow(/CA request to 127\.0\.0\.1:\d+ failed/);
    // no token file, an empty one, a token the API does not know
    await expect(
      new CaClient({ address, rootPem: signer.rootPem, tokenFile: '/nonexistent/istio-token' }).fetch(WEB),
    ).rejects.toThrow(/cannot read the service-account token \/nonexistent\/istio-token/);
    await expect(
      new CaClient({ address, rootPem: signer.rootPem, tokenFile: tokenFile('') }).fetch(WEB),
    ).rejects.toThrow(/is empty/);
    await expect(
      new CaClient({ address, rootPem: signer.rootPem, tokenFile: tokenFile('not-a-token') }).fetch(WEB),
    ).rejects.toThrow(/401/);
  } finally {
    await server.close();
  }
});

test('CaClient: an answer for another identity, another key, or signed by another root gives no certificate', async () => {
  const { signer, proxyToken } = await setup(undefined, false, new SystemClock());
  const other = await MeshCa.create('cluster.local');
  const now = Date.now();
  // A CA that signs whatever it is asked with a twist: answers are wrong in the way `mode` says.
  let mode: 'identity' | 'key' | 'root' = 'identity';
  const server = await serve(signer, async (req) => {
    const csr = new x509.Pkcs10CertificateRequest((JSON.parse(req.body) as { csr: string }).csr);
    let leaf: string;
    if (mode === 'identity') leaf = await signer.sign(csr, DB, now - 1000, now + 3_600_000);
    else if (mode === 'root') leaf = await other.sign(csr, WEB, now - 1000, now + 3_600_000);
    else {
      const keys = (await webcrypto.subtle.generateKey({ name: 'ECDSA', namedCurve: 'P-256' }, true, [
        'sign',
        'verify',
      ])) as webcrypto.CryptoKeyPair;
      const foreign = await x509.Pkcs10CertificateRequestGenerator.create({
        name: '',
        keys,
        signingAlgorithm: { name: 'ECDSA', hash: 'SHA-256' },
        extensions: [new x509.SubjectAlternativeNameExtension([{ type: 'url', value: WEB }])],
      });
      leaf = await signer.sign(foreign, WEB, now - 1000, now + 3_600_000);
    }
    return { status: 200, body: { identity: WEB, certChain: [leaf, signer.rootPem], notAfter: '' } };
  });
  try {
    const client = new CaClient({
      address: `https://127.0.0.1:${server.port}`,
      rootPem: signer.rootPem,
      tokenFile: tokenFile(proxyToken),
    });
    await expect(client.fetch(WEB)).rejects.toThrow(
      /a certificate for \[spiffe:\/\/cluster\.local\/ns\/shop\/sa\/db\], not for/,
    );
    mode = 'key';
    await expect(client.fetch(WEB)).rejects.toThrow(/another key than the request's/);
    mode = 'root';
    await expect(client.fetch(WEB)).rejects.toThrow(/the mesh root did not sign/);
  } finally {
    await server.close();
  }
});

test('parseCaAddress takes https://HOST:PORT only', () => {
  expect(parseCaAddress('https://10.0.0.1:15012').port).toBe('15012');
  expect(parseCaAddress('https://[fd00::1]:15012').hostname).toBe('[fd00::1]');
  for (const bad of ['http://ca:15012', 'ca:15012', 'https://ca:15012/v1', 'https://u@ca:1', 'https://ca:1?x=1'])
    expect(() => parseCaAddress(bad)).toThrow(/CA address/);
});

test('HBONE with certificates from the CA: pods of the proxy node connect; a pod of another node gets none (fail closed)', async () => {
  // The API: the node1 proxy's pod and token; a and b run on node1, c on node2.
  const clock = new SystemClock();
  const store = new ApiStore({ clock, random: new SeededRandom(9) });
  for (const ns of ['ambient-lab-system', 'default']) store.create('Namespace', { metadata: { name: ns } });
  const pod = (ns: string, name: string, sa: string, node: string): string =>
    store.create('Pod', {
      metadata: { name, namespace: ns },
      spec: { serviceAccountName: sa, nodeName: node, containers: [{ name: 'c', image: 'i' }] },
    }).metadata!.uid!;
  const proxyUid = pod('ambient-lab-system', 'proxy-node1', 'ambient-lab-proxy', 'node1');
  for (const [n, sa, node] of [
    ['a', 'sa-a', 'node1'],
    ['b', 'sa-b', 'node1'],
    ['c', 'sa-c', 'node2'],
  ] as const)
    pod('default', n, sa, node);
  const token = store.tokens.issue({
    namespace: 'ambient-lab-system',
    serviceAccount: 'ambient-lab-proxy',
    pod: { name: 'proxy-node1', uid: proxyUid, node: 'node1' },
    audiences: ['istio-ca'],
  });
  const signer = await MeshCa.create(TRUST_DOMAIN);
  const log = new MemoryLogger();
  const ca = new CaService(
    {
      trustDomain: TRUST_DOMAIN,
      trustedNodeAccounts: new Set(['ambient-lab-system/ambient-lab-proxy']),
      ...CA_DEFAULTS,
    },
    {
      kube: new SimKubeApi(store, clock),
      pods: storePodView(store),
      signer,
      clock,
      log,
    },
  );
  const server = await serve(signer, (req) => handleCaRequest(ca, req));
  const fetched: string[] = [];
  const failed: string[] = [];
  const manager = new CertificateManager({
    fetcher: new CaClient({
      address: `https://127.0.0.1:${server.port}`,
      rootPem: signer.rootPem,
      tokenFile: tokenFile(token),
    }),
    clock,
    random: new SeededRandom(1),
    log: new MemoryLogger(),
    metrics: { fetched: (id) => fetched.push(id), failed: (id) => failed.push(id) },
  });
  try {
    const m = await buildMesh({
      hbone: new TlsHbone({ certificates: new ManagedCertificates(manager, TRUST_DOMAIN, signer.rootPem) }),
    });
    const b = await echoServer(m.app('b'));
    const c = await echoServer(m.app('c'));
    expect((await exchange(m.app('a'), '10.244.1.6', 8080, 'same-node')).reply).toBe('same-node');
    expect(b.peers).toEqual(['10.244.1.5']);
    expect(fetched.sort()).toEqual([
      'spiffe://cluster.local/ns/default/sa/sa-a',
      'spiffe://cluster.local/ns/default/sa/sa-b',
    ]);
    // c's proxy would be node2's; this CA gives node1's proxy no certificate for sa-c, so the
    // server side of the tunnel has none to present and the connection fails closed
    expect((await exchange(m.app('a'), '10.244.2.5', 8080, 'x')).reply).not.toBe('x');
    expect(c.peers).toEqual([]);
    expect(failed).toContain('spiffe://cluster.local/ns/default/sa/sa-c');
    expect(log.entries.some((e) => /sa-c/.test(JSON.stringify(e)))).toBe(true);
  } finally {
    manager.stop();
    await server.close();
  }
});
