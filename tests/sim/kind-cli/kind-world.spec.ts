/**
 * The kind world's own logic without a cluster: client-node talks to the sim's HTTP facade
 * (sim/kube/http-facade.ts) and kubectl/docker are fakes on PATH (fakes.ts). `kubectl exec`
 * runs the REAL probe program locally and `kubectl logs` returns what a REAL pod app
 * (e2e/netns/world-pod-app.ts) and a small relay standing for the node proxy wrote — so
 * connect() is checked end to end: the exec command line, the probe protocol, attribution
 * from the logs (direct to the app, via the proxy, refused). Also the command lines of
 * stop/start (node label), restart, rebootNode and dropWatches.
 * Needs the compiled probe program and pod app (`npx tsc -p .`).
 */
import { test, expect } from '@playwright/test';
import { spawn, type ChildProcess } from 'node:child_process';
import { existsSync, mkdtempSync, rmSync, appendFileSync, readFileSync, writeFileSync } from 'node:fs';
import * as net from 'node:net';
import * as os from 'node:os';
import * as path from 'node:path';
import { fileURLToPath } from 'node:url';
import * as k8s from '@kubernetes/client-node';
import { SystemClock } from '../../../impl/linux/clock.js';
import { formatRecord, CONNECTION_LOG_VERSION } from '../../../impl/ztunnel/connection-log.js';
import { ApiStore } from '../../../sim/kube/store.js';
import { facadeKubeconfig, startKubeApiFacade, type KubeApiFacade } from '../../../sim/kube/http-facade.js';
import { SeededRandom } from '../../../sim/time/seeded-random.js';
import { KindCli, PROBE_PROGRAM, SYSTEM_NAMESPACE } from '../../../e2e/kind/kind-cli.js';
import { KindWorld } from '../../../e2e/kind/kind-world.js';
import type { WorldOptions } from '../../../scenarios/world.js';
import { makeFakes, type Fakes } from './fakes.js';

const repo = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../../..');
const probeJs = path.join(repo, 'dist/e2e/netns/probe-program.js');
const podAppJs = path.join(repo, 'dist/e2e/netns/world-pod-app.js');
const KC = '/tmp/al-kind-world-test.kubeconfig';
const OPTIONS: WorldOptions = {
  nodes: 1,
  profile: 'upstream',
  kernelVersion: '6.1',
  ipv6: false,
  dnsCapture: false,
  seed: 1,
};

test.skip(
  !existsSync(probeJs) || !existsSync(podAppJs),
  `needs the compiled probe program and pod app (${probeJs}): run \`npx tsc -p .\``,
);

interface Rig {
  readonly world: KindWorld;
  readonly fakes: Fakes;
  readonly tmp: string;
  readonly appPort: number;
  readonly relayPort: number;
  readonly appLog: string;
  readonly proxyLog: string;
  readonly uids: Record<string, string>;
}

async function freePort(host: string): Promise<number> {
  const s = net.createServer();
  await new Promise<void>((r) => s.listen(0, host, () => r()));
  const port = (s.address() as net.AddressInfo).port;
  await new Promise<void>((r) => s.close(() => r()));
  return port;
}

/** A stand-in for the node proxy's inbound leg on 127.0.0.2: relays to the app and writes a connection-log record. */
function relay(listenPort: number, appPort: number, logFile: string): net.Server {
  return net
    .createServer((down) => {
      const up = net.connect({ host: '127.0.0.1', port: appPort }, () => {
        appendFileSync(
          logFile,
          formatRecord({
            v: CONNECTION_LOG_VERSION,
            time: 1,
            event: 'forwarded',
            direction: 'inbound-plaintext',
            pod: 'mesh/c',
            downstream: {
              src: { ip: down.remoteAddress!, port: down.remotePort! },
              dst: { ip: '127.0.0.2', port: listenPort },
            },
            upstream: { src: { ip: up.localAddress!, port: up.localPort! }, dst: { ip: '127.0.0.1', port: appPort } },
            decision: { allow: true, reason: 'allow-all' },
          }),
        );
        down.pipe(up).pipe(down);
      });
      up.on('error', () => down.destroy());
      down.on('error', () => up.destroy());
    })
    .listen(listenPort, '127.0.0.2');
}

