/**
 * The offline images (tools/images.ts, ci/*.Dockerfile on the debootstrap base) hold what the
 * manifests run: each check is a `docker run --rm --network none` of a built image, so nothing
 * here reaches a network. The images come from localImages() (built or reused; .ci/run builds them
 * before the tests). The uid, gid and capabilities checked are the proxy DaemonSet's and the CA Deployment's
 * (deploy/base/proxy.yaml, as `kubectl kustomize` renders it). Short-lived probes, so plain `docker run` through execa (the
 * container world itself drives Docker through testcontainers).
 */
import { test, expect } from '@playwright/test';
import { execa } from 'execa';
import * as path from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseAllDocuments } from 'yaml';
import { localImages } from '../../e2e/containers/images.js';
import { renderDeployment } from '../../e2e/deployment/launch.js';
import { containersWorld } from '../worlds.js';

const world = containersWorld();
test.skip(!world.available, world.reason);
test.describe.configure({ mode: 'serial' });

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
const ADDONS = ['ambient_lab_sockets', 'ambient_lab_packet', 'ambient_lab_hbone'];
const LOAD_ADDONS = `for (const a of ${JSON.stringify(ADDONS)}) require('/app/build/Release/' + a + '.node'); console.log('loaded')`;

let images: { readonly node: string; readonly agent: string; readonly proxy: string; readonly ca: string };

test.beforeAll(async () => {
  test.setTimeout(900_000); // a first build debootstraps the base (minutes); cached, seconds
  images = await localImages({ log: (l) => console.log(l) });
});

/** `docker run --rm --network none [opts] image argv...`; the container is removed by --rm. */
async function inImage(
  image: string,
  argv: readonly string[],
  opts: readonly string[] = [],
): Promise<{ exitCode: number; stdout: string; stderr: string }> {
  const r = await execa('docker', ['run', '--rm', '--network', 'none', ...opts, image, ...argv], {
    reject: false,
    timeout: 120_000,
  });
  return { exitCode: r.exitCode ?? -1, stdout: String(r.stdout), stderr: String(r.stderr) };
}

async function ok(image: string, argv: readonly string[], opts: readonly string[] = []): Promise<string> {
  const r = await inImage(image, argv, opts);
  expect(r.exitCode, `${image} ${argv.join(' ')}: ${r.stderr}`).toBe(0);
  return r.stdout + r.stderr;
}

test('hash-tagged images; another process (`npm run images`) computes the same tags and reuses them', async () => {
  for (const [name, tag] of Object.entries(images))
    expect(tag).toMatch(new RegExp(`^ambient-lab/${name}:[0-9a-f]{16}$`));
  const r = await execa(process.execPath, [path.join(ROOT, 'dist/tools/build-images.js')], { reject: false });
  expect(r.exitCode, r.stderr).toBe(0);
  const printed = Object.fromEntries(
    String(r.stdout)
      .trim()
      .split('\n')
      .map((l) => l.split('=') as [string, string]),
  );
  expect(printed).toMatchObject(images);
  // nothing built: only the inputs hashed and `docker image inspect`
  expect(String(r.stderr)).not.toContain('built');
  expect(String(r.stderr)).toMatch(/reusing ambient-lab\/base:/);
});

interface Container {
  readonly name: string;
  readonly securityContext: {
    readonly runAsUser?: number;
    readonly runAsGroup?: number;
    readonly capabilities: { readonly add?: readonly string[] };
  };
}

/** A container of one of the DaemonSets of deploy/ as it ships (the base rendered by `kubectl kustomize`). */
function manifestContainer(workload: string, container: string, kind = 'DaemonSet'): Container {
  const rendered = renderDeployment({ profile: 'upstream', ipv6: true, dnsCapture: true });
  for (const doc of parseAllDocuments(rendered)) {
    const o = doc.toJS() as {
      kind?: string;
      metadata?: { name?: string };
      spec?: { template?: { spec?: { containers?: Container[] } } };
    } | null;
    const c = o?.kind === kind && o.metadata?.name === workload ? o.spec?.template?.spec?.containers : undefined;
    const found = c?.find((x) => x.name === container);
    if (found) return found;
  }
  throw new Error(`no ${kind} ${workload} with a container ${container} in deploy/ as rendered`);
}

/** `docker run` options for a container's capabilities as the DaemonSet sets them (drop ALL, add its list). */
const capsOf = (c: Container): string[] => [
  '--cap-drop',
  'ALL',
  ...(c.securityContext.capabilities.add ?? []).flatMap((cap) => ['--cap-add', cap]),
];
const CAP_EFF = "console.log(/CapEff:\\s*(\\w+)/.exec(require('fs').readFileSync('/proc/self/status', 'utf8'))[1])";
const CAP_BIT: Readonly<Record<string, number>> = { NET_ADMIN: 12, NET_RAW: 13, SYS_ADMIN: 21, SYS_PTRACE: 19 };

