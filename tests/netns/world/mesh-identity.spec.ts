/**
 * Issue 18 on the real kernel (and in the container world): the proxies run as the manifests say,
 * with certificates from the mesh CA (the CA Deployment's process, beside the API) and no root
 * key. A cross-node connection is authorized under the source pod's identity; each proxy holds
 * certificates for its own node's pods only. The compromised node: root on node-0 holds what
 * node-0's proxy holds (its projected token, the root certificate) but not the root key. From
 * node-0's network namespace it asks the CA for the identity of a pod on node-1 (refused), for a
 * node-0 pod's identity (granted: the control that the request path works), with a token for
 * another audience (refused), and it offers node-1's proxy, on v's HBONE port, a self-signed
 * certificate naming v's identity (refused with the TLS alert "unknown ca") and the granted one
 * (accepted: the control that the handshake check can tell). The same through World.forgedHbone,
 * as the catalog's forged-identity phase runs it: refused with every credential, the control
 * issued and delivered. Then, with the CA down, a pod whose
 * identity no proxy holds yet gets no HBONE (fail closed, said in the connection log), and it
 * does once the CA is back and the proxy's retry has the certificate. Last, the token refresher a
 * lab that stays up runs replaces the proxy's token with a new valid one. One world for all of it: a world costs more than the checks.
 */
import { test, expect } from '@playwright/test';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { execIn } from '../../../e2e/netns/ip.js';
import { repoRoot } from '../../../e2e/netns/world-lab.js';
import { request } from '../../../e2e/netns/world-api-client.js';
import type { PodRef } from '../../../scenarios/world.js';
import { MESH, skipUnlessSuiteWorldAvailable, withNetnsWorld } from './fixture.js';

skipUnlessSuiteWorldAvailable();
test.setTimeout(600_000); // generous: the suite must pass on a loaded machine (npm run test:netns:loaded)

const a: PodRef = { namespace: 'mesh', name: 'a' };
const b: PodRef = { namespace: 'mesh', name: 'b' };
const c: PodRef = { namespace: 'late', name: 'c' };
const app = { uid: 1000, caps: [], tcpPorts: [8080] };

const OWN = 'spiffe://cluster.local/ns/mesh/sa/default'; // pod a, node-0
const FOREIGN = 'spiffe://cluster.local/ns/vault/sa/default'; // pod v, node-1 only

/** What the attacker runs in node-0's netns: CA requests and TLS handshakes with node-1's 15008; prints one JSON line. */
function attackerProgram(): string {
  const dist = path.join(repoRoot(), 'dist', 'impl', 'linux');
  return `
import { createRequire } from 'node:module';
const require = createRequire(${JSON.stringify(path.join(repoRoot(), 'package.json'))});
require('reflect-metadata');
const x509 = require('@peculiar/x509');
import * as tls from 'node:tls';
import { webcrypto } from 'node:crypto';
const { CaClient } = await import(${JSON.stringify(path.join(dist, 'ca-client.js'))});
const [caAddress, rootFile, tokenFile, otherAudienceFile, peer, own, foreign] = process.argv.slice(2);
const fs = await import('node:fs');
const rootPem = fs.readFileSync(rootFile, 'utf8');
const ask = (file, id) => new CaClient({ address: caAddress, rootPem, tokenFile: file }).fetch(id)
  .then((c) => ({ ok: true, cert: c }), (e) => ({ ok: false, error: e.message }));
const handshake = (certPem, keyPem) => new Promise((resolve) => {
  const s = tls.connect({ host: peer, port: 15008, cert: certPem, key: keyPem, ca: rootPem, ALPNProtocols: ['h2'],
    minVersion: 'TLSv1.3', checkServerIdentity: () => undefined });
  const t = setTimeout(() => { s.destroy(); resolve('no answer'); }, 5000);
  s.on('data', () => { clearTimeout(t); s.destroy(); resolve('accepted'); });
  s.on('error', (e) => { clearTimeout(t); resolve('refused: ' + e.message); });
  s.on('close', () => { clearTimeout(t); resolve('refused: closed'); });
});
const alg = { name: 'ECDSA', namedCurve: 'P-256', hash: 'SHA-256' };
x509.cryptoProvider.set(webcrypto);
const keys = await webcrypto.subtle.generateKey(alg, true, ['sign', 'verify']);
const self = await x509.X509CertificateGenerator.createSelfSigned({ serialNumber: '01', name: 'CN=forged', keys,
  signingAlgorithm: alg, notBefore: new Date(Date.now() - 60000), notAfter: new Date(Date.now() + 3600000),
  extensions: [new x509.SubjectAlternativeNameExtension([{ type: 'url', value: foreign }])] });
const pkcs8 = Buffer.from(await webcrypto.subtle.exportKey('pkcs8', keys.privateKey)).toString('base64');
const selfKey = '-----BEGIN PRIVATE KEY-----\\n' + pkcs8.replace(/.{64}/g, '$&\\n') + '\\n-----END PRIVATE KEY-----\\n';
const foreignAsk = await ask(tokenFile, foreign);
const ownAsk = await ask(tokenFile, own);
const audienceAsk = await ask(otherAudienceFile, own);
const selfSigned = await handshake(self.toString('pem'), selfKey);
const granted = ownAsk.ok ? await handshake(ownAsk.cert.certPem, ownAsk.cert.keyPem) : 'not granted';
console.log(JSON.stringify({
  foreign: foreignAsk.ok ? 'granted' : foreignAsk.error,
  own: ownAsk.ok ? 'granted ' + ownAsk.cert.identity : ownAsk.error,
  audience: audienceAsk.ok ? 'granted' : audienceAsk.error,
  selfSigned, granted,
}));
`;
}

