/**
 * `check --world kind` without Docker: the shared-cluster factory (e2e/kind/shared-cluster.ts)
 * against fake kind/docker/kubectl on PATH and the sim's HTTP facade for the API, and the check's
 * kind wiring (scenarios/model/worlds.ts, check.ts): cells the kind world cannot stage are not
 * run and say why, the run is single-stack and says so, kind cells run in this thread and the
 * shared cluster is disposed at the end. A full check against the fakes is not possible (the
 * histories need real pods, proxies and traffic); the one-cell run below uses the sim world
 * behind the kind wiring to show the run itself, and the real run is tests/kind/check-kind.spec.ts.
 */
import { test, expect } from '@playwright/test';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { fileURLToPath } from 'node:url';
import * as k8s from '@kubernetes/client-node';
import { SystemClock } from '../../../impl/linux/clock.js';
import { ApiStore } from '../../../sim/kube/store.js';
import { facadeKubeconfig, startKubeApiFacade } from '../../../sim/kube/http-facade.js';
import { SeededRandom } from '../../../sim/time/seeded-random.js';
import { SharedKindCluster } from '../../../e2e/kind/shared-cluster.js';
import { CheckInterrupted, runCheck } from '../../../scenarios/model/check.js';
import { setKindFactory, unstageableThreat, worldGaps, worldLimits } from '../../../scenarios/model/worlds.js';
import { createSimWorld } from '../../../scenarios/worlds/sim-world.js';
import type { WorldFactory, WorldOptions } from '../../../scenarios/world.js';
import { checkBudget, KIND_DEFAULTS, renderReport } from '../../../cli/commands/check.js';
import { DEFAULT_RUNS } from '../../../scenarios/model/defaults.js';
import { makeFakes } from './fakes.js';
import { kubectlAvailability, renderDeployment } from '../../../e2e/deployment/launch.js';

const repo = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../../..');
const OPTS: WorldOptions = {
  nodes: 1,
  profile: 'strict',
  kernelVersion: '6.1',
  ipv6: false,
  dnsCapture: false,
  seed: 3,
};

