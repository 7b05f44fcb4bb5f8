/**
 * The kind world's command lines against FAKE `kind`, `docker` and `kubectl` binaries on PATH
 * that record their argv (one JSON line each) and answer as configured — no Docker needed.
 * Checks the exact commands of bring-up (create with our config and a private kubeconfig,
 * build the three images from ci/, load them, create the CRD only when absent, apply, wait),
 * teardown, the clean-up on a failed step, and that errors name the failing command.
 */
import { test, expect } from '@playwright/test';
import { chmod, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import * as os from 'node:os';
import * as path from 'node:path';
import { fileURLToPath } from 'node:url';
import { CRD_NAME, KindCli } from '../../../e2e/kind/kind-cli.js';
import { kubectlAvailability, renderDeployment } from '../../../e2e/deployment/launch.js';
import { MeshCa } from '../../../impl/linux/mesh-ca.js';

// bring-up renders deploy/ with the real kubectl (the fakes record what is applied)
const kubectl = kubectlAvailability();
test.skip(!kubectl.ok, kubectl.reason);

const repo = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../../..');
const BASE = { profile: 'upstream', ipv6: true, dnsCapture: true } as const;

interface Fake {
  readonly dir: string;
  readonly env: NodeJS.ProcessEnv;
  calls(): Promise<string[][]>;
  /** What each call whose argv ends in `-` read on stdin, in order. */
  stdins(): Promise<string[]>;
}

/** A recording binary: appends [name, ...argv] to the log; exits with $FAIL_<NAME>_ON (comma-separated words) matching a word of argv. */
async function withFakes(fn: (f: Fake) => Promise<void>, extraEnv: Record<string, string> = {}): Promise<void> {
  const dir = await mkdtemp(path.join(os.tmpdir(), 'al-fakebin-'));
  const log = path.join(dir, 'calls.jsonl');
  const script = `#!${process.execPath}
const fs = require('node:fs');
const name = require('node:path').basename(process.argv[1]);
const argv = process.argv.slice(2);
fs.appendFileSync(${JSON.stringify(log)}, JSON.stringify([name, ...argv]) + '\\n');
if (argv[argv.length - 1] === '-') fs.appendFileSync(${JSON.stringify(log)} + '.stdin', JSON.stringify(fs.readFileSync(0, 'utf8')) + '\\n');
const failOn = process.env['FAIL_' + name.toUpperCase() + '_ON'];
if (failOn && failOn.split(',').some((w) => argv.includes(w))) { process.stderr.write(name + ': simulated failure on ' + failOn + '\\n'); process.exit(1); }
if (name === 'kubectl' && argv.includes('jsonpath={.items[*].metadata.name}')) process.stdout.write('ambient-lab-proxy-abcde');
if (name === 'kubectl' && argv.includes('logs')) process.stdout.write('{"event":"accepted"}\\n');
`;
  for (const b of ['kind', 'docker', 'kubectl']) {
    await writeFile(path.join(dir, b), script);
    await chmod(path.join(dir, b), 0o755);
  }
  try {
    await fn({
      dir,
      env: { PATH: `${dir}:/usr/bin:/bin`, ...extraEnv },
      calls: async () =>
        (await readFile(log, 'utf8').catch(() => ''))
          .split('\n')
          .filter(Boolean)
          .map((l) => JSON.parse(l) as string[]),
      stdins: async () =>
        (await readFile(`${log}.stdin`, 'utf8').catch(() => ''))
          .split('\n')
          .filter(Boolean)
          .map((l) => JSON.parse(l) as string),
    });
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
}

const KC = '/tmp/al-kind-test.kubeconfig';

test('bring-up: create with our config and a private kubeconfig, build from ci/, load, CRD created when absent, manifests applied in order, agent settings and the node-stop hook, rollouts awaited', async () => {
  // `kubectl get crd` fails: the CRD is absent
  await withFakes(
    async (f) => {
      const cli = new KindCli({
        cluster: 'al-e2e',
        repoRoot: repo,
        kubeconfig: KC,
        env: f.env,
        nodeImage: 'kindest/node:v1.31.0',
      });
      await cli.up({ deployment: { profile: 'strict', ipv6: true, dnsCapture: false } });
      const avoid = (c: string) =>
        JSON.stringify({
          spec: {
            template: {
              spec: {
                affinity: {
                  nodeAffinity: {
                    requiredDuringSchedulingIgnoredDuringExecution: {
                      nodeSelectorTerms: [
                        { matchExpressions: [{ key: `ambient-lab.io/stop-${c}`, operator: 'DoesNotExist' }] },
                      ],
                    },
                  },
                },
              },
            },
          },
        });
      expect(await f.calls()).toEqual([
        [
          'kind',
          'create',
          'cluster',
          '--name',
          'al-e2e',
          '--config',
          path.join(repo, 'fixtures/kind/cluster.yaml'),
          '--kubeconfig',
          KC,
          '--wait',
          '180s',
          '--image',
          'kindest/node:v1.31.0',
        ],
        ['docker', 'build', '-f', 'ci/build.Dockerfile', '-t', 'ambient-lab/build:dev', '.'],
        [
          'docker',
          'build',
          '-f',
          'ci/agent.Dockerfile',
          '--build-arg',
          'BUILD_IMAGE=ambient-lab/build:dev',
          '-t',
          'ambient-lab/agent:dev',
          '.',
        ],
        [
          'docker',
          'build',
          '-f',
          'ci/proxy.Dockerfile',
          '--build-arg',
          'BUILD_IMAGE=ambient-lab/build:dev',
          '-t',
          'ambient-lab/proxy:dev',
          '.',
        ],
        [
          'docker',
          'build',
          '-f',
          'ci/ca.Dockerfile',
          '--build-arg',
          'BUILD_IMAGE=ambient-lab/build:dev',
          '-t',
          'ambient-lab/ca:dev',
          '.',
        ],
        ['kind', 'load', 'docker-image', 'ambient-lab/agent:dev', '--name', 'al-e2e'],
        ['kind', 'load', 'docker-image', 'ambient-lab/proxy:dev', '--name', 'al-e2e'],
        ['kind', 'load', 'docker-image', 'ambient-lab/ca:dev', '--name', 'al-e2e'],
        ['kubectl', '--kubeconfig', KC, 'get', 'crd', CRD_NAME, '-o', 'name'],
        ['kubectl', '--kubeconfig', KC, 'create', '-k', path.join(repo, 'deploy/crd')],
        [
          'kubectl',
          '--kubeconfig',
          KC,
          'wait',
          '--for',
          'condition=Established',
          `crd/${CRD_NAME}`,
          '--timeout',
          '60s',
        ],
        // deploy/ rendered for the world's options (the stream on stdin, checked below)
        ['kubectl', '--kubeconfig', KC, 'apply', '-f', '-'],
        // the mesh root Secret exists (the fake answers), so none is created
        [
          'kubectl',
          '--kubeconfig',
          KC,
          '-n',
          'ambient-lab-system',
          'get',
          'secret',
          'ambient-lab-mesh-root',
          '-o',
          'name',
        ],
        // and so does its certificate's ConfigMap
        [
          'kubectl',
          '--kubeconfig',
          KC,
          '-n',
          'ambient-lab-system',
          'get',
          'configmap',
          'ambient-lab-mesh-root-cert',
          '-o',
          'name',
        ],
        // the node-stop hook goes in before the rollout wait
        [
          'kubectl',
          '--kubeconfig',
          KC,
          '-n',
          'ambient-lab-system',
          'patch',
          'daemonset',
          'ambient-lab-agent',
          '--type',
          'merge',
          '-p',
          avoid('agent'),
        ],
        [
          'kubectl',
          '--kubeconfig',
          KC,
          '-n',
          'ambient-lab-system',
          'patch',
          'daemonset',
          'ambient-lab-proxy',
          '--type',
          'merge',
          '-p',
          avoid('proxy'),
        ],
        [
          'kubectl',
          '--kubeconfig',
          KC,
          '-n',
          'ambient-lab-system',
          'rollout',
          'status',
          'deployment/ambient-lab-ca',
          '--timeout',
          '300s',
        ],
        [
          'kubectl',
          '--kubeconfig',
          KC,
          '-n',
          'ambient-lab-system',
          'rollout',
          'status',
          'daemonset/ambient-lab-agent',
          '--timeout',
          '300s',
        ],
        [
          'kubectl',
          '--kubeconfig',
          KC,
          '-n',
          'ambient-lab-system',
          'rollout',
          'status',
          'daemonset/ambient-lab-proxy',
          '--timeout',
          '300s',
        ],
      ]);
      expect(await f.stdins()).toEqual([renderDeployment({ profile: 'strict', ipv6: true, dnsCapture: false })]);
      await cli.deleteCluster();
      expect((await f.calls()).at(-1)).toEqual(['kind', 'delete', 'cluster', '--name', 'al-e2e', '--kubeconfig', KC]);
    },
    { FAIL_KUBECTL_ON: 'crd' },
  );
});

test('with AMBIENT_LAB_KIND_LOGS, deleting a cluster exports its logs first; a failed export still deletes', async () => {
  for (const failExport of [false, true])
    await withFakes(
      async (f) => {
        const cli = new KindCli({ cluster: 'al-e2e', repoRoot: repo, kubeconfig: KC, env: f.env });
        await cli.deleteCluster();
        expect(await f.calls()).toEqual([
          ['kind', 'export', 'logs', '/tmp/al-kind-logs/al-e2e', '--name', 'al-e2e'],
          ['kind', 'delete', 'cluster', '--name', 'al-e2e', '--kubeconfig', KC],
        ]);
      },
      { AMBIENT_LAB_KIND_LOGS: '/tmp/al-kind-logs', ...(failExport ? { FAIL_KIND_ON: 'export' } : {}) },
    );
});

test("an existing CRD (Istio's) is left alone: no create", async () => {
  await withFakes(async (f) => {
    const cli = new KindCli({ cluster: 'al-e2e', repoRoot: repo, kubeconfig: KC, env: f.env });
    expect(await cli.applyManifests(BASE)).toEqual({ crdCreated: false });
    const calls = await f.calls();
    expect(calls.some((c) => c.includes('create'))).toBe(false);
    expect(calls.filter((c) => c.includes('apply')).length).toBe(1);
  });
});

test('no mesh root Secret yet: one is made (a fresh root the CA loads), on stdin, never in a file or argv; its certificate goes into the ConfigMap the proxies mount', async () => {
  await withFakes(
    async (f) => {
      const cli = new KindCli({ cluster: 'al-e2e', repoRoot: repo, kubeconfig: KC, env: f.env });
      await cli.applyManifests(BASE);
      const calls = await f.calls();
      expect(calls.filter((c) => c.includes('create') && c.includes('-'))).toEqual([
        ['kubectl', '--kubeconfig', KC, 'create', '-f', '-'],
        ['kubectl', '--kubeconfig', KC, 'create', '-f', '-'],
      ]);
      const [, secretText, configMapText] = await f.stdins();
      const secret = JSON.parse(secretText!) as {
        kind: string;
        metadata: { name: string; namespace: string };
        stringData: Record<string, string>;
      };
      expect(secret).toMatchObject({
        kind: 'Secret',
        metadata: { name: 'ambient-lab-mesh-root', namespace: 'ambient-lab-system' },
      });
      // what the CA does with --ca-cert/--ca-key: load it as the mesh root
      const ca = await MeshCa.load('cluster.local', secret.stringData['ca.crt']!, secret.stringData['ca.key']!);
      expect(ca.rootPem).toBe(secret.stringData['ca.crt']);
      // the proxies get the certificate alone
      expect(JSON.parse(configMapText!)).toEqual({
        apiVersion: 'v1',
        kind: 'ConfigMap',
        metadata: { name: 'ambient-lab-mesh-root-cert', namespace: 'ambient-lab-system' },
        data: { 'ca.crt': secret.stringData['ca.crt'] },
      });
    },
    { FAIL_KUBECTL_ON: 'secret,configmap' },
  );
});

test("a non-default tag rewrites the DaemonSets' and the CA Deployment's images after applying", async () => {
  await withFakes(async (f) => {
    const cli = new KindCli({ cluster: 'al-e2e', repoRoot: repo, kubeconfig: KC, env: f.env, tag: 'pr-7' });
    await cli.applyManifests(BASE);
    const sets = (await f.calls()).filter((c) => c.includes('set'));
    expect(sets).toEqual([
      [
        'kubectl',
        '--kubeconfig',
        KC,
        '-n',
        'ambient-lab-system',
        'set',
        'image',
        'daemonset/ambient-lab-agent',
        'install-cni=ambient-lab/agent:pr-7',
        'agent=ambient-lab/agent:pr-7',
      ],
      [
        'kubectl',
        '--kubeconfig',
        KC,
        '-n',
        'ambient-lab-system',
        'set',
        'image',
        'daemonset/ambient-lab-proxy',
        'proxy=ambient-lab/proxy:pr-7',
      ],
      [
        'kubectl',
        '--kubeconfig',
        KC,
        '-n',
        'ambient-lab-system',
        'set',
        'image',
        'deployment/ambient-lab-ca',
        'ca=ambient-lab/ca:pr-7',
      ],
    ]);
  });
});

test('a failed step deletes the cluster and the error names the command', async () => {
  await withFakes(
    async (f) => {
      const cli = new KindCli({ cluster: 'al-e2e', repoRoot: repo, kubeconfig: KC, env: f.env });
      const err = await cli.up().catch((e: unknown) => e as Error);
      expect(err).toBeInstanceOf(Error);
      expect((err as Error).message).toContain('docker build -f ci/agent.Dockerfile');
      expect((err as Error).message).toContain('simulated failure');
      const calls = await f.calls();
      expect(calls.at(-1)).toEqual(['kind', 'delete', 'cluster', '--name', 'al-e2e', '--kubeconfig', KC]);
      expect(calls.some((c) => c[0] === 'kind' && c[1] === 'load')).toBe(false);
    },
    { FAIL_DOCKER_ON: 'ci/agent.Dockerfile' },
  );
});

test('the proxy log of a node: the proxy pod on that node, its proxy container', async () => {
  await withFakes(async (f) => {
    const cli = new KindCli({ cluster: 'al-e2e', repoRoot: repo, kubeconfig: KC, env: f.env });
    expect(await cli.proxyLog('al-e2e-worker')).toBe('{"event":"accepted"}\n');
    expect(await f.calls()).toEqual([
      [
        'kubectl',
        '--kubeconfig',
        KC,
        '-n',
        'ambient-lab-system',
        'get',
        'pods',
        '-l',
        'app.kubernetes.io/name=ambient-lab-proxy',
        '--field-selector',
        'spec.nodeName=al-e2e-worker',
        '-o',
        'jsonpath={.items[*].metadata.name}',
      ],
      ['kubectl', '--kubeconfig', KC, '-n', 'ambient-lab-system', 'logs', 'ambient-lab-proxy-abcde', '-c', 'proxy'],
    ]);
  });
});

test('cluster names that are not ours are refused', () => {
  expect(() => new KindCli({ cluster: 'kind', repoRoot: repo, kubeconfig: KC })).toThrow(/al-/);
});