/**
 * Wait for the app's "ready" line: it opens its report file before it listens, so the file's
 * existence alone let a probe on a loaded machine reach a port nobody listened on yet.
 */
async function appReady(appLog: string): Promise<void> {
  const deadline = Date.now() + 30_000;
  while (Date.now() < deadline) {
    if (existsSync(appLog) && readFileSync(appLog, 'utf8').includes('"ev":"ready"')) return;
    await new Promise((r) => setTimeout(r, 50));
  }
  throw new Error(`the pod app did not report ready within 30 s (${appLog}); is dist/ built (\`npx tsc -p .\`)?`);
}

async function withRig(fn: (r: Rig) => Promise<void>): Promise<void> {
  const tmp = mkdtempSync(path.join(os.tmpdir(), 'al-kindworld-'));
  const store = new ApiStore({ clock: new SystemClock(), random: new SeededRandom(1) });
  const facade: KubeApiFacade = await startKubeApiFacade(store);
  const fakes = await makeFakes(['kubectl', 'docker', 'iptables-restore']);
  const appLog = path.join(tmp, 'app.jsonl');
  const proxyLog = path.join(tmp, 'proxy.jsonl');
  writeFileSync(proxyLog, '{"level":"info","msg":"proxy started"}\n'); // pino lines mix with records
  const appPort = await freePort('127.0.0.1');
  const relayPort = await freePort('127.0.0.2');
  const children: ChildProcess[] = [];
  const relayServer = relay(relayPort, appPort, proxyLog);
  try {
    await new Promise<void>((resolve, reject) => {
      relayServer.once('listening', resolve);
      relayServer.once('error', reject);
    });
    const app = spawn(process.execPath, [podAppJs, '--pod', 'mesh/b', '--report', appLog, '--tcp', String(appPort)], {
      stdio: 'ignore',
    });
    children.push(app);
    await appReady(appLog);
    await fakes.setRules([
      { bin: 'kubectl', has: ['exec', '-i', '--', 'node', PROBE_PROGRAM], exec: [process.execPath, probeJs] },
      { bin: 'kubectl', has: ['logs', '-c', 'app'], stdoutFile: appLog },
      {
        bin: 'kubectl',
        has: ['get', 'pods', 'app.kubernetes.io/name=ambient-lab-proxy'],
        stdout: 'ambient-lab-proxy-n1|true|\n',
      },
      { bin: 'kubectl', has: ['logs', 'ambient-lab-proxy-n1', '-c', 'proxy'], stdoutFile: proxyLog },
    ]);
    const kc = new k8s.KubeConfig();
    kc.loadFromString(facadeKubeconfig(facade.url));
    const core = kc.makeApiClient(k8s.CoreV1Api);
    await core.createNode({
      body: { metadata: { name: 'n1' }, status: { addresses: [{ type: 'InternalIP', address: '172.18.0.2' }] } },
    });
    const uids: Record<string, string> = {};
    await core.createNamespace({ body: { metadata: { name: 'mesh' } } });
    for (const [name, ip] of [
      ['a', '127.0.0.1'],
      ['b', '127.0.0.1'],
      ['c', '127.0.0.2'],
    ] as const) {
      const created = await core.createNamespacedPod({
        namespace: 'mesh',
        body: {
          metadata: { name, annotations: { 'ambient.istio.io/redirection': 'enabled' } },
          spec: { nodeName: 'n1', containers: [{ name: 'app', image: 'x' }] },
        },
      });
      uids[name] = created.metadata!.uid!;
      await core.replaceNamespacedPodStatus({
        namespace: 'mesh',
        name,
        body: {
          ...created,
          status: {
            phase: 'Running',
            podIP: ip,
            podIPs: [{ ip }],
            containerStatuses: [
              { name: 'app', image: 'x', imageID: '', ready: true, restartCount: 0, state: { running: {} } },
            ],
          },
        },
      });
    }
    const cli = new KindCli({ cluster: 'al-e2e', repoRoot: repo, kubeconfig: KC, env: fakes.env });
    const world = new KindWorld(OPTIONS, ['n1'], cli, kc, undefined, fakes.env);
    await world.loadNodeAddresses();
    await fn({ world, fakes, tmp, appPort, relayPort, appLog, proxyLog, uids });
  } finally {
    for (const c of children) c.kill('SIGTERM');
    relayServer.close();
    await facade.close();
    await fakes.dispose();
    rmSync(tmp, { recursive: true, force: true });
  }
}