test("shared cluster: brought up once for many worlds; a world's close clears what it did; a new profile is deploy/ rendered for it, applied, and a rollout; dispose deletes the cluster once", async () => {
  const kubectl = kubectlAvailability();
  test.skip(!kubectl.ok, kubectl.reason); // bring-up renders deploy/
  const work = mkdtempSync(path.join(os.tmpdir(), 'al-kindshared-'));
  const store = new ApiStore({ clock: new SystemClock(), random: new SeededRandom(1) });
  const facade = await startKubeApiFacade(store);
  const fakes = await makeFakes(['kind', 'docker', 'kubectl']);
  const kc = new k8s.KubeConfig();
  kc.loadFromString(facadeKubeconfig(facade.url));
  const core = kc.makeApiClient(k8s.CoreV1Api);
  // A stand-in kubelet: every pod the world creates runs (the host probes prepare() waits for).
  let kubelet = true;
  const runPods = async (): Promise<void> => {
    while (kubelet) {
      for (const p of (await core.listPodForAllNamespaces()).items) {
        if (p.status?.phase === 'Running') continue;
        await core
          .replaceNamespacedPodStatus({
            namespace: p.metadata!.namespace!,
            name: p.metadata!.name!,
            body: { ...p, status: { phase: 'Running', podIPs: [{ ip: '10.244.0.9' }] } },
          })
          .catch(() => undefined);
      }
      await new Promise((r) => setTimeout(r, 50));
    }
  };
  const kubeletDone = runPods();
  try {
    writeFileSync(path.join(work, 'kubeconfig'), facadeKubeconfig(facade.url)); // what `kind create cluster --kubeconfig` writes
    await core.createNode({
      body: { metadata: { name: 'n1' }, status: { addresses: [{ type: 'InternalIP', address: '172.18.0.2' }] } },
    });
    const ready = { bin: 'kubectl', has: ['get', 'pods'], stdout: 'ambient-lab-proxy-n1|true|\n' };
    await fakes.setRules([ready]);
    const shared = new SharedKindCluster({
      cluster: 'al-check-t',
      workDir: work,
      env: fakes.env,
      available: () => ({ ok: true, reason: 'fakes' }),
      clearPolling: { intervalMs: 20 },
    });
    const KC = path.join(work, 'kubeconfig');

    const w1 = await shared.create(OPTS);
    expect(w1.nodes).toEqual(['n1']);
    const up = await fakes.calls();
    expect(up.filter((c) => c[0] === 'kind' && c[1] === 'create')).toEqual([
      [
        'kind',
        'create',
        'cluster',
        '--name',
        'al-check-t',
        '--config',
        path.join(repo, 'fixtures/kind/cluster.yaml'),
        '--kubeconfig',
        KC,
        '--wait',
        '180s',
      ],
    ]);
    expect(up).toContainEqual(['kubectl', '--kubeconfig', KC, 'apply', '-f', '-']);
    expect(await fakes.stdins()).toEqual([renderDeployment({ profile: 'strict', ipv6: false, dnsCapture: false })]);
    expect((await core.readNamespacedPod({ namespace: 'ambient-lab-e2e', name: 'host-probe-n1' })).status?.phase).toBe(
      'Running',
    );
    await expect(shared.create(OPTS)).rejects.toThrow(/already has a world/);

    // The history changes the cluster: a namespace, a stopped proxy.
    await w1.createNamespace('ambient-a', { 'istio.io/dataplane-mode': 'ambient' });
    await fakes.setRules([{ bin: 'kubectl', has: ['get', 'pods'], stdout: '' }]);
    await w1.stop('proxy', 'n1');
    await fakes.setRules([ready]);
    const before = (await fakes.calls()).length;
    await w1.close();
    const cleared = (await fakes.calls()).slice(before);
    expect(cleared).toContainEqual([
      'kubectl',
      '--kubeconfig',
      KC,
      'label',
      'node',
      'n1',
      'ambient-lab.io/stop-proxy-',
    ]);
    expect(cleared.some((c) => c[0] === 'kind')).toBe(false); // close() hands the cluster back, never deletes it
    expect(
      await core.readNamespace({ name: 'ambient-a' }).then(
        () => 'exists',
        () => 'gone',
      ),
    ).toBe('gone');

    // The next world: same cluster, same host probes; another profile reaches the agent DaemonSet.
    const mark = (await fakes.calls()).length;
    const w2 = await shared.create({ ...OPTS, profile: 'upstream' });
    const second = (await fakes.calls()).slice(mark);
    expect(second.filter((c) => c[0] === 'kind' || c[0] === 'docker')).toEqual([]);
    expect(second).toContainEqual(['kubectl', '--kubeconfig', KC, 'apply', '-f', '-']);
    expect((await fakes.stdins()).at(-1)).toBe(
      renderDeployment({ profile: 'upstream', ipv6: false, dnsCapture: false }),
    );
    expect(second).toContainEqual([
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
    ]);
    await w2.createNamespace('ambient-a'); // the name the previous world used is free again
    await w2.close();
    expect(shared.created).toBe(2);

    // IPv6 and a v4-only mesh are refused with 'unsupported' (the catalog logs such a phase as skipped).
    // (a dual-stack world needs a dual-stack cluster: the first world of the run chose single-stack)
    await expect(shared.create({ ...OPTS, ipv6: true })).rejects.toThrow(
      /ipv6 true is unsupported on this run's single-stack shared cluster/,
    );
    await expect(shared.create({ ...OPTS, ipv6: true, meshV6: false })).rejects.toThrow(/unsupported/);

    await shared.dispose();
    expect((await fakes.calls()).filter((c) => c[0] === 'kind' && c[1] === 'delete')).toEqual([
      ['kind', 'delete', 'cluster', '--name', 'al-check-t', '--kubeconfig', KC],
    ]);
  } finally {
    kubelet = false;
    await kubeletDone.catch(() => undefined);
    await facade.close();
    await fakes.dispose();
    rmSync(work, { recursive: true, force: true });
  }
});

test('a failed bring-up is reported by every later create, without a second `kind create`', async () => {
  const fakes = await makeFakes(['kind', 'docker', 'kubectl']);
  const work = mkdtempSync(path.join(os.tmpdir(), 'al-kindshared-'));
  try {
    await fakes.setRules([{ bin: 'docker', has: ['build'], stderr: 'no space left on device', exit: 1 }]);
    const shared = new SharedKindCluster({
      cluster: 'al-check-t',
      workDir: work,
      env: fakes.env,
      available: () => ({ ok: true, reason: 'fakes' }),
    });
    await expect(shared.create(OPTS)).rejects.toThrow(
      /docker build .* failed with exit code 1: no space left on device/,
    );
    await expect(shared.create(OPTS)).rejects.toThrow(/no space left on device/);
    const calls = await fakes.calls();
    expect(calls.filter((c) => c[0] === 'kind' && c[1] === 'create')).toHaveLength(1);
    expect(calls.filter((c) => c[0] === 'kind' && c[1] === 'delete')).toHaveLength(1); // up() deletes the half-made cluster
  } finally {
    await fakes.dispose();
    rmSync(work, { recursive: true, force: true });
  }
});

