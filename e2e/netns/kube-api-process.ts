/**
 * The netns world's Kubernetes API as its own process, run in the cluster's fabric netns
 * (`ip netns exec <prefix>fabric node dist/e2e/netns/kube-api-process.js ...`):
 *
 *   - an ApiStore with the sim facade (sim/kube/http-facade.ts) on the fabric's 127.0.0.1;
 *   - a TCP relay on <listen address>:<port> (the fabric bridge address, reachable from every
 *     node netns: node agents, proxies and the CNI plugin use it through their kubeconfig);
 *   - a Unix-socket relay (`--api-socket`) for the harness in the root netns, which has no route
 *     into the private topology (Unix sockets are not per network namespace);
 *   - a control endpoint on a second Unix socket (`--control-socket`): POST /drop-watches;
 *   - on <listen address>:<port + 2>, an API that answers every request 500 (a Status, as an
 *     overloaded or broken API server would): the CNI plugin's kubeconfig points there while
 *     the lab breaks the API for it in `error` mode (NetnsLab.setCniApiFault);
 *   - with `--tls-cert FILE --tls-key FILE`, the TCP relay terminates TLS (the container world's
 *     components use in-cluster config, which client-node and the CNI installer make https://);
 *     the facade behind it, and the Unix relay, stay plain HTTP.
 *
 * A process rather than in the harness because `ambient-lab up` leaves the cluster running after
 * the command exits. Prints one line `{"ready":true,...}` on stdout when serving; SIGTERM ends it.
 */
import * as fs from 'node:fs';
import * as http from 'node:http';
import * as net from 'node:net';
import * as tls from 'node:tls';
import { SystemClock } from '../../impl/linux/clock.js';
import { SystemRandom } from '../../impl/linux/random.js';
import { startKubeApiFacade } from '../../sim/kube/http-facade.js';
import { ApiStore } from '../../sim/kube/store.js';

function arg(name: string): string {
  const i = process.argv.indexOf(`--${name}`);
  const v = i >= 0 ? process.argv[i + 1] : undefined;
  if (v === undefined) throw new Error(`kube-api-process: --${name} is required`);
  return v;
}

function optArg(name: string): string | undefined {
  const i = process.argv.indexOf(`--${name}`);
  return i >= 0 ? process.argv[i + 1] : undefined;
}

function relay(target: number, tlsFiles?: { cert: string; key: string }): net.Server {
  const handle = (c: net.Socket): void => {
    const up = net.connect(target, '127.0.0.1');
    c.pipe(up).pipe(c);
    const end = (): void => {
      c.destroy();
      up.destroy();
    };
    c.on('error', end);
    up.on('error', end);
  };
  return tlsFiles
    ? tls.createServer({ cert: fs.readFileSync(tlsFiles.cert), key: fs.readFileSync(tlsFiles.key) }, handle)
    : net.createServer(handle);
}

function listenUnix(server: net.Server, path: string): Promise<void> {
  fs.rmSync(path, { force: true });
  return new Promise((resolve, reject) => {
    server.once('error', reject);
    server.listen(path, () => {
      fs.chmodSync(path, 0o600);
      resolve();
    });
  });
}

async function main(): Promise<void> {
  const [host, portText] = arg('listen').split(':') as [string, string];
  const apiSocket = arg('api-socket');
  const controlSocket = arg('control-socket');
  const store = new ApiStore({
    clock: new SystemClock(),
    random: new SystemRandom(),
    epochMs: Date.now() - performance.now(),
  });
  const facade = await startKubeApiFacade(store);
  const cert = optArg('tls-cert');
  const key = optArg('tls-key');
  if ((cert === undefined) !== (key === undefined))
    throw new Error('kube-api-process: --tls-cert and --tls-key go together');
  const tcp = relay(facade.port, cert !== undefined && key !== undefined ? { cert, key } : undefined);
  await new Promise<void>((resolve, reject) => {
    tcp.once('error', (e) => reject(new Error(`kube-api-process: cannot listen on ${host}:${portText}: ${e.message}`)));
    tcp.listen(Number(portText), host, () => resolve());
  });
  await listenUnix(relay(facade.port), apiSocket);
  const erroring = http.createServer((req, res) => {
    const body = JSON.stringify({
      kind: 'Status',
      apiVersion: 'v1',
      status: 'Failure',
      message: 'the lab breaks the API for this client (ambient-lab api fault on --mode error)',
      reason: 'InternalError',
      code: 500,
    });
    res.writeHead(500, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body) });
    res.end(body);
  });
  await new Promise<void>((resolve, reject) => {
    erroring.once('error', (e) =>
      reject(new Error(`kube-api-process: cannot listen on ${host}:${Number(portText) + 2}: ${e.message}`)),
    );
    erroring.listen(Number(portText) + 2, host, () => resolve());
  });
  const control = http.createServer((req, res) => {
    if (req.method === 'POST' && req.url === '/drop-watches') {
      const n = store.dropWatches();
      res.end(JSON.stringify({ dropped: n }));
    } else {
      res.statusCode = 404;
      res.end(JSON.stringify({ error: 'POST /drop-watches only' }));
    }
  });
  await listenUnix(control, controlSocket);
  process.stdout.write(
    `${JSON.stringify({ ready: true, url: `${cert ? 'https' : 'http'}://${host}:${portText}`, pid: process.pid })}\n`,
  );
  process.on('SIGTERM', () => {
    void facade.close().finally(() => {
      for (const p of [apiSocket, controlSocket]) fs.rmSync(p, { force: true });
      process.exit(0);
    });
  });
}

main().catch((e: unknown) => {
  process.stderr.write(`kube-api-process: ${e instanceof Error ? e.message : String(e)}\n`);
  process.exit(1);
});