test('connect pod to pod, direct: the probe runs via `kubectl exec -i` in the source app container; the app accepted it and no proxy did', async () => {
  await withRig(async ({ world, fakes, appPort }) => {
    const r = await world.connect(
      { kind: 'pod', pod: { namespace: 'mesh', name: 'a' } },
      { kind: 'pod', pod: { namespace: 'mesh', name: 'b' }, port: appPort },
    );
    expect(r.outcome, r.error).toBe('established');
    expect(r.acceptedBy).toBe('app');
    expect(r.acceptedIn).toEqual({ namespace: 'mesh', name: 'b' });
    expect(r.deliveries).toEqual([
      {
        pod: { namespace: 'mesh', name: 'b' },
        port: appPort,
        peer: expect.stringMatching(/^127\.0\.0\.1:\d+$/),
        viaProxy: false,
      },
    ]);
    expect(r.proxyLog).toEqual([]);
    const calls = await fakes.calls();
    expect(calls[0]).toEqual([
      'kubectl',
      '--kubeconfig',
      KC,
      '-n',
      'mesh',
      'exec',
      '-i',
      'a',
      '-c',
      'app',
      '--',
      'node',
      PROBE_PROGRAM,
    ]);
    expect(calls).toContainEqual([
      'kubectl',
      '--kubeconfig',
      KC,
      '-n',
      'mesh',
      'logs',
      'b',
      '-c',
      'app',
      expect.stringMatching(/^--since-time=\d{4}-/),
    ]);
    expect(calls).toContainEqual([
      'kubectl',
      '--kubeconfig',
      KC,
      '-n',
      SYSTEM_NAMESPACE,
      'logs',
      'ambient-lab-proxy-n1',
      '-c',
      'proxy',
      expect.stringMatching(/^--since-time=/),
    ]);
  });
});

test('connect through the proxy: the first hop is the proxy record whose downstream is the client; the delivery is via the proxy', async () => {
  await withRig(async ({ world, relayPort, appPort }) => {
    const r = await world.connect(
      { kind: 'pod', pod: { namespace: 'mesh', name: 'a' } },
      { kind: 'pod', pod: { namespace: 'mesh', name: 'c' }, port: relayPort },
    );
    expect(r.outcome, r.error).toBe('established');
    expect(r.acceptedBy).toBe('proxy-inbound');
    expect(r.acceptedIn).toEqual({ namespace: 'mesh', name: 'c' });
    expect(r.deliveries).toEqual([
      {
        pod: { namespace: 'mesh', name: 'c' },
        port: appPort,
        peer: expect.stringMatching(/^127\.0\.0\.1:\d+$/),
        viaProxy: true,
        proxyNode: 'n1',
        proxyFor: { namespace: 'mesh', name: 'c' },
      },
    ]);
    expect(r.proxyLog).toEqual([
      {
        node: 'n1',
        pod: { namespace: 'mesh', name: 'c' },
        event: 'forwarded',
        direction: 'inbound-plaintext',
        srcIdentity: undefined,
        dstIdentity: undefined,
        allowed: true,
        reason: 'allow-all',
      },
    ]);
  });
});

