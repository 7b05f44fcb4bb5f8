/**
 * The container world (e2e/containers/world.ts) end to end: nodes are containers, the agent (with
 * its installer) and the proxy run as containers from the images with the manifests' settings,
 * and the World calls the netns world's suite makes:
 * - capture: enrolled pods reach each other through the node proxy, on one node and across
 *   nodes (HBONE between two proxies sharing the mesh root); a pod outside the mesh is untouched;
 * - the proxy runs as uid/gid 1337 with only NET_ADMIN and SYS_ADMIN, reaches the agent's ZDS
 *   socket through group 1337 (mode 0660) and passes the agent's peer check (it serves pods);
 * - fail closed: with the proxy down traffic is not delivered; with the agent down a new mesh pod
 *   does not start; both recover when started again, and after a restart;
 *   an agent stop or restart (its DaemonSet in the lab's API) leaves the plugin installed and chained;
 * - install and uninstall: the installer chains the plugin into the node's conflist; after the
 *   agent pod is removed and the DaemonSet deleted from the lab's API (the manifests' installer,
 *   when-daemonset-gone, removes the plugin at exit), no ambient-lab file is left
 *   in the node's CNI directories and a new pod starts normally (not captured).
 * Skipped with the reason when Docker or the world's tools are missing, or the images cannot be
 * built (tests/worlds.ts, containerImages()).
 */
import { test, expect } from '@playwright/test';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { containersWorld } from '../worlds.js';
import { ContainersBackend, containerImages } from '../../e2e/containers/world.js';
import type { NetnsWorld } from '../../e2e/netns/world.js';
import { MESH, withNetnsWorld } from '../netns/world/fixture.js';
import type { PodRef, WorldOptions } from '../../scenarios/world.js';

const avail = containersWorld();
test.skip(!avail.available, avail.reason);

let imagesReason: string | undefined;
test.beforeAll(async () => {
  test.setTimeout(900_000); // a first build of the base image takes minutes; cached, seconds
  try {
    await containerImages();
  } catch (e) {
    imagesReason = `the container world's images cannot be built here: ${e instanceof Error ? e.message : String(e)}`;
    console.log(`[worlds] containers: skipped: ${imagesReason}`);
  }
});
test.beforeEach(() => test.skip(imagesReason !== undefined, imagesReason ?? ''));

const app = { uid: 1000, caps: [], tcpPorts: [8080] } as const;

/** A container world for one test (the real-kernel suite's fixture: always closed, nothing of its run left); upstream unless told. */
function withContainersWorld(opts: Partial<WorldOptions>, fn: (w: NetnsWorld) => Promise<void>): Promise<void> {
  return withNetnsWorld({ profile: 'upstream', ...opts }, fn);
}

function backendOf(w: NetnsWorld): ContainersBackend {
  const b = w.lab.backend;
  if (!(b instanceof ContainersBackend)) throw new Error('not a container world');
  return b;
}

/** The plugin on `node`: the types the node's primary conflist chains, and our files in the CNI bin dir. */
function pluginOn(w: NetnsWorld, node: string): { chain: string[]; files: string[] } {
  const backend = backendOf(w);
  const conf = backend.hostDir(w.lab, node, '/etc/cni/net.d');
  const bin = backend.hostDir(w.lab, node, '/opt/cni/bin');
  const list = JSON.parse(fs.readFileSync(path.join(conf, '10-al-podnet.conflist'), 'utf8')) as {
    plugins: { type: string }[];
  };
  return { chain: list.plugins.map((p) => p.type), files: fs.readdirSync(bin).filter((f) => /ambient-lab/.test(f)) };
}
const INSTALLED = { chain: ['bridge', 'ambient-lab-cni'], files: ['ambient-lab-cni'] };

/** What the agent pod's install-cni containers on `node` decided at exit, in order (their log). */
function installerExits(w: NetnsWorld, node: string): { uninstall: boolean; why: string }[] {
  const file = path.join(w.lab.nodeDir(node), 'install-cni.log');
  return fs
    .readFileSync(file, 'utf8')
    .split('\n')
    .filter((l) => l.includes('"msg":"cni installer exiting"'))
    .map((l) => {
      const { uninstall, why } = JSON.parse(l) as { uninstall: boolean; why: string };
      return { uninstall, why };
    });
}
/** A stop of the agent pod with its DaemonSet in the API: the installer leaves the plugin (cni-installer-main.ts). */
const LEFT_IN_PLACE = { uninstall: false, why: expect.stringContaining('the DaemonSet is still present') };

