/**
 * CNI plugin start-up + round trip (issue 6): the real executable (`bin/ambient-lab-cni.js`) run
 * as the runtime runs it, for an ambient pod (reads pod + namespace from the API, sends the add
 * event over the Unix socket, waits for the agent), side by side in one run with a bare
 * `node -e ""` start (the floor any Node.js plugin pays) and a VERSION call.
 *
 *   npm run bench:cni
 */
import { spawn } from 'node:child_process';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { fileURLToPath } from 'node:url';
import { ApiStore } from '../sim/kube/store.js';
import { startKubeApiFacade, facadeKubeconfig } from '../sim/kube/http-facade.js';
import { SystemClock } from '../impl/linux/clock.js';
import { SystemRandom } from '../impl/linux/random.js';
import { HttpPluginEventTransport } from '../impl/linux/plugin-events-http.js';
import { cniEnv, k8sCniArgs } from '../impl/api/cni.js';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..', '..');
const plugin = path.join(root, 'bin', 'ambient-lab-cni.js');

async function main(): Promise<void> {
  const runs = Number(process.env['BENCH_RUNS'] ?? 20);
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'al-bench-cni-'));
  const store = new ApiStore({ clock: new SystemClock(), random: new SystemRandom() });
  await store.create('Namespace', { metadata: { name: 'shop', labels: { 'istio.io/dataplane-mode': 'ambient' } } });
  await store.create('Pod', {
    metadata: { name: 'web', namespace: 'shop' },
    spec: { nodeName: 'n1', containers: [{ name: 'c', image: 'i' }] },
  });
  const facade = await startKubeApiFacade(store);
  const kubeconfig = path.join(dir, 'kubeconfig');
  facadeKubeconfig(facade.url, kubeconfig);
  const sock = path.join(dir, 'run', 'events.sock');
  const transport = new HttpPluginEventTransport();
  const server = await transport.serve(sock, async () => ({ ok: true, status: 'enabled' }), {
    maxBodyBytes: 16384,
    requestTimeoutMs: 5000,
  });
  const conf = JSON.stringify({
    cniVersion: '1.0.0',
    name: 'k8s',
    type: 'ambient-lab-cni',
    agentSocket: sock,
    kubeconfig,
    prevResult: { cniVersion: '1.0.0', ips: [{ address: '10.244.1.5/24' }] },
  });
  const env = {
    ...process.env,
    ...cniEnv({
      command: 'ADD',
      containerId: 'c1',
      netns: '/var/run/netns/x',
      ifname: 'eth0',
      args: k8sCniArgs({ namespace: 'shop', name: 'web', uid: 'u1' }, 'c1'),
      path: ['/opt/cni/bin'],
    }),
  };
  // Spawned asynchronously: this process's event loop serves the API and the agent socket.
  const timeAsync = async (argv: string[], e: NodeJS.ProcessEnv, input: string): Promise<number> => {
    const t0 = performance.now();
    await new Promise<void>((resolve, reject) => {
      const c = spawn(process.execPath, argv, { env: e, stdio: ['pipe', 'pipe', 'inherit'] });
      let out = '';
      c.stdout.on('data', (d) => (out += d));
      c.on('exit', (code) => (code === 0 ? resolve() : reject(new Error(`exit ${code}: ${out}`))));
      c.stdin.end(input);
    });
    return performance.now() - t0;
  };
  const measure = async (argv: string[], e: NodeJS.ProcessEnv, input: string): Promise<number> => {
    await timeAsync(argv, e, input); // warm the file cache
    const xs: number[] = [];
    for (let i = 0; i < runs; i++) xs.push(await timeAsync(argv, e, input));
    xs.sort((a, b) => a - b);
    return xs[Math.floor(xs.length / 2)]!;
  };
  const bare = await measure(['-e', ''], process.env, '');
  const version = await measure([plugin], { ...process.env, CNI_COMMAND: 'VERSION' }, '');
  const add = await measure([plugin], env, conf);
  await server.close();
  await facade.close();
  fs.rmSync(dir, { recursive: true, force: true });
  console.log(`CNI plugin, median of ${runs} runs (ms)`);
  console.log(`  node -e ""                    ${bare.toFixed(1).padStart(7)}   1.00x`);
  console.log(`  ambient-lab-cni VERSION       ${version.toFixed(1).padStart(7)}   ${(version / bare).toFixed(2)}x`);
  console.log(
    `  ambient-lab-cni ADD (ambient) ${add.toFixed(1).padStart(7)}   ${(add / bare).toFixed(2)}x   (API get x2 + agent round trip)`,
  );
}

main().catch((e: unknown) => {
  console.error(e);
  process.exitCode = 1;
});