test('refused, and an attempt from a host runs the host probe under setpriv with the source uid and capabilities', async () => {
  await withRig(async ({ world, fakes }) => {
    const closed = await freePort('127.0.0.1');
    const r = await world.connect(
      { kind: 'pod', pod: { namespace: 'mesh', name: 'a' } },
      { kind: 'ip', ip: '127.0.0.1', port: closed },
    );
    expect(r.outcome, r.error).toBe('refused');
    expect(r.acceptedBy).toBeUndefined();
    expect(r.deliveries).toEqual([]);
    await fakes.setRules([{ bin: 'kubectl', has: ['exec'], exec: ['sh', '-c', 'echo "setpriv missing" >&2; exit 3'] }]);
    await expect(
      world.connect(
        { kind: 'host', node: 'n1', uid: 1000, caps: ['NET_RAW'] },
        { kind: 'ip', ip: '127.0.0.1', port: closed },
      ),
    ).rejects.toThrow(/exited with code 3.*setpriv missing/s);
    expect((await fakes.calls()).at(-1)).toEqual([
      'kubectl',
      '--kubeconfig',
      KC,
      '-n',
      'ambient-lab-e2e',
      'exec',
      '-i',
      'host-probe-n1',
      '-c',
      'probe',
      '--',
      'setpriv',
      '--reuid=1000',
      '--regid=1000',
      '--clear-groups',
      '--inh-caps=-all,+net_raw',
      '--bounding-set=-all,+net_raw',
      '--ambient-caps=-all,+net_raw',
      'node',
      PROBE_PROGRAM,
    ]);
    expect(
      await world.connect(
        { kind: 'host', node: 'nope', uid: 0, caps: [] },
        { kind: 'ip', ip: '127.0.0.1', port: closed },
      ),
    ).toMatchObject({ outcome: 'error', error: 'no node nope in this world' });
  });
});

test('pods(): redirected and served come from the node (docker exec), never from the annotation', async () => {
  await withRig(async ({ world, fakes, uids }) => {
    await fakes.setRules([
      {
        bin: 'docker',
        has: ['exec', 'n1', 'sh', '-c'],
        stdout: `al-status {"pods":[{"uid":"${uids['a']}","identity":"4:111"},{"uid":"${uids['c']}","identity":"4:999"}]}\nal-pod ${uids['a']} 111 1\nal-pod ${uids['b']} 222 0\nal-pod ${uids['c']} 333 1\n`,
      },
    ]);
    const obs = Object.fromEntries(
      (await world.pods()).map((p) => [p.name, { redirected: p.redirected, served: p.served, started: p.started }]),
    );
    // every pod is annotated 'enabled'; only the node's evidence decides
    expect((await world.pods()).every((p) => p.annotation === 'enabled')).toBe(true);
    expect(obs).toEqual({
      a: { redirected: true, served: true, started: true },
      b: { redirected: false, served: false, started: true },
      c: { redirected: true, served: false, started: true }, // the proxy holds another netns for c
    });
    const call = (await fakes.calls()).find((c) => c[0] === 'docker')!;
    expect(call.slice(0, 5)).toEqual(['docker', 'exec', 'n1', 'sh', '-c']);
    expect(call[5]).toContain('crictl pods -q --state ready');
  });
});