test('what the kind world cannot stage: the host kernel era; meshV6 and cniApiFault for the whole run (raw sources and IPv6 it stages)', () => {
  const t = (id: string, kernelVersion: string, caps: ('NET_RAW' | 'NET_ADMIN')[] = []) => ({
    id,
    kernelVersion,
    caps,
  });
  expect(unstageableThreat('kind', t('app-net-raw-5.15', '5.15', ['NET_RAW']), '6.8.0-1021-azure')).toMatch(
    /kernelVersion: the threat assumes kernel 5\.15.*6\.8\.0/,
  );
  expect(unstageableThreat('kind', t('app-nonroot', '6.1'), '5.15.0-100-generic')).toMatch(/kernelVersion/);
  expect(unstageableThreat('kind', t('app-nonroot', '6.1'), '6.8.0')).toBeUndefined();
  expect(unstageableThreat('kind', t('app-net-admin', '6.1', ['NET_ADMIN']), '6.1.0-28-amd64')).toBeUndefined();
  expect(unstageableThreat('kind', t('app-net-raw-6.1', '6.1', ['NET_RAW']), '6.1.0-28-amd64')).toBeUndefined(); // raw through the probe
  expect(worldLimits('kind')).toEqual({ ipv6: true, raw: true, kernel: 'host', imageUser: false });
  // kind's one pod image runs as root: an app whose uid is its image's USER is not staged there
  expect(
    unstageableThreat('kind', { ...t('app-proxy-uid-net-raw', '6.1', ['NET_RAW']), uidSource: 'image' }, '6.1.0'),
  ).toMatch(/uid from the image: .*kind world has no image with that USER/);
  expect(
    unstageableThreat('netns', { ...t('app-proxy-uid-net-raw', '6.1', ['NET_RAW']), uidSource: 'image' }, '6.1.0'),
  ).toBeUndefined();
  // the sim follows kernelVersion; the netns world runs on the host's kernel, as kind
  expect(unstageableThreat('sim', t('app-net-raw-5.15', '5.15', ['NET_RAW']), '6.8.0')).toBeUndefined();
  expect(unstageableThreat('netns', t('app-net-raw-6.1', '6.1', ['NET_RAW']), '6.8.0')).toBeUndefined();
  expect(unstageableThreat('netns', t('app-net-raw-5.15', '5.15', ['NET_RAW']), '6.1.0-28-amd64')).toMatch(
    /kernelVersion: the threat assumes kernel 5\.15, the netns world runs on the host's kernel 6\.1/,
  );
  const gaps = worldGaps('kind', { ipv6: false }, true);
  expect(gaps.join('\n')).not.toMatch(/IPv6: not staged/); // a dual-stack kind cluster
  expect(gaps.join('\n')).toMatch(/meshV6.*mesh-v6-off phase is skipped/);
  expect(gaps.join('\n')).toMatch(/cniApiFault.*api-error-at-add/);
  expect(worldGaps('sim', { ipv6: true }, true)).toEqual([]);
});

