/**
 * The kind world's raw (AF_PACKET) attempts and IPv6, against the fakes (fakes.ts) and the sim's
 * HTTP facade: the exact command lines of a dual-stack bring-up and of a raw attempt (the
 * next-hop lookup in the source container, the probe's raw-send, the conntrack lookup on the
 * destination's node), and how a raw result is attributed. The probe here is a stand-in that
 * records its requests and answers a raw-send with a reply the test chooses (no frame is sent
 * from this machine).
 */
import { test, expect } from '@playwright/test';
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { fileURLToPath } from 'node:url';
import * as k8s from '@kubernetes/client-node';
import { parse as parseYaml } from 'yaml';
import { SystemClock } from '../../../impl/linux/clock.js';
import { ApiStore } from '../../../sim/kube/store.js';
import { facadeKubeconfig, startKubeApiFacade } from '../../../sim/kube/http-facade.js';
import { SeededRandom } from '../../../sim/time/seeded-random.js';
import { KindCli, PROBE_PROGRAM } from '../../../e2e/kind/kind-cli.js';
import { KindWorld, kindDeployment, kindConfigFor } from '../../../e2e/kind/kind-world.js';
import {
  deploymentChoiceOf,
  deploymentLaunch,
  kubectlAvailability,
  renderDeployment,
} from '../../../e2e/deployment/launch.js';
import { NEXT_HOP_SCRIPT, parseNextHop, parseRawPort, rawSynAckAcceptor } from '../../../e2e/kind/raw-attempt.js';
import type { WorldOptions } from '../../../scenarios/world.js';
import type { RawSendOutcome } from '../../../e2e/netns/probe-protocol.js';
import { makeFakes, type FakeRule, type Fakes } from './fakes.js';

/** What rawConntrackScript prints for conntrack's listing `entries` (exit line not included). */
function ctOut(entries: readonly string[]): string {
  return `${entries.map((e) => `al-ct-out ${e}\n`).join('')}al-ct-err conntrack v1.4.7 (conntrack-tools): ${entries.length} flow entries have been shown.\n`;
}

const repo = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../../..');
const KC = '/tmp/al-kind-raw-test.kubeconfig';
const OPTIONS: WorldOptions = {
  nodes: 1,
  profile: 'strict',
  kernelVersion: '6.1',
  ipv6: true,
  dnsCapture: false,
  seed: 1,
};
const HOP = { dev: 'eth0', mac: '0a:58:0a:f4:00:01' };

/** A stand-in probe: the ready line, then one canned reply per request; every request is appended to `requests`. */
function fakeProbe(
  dir: string,
  reply: RawSendOutcome | { readonly result: 'timeout' },
): { script: string; requests: () => Record<string, unknown>[] } {
  const script = path.join(dir, 'fake-probe.cjs');
  const requests = path.join(dir, 'requests.jsonl');
  const value =
    reply.result === 'timeout' ? { result: 'timeout', code: undefined, call: undefined, message: undefined } : reply;
  writeFileSync(
    script,
    `
const fs = require('node:fs');
process.stdout.write(JSON.stringify({ ev: 'tag', listener: '', peer: '', tag: 'ready' }) + '\\n');
require('node:readline').createInterface({ input: process.stdin }).on('line', (l) => {
  const req = JSON.parse(l);
  fs.appendFileSync(${JSON.stringify(requests)}, l + '\\n');
  process.stdout.write(JSON.stringify({ id: req.id, ok: true, value: ${JSON.stringify(value)} }) + '\\n');
});
`,
  );
  return {
    script,
    requests: () =>
      readFileSync(requests, 'utf8')
        .split('\n')
        .filter(Boolean)
        .map((l) => JSON.parse(l) as Record<string, unknown>),
  };
}

interface Rig {
  readonly world: KindWorld;
  readonly fakes: Fakes;
  readonly dir: string;
  readonly uids: Record<string, string>;
}

