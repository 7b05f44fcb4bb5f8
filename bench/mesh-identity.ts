/**
 * What mesh identity from a CA costs, beside the shared-root test mode, in one run:
 *   1. certificates per second: the proxy's CaClient (new P-256 key, CSR, HTTPS with a projected
 *      token) against the CA's real HTTPS endpoint on loopback (TokenReview and pods from the sim
 *      API in this process, node authorization, the CSR check, signing), one at a time and 8 at
 *      once; and the shared root signing locally (MeshCa.certificateFor: key and signature only);
 *   2. the first HBONE connection of two new pods (a -> b on one node, real TLS 1.3 + HTTP/2 over
 *      the simulated sockets: both certificates are made on the way), with certificates from the
 *      CA through the proxy's CertificateManager, and from the shared root; and a warm connection
 *      (certificates held) for reference. Median of ROUNDS fresh meshes each.
 *
 *   npm run bench:mesh-identity            (ROUNDS=15, N=200 by default)
 */
import 'reflect-metadata';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { SystemClock } from '../impl/linux/clock.js';
import { CaClient } from '../impl/linux/ca-client.js';
import { ManagedCertificates } from '../impl/linux/managed-certificates.js';
import { MeshCa, type CertificateSource } from '../impl/linux/mesh-ca.js';
import { serveCaHttps } from '../impl/linux/mesh-ca-http.js';
import { TlsHbone } from '../impl/linux/hbone-tls.js';
import { CaService, CA_DEFAULTS } from '../impl/mesh-ca/ca-service.js';
import { handleCaRequest } from '../impl/mesh-ca/http-api.js';
import { storePodView } from '../sim/kube/store-pod-view.js';
import { CertificateManager } from '../impl/ztunnel/cert-manager.js';
import { ApiStore } from '../sim/kube/store.js';
import { SimKubeApi } from '../sim/kube/sim-kube-api.js';
import { MemoryLogger } from '../sim/log/memory-logger.js';
import { SeededRandom } from '../sim/time/seeded-random.js';
import { buildMesh, echoServer, exchange, TRUST_DOMAIN } from '../sim/proxy-mesh/proxy-mesh.js';

const ROUNDS = Number(process.env['ROUNDS'] ?? 15);
const N = Number(process.env['N'] ?? 200);
const clock = new SystemClock();

/** The sim API with node1's proxy pod and token, and the pods a and b on node1 (service accounts sa-a, sa-b). */
function api(): { store: ApiStore; token: string } {
  const store = new ApiStore({ clock, random: new SeededRandom(3) });
  for (const ns of ['ambient-lab-system', 'default']) store.create('Namespace', { metadata: { name: ns } });
  const pod = (ns: string, name: string, sa: string): string =>
    store.create('Pod', {
      metadata: { name, namespace: ns },
      spec: { serviceAccountName: sa, nodeName: 'node1', containers: [{ name: 'c', image: 'i' }] },
    }).metadata!.uid!;
  const uid = pod('ambient-lab-system', 'proxy-node1', 'ambient-lab-proxy');
  pod('default', 'a', 'sa-a');
  pod('default', 'b', 'sa-b');
  const token = store.tokens.issue({
    namespace: 'ambient-lab-system',
    serviceAccount: 'ambient-lab-proxy',
    pod: { name: 'proxy-node1', uid, node: 'node1' },
    audiences: ['istio-ca'],
  });
  return { store, token };
}

const root = await MeshCa.create(TRUST_DOMAIN);
const { store, token } = api();
const ca = new CaService(
  { trustDomain: TRUST_DOMAIN, trustedNodeAccounts: new Set(['ambient-lab-system/ambient-lab-proxy']), ...CA_DEFAULTS },
  {
    kube: new SimKubeApi(store, clock),
    pods: storePodView(store),
    signer: root,
    clock,
    log: new MemoryLogger(),
  },
);
const serving = await root.servingCertificate([], ['127.0.0.1']);
const server = await serveCaHttps(
  { host: '127.0.0.1', port: 0, certPem: serving.certPem, keyPem: serving.keyPem },
  (req) => handleCaRequest(ca, req),
);
const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'al-bench-ca-'));
const tokenFile = path.join(dir, 'istio-token');
fs.writeFileSync(tokenFile, token, { mode: 0o600 });
const client = new CaClient({ address: `https://127.0.0.1:${server.port}`, rootPem: root.rootPem, tokenFile });
const A = 'spiffe://cluster.local/ns/default/sa/sa-a';