test('pods(): a failed node read is an error — not "not redirected" or "not served"; a proxy that is not running serves nothing', async () => {
  await withRig(async ({ world, fakes, uids }) => {
    const proxyReady = {
      bin: 'kubectl',
      has: ['get', 'pods', 'app.kubernetes.io/name=ambient-lab-proxy'],
      stdout: 'ambient-lab-proxy-n1|true|\n',
    };
    const pods = `al-pod ${uids['a']} 111 1\nal-pod ${uids['b']} 222 0\nal-pod ${uids['c']} 333 1\n`;
    // positive control: no proxy pod on the node, curl cannot connect → nothing served, rules still read
    await fakes.setRules([
      { bin: 'docker', has: ['exec', 'n1', 'sh', '-c'], stdout: `al-status-error curl exit 7\n${pods}` },
    ]);
    expect((await world.pods()).map((p) => [p.name, p.redirected, p.served])).toEqual([
      ['a', true, false],
      ['b', false, false],
      ['c', true, false],
    ]);
    // the same answer while a ready proxy pod runs there: its /status could not be read
    await fakes.setRules([
      proxyReady,
      { bin: 'docker', has: ['exec', 'n1', 'sh', '-c'], stdout: `al-status-error curl exit 7\n${pods}` },
    ]);
    await expect(world.pods()).rejects.toThrow(/the proxy on n1 is ready but its \/status .* failed: curl exit 7/);
    // the node script failed (crictl), or printed nothing
    await fakes.setRules([
      proxyReady,
      {
        bin: 'docker',
        has: ['exec', 'n1', 'sh', '-c'],
        stderr: 'crictl pods -q --state ready failed (exit 1)',
        exit: 1,
      },
    ]);
    await expect(world.pods()).rejects.toThrow(
      /docker exec n1 sh -c [\s\S]* failed with exit code 1: crictl pods -q --state ready failed/,
    );
    await fakes.setRules([proxyReady, { bin: 'docker', has: ['exec', 'n1', 'sh', '-c'], stdout: '' }]);
    await expect(world.pods()).rejects.toThrow(/the node evidence script on n1 printed no status line/);
    // a running pod whose sandbox rules neither iptables backend could read
    await fakes.setRules([
      proxyReady,
      {
        bin: 'docker',
        has: ['exec', 'n1', 'sh', '-c'],
        stdout: `al-status {"pods":[]}\nal-pod-unreadable ${uids['a']} neither iptables-nft-save nor iptables-legacy-save could read netns /var/run/netns/x\n`,
      },
    ]);
    await expect(world.pods()).rejects.toThrow(/cannot read the rules of pod mesh\/a on n1: neither iptables-nft-save/);
  });
});

test('connect(): a proxy log, or the app log of a running pod, that cannot be read is an error — not "no proxy" or "no delivery"', async () => {
  await withRig(async ({ world, fakes, appLog, proxyLog }) => {
    const probe = {
      bin: 'kubectl',
      has: ['exec', '-i', '--', 'node', PROBE_PROGRAM],
      exec: [process.execPath, probeJs],
    };
    const proxyPods = {
      bin: 'kubectl',
      has: ['get', 'pods', 'app.kubernetes.io/name=ambient-lab-proxy'],
      stdout: 'ambient-lab-proxy-n1|true|\n',
    };
    const to = { kind: 'pod', pod: { namespace: 'mesh', name: 'c' }, port: 1 } as const;
    await fakes.setRules([
      probe,
      proxyPods,
      { bin: 'kubectl', has: ['logs', '-c', 'app'], stdoutFile: appLog },
      {
        bin: 'kubectl',
        has: ['logs', 'ambient-lab-proxy-n1', '-c', 'proxy'],
        stderr: 'Error from server: tls: internal error',
        exit: 1,
      },
    ]);
    await expect(world.connect({ kind: 'pod', pod: { namespace: 'mesh', name: 'a' } }, to, {})).rejects.toThrow(
      /kubectl --kubeconfig \S+ -n ambient-lab-system logs ambient-lab-proxy-n1 -c proxy .*failed with exit code 1: Error from server/,
    );
    // the app log of a running pod cannot be read
    await fakes.setRules([
      probe,
      proxyPods,
      { bin: 'kubectl', has: ['logs', '-c', 'app'], stderr: 'Error from server: tls: internal error', exit: 1 },
      { bin: 'kubectl', has: ['logs', 'ambient-lab-proxy-n1', '-c', 'proxy'], stdoutFile: proxyLog },
    ]);
    await expect(world.connect({ kind: 'pod', pod: { namespace: 'mesh', name: 'a' } }, to, {})).rejects.toThrow(
      /reading the app log of running pod mesh\/c failed: .*Error from server/,
    );
  });
});