test('the agent image: Node 20, the native addons load, the rule tools work in its netns, the CNI payload is there', async () => {
  const agent = capsOf(manifestContainer('ambient-lab-agent', 'agent'));
  expect(await ok(images.agent, ['node', '--version'])).toMatch(/^v20\./);
  expect(await ok(images.agent, ['node', '-e', LOAD_ADDONS])).toContain('loaded');
  // with the agent's capabilities, in the container's own network namespace (--network none)
  const rules = await ok(
    images.agent,
    ['sh', '-c', 'iptables -S && ip6tables -S && ipset create al-smoke hash:ip && ipset list -n && ip rule && ip -V'],
    agent,
  );
  expect(rules).toContain('-P OUTPUT ACCEPT');
  expect(rules).toContain('al-smoke');
  expect(rules).toMatch(/iproute2/);
  expect(await ok(images.agent, ['iptables', '--version'])).toMatch(/iptables v1\.8/);
  // the plugin payload the agent installs on the node (deploy/base/agent.yaml, install-cni's AMBIENT_LAB_PAYLOAD)
  expect(
    await ok(images.agent, [
      'sh',
      '-c',
      'test -x /app/cni/ambient-lab-cni && test -x /usr/local/bin/node && echo payload',
    ]),
  ).toContain('payload');
  const version = await ok(images.agent, [
    'sh',
    '-c',
    'echo "{}" | CNI_COMMAND=VERSION node /app/cni/ambient-lab-cni.mjs',
  ]);
  expect((JSON.parse(version) as { supportedVersions: string[] }).supportedVersions).toContain('1.0.0');
  // production dependencies only
  expect(
    await ok(images.agent, [
      'sh',
      '-c',
      'test ! -e /app/node_modules/typescript && test -e /app/node_modules/yaml && echo pruned',
    ]),
  ).toContain('pruned');
});

test('the proxy image: uid/gid 1337 as the DaemonSet, node-netcaps carries exactly its capabilities, and they take effect', async () => {
  const proxy = manifestContainer('ambient-lab-proxy', 'proxy');
  const sc = proxy.securityContext;
  expect((await ok(images.proxy, ['id', '-u'])).trim()).toBe(String(sc.runAsUser));
  expect((await ok(images.proxy, ['id', '-g'])).trim()).toBe(String(sc.runAsGroup));
  const add = sc.capabilities.add ?? [];
  const caps = add.map((c) => `cap_${c.toLowerCase()}`).sort();
  expect((await ok(images.proxy, ['getcap', '/app/node-netcaps'])).trim()).toBe(
    `/app/node-netcaps ${caps.join(',')}=ep`,
  );
  // run as the DaemonSet does (those capabilities, not privileged): the file capabilities become
  // the non-root process's effective set, and the addons load under it
  const eff = await ok(
    images.proxy,
    ['/app/node-netcaps', '-e', `${LOAD_ADDONS.replace("console.log('loaded')", CAP_EFF)}`],
    capsOf(proxy),
  );
  const want = add.reduce((m, c) => m | (1n << BigInt(CAP_BIT[c]!)), 0n);
  expect(BigInt(`0x${eff.trim()}`)).toBe(want);
  // plain node in the same image stays without them
  expect(BigInt(`0x${(await ok(images.proxy, ['node', '-e', CAP_EFF], capsOf(proxy))).trim()}`)).toBe(0n);
});

test('the CA image: uid/gid 1338 as the Deployment, no capabilities, and its program runs (a usage error exits 2)', async () => {
  const ca = manifestContainer('ambient-lab-ca', 'ca', 'Deployment');
  const sc = ca.securityContext;
  expect((await ok(images.ca, ['id', '-u'])).trim()).toBe(String(sc.runAsUser));
  expect((await ok(images.ca, ['id', '-g'])).trim()).toBe(String(sc.runAsGroup));
  expect(sc.capabilities.add ?? []).toEqual([]);
  // the manifest's command, as the Deployment runs it (no capabilities): missing --ca-cert is a usage error
  const r = await inImage(images.ca, ['node', '/app/bin/ambient-lab-ca.js'], capsOf(ca));
  expect(r.exitCode, r.stderr).toBe(2);
  expect(r.stderr).toContain('ca-cert');
});

test("the node image: the netns world's tools (its own check), the reference CNI plugins, the pod app", async () => {
  expect(await ok(images.node, ['node', '/app/dist/e2e/netns/required-tools.js', '--check'])).not.toContain('MISSING');
  expect(
    await ok(images.node, [
      'sh',
      '-c',
      'test -x /usr/lib/cni/bridge && test -x /usr/lib/cni/host-local && test -x /usr/lib/cni/loopback && echo cni',
    ]),
  ).toContain('cni');
  expect(
    await ok(images.node, [
      'sh',
      '-c',
      'test -f /app/dist/e2e/netns/world-pod-app.js && test -f /app/dist/e2e/netns/probe-program.js && echo apps',
    ]),
  ).toContain('apps');
  expect(await ok(images.node, ['node', '-e', LOAD_ADDONS])).toContain('loaded');
});