/** uid, gid, supplementary groups and effective capabilities of a process, from /proc. */
function creds(pid: number): { uid: string; gid: string; groups: string; capEff: bigint } {
  const s = fs.readFileSync(`/proc/${pid}/status`, 'utf8');
  const field = (k: string): string => new RegExp(`^${k}:\\s*(.*)$`, 'm').exec(s)?.[1]?.trim() ?? '';
  return {
    uid: field('Uid').split(/\s+/)[1]!,
    gid: field('Gid').split(/\s+/)[1]!,
    groups: field('Groups'),
    capEff: BigInt(`0x${field('CapEff')}`),
  };
}
const CAP_NET_ADMIN = 12n;
const CAP_SYS_ADMIN = 21n;

const a: PodRef = { namespace: 'mesh', name: 'a' };
const b: PodRef = { namespace: 'mesh', name: 'b' };
const c: PodRef = { namespace: 'mesh', name: 'c' };

test('capture on one node and across nodes (HBONE); the proxy at uid 1337 reaches the ZDS socket through group 1337; the mesh CA is a container of its own', async () => {
  await withContainersWorld({}, async (w) => {
    await w.createNamespace('mesh', MESH);
    await w.createNamespace('plain');
    await w.createPod({ ...a, node: 'node-0', app });
    await w.createPod({ ...b, node: 'node-0', app });
    await w.createPod({ ...c, node: 'node-1', app });
    await w.createPod({ namespace: 'plain', name: 'p', node: 'node-0', app });
    await w.settle();
    const pods = await w.pods();
    expect(pods.filter((p) => p.namespace === 'mesh').map((p) => [p.name, p.redirected, p.served])).toEqual([
      ['a', true, true],
      ['b', true, true],
      ['c', true, true],
    ]);
    expect(pods.find((p) => p.name === 'p')).toMatchObject({ started: true, redirected: false, served: false });

    const same = await w.connect({ kind: 'pod', pod: a }, { kind: 'pod', pod: b, port: 8080 });
    expect(same).toMatchObject({ outcome: 'established', acceptedBy: 'proxy-outbound', acceptedIn: a });
    expect(same.deliveries).toEqual([expect.objectContaining({ pod: b, viaProxy: true, proxyNode: 'node-0' })]);
    const cross = await w.connect({ kind: 'pod', pod: a }, { kind: 'pod', pod: c, port: 8080 });
    expect(cross).toMatchObject({ outcome: 'established', acceptedBy: 'proxy-outbound', acceptedIn: a });
    expect(cross.deliveries).toEqual([expect.objectContaining({ pod: c, viaProxy: true, proxyNode: 'node-1' })]);
    expect(cross.proxyLog.map((r) => [r.node, r.direction, r.event])).toContainEqual([
      'node-1',
      'inbound-hbone',
      'forwarded',
    ]);
    const plain = await w.connect(
      { kind: 'pod', pod: a },
      { kind: 'pod', pod: { namespace: 'plain', name: 'p' }, port: 8080 },
    );
    expect(plain.outcome).toBe('established');

    // The proxy as the manifests run it: uid/gid 1337, exactly NET_ADMIN and SYS_ADMIN effective
    // (file capabilities of /app/node-netcaps), and the ZDS socket it uses is group 1337, 0660.
    for (const node of w.nodes) {
      const proxy = w.lab.state.components[`${node}/proxy`]!;
      const cr = creds(proxy.pid);
      expect([cr.uid, cr.gid]).toEqual(['1337', '1337']);
      expect(cr.capEff).toBe((1n << CAP_NET_ADMIN) | (1n << CAP_SYS_ADMIN));
      const agent = creds(w.lab.state.components[`${node}/agent`]!.pid);
      expect(agent.uid).toBe('0');
      expect(agent.groups.split(/\s+/)).toContain('1337');
      const zds = fs.statSync(path.join(w.lab.nodeDir(node), 'zds.sock'));
      expect([zds.gid, zds.mode & 0o777]).toEqual([1337, 0o660]);
    }
    // The mesh CA as its Deployment runs it: a container of its own at its Service's address,
    // uid/gid 1338 without capabilities, the root Secret mounted 0440 with the pod's group; and
    // the cross-node connection above was authorized under a certificate it issued.
    const ca = creds(w.lab.state.ca!.pid);
    expect([ca.uid, ca.gid, ca.capEff]).toEqual(['1338', '1338', 0n]);
    expect(fs.readFileSync(`/proc/${w.lab.state.ca!.pid}/cgroup`, 'utf8')).toMatch(/docker|containerd/);
    expect(w.lab.caAddress()).toBe('https://192.0.2.2:15012');
    const key = fs.statSync(path.join(w.lab.state.runDir, 'secrets', 'ambient-lab-mesh-root', 'ca.key'));
    expect([key.gid, key.mode & 0o777]).toEqual([1338, 0o440]);
    expect(fs.readFileSync(path.join(w.lab.state.runDir, 'ca.log'), 'utf8')).toMatch(/certificate issued/);
  });
});