test('check --world kind: unstageable cells are not run and say why (n/e, never holds); the stageable cells (NET_RAW too) run in this thread, dual-stack when asked, and the shared cluster is disposed', async () => {
  const created: WorldOptions[] = [];
  let disposed = 0;
  // The kind wiring with a sim world behind it: the histories need a cluster the fakes cannot be.
  const stand: WorldFactory & { dispose(): Promise<void> } = {
    kind: 'kind',
    available: () => ({ ok: true, reason: 'test' }),
    create: (o) => {
      created.push(o);
      return createSimWorld(o, { trace: false });
    },
    dispose: () => {
      disposed++;
      return Promise.resolve();
    },
  };
  setKindFactory(stand);
  try {
    const kernel = os.release();
    const report = await runCheck({
      world: { world: 'kind' },
      settings: { nodes: 2, ipv6: true, dnsCapture: false, maxCommands: 3 },
      runs: 2,
      seed: 11,
      workers: 2,
      outDir: undefined,
      attacks: false,
      selection: {
        properties: ['outbound-capture'],
        threats: ['app-nonroot', 'app-net-raw-6.1', 'app-net-raw-5.15'],
        profiles: ['strict'],
      },
    });
    const cell = (threat: string) => report.cells.find((c) => c.threat === threat)!;
    const stageable =
      unstageableThreat('kind', { id: 'app-nonroot', kernelVersion: '6.1', caps: [] }, kernel) === undefined;
    if (stageable) {
      expect(cell('app-nonroot')).toMatchObject({ observed: 'holds', status: 'holds', runs: 1 });
      expect(created.length).toBeGreaterThanOrEqual(1);
      expect(created.every((o) => o.ipv6 === true && o.profile === 'strict')).toBe(true); // dual-stack, as --ipv6 said
      expect(cell('app-net-raw-6.1')).toMatchObject({ runs: 1 }); // NET_RAW cells run on kind now
      expect(cell('app-net-raw-6.1').observed).not.toBe('not run');
      expect(cell('app-net-raw-6.1').skipped).toBeUndefined();
    }
    expect(cell('app-net-raw-5.15')).toMatchObject({ observed: 'not run', status: 'not evaluated', runs: 0 });
    expect(cell('app-net-raw-5.15').skipped).toMatch(/kernelVersion/);
    expect(report.settings.ipv6).toBe(true);
    expect(report.worldGaps?.join('\n')).not.toMatch(/IPv6: not staged/);
    // (report.ok is not asserted: one 3-command history need not find app-net-raw-6.1's expected bypass)
    expect(disposed).toBe(1);
    const text = renderReport(report);
    expect(text).toMatch(/Cells this world could not stage \(1; not run, shown as n\/e, never as holding\):/);
    expect(text).toMatch(/outbound-capture × app-net-raw-5\.15 × strict: kernelVersion/);
    expect(text).toMatch(/World features this run did not stage/);
  } finally {
    setKindFactory(undefined);
  }
});

test('an aborted check (SIGINT/SIGTERM in the CLI) stops waiting, asks the factory to reap what its worlds left, rejects with CheckInterrupted listing it, and still disposes the shared cluster', async () => {
  let disposed = 0;
  let reaped = 0;
  const ac = new AbortController();
  // A world that never finishes being made: the run is stuck in it when the signal comes.
  const stand: WorldFactory & { dispose(): Promise<void> } = {
    kind: 'kind',
    available: () => ({ ok: true, reason: 'test' }),
    create: () => {
      ac.abort('SIGTERM');
      return new Promise(() => undefined);
    },
    reapInterrupted: () => {
      reaped++;
      return Promise.resolve(['network namespace al-0test1abcdef-node-0']);
    },
    dispose: () => {
      disposed++;
      return Promise.resolve();
    },
  };
  setKindFactory(stand);
  try {
    const run = runCheck({
      world: { world: 'kind' },
      settings: { nodes: 1, ipv6: false, dnsCapture: false, maxCommands: 3 },
      runs: 1,
      seed: 11,
      workers: 0,
      outDir: undefined,
      attacks: false,
      selection: { properties: ['outbound-capture'], threats: ['app-nonroot'], profiles: ['strict'] },
      signal: ac.signal,
    });
    const e = await run.then(
      () => undefined,
      (x: unknown) => x,
    );
    expect(e).toBeInstanceOf(CheckInterrupted);
    expect((e as CheckInterrupted).reason).toBe('SIGTERM');
    expect((e as CheckInterrupted).reaped).toEqual(['network namespace al-0test1abcdef-node-0']);
    expect(reaped).toBe(1);
    expect(disposed).toBe(1);
  } finally {
    setKindFactory(undefined);
  }
});

test('kind budget defaults: a small selection and budget unless given; given options win; other worlds keep theirs', () => {
  expect(checkBudget('kind', {})).toEqual({
    runs: KIND_DEFAULTS.runs,
    maxCommands: KIND_DEFAULTS.maxCommands,
    threats: ['app-nonroot'],
    profiles: ['strict'],
  });
  expect(checkBudget('kind', { runs: '40', threats: 'outside' })).toEqual({
    runs: 40,
    maxCommands: KIND_DEFAULTS.maxCommands,
    threats: ['outside'],
  });
  expect(checkBudget('kind', { properties: 'fail-closed' })).toEqual({
    runs: KIND_DEFAULTS.runs,
    maxCommands: KIND_DEFAULTS.maxCommands,
  });
  expect(checkBudget('sim', {})).toEqual({ runs: DEFAULT_RUNS, maxCommands: 12 });
  expect(() => checkBudget('kind', { runs: '0' })).toThrow(/--runs "0": expected a decimal integer >= 1/);
});
