/**
 * The mesh CA as a process (bin/ambient-lab-ca.js) and its HTTPS transport
 * (impl/linux/mesh-ca-http.ts), on loopback against the sim API's HTTP facade: TLS with a
 * serving certificate the root signs, a certificate for the node proxy's own node's pod, a
 * refusal for another node's, a body over the cap cut off at 413, a flood answered 503 while
 * the CA is busy, and a clean exit on SIGTERM.
 */
import { test, expect } from '@playwright/test';
import 'reflect-metadata';
import * as x509 from '@peculiar/x509';
import { spawn } from 'node:child_process';
import * as fs from 'node:fs';
import * as https from 'node:https';
import * as os from 'node:os';
import * as path from 'node:path';
import { facadeKubeconfig, startKubeApiFacade } from '../../../sim/kube/http-facade.js';
import { SystemClock } from '../../../impl/linux/clock.js';
import { MeshCa } from '../../../impl/linux/mesh-ca.js';
import { serveCaHttps } from '../../../impl/linux/mesh-ca-http.js';
import { CA_PATH, MAX_BODY_BYTES } from '../../../impl/mesh-ca/http-api.js';
import { clusterApi, csrFor, DB, WEB } from './harness.js';

const REPO = path.resolve(import.meta.dirname, '..', '..', '..');
const NAME = 'ambient-lab-ca.ambient-lab-system.svc';

function post(port: number, ca: string, body: string, token?: string): Promise<{ status: number; body: string }> {
  return new Promise((resolve, reject) => {
    const req = https.request(
      {
        host: '127.0.0.1',
        port,
        servername: NAME,
        ca,
        method: 'POST',
        path: CA_PATH,
        headers: {
          'content-type': 'application/json',
          'content-length': Buffer.byteLength(body),
          ...(token ? { authorization: `Bearer ${token}` } : {}),
        },
      },
      (res) => {
        let text = '';
        res.setEncoding('utf8');
        res.on('data', (d: string) => (text += d));
        res.on('end', () => resolve({ status: res.statusCode ?? 0, body: text }));
      },
    );
    req.on('error', reject);
    req.end(body);
  });
}

test('bin/ambient-lab-ca.js: TLS by its root, own-node certificates only, 413 past the cap, exit 0 on SIGTERM', async () => {
  const { store, proxyToken: token } = clusterApi(new SystemClock());
  const facade = await startKubeApiFacade(store);
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'al-ca-'));
  const root = await (await MeshCa.create('cluster.local')).exportRoot();
  fs.writeFileSync(path.join(dir, 'ca.pem'), root.certPem);
  fs.writeFileSync(path.join(dir, 'ca.key'), root.keyPem, { mode: 0o600 });
  facadeKubeconfig(facade.url, path.join(dir, 'kubeconfig'));
  const child = spawn(
    process.execPath,
    [
      path.join(REPO, 'bin', 'ambient-lab-ca.js'),
      '--ca-cert',
      path.join(dir, 'ca.pem'),
      '--ca-key',
      path.join(dir, 'ca.key'),
      '--listen',
      '127.0.0.1:0',
      '--kubeconfig',
      path.join(dir, 'kubeconfig'),
    ],
    { stdio: ['ignore', 'pipe', 'pipe'] },
  );
  let out = '';
  child.stdout.setEncoding('utf8').on('data', (d: string) => (out += d));
  child.stderr.setEncoding('utf8').on('data', (d: string) => (out += d));
  const exited = new Promise<number | null>((resolve) => child.on('exit', (code) => resolve(code)));
  try {
    const deadline = Date.now() + 20_000;
    let port: number | undefined;
    while (port === undefined) {
      const m = /"listen":"127\.0\.0\.1:(\d+)"/.exec(out);
      if (m) port = Number(m[1]);
      else if (Date.now() > deadline || child.exitCode !== null) throw new Error(`the CA did not start: ${out}`);
      else await new Promise((r) => setTimeout(r, 50));
    }
    const web = await post(port, root.certPem, JSON.stringify({ csr: await csrFor(WEB), identity: WEB }), token);
    expect(web.status, web.body).toBe(200);
    const issued = JSON.parse(web.body) as { identity: string; certChain: string[] };
    expect(issued.identity).toBe(WEB);
    // valid now, by the wall clock a peer checks it with, for the default 24 h
    const leaf = new x509.X509Certificate(issued.certChain[0]!);
    expect(leaf.notBefore.getTime()).toBeLessThanOrEqual(Date.now());
    expect(leaf.notAfter.getTime()).toBeGreaterThan(Date.now() + 23 * 3600 * 1000);
    const db = await post(port, root.certPem, JSON.stringify({ csr: await csrFor(DB), identity: DB }), token);
    expect(db).toEqual({ status: 401, body: '{"error":"request authenticate failure"}' });
    expect(out).toMatch(/"reason":"no pod of shop\/db runs on node node-0".*"msg":"certificate request refused"/);
    const big = await post(port, root.certPem, 'x'.repeat(MAX_BODY_BYTES * 4), token);
    expect(big.status).toBe(413);
    child.kill('SIGTERM');
    expect(await exited).toBe(0);
  } finally {
    if (child.exitCode === null) child.kill('SIGKILL');
    await facade.close();
    fs.rmSync(dir, { recursive: true, force: true });
  }
});

test('the transport answers 503 with Retry-After past its in-flight cap, and serves again once free', async () => {
  const ca = await MeshCa.create('cluster.local');
  const serving = await ca.servingCertificate([NAME], []);
  let release: () => void = () => undefined;
  const gate = new Promise<void>((r) => (release = r));
  // Both parked requests are in the handler (not just sent): a loaded machine may take long over TLS.
  let arrived = 0;
  let bothIn: () => void = () => undefined;
  const bothInHandler = new Promise<void>((r) => (bothIn = r));
  const server = await serveCaHttps(
    { host: '127.0.0.1', port: 0, certPem: serving.certPem, keyPem: serving.keyPem, maxInFlight: 2 },
    async () => {
      if (++arrived === 2) bothIn();
      await gate;
      return { status: 200, body: { ok: true } };
    },
  );
  try {
    const parked = [post(server.port, ca.rootPem, '{}'), post(server.port, ca.rootPem, '{}')];
    await bothInHandler;
    const third = await post(server.port, ca.rootPem, '{}');
    expect(third.status).toBe(503);
    expect(third.body).toMatch(/busy: 2 requests in progress/);
    release();
    expect((await Promise.all(parked)).map((r) => r.status)).toEqual([200, 200]);
    expect((await post(server.port, ca.rootPem, '{}')).status).toBe(200);
  } finally {
    await server.close();
  }
});