test('fail closed with the proxy or the agent down; both recover on start and after a restart', async () => {
  await withContainersWorld({ nodes: 1 }, async (w) => {
    await w.createNamespace('mesh', MESH);
    await w.createPod({ ...a, node: 'node-0', app });
    await w.createPod({ ...b, node: 'node-0', app });
    await w.settle();
    const go = (): ReturnType<NetnsWorld['connect']> =>
      w.connect({ kind: 'pod', pod: a }, { kind: 'pod', pod: b, port: 8080 });
    expect((await go()).deliveries).toHaveLength(1);

    await w.stop('proxy', 'node-0');
    const down = await go();
    expect(down.deliveries).toEqual([]);
    expect(['refused', 'timeout']).toContain(down.outcome);
    await w.start('proxy', 'node-0');
    await w.settle();
    expect((await go()).deliveries).toEqual([expect.objectContaining({ pod: b, viaProxy: true })]);

    await w.stop('agent', 'node-0');
    // The manifests' installer stopped with the agent, its DaemonSet in the lab's API: the plugin
    // stays installed and chained (what makes the pod below fail closed rather than start uncaptured).
    await expect.poll(() => installerExits(w, 'node-0')).toEqual([LEFT_IN_PLACE]);
    expect(pluginOn(w, 'node-0')).toEqual(INSTALLED);
    const late = await w.createPod({ ...c, node: 'node-0', app });
    expect(late.started, 'a mesh pod must not start while the agent is down').toBe(false);
    await w.start('agent', 'node-0');
    await w.settle();
    expect((await w.pods()).find((p) => p.name === 'c')).toMatchObject({
      started: true,
      redirected: true,
      served: true,
    });

    await w.restart('agent', 'node-0');
    await expect.poll(() => installerExits(w, 'node-0')).toEqual([LEFT_IN_PLACE, LEFT_IN_PLACE]);
    expect(pluginOn(w, 'node-0')).toEqual(INSTALLED);
    await w.restart('proxy', 'node-0');
    await w.settle();
    expect((await go()).deliveries).toEqual([expect.objectContaining({ pod: b, viaProxy: true })]);
    expect((await w.pods()).filter((p) => p.served && p.redirected)).toHaveLength(3);
  });
});

test('install chains the plugin into the node conflist; uninstall leaves no ambient-lab file and new pods start normally', async () => {
  await withContainersWorld({ nodes: 1 }, async (w) => {
    const backend = backendOf(w);
    const conf = backend.hostDir(w.lab, 'node-0', '/etc/cni/net.d');
    expect(pluginOn(w, 'node-0')).toEqual(INSTALLED);

    await w.stop('agent', 'node-0');
    await w.stop('proxy', 'node-0');
    expect(pluginOn(w, 'node-0')).toEqual(INSTALLED); // an agent stop with the DaemonSet there
    await backend.uninstall(w.lab, 'node-0');
    expect(await w.lab.api.list('DaemonSet')).toEqual([]);
    expect(pluginOn(w, 'node-0')).toEqual({ chain: ['bridge'], files: [] });
    expect(fs.readdirSync(conf).filter((f) => /ambient-lab/.test(f))).toEqual([]);

    await w.createNamespace('mesh', MESH);
    const p = await w.createPod({ ...a, node: 'node-0', app });
    expect(p).toMatchObject({ started: true, redirected: false, served: false });
  });
});