const seconds = (t0: bigint): number => Number(process.hrtime.bigint() - t0) / 1e9;
const median = (xs: number[]): number => [...xs].sort((x, y) => x - y)[Math.floor(xs.length / 2)]!;

try {
  for (let i = 0; i < 10; i++) await client.fetch(A); // warm up
  let t0 = process.hrtime.bigint();
  for (let i = 0; i < N; i++) await client.fetch(A);
  const serial = N / seconds(t0);
  t0 = process.hrtime.bigint();
  for (let i = 0; i < N; i += 8) await Promise.all(Array.from({ length: 8 }, () => client.fetch(A)));
  const parallel = (Math.ceil(N / 8) * 8) / seconds(t0);
  t0 = process.hrtime.bigint();
  for (let i = 0; i < N; i++) {
    // a fresh MeshCa keeps no cache: each certificateFor is a new key and signature
    const fresh = await MeshCa.load(TRUST_DOMAIN, root.rootPem, (await root.exportRoot()).keyPem);
    await fresh.certificateFor({ trustDomain: TRUST_DOMAIN, namespace: 'default', serviceAccount: 'sa-a' });
  }
  const local = N / seconds(t0);

  /** First a -> b exchange on a fresh mesh (certificates made on the way), then a warm one; ms each. */
  const firstAndWarm = async (certificates: () => Promise<CertificateSource>): Promise<[number, number]> => {
    const m = await buildMesh({ hbone: new TlsHbone({ certificates: await certificates() }) });
    await echoServer(m.app('b'));
    let t = process.hrtime.bigint();
    const first = await exchange(m.app('a'), '10.244.1.6', 8080, 'x');
    const firstMs = seconds(t) * 1000;
    if (first.reply !== 'x') throw new Error(`first exchange failed: ${String(first.reply)}`);
    t = process.hrtime.bigint();
    const warm = await exchange(m.app('a'), '10.244.1.6', 8080, 'y');
    const warmMs = seconds(t) * 1000;
    if (warm.reply !== 'y') throw new Error(`warm exchange failed: ${String(warm.reply)}`);
    return [firstMs, warmMs];
  };
  const managers: CertificateManager[] = [];
  const viaCa = async (): Promise<CertificateSource> => {
    const manager = new CertificateManager({
      fetcher: client,
      clock,
      random: new SeededRandom(1),
      log: new MemoryLogger(),
    });
    managers.push(manager);
    return new ManagedCertificates(manager, TRUST_DOMAIN, root.rootPem);
  };
  const shared = async (): Promise<CertificateSource> =>
    MeshCa.load(TRUST_DOMAIN, root.rootPem, (await root.exportRoot()).keyPem);
  await firstAndWarm(viaCa); // warm up both paths (module loading, JIT)
  await firstAndWarm(shared);
  const caRuns: [number, number][] = [];
  const sharedRuns: [number, number][] = [];
  for (let r = 0; r < ROUNDS; r++) {
    caRuns.push(await firstAndWarm(viaCa)); // alternate, so load changes hit both alike
    sharedRuns.push(await firstAndWarm(shared));
  }
  for (const m of managers) m.stop();
  const caFirst = median(caRuns.map((x) => x[0]));
  const sharedFirst = median(sharedRuns.map((x) => x[0]));
  const warm = median([...caRuns, ...sharedRuns].map((x) => x[1]));
  console.log(
    `certificates from the CA (HTTPS, TokenReview, node check, CSR, sign), one at a time: ${serial.toFixed(0)}/s`,
  );
  console.log(
    `certificates from the CA, 8 at once                                               : ${parallel.toFixed(0)}/s`,
  );
  console.log(
    `certificates from the shared root, in the proxy (test mode)                      : ${local.toFixed(0)}/s`,
  );
  console.log(
    `first HBONE exchange of two new pods, certificates from the CA     : ${caFirst.toFixed(1)} ms (median of ${ROUNDS})`,
  );
  console.log(`first HBONE exchange of two new pods, certificates from shared root: ${sharedFirst.toFixed(1)} ms`);
  console.log(
    `added by the CA: ${(caFirst - sharedFirst).toFixed(1)} ms (${(caFirst / sharedFirst).toFixed(2)}x); a warm exchange: ${warm.toFixed(1)} ms`,
  );
} finally {
  await server.close();
  fs.rmSync(dir, { recursive: true, force: true });
}