test('certificates from the mesh CA: cross-node HBONE under the pod identity, own-node identities only, a compromised node gets and forges none, fail closed without the CA', async () => {
  await withNetnsWorld({ profile: 'strict' }, async (w) => {
    await w.createNamespace('mesh', MESH);
    await w.createPod({ ...a, node: 'node-0', app });
    await w.createPod({ ...b, node: 'node-1', app });
    await w.createNamespace('vault', MESH);
    await w.createPod({ namespace: 'vault', name: 'v', node: 'node-1', app });
    await w.settle();

    const r = await w.connect({ kind: 'pod', pod: a }, { kind: 'pod', pod: b, port: 8080 });
    expect(
      r.deliveries.filter((d) => d.pod.name === 'b'),
      `${r.trace}\nproxy records: ${JSON.stringify(r.proxyLog)}`,
    ).toEqual([expect.objectContaining({ port: 8080, viaProxy: true })]);
    const inbound = r.proxyLog.find((e) => e.node === 'node-1' && e.event === 'forwarded');
    expect(inbound?.srcIdentity, r.trace).toBe('spiffe://cluster.local/ns/mesh/sa/default');

    // Each proxy holds the identities of its own node's pods (prefetched as it serves them), and
    // no key: its command line names the CA, not a root key.
    const held = async (node: string): Promise<string[]> => {
      const s = await w.lab.componentStatus('proxy', node);
      return ((s.status?.['certificates'] ?? []) as { identity: string; notAfterMs?: number }[])
        .filter((x) => x.notAfterMs !== undefined)
        .map((x) => x.identity);
    };
    expect(await held('node-0')).toEqual(['spiffe://cluster.local/ns/mesh/sa/default']);
    expect((await held('node-1')).sort()).toEqual(['spiffe://cluster.local/ns/mesh/sa/default', FOREIGN].sort());
    const caLog = fs.readFileSync(`${w.lab.state.runDir}/ca.log`, 'utf8');
    expect(caLog).toContain('mesh CA serving');

    // The compromised node.
    const lab = w.lab;
    // node-1's proxy serves v's HBONE on v's address, port 15008 (its in-pod listener)
    const vIp = (await w.pods()).find((p) => p.name === 'v')!.ips.find((ip) => !ip.includes(':'))!;
    const node0 = lab.state.nodes[0]!;
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'al-attacker-'));
    try {
      // a token of node-0's proxy pod for another audience: what a TokenRequest by root on node-0
      // (with the proxy's credentials) could get; the CA reviews tokens for istio-ca only
      const pod = await lab.api.get('Pod', 'ambient-lab-proxy-node-0', 'ambient-lab-system');
      const other = await lab.api.requestToken(
        'ambient-lab-system',
        'ambient-lab-proxy',
        { name: 'ambient-lab-proxy-node-0', uid: pod.metadata!.uid! },
        'vault',
        3600,
      );
      fs.writeFileSync(path.join(dir, 'other-audience'), other, { mode: 0o600 });
      const program = path.join(dir, 'attacker.mjs');
      fs.writeFileSync(program, attackerProgram());
      const out = await execIn(
        node0.netns,
        [
          process.execPath,
          program,
          lab.caAddress(),
          path.join(lab.nodeDir(node0.name), 'configmaps', 'ambient-lab-mesh-root-cert', 'ca.crt'),
          path.join(lab.nodeDir(node0.name), 'tokens', 'istio-token'),
          path.join(dir, 'other-audience'),
          vIp,
          OWN,
          FOREIGN,
        ],
        undefined,
        60_000,
      );
      const r = JSON.parse(out.trim().split('\n').at(-1)!) as Record<string, string>;
      expect(r['foreign']).toMatch(
        /refused spiffe:\/\/cluster\.local\/ns\/vault\/sa\/default: 401 request authenticate failure/,
      );
      expect(r['own']).toBe(`granted ${OWN}`);
      expect(r['audience']).toMatch(/: 401 request authenticate failure/);
      // refused by TLS: node-1's proxy answers the foreign root with an alert (not a port nobody listens on)
      expect(r['selfSigned'], out).toMatch(/^refused: .*alert unknown ca/);
      expect(r['granted']).toBe('accepted');
      // the CA's log says why it refused (the answer stays opaque, as upstream)
      const caLog = fs.readFileSync(path.join(lab.state.runDir, 'ca.log'), 'utf8');
      expect(caLog).toContain('vault/sa/default');
    } finally {
      fs.rmSync(dir, { recursive: true, force: true });
    }

    // The same attack as the catalog's forged-identity phase runs it (World.forgedHbone): every
    // credential this world can present is refused for v's identity, the self-signed certificate
    // is refused in the handshake, and the control — node-0's own identity — is issued and
    // delivered to b under that identity.
    const toV = { kind: 'pod' as const, pod: { namespace: 'vault', name: 'v' }, port: 8080 };
    expect(w.forgeableCredentials).not.toContain('expired-token'); // a real world cannot wait 10 minutes
    for (const credential of w.forgeableCredentials.filter((x) => x !== 'self-signed')) {
      const f = await w.forgedHbone('node-0', FOREIGN, credential, toV);
      expect(f.certificate.kind, `${credential}: ${f.certificate.detail}`).toBe('refused');
      expect(f.certificate.detail, credential).toMatch(/401 request authenticate failure/);
      expect(f.deliveries, credential).toEqual([]);
    }
    const forged = await w.forgedHbone('node-0', FOREIGN, 'self-signed', toV);
    expect(forged.certificate.kind).toBe('self-signed');
    expect(forged.outcome, forged.trace).toBe('refused');
    expect(forged.deliveries, forged.trace).toEqual([]);
    const control = await w.forgedHbone('node-0', OWN, 'node-token', { kind: 'pod', pod: b, port: 8080 });
    expect(control.certificate.kind, control.trace).toBe('issued');
    expect(control.deliveries, control.trace).toEqual([expect.objectContaining({ pod: b, viaProxy: true })]);
    expect(control.proxyLog.find((e) => e.event === 'forwarded')?.srcIdentity, control.trace).toBe(OWN);

    // The CA goes down; a pod of a new identity arrives on node-0.
    await w.lab.stopCa();
    await w.createNamespace('late', MESH);
    await w.createPod({ ...c, node: 'node-0', app });
    await w.settle();
    const denied = await w.connect({ kind: 'pod', pod: c }, { kind: 'pod', pod: b, port: 8080 });
    expect(
      denied.deliveries.filter((d) => d.pod.name === 'b'),
      denied.trace,
    ).toEqual([]);
    expect(
      denied.proxyLog.some((e) => e.node === 'node-0' && /no-certificate|no certificate/.test(e.reason)),
      denied.trace,
    ).toBe(true);

    // Back: the proxy's retry (backoff 1 s, doubling: at most 16 s by now) gets the certificate
    // by itself, and the connection goes through.
    await w.lab.startCa();
    const late = 'spiffe://cluster.local/ns/late/sa/default';
    await expect.poll(() => held('node-0'), { timeout: 60_000, intervals: [500] }).toContain(late);
    const ok = await w.connect({ kind: 'pod', pod: c }, { kind: 'pod', pod: b, port: 8080 });
    // on failure: what node-0's proxy said about certificates (the connection log says only "failed")
    const certLines = (): string =>
      fs
        .readFileSync(path.join(w.lab.nodeDir('node-0'), 'proxy.log'), 'utf8')
        .split('\n')
        .filter((l) => l.includes('certificate'))
        .slice(-10)
        .join('\n');
    expect(
      ok.deliveries.filter((d) => d.pod.name === 'b'),
      `${ok.trace}\nproxy records: ${JSON.stringify(ok.proxyLog)}\n${certLines()}`,
    ).toEqual([expect.objectContaining({ port: 8080, viaProxy: true })]);
    expect(ok.proxyLog.find((e) => e.node === 'node-1' && e.event === 'forwarded')?.srcIdentity).toBe(late);

    // A lab that stays up refreshes the proxies' projected tokens as kubelet does (80 % of their
    // 12 h; here after 300 ms): the file is replaced whole, keeps its owner and mode, and the new
    // token is one the API authenticates for the CA's audience.
    const tokenFile = w.lab.proxyVolumeFiles('node-0').token;
    const before = fs.readFileSync(tokenFile, 'utf8');
    await w.lab.startTokenRefresher({ checkEveryMs: 200, maxAgeMs: 300 });
    await expect.poll(() => fs.readFileSync(tokenFile, 'utf8'), { timeout: 30_000 }).not.toBe(before);
    const st = fs.statSync(tokenFile);
    expect([st.mode & 0o777, st.uid, st.gid]).toEqual([0o440, 0, w.lab.proxyGid()]);
    const review = (await request(w.lab.state.apiSocket, 'POST', '/apis/authentication.k8s.io/v1/tokenreviews', {
      apiVersion: 'authentication.k8s.io/v1',
      kind: 'TokenReview',
      spec: { token: fs.readFileSync(tokenFile, 'utf8'), audiences: ['istio-ca'] },
    })) as { status?: { authenticated?: boolean; user?: { username?: string } } };
    expect(review.status?.authenticated).toBe(true);
    expect(review.status?.user?.username).toBe('system:serviceaccount:ambient-lab-system:ambient-lab-proxy');
  });
});