test('stop/start take a component off a node by label and wait for its pod to go / come back ready; reboot and dropWatches command lines', async () => {
  await withRig(async ({ world, fakes }) => {
    await fakes.setRules([{ bin: 'kubectl', has: ['get', 'pods'], stdout: '' }]);
    await world.stop('agent', 'n1');
    await fakes.setRules([
      { bin: 'kubectl', has: ['get', 'pods'], stdout: 'ambient-lab-agent-x|true|\nambient-lab-proxy-y|true|\n' },
      { bin: 'docker', has: ['systemctl'], stdout: 'active\n' },
      { bin: 'kubectl', has: ['--raw', '/readyz'], stdout: 'ok' },
    ]);
    await world.start('agent', 'n1');
    await world.rebootNode('n1');
    await world.dropWatches();
    const k = (...a: string[]): string[] => ['kubectl', '--kubeconfig', KC, ...a];
    const getPods = (c: string): string[] =>
      k(
        '-n',
        SYSTEM_NAMESPACE,
        'get',
        'pods',
        '-l',
        `app.kubernetes.io/name=ambient-lab-${c}`,
        '--field-selector',
        'spec.nodeName=n1',
        '-o',
        'jsonpath={range .items[*]}{.metadata.name}{"|"}{.status.containerStatuses[*].ready}{"|"}{.metadata.deletionTimestamp}{"\\n"}{end}',
      );
    expect(await fakes.calls()).toEqual([
      k('label', 'node', 'n1', 'ambient-lab.io/stop-agent=true', '--overwrite'),
      getPods('agent'),
      k('label', 'node', 'n1', 'ambient-lab.io/stop-agent-'),
      getPods('agent'),
      ['docker', 'restart', 'n1'],
      ['docker', 'exec', 'n1', 'systemctl', 'is-active', 'kubelet'],
      k('wait', '--for=condition=Ready', 'node/n1', '--timeout', '180s'),
      getPods('agent'),
      getPods('proxy'),
      ['docker', 'exec', 'al-e2e-control-plane', 'sh', '-c', 'crictl stop $(crictl ps -q --name kube-apiserver)'],
      k('get', '--raw', '/readyz'),
    ]);
  });
});

test('a component that never comes back is an error naming what was last seen', async () => {
  await withRig(async ({ world, fakes }) => {
    await fakes.setRules([{ bin: 'kubectl', has: ['get', 'pods'], stdout: 'ambient-lab-proxy-z|false|\n' }]);
    const cli = (world as unknown as { cli: KindCli }).cli; // the world's own command lines, with a short wait
    await expect(cli.waitComponent('proxy', 'n1', 'ready', { attempts: 2, intervalMs: 10 })).rejects.toThrow(
      /ambient-lab-proxy on node n1 did not become ready; last seen: .*"ready":false/,
    );
  });
});

test('outside: a container on the kind network routes the pod CIDR via a node, then execs the probe argv exactly as given', async () => {
  const fakes = await makeFakes(['ip']);
  try {
    const cli = new KindCli({ cluster: 'al-e2e', repoRoot: repo, kubeconfig: KC, env: fakes.env });
    const tricky = ['printf', '%s\\n', "it's", 'a b', '$(echo injected)'];
    const argv = cli.outsideArgv('ambient-lab/agent:dev', { cidr: '10.244.0.0/16', via: '172.18.0.3' }, tricky);
    expect(argv.slice(0, 11)).toEqual([
      'docker',
      'run',
      '--rm',
      '-i',
      '--network',
      'kind',
      '--cap-add',
      'NET_ADMIN',
      'ambient-lab/agent:dev',
      'sh',
      '-c',
    ]);
    const { execFile } = await import('node:child_process');
    const stdout = await new Promise<string>((resolve, reject) =>
      execFile('sh', ['-c', argv[11]!], { env: fakes.env }, (e, out) => (e ? reject(e) : resolve(out))),
    );
    expect(stdout).toBe("it's\na b\n$(echo injected)\n");
    expect(await fakes.calls()).toEqual([['ip', 'route', 'add', '10.244.0.0/16', 'via', '172.18.0.3']]);
    expect(() => cli.outsideArgv('img', { cidr: '10.244.0.0/16;reboot', via: '172.18.0.3' }, [])).toThrow(
      /not an address/,
    );
  } finally {
    await fakes.dispose();
  }
});