async function withRig(fn: (r: Rig) => Promise<void>): Promise<void> {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'al-kindraw-'));
  const store = new ApiStore({ clock: new SystemClock(), random: new SeededRandom(1) });
  const facade = await startKubeApiFacade(store);
  const fakes = await makeFakes(['kubectl', 'docker']);
  try {
    const kc = new k8s.KubeConfig();
    kc.loadFromString(facadeKubeconfig(facade.url));
    const core = kc.makeApiClient(k8s.CoreV1Api);
    // a dual-stack node: an InternalIP of each family
    await core.createNode({
      body: {
        metadata: { name: 'n1' },
        status: {
          addresses: [
            { type: 'InternalIP', address: '172.18.0.2' },
            { type: 'InternalIP', address: 'fc00:f853:ccd:e793::2' },
          ],
        },
      },
    });
    await core.createNamespace({ body: { metadata: { name: 'mesh' } } });
    const uids: Record<string, string> = {};
    for (const [name, ips] of [
      ['a', ['10.244.1.5', 'fd00:10:244:1::5']],
      ['b', ['10.244.1.6', 'fd00:10:244:1::6']],
    ] as const) {
      const created = await core.createNamespacedPod({
        namespace: 'mesh',
        body: {
          metadata: { name },
          spec: {
            nodeName: 'n1',
            containers: [{ name: 'app', image: 'x', ports: [{ containerPort: 8080, protocol: 'TCP' }] }],
          },
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
            podIP: ips[0],
            podIPs: ips.map((ip) => ({ ip })),
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
    await fn({ world, fakes, dir, uids });
  } finally {
    await facade.close();
    await fakes.dispose();
    rmSync(dir, { recursive: true, force: true });
  }
}

const A = { kind: 'pod', pod: { namespace: 'mesh', name: 'a' } } as const;
const execIn = (pod: string, cmd: readonly string[]): string[] => [
  'kubectl',
  '--kubeconfig',
  KC,
  '-n',
  'mesh',
  'exec',
  '-i',
  pod,
  '-c',
  'app',
  '--',
  ...cmd,
];

test('dual-stack bring-up: the dual kind config, and deploy/ rendered for the options (IPv6 on for the agent and the proxy, next to the profile settings) applied before the rollout waits', async () => {
  const kubectl = kubectlAvailability();
  test.skip(!kubectl.ok, kubectl.reason);
  const fakes = await makeFakes(['kind', 'docker', 'kubectl']);
  try {
    const cli = new KindCli({
      cluster: 'al-e2e',
      repoRoot: repo,
      kubeconfig: KC,
      env: fakes.env,
      kindConfig: kindConfigFor(OPTIONS),
    });
    await cli.up({ build: false, deployment: kindDeployment(OPTIONS) });
    const calls = await fakes.calls();
    expect(calls[0]).toEqual([
      'kind',
      'create',
      'cluster',
      '--name',
      'al-e2e',
      '--config',
      path.join(repo, 'fixtures/kind/cluster-dual.yaml'),
      '--kubeconfig',
      KC,
      '--wait',
      '180s',
    ]);
    // the applied stream is the one loader's rendering of deploy/ for these options
    const [applied] = await fakes.stdins();
    expect(applied).toBe(renderDeployment({ profile: 'strict', ipv6: true, dnsCapture: false }));
    const choice = deploymentChoiceOf(deploymentLaunch(applied!, { nodeName: 'n' }));
    expect(choice).toEqual({ profile: 'strict', ipv6: true, dnsCapture: false });
    // no world-side env edits: the settings are in the rendered manifests
    expect(calls.filter((c) => c.includes('set') && c.includes('env'))).toEqual([]);
    // the settings go in before the rollout waits
    const rollout = calls.findIndex((c) => c.includes('rollout'));
    expect(calls.findIndex((c) => c.includes('apply'))).toBeLessThan(rollout);
  } finally {
    await fakes.dispose();
  }
  // single-stack worlds keep the IPv4 config and turn IPv6 off (the base turns it on, as upstream)
  expect(kindConfigFor({ ipv6: false })).toBe('fixtures/kind/cluster.yaml');
  expect(kindDeployment({ ...OPTIONS, ipv6: false })).toEqual({ profile: 'strict', ipv6: false, dnsCapture: false });
  // the dual config is what kind reads for dual-stack: both families in the pod and service subnets
  const dual = parseYaml(readFileSync(path.join(repo, 'fixtures/kind/cluster-dual.yaml'), 'utf8')) as {
    networking: Record<string, unknown>;
  };
  expect(dual.networking).toMatchObject({
    ipFamily: 'dual',
    podSubnet: '10.244.0.0/16,fd00:10:244::/56',
    serviceSubnet: '10.96.0.0/16,fd00:10:96::/112',
  });
});

test("IPv6 connect: the probe aims at the destination's v6 address from status.podIPs; a host source uses the node's v6 InternalIP", async () => {
  await withRig(async ({ world, fakes, dir }) => {
    const probe = fakeProbe(dir, { result: 'timeout' }); // (no logs to wait for)
    await fakes.setRules([
      { bin: 'kubectl', has: ['exec', '-i', '--', 'node', PROBE_PROGRAM], exec: [process.execPath, probe.script] },
    ]);
    const r = await world.connect(A, { kind: 'pod', pod: { namespace: 'mesh', name: 'b' }, port: 8080 }, { family: 6 });
    expect(r.outcome).toBe('timeout');
    expect(probe.requests()[0]).toMatchObject({ op: 'connect', address: 'fd00:10:244:1::6', port: 8080, proto: 'tcp' });
    expect(r.trace).toMatch(/fd00:10:244:1::5:\d+ -> \[fd00:10:244:1::6\]:8080/);
    // a literal v6 destination picks family 6 on its own; the host source is the node's v6 address
    const h = await world.connect(
      { kind: 'host', node: 'n1', uid: 0, caps: [] },
      { kind: 'ip', ip: 'fd00:10:244:1::6', port: 8080 },
    );
    expect(h.trace).toMatch(/fc00:f853:ccd:e793::2:\d+ -> \[fd00:10:244:1::6\]:8080/);
    expect(probe.requests()[1]).toMatchObject({ op: 'connect', address: 'fd00:10:244:1::6' });
  });
});

test("raw TCP from a pod: next hop asked in the source container, raw-send through the same probe, SYN-ACK attributed by the destination sandbox's conntrack entry on its node", async () => {
  await withRig(async ({ world, fakes, dir, uids }) => {
    const probe = fakeProbe(dir, { result: 'syn-ack', code: undefined, call: undefined, message: undefined });
    await fakes.setRules([
      { bin: 'kubectl', has: ['exec', '-i', '--', 'node', PROBE_PROGRAM], exec: [process.execPath, probe.script] },
      { bin: 'kubectl', has: ['exec', '-i', '--', 'node', '-e'], stdout: `${JSON.stringify(HOP)}\n` },
      {
        bin: 'docker',
        has: ['exec', 'n1', 'sh', '-c', '~conntrack'],
        stdout: `${ctOut(['tcp      6 59 SYN_RECV src=10.244.1.5 dst=10.244.1.6 sport=1 dport=8080 src=10.244.1.6 dst=10.244.1.5 sport=15006 dport=1 mark=0 use=1'])}al-ct-exit 0\n`,
      },
    ]);
    const r = await world.connect(A, { kind: 'pod', pod: { namespace: 'mesh', name: 'b' }, port: 8080 }, { raw: true });
    const calls = await fakes.calls();
    // 1) the next hop, in the source's own container (its netns): `node -e <script> <dst>`
    expect(calls[0]).toEqual(execIn('a', ['node', '-e', NEXT_HOP_SCRIPT, '10.244.1.6']));
    // 2) the probe, launched as for a connect, asked to raw-send out of that device to that MAC
    expect(calls[1]).toEqual(execIn('a', ['node', PROBE_PROGRAM]));
    const req = probe.requests()[0]!;
    expect(req).toMatchObject({
      op: 'raw-send',
      proto: 'tcp',
      ifname: 'eth0',
      dstMac: HOP.mac,
      source: '10.244.1.5',
      address: '10.244.1.6',
      port: 8080,
      timeoutMs: 1000,
    });
    // 3) the SYN-ACK: conntrack in b's sandbox netns on node n1, for this client
    const ct = calls.find((c) => c[0] === 'docker')!;
    expect(ct.slice(0, 4)).toEqual(['docker', 'exec', 'n1', 'sh']);
    expect(ct[5]).toContain(`[ "$1" = '${uids['b']!}' ]`);
    expect(ct[5]).toContain(
      `conntrack -L -f ipv4 -p tcp --orig-src 10.244.1.5 --orig-port-src ${String(req['sourcePort'])}`,
    );
    // the REDIRECT sent it to 15006: the inbound proxy port took it, in b
    expect(r).toMatchObject({
      outcome: 'delivered',
      acceptedBy: 'proxy-inbound',
      acceptedIn: { namespace: 'mesh', name: 'b' },
      deliveries: [],
    });
    expect(r.trace).toMatch(/AF_PACKET tcp .*SYN-ACK \(proxy-inbound\)/);

    // no conntrack entry (no NAT; conntrack ran, exited 0 and counted 0): the port aimed at, which is b's app port — the app took it directly
    const rules = (docker: Partial<FakeRule>): Promise<void> =>
      fakes.setRules([
        { bin: 'kubectl', has: ['exec', '-i', '--', 'node', PROBE_PROGRAM], exec: [process.execPath, probe.script] },
        { bin: 'kubectl', has: ['exec', '-i', '--', 'node', '-e'], stdout: `${JSON.stringify(HOP)}\n` },
        { bin: 'docker', has: ['exec', 'n1', 'sh', '-c', '~conntrack'], ...docker },
      ]);
    await rules({ stdout: `${ctOut([])}al-ct-exit 0\n` });
    const direct = await world.connect(
      A,
      { kind: 'pod', pod: { namespace: 'mesh', name: 'b' }, port: 8080 },
      { raw: true },
    );
    const sport = Number(probe.requests()[1]!['sourcePort']);
    expect(direct).toMatchObject({
      outcome: 'delivered',
      acceptedBy: 'app',
      acceptedIn: { namespace: 'mesh', name: 'b' },
      deliveries: [{ pod: { namespace: 'mesh', name: 'b' }, port: 8080, peer: `10.244.1.5:${sport}`, viaProxy: false }],
    });

    // a failed observation is a harness error, never "no entry" (which would attribute the app)
    const to = { kind: 'pod', pod: { namespace: 'mesh', name: 'b' }, port: 8080 } as const;
    await rules({
      stdout: 'al-ct-err nsenter: failed to execute conntrack: No such file or directory\nal-ct-exit 127\n',
    });
    await expect(world.connect(A, to, { raw: true })).rejects.toThrow(
      /raw SYN .*conntrack exited 127 on the node: nsenter: failed to execute conntrack.*Debian package conntrack/,
    );
    await rules({ stdout: '' }); // the sandbox was not found on the node
    await expect(world.connect(A, to, { raw: true })).rejects.toThrow(
      /raw SYN .*the destination pod's sandbox was not found on its node/,
    );
    await rules({ stdout: 'al-ct-exit 0\n' }); // exit 0 but no summary: not conntrack's answer
    await expect(world.connect(A, to, { raw: true })).rejects.toThrow(/conntrack printed no summary line/);
    await rules({ stderr: 'Error response from daemon: container n1 is not running', exit: 1 }); // docker exec itself fails
    await expect(world.connect(A, to, { raw: true })).rejects.toThrow(
      /docker exec n1 sh -c [\s\S]* failed with exit code 1: Error response from daemon/,
    );
  });
});

test('raw results: EPERM without NET_RAW is an error naming socket(AF_PACKET); an RST is not delivered; no next hop is an error; outside raw is refused', async () => {
  await withRig(async ({ world, fakes, dir }) => {
    const eperm = fakeProbe(dir, {
      result: 'error',
      code: 'EPERM',
      call: 'socket',
      message: 'Operation not permitted',
    });
    const rules = (script: string, hop: string) =>
      fakes.setRules([
        { bin: 'kubectl', has: ['exec', '-i', '--', 'node', PROBE_PROGRAM], exec: [process.execPath, script] },
        { bin: 'kubectl', has: ['exec', '-i', '--', 'node', '-e'], stdout: hop },
      ]);
    await rules(eperm.script, `${JSON.stringify(HOP)}\n`);
    const to = { kind: 'pod', pod: { namespace: 'mesh', name: 'b' }, port: 8080 } as const;
    expect(await world.connect(A, to, { raw: true })).toMatchObject({
      outcome: 'error',
      error: 'socket(AF_PACKET): EPERM',
      acceptedBy: undefined,
      deliveries: [],
    });
    rmSync(path.join(dir, 'requests.jsonl'), { force: true });
    const rst = fakeProbe(dir, { result: 'rst', code: undefined, call: undefined, message: undefined });
    await rules(rst.script, `${JSON.stringify(HOP)}\n`);
    const r = await world.connect(A, to, { raw: true, family: 6 });
    expect(r).toMatchObject({ outcome: 'not-delivered', acceptedBy: undefined, deliveries: [] });
    expect(r.trace).toMatch(/answer rst/);
    expect(rst.requests()[0]).toMatchObject({
      op: 'raw-send',
      source: 'fd00:10:244:1::5',
      address: 'fd00:10:244:1::6',
    });
    expect((await fakes.calls()).some((c) => c.includes('fd00:10:244:1::6') && c.includes('-e'))).toBe(true); // the v6 next hop was asked
    await rules(rst.script, `${JSON.stringify({ error: 'no neighbour entry for 10.244.1.1 on eth0' })}\n`);
    expect(await world.connect(A, to, { raw: true })).toMatchObject({
      outcome: 'error',
      error: 'raw: no neighbour entry for 10.244.1.1 on eth0',
    });
    expect(await world.connect({ kind: 'outside' }, to, { raw: true })).toMatchObject({
      outcome: 'error',
      error: expect.stringMatching(/raw .* from outside are not staged/),
    });
  });
});

test('raw helpers: the next-hop answer, the conntrack port, the acceptor of a SYN-ACK', () => {
  expect(parseNextHop('kubectl chatter\n{"dev":"eth0","mac":"0a:58:0a:f4:00:01"}\n')).toEqual(HOP);
  expect(parseNextHop('{"dev":"eth0","mac":"not-a-mac"}\n')).toMatch(/printed no answer/);
  expect(parseNextHop('{"error":"no route to 10.9.9.9"}\n')).toBe('no route to 10.9.9.9');
  const entry =
    'tcp 6 59 SYN_RECV src=10.244.1.5 dst=10.244.1.6 sport=40000 dport=8080 src=10.244.1.6 dst=10.244.1.5 sport=15001 dport=40000 mark=0 use=1';
  expect(parseRawPort(`${ctOut([entry])}al-ct-exit 0\n`, 8080, 'x')).toBe(15001);
  expect(parseRawPort(`${ctOut([])}al-ct-exit 0\n`, 8080, 'x')).toBe(8080);
  expect(() => parseRawPort('', 8080, 'x')).toThrow(/sandbox was not found/);
  expect(() => parseRawPort('al-ct-exit 1\n', 8080, 'x')).toThrow(/conntrack exited 1/);
  expect(() => parseRawPort(`${ctOut([entry])}al-ct-exit 0\n`, 9090, 'x')).toThrow(
    /lists this source only towards other ports: 8080/,
  );
  const dst = { namespace: 'mesh', name: 'b' };
  const client = { ip: '10.244.1.5', port: 40000 };
  expect(rawSynAckAcceptor({ port: 15008, dst, appPorts: [8080], client })).toEqual({
    acceptedBy: 'proxy-hbone',
    acceptedIn: dst,
  });
  expect(rawSynAckAcceptor({ port: 9999, dst, appPorts: [8080], client })).toEqual({
    acceptedBy: 'other',
    acceptedIn: dst,
  });
  expect(rawSynAckAcceptor({ port: 8080, dst: undefined, appPorts: [8080], client })).toEqual({ acceptedBy: 'other' });
});

test('iptables flush in a dual-stack pod: iptables-restore then ip6tables-restore, as the app; a v6 refusal is reported by its tool', async () => {
  const probeJs = path.join(repo, 'dist/e2e/netns/probe-program.js');
  test.skip(!existsSync(probeJs), `needs the compiled probe program (${probeJs}): run \`npx tsc -p .\``);
  await withRig(async ({ world, fakes }) => {
    const fakeTools = await makeFakes(['iptables-restore', 'ip6tables-restore'], []);
    try {
      // the real probe, its PATH: the tool fakes first (never the host's tables)
      const env = `PATH=${fakeTools.dir}:/usr/bin:/bin`;
      const exec = {
        bin: 'kubectl',
        has: ['exec', '-i', '--', 'node', PROBE_PROGRAM],
        exec: ['env', env, process.execPath, probeJs],
      };
      await fakes.setRules([exec]);
      await fakeTools.setRules([]);
      const b = { namespace: 'mesh', name: 'b' };
      expect(await world.appExec(b, { kind: 'iptables-flush' })).toEqual({ ok: true });
      expect(await fakeTools.calls()).toEqual([['iptables-restore'], ['ip6tables-restore']]);
      await fakeTools.setRules([
        { bin: 'ip6tables-restore', exit: 4, stderr: 'ip6tables-restore: Permission denied (you must be root)\n' },
      ]);
      const denied = await world.appExec(b, { kind: 'iptables-flush' });
      expect(denied.ok).toBe(false);
      expect(denied.error).toMatch(/^ip6tables-restore: EPERM .*mesh\/b/);
    } finally {
      await fakeTools.dispose();
    }
  });
});
