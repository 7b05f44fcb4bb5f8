/**
 * Issue 18's threat on the real kernel: root on node-0 (host-root) holds what node-0's proxy
 * holds — its projected token, the root certificate — but not the root key, which only the CA
 * has. From node-0's network namespace, as root, it asks the CA for the identity of a pod that
 * runs on node-1 (refused), for a node-0 pod's identity (granted: what a node may hold, the
 * control that the request path works), with a token for another audience (refused), and it
 * offers node-1's proxy a self-signed certificate naming node-1's pod (the handshake is refused)
 * and the granted certificate (accepted: the control that the handshake check can tell), on v's
 * HBONE port (15008, the in-pod listener of node-1's proxy).
 */
import { test, expect } from '@playwright/test';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { execIn } from '../../../e2e/netns/ip.js';
import { repoRoot } from '../../../e2e/netns/world-lab.js';
import { MESH, skipUnlessSuiteWorldAvailable, withNetnsWorld } from './fixture.js';

skipUnlessSuiteWorldAvailable();
test.setTimeout(600_000); // generous: the suite must pass on a loaded machine (npm run test:netns:loaded)

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

test('host-root on node-0 cannot get or forge a node-1 identity: the CA refuses it, a wrong-audience token, and node-1 refuses a self-signed certificate', async () => {
  await withNetnsWorld({ profile: 'strict' }, async (w) => {
    await w.createNamespace('mesh', MESH);
    await w.createNamespace('vault', MESH);
    const app = { uid: 1000, caps: [], tcpPorts: [8080] };
    await w.createPod({ namespace: 'mesh', name: 'a', node: 'node-0', app });
    await w.createPod({ namespace: 'vault', name: 'v', node: 'node-1', app });
    await w.settle();

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
  });
});