test('appExec: a listener stays attached in the app container and its accepts are deliveries; an iptables flush runs as the app and EPERM is reported', async () => {
  await withRig(async ({ world, fakes }) => {
    const port = await freePort('127.0.0.1');
    const b = { namespace: 'mesh', name: 'b' };
    expect(await world.appExec(b, { kind: 'listen', port })).toEqual({ ok: true });
    const again = await world.appExec(b, { kind: 'listen', port }); // the same port again: the kernel says no
    expect(again.ok).toBe(false);
    expect(again.error).toMatch(/^bind\(\d+\): EADDRINUSE/);
    const r = await world.connect(
      { kind: 'pod', pod: { namespace: 'mesh', name: 'a' } },
      { kind: 'pod', pod: b, port },
    );
    expect(r.outcome, r.error).toBe('established');
    expect(r.acceptedBy).toBe('app');
    expect(r.deliveries).toEqual([
      { pod: b, port, peer: expect.stringMatching(/^127\.0\.0\.1:\d+$/), viaProxy: false },
    ]);

    // iptables-restore resolves to the fake first on the probe's PATH (never the host's tables)
    const { execFileSync } = await import('node:child_process');
    expect(execFileSync('sh', ['-c', 'command -v iptables-restore'], { env: fakes.env }).toString().trim()).toBe(
      path.join(fakes.dir, 'iptables-restore'),
    );
    const rules = [
      { bin: 'kubectl', has: ['exec', '-i', '--', 'node', PROBE_PROGRAM], exec: [process.execPath, probeJs] },
      { bin: 'kubectl', has: ['logs', '-c', 'app'], stdoutFile: '/dev/null' },
    ];
    await fakes.setRules([
      ...rules,
      {
        bin: 'iptables-restore',
        exit: 4,
        stderr:
          'iptables-restore v1.8.9 (nf_tables): Could not fetch rule set generation id: Permission denied (you must be root)\n',
      },
    ]);
    const denied = await world.appExec(b, { kind: 'iptables-flush' });
    expect(denied.ok).toBe(false);
    expect(denied.error).toMatch(/^iptables-restore: EPERM .*mesh\/b/);
    await fakes.setRules([...rules, { bin: 'iptables-restore', exit: 0 }]);
    expect(await world.appExec(b, { kind: 'iptables-flush' })).toEqual({ ok: true });
    const calls = await fakes.calls();
    expect(calls.filter((c) => c[0] === 'iptables-restore')).toEqual([['iptables-restore'], ['iptables-restore']]);
    // appExec runs in b's app container (as b's app); connect ran in a's
    const execs = calls.filter((c) => c[0] === 'kubectl' && c.includes('exec')).map((c) => c.slice(3, 10).join(' '));
    expect([...new Set(execs)].sort()).toEqual(['-n mesh exec -i a -c app', '-n mesh exec -i b -c app']);
    await world.deletePod(b); // the attached listener probe ends with the pod
  });
});

test("zdsClient: the rogue script runs in the node's host-probe pod under setpriv as the uid, with no capabilities; its line is the result", async () => {
  await withRig(async ({ world, fakes }) => {
    await fakes.setRules([
      {
        bin: 'kubectl',
        has: ['exec', 'host-probe-n1'],
        stdout: 'noise\n{"accepted":false,"workloads":0,"detail":"connect: EACCES"}\n',
      },
    ]);
    expect(await world.zdsClient('n1', 1000)).toEqual({ accepted: false, workloads: 0, detail: 'connect: EACCES' });
    const call = (await fakes.calls()).at(-1)!;
    expect(call.slice(0, -1)).toEqual([
      'kubectl',
      '--kubeconfig',
      KC,
      '-n',
      'ambient-lab-e2e',
      'exec',
      'host-probe-n1',
      '-c',
      'probe',
      '--',
      'setpriv',
      '--reuid=1000',
      '--regid=1000',
      '--clear-groups',
      '--inh-caps=-all',
      '--bounding-set=-all',
      'node',
      '-e',
    ]);
    expect(call.at(-1)).toContain('/var/run/ambient-lab/zds/zds.sock');
    await fakes.setRules([{ bin: 'kubectl', has: ['exec'], exit: 1, stderr: 'error: unable to upgrade connection\n' }]);
    await expect(world.zdsClient('n1', 0)).rejects.toThrow(
      /rogue ZDS client on n1 failed \(exit 1\): error: unable to upgrade connection/,
    );
  });
});
