/** A mesh CA over the sim API with a real root: two nodes, the node-0 proxy, web on node-0, db on node-1. */
import 'reflect-metadata';
import * as x509 from '@peculiar/x509';
import { webcrypto } from 'node:crypto';
import { ApiStore } from '../../../sim/kube/store.js';
import { SimKubeApi } from '../../../sim/kube/sim-kube-api.js';
import { VirtualClock } from '../../../sim/time/virtual-clock.js';
import { SeededRandom } from '../../../sim/time/seeded-random.js';
import { MemoryLogger } from '../../../sim/log/memory-logger.js';
import { MeshCa } from '../../../impl/linux/mesh-ca.js';
import type { Clock, WallClock } from '../../../impl/host/clock.js';
import { CaService, CA_DEFAULTS } from '../../../impl/mesh-ca/ca-service.js';
import { storePodView } from '../../../sim/kube/store-pod-view.js';

export const WEB = 'spiffe://cluster.local/ns/shop/sa/web';
export const DB = 'spiffe://cluster.local/ns/shop/sa/db';
export const PROXY_SA = 'ambient-lab-system/ambient-lab-proxy';
const EC = { name: 'ECDSA', namedCurve: 'P-256', hash: 'SHA-256' } as const;

export async function csrFor(uri: string): Promise<string> {
  const keys = (await webcrypto.subtle.generateKey(EC, true, ['sign', 'verify'])) as webcrypto.CryptoKeyPair;
  const r = await x509.Pkcs10CertificateRequestGenerator.create({
    name: '',
    keys,
    signingAlgorithm: EC,
    extensions: [new x509.SubjectAlternativeNameExtension([{ type: 'url', value: uri }])],
  });
  return r.toString('pem');
}

/**
 * The API of a two-node cluster — the node-0 proxy, web on node-0, db on node-1 — with bound
 * tokens for the proxy and for web (audience istio-ca), and a proxy token for another audience.
 */
export function clusterApi(clock: Clock) {
  const store = new ApiStore({ clock, random: new SeededRandom(5) });
  for (const ns of ['ambient-lab-system', 'shop']) store.create('Namespace', { metadata: { name: ns } });
  const pod = (ns: string, name: string, sa: string, node: string): string =>
    store.create('Pod', {
      metadata: { name, namespace: ns },
      spec: { serviceAccountName: sa, nodeName: node, containers: [{ name: 'c', image: 'i' }] },
    }).metadata!.uid!;
  const token = (ns: string, name: string, sa: string, node: string, uid: string, audiences = ['istio-ca']): string =>
    store.tokens.issue({ namespace: ns, serviceAccount: sa, pod: { name, uid, node }, audiences });
  const proxyUid = pod('ambient-lab-system', 'proxy-node-0', 'ambient-lab-proxy', 'node-0');
  const webUid = pod('shop', 'web-0', 'web', 'node-0');
  pod('shop', 'db-0', 'db', 'node-1');
  return {
    store,
    proxyToken: token('ambient-lab-system', 'proxy-node-0', 'ambient-lab-proxy', 'node-0', proxyUid),
    webToken: token('shop', 'web-0', 'web', 'node-0', webUid),
    otherAudience: token('ambient-lab-system', 'proxy-node-0', 'ambient-lab-proxy', 'node-0', proxyUid, ['vault']),
  };
}

/** `nodeCheckMutant`: a CA whose pod view ignores the node (every pod counts as on the caller's node). */
export async function setup(
  trusted: ReadonlySet<string> = new Set([PROXY_SA]),
  nodeCheckMutant = false,
  clock: Clock & WallClock = new VirtualClock(),
) {
  const { store, proxyToken, webToken, otherAudience } = clusterApi(clock);
  const pods = storePodView(store, { ignoreNode: nodeCheckMutant });
  const signer = await MeshCa.create('cluster.local', new Date(clock.epochMs()));
  const log = new MemoryLogger();
  const ca = new CaService(
    { trustDomain: 'cluster.local', trustedNodeAccounts: trusted, ...CA_DEFAULTS },
    { kube: new SimKubeApi(store, clock), pods, signer, clock, log },
  );
  return { ca, log, clock, signer, proxyToken, webToken, otherAudience };
}
