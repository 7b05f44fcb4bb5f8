/**
 * The CNI installer with the real FileSystem adapter (impl/linux/files.ts: atomic rename,
 * inotify watch) on a real temporary CNI conf dir, and the chain it produces run the way a
 * runtime runs it: the first conf file of the dir, Debian's real bridge + host-local plugins
 * and OUR plugin executable, inside a private node netns (e2e/netns/cni-exec.ts).
 *
 * - install → a pod ADD goes through the chain into our plugin (proved twice: with the API
 *   unreachable our plugin refuses the pod — fail closed — and with the pod's namespace
 *   excluded our plugin passes the primary's result through and the pod starts);
 * - the "primary CNI" rewrites its file without us → the watch re-inserts us;
 * - uninstall → the file is the primary's again, our executable is gone, and pod ADD succeeds;
 * - the agent's readiness check (install-check.ts) on the same real files, through inotify; and the
 *   installer's exit with its DaemonSet gone (decideUninstallOnExit): no file of ours left in the
 *   CNI dirs, and a new pod starts with the primary alone.
 */
import { test, expect } from '@playwright/test';
import { existsSync } from 'node:fs';
import { chmod, mkdir, mkdtemp, readFile, readdir, rename, rm, writeFile } from 'node:fs/promises';
import * as os from 'node:os';
import * as path from 'node:path';
import { fileURLToPath } from 'node:url';
import { netnsWorld } from '../../worlds.js';
import { withCluster, type NetnsCluster } from '../../../e2e/netns/cluster.js';
import {
  DEBIAN_CNI_DIR,
  FileResultCache,
  NetnsPluginExec,
  startPodWithCni,
  stopPodWithCni,
  type PodNetwork,
} from '../../../e2e/netns/cni-exec.js';
import { PRIMARY_CONFLIST_FILE, primaryConfList } from '../../../e2e/netns/primary-conflist.js';
import { CniChain, CniChainError } from '../../../sim/cni/chain.js';
import { MemoryLogger } from '../../../sim/log/memory-logger.js';
import { parseConfList, type CniConfList } from '../../../impl/api/cni.js';
import { CniInstaller, decideUninstallOnExit, type CniInstallConfig } from '../../../impl/node-agent/install.js';
import { PluginInstallCheck } from '../../../impl/node-agent/install-check.js';
import { choosePrimary } from '../../../impl/node-agent/install-conflist.js';
import { NodeFileSystem } from '../../../impl/linux/files.js';
import { SystemClock } from '../../../impl/linux/clock.js';

const w = netnsWorld();
test.skip(!w.available, w.reason);
test.skip(
  !existsSync(path.join(DEBIAN_CNI_DIR, 'bridge')),
  `needs containernetworking-plugins in ${DEBIAN_CNI_DIR} (apt-get install -y containernetworking-plugins)`,
);

const repo = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../../..');
test.skip(
  !existsSync(path.join(repo, 'dist/impl/linux/cni-plugin-main.js')),
  'needs the compiled plugin: run npm run build',
);

const LOOPBACK: CniConfList = { cniVersion: '1.0.0', name: 'cni-loopback', plugins: [{ type: 'loopback' }] };

interface Rig {
  readonly tmp: string;
  readonly confDir: string;
  readonly binDir: string;
  readonly primaryFile: string;
  installer(fields?: Record<string, unknown>): CniInstaller;
  /** What the runtime would load now: the first conf file, as a chain with the real plugins. */
  networks(): Promise<PodNetwork[]>;
}

async function withRig(fn: (c: NetnsCluster, r: Rig) => Promise<void>): Promise<void> {
  const tmp = await mkdtemp(path.join(os.tmpdir(), 'al-install-'));
  const confDir = path.join(tmp, 'net.d');
  const binDir = path.join(tmp, 'bin');
  const image = path.join(tmp, 'image');
  await Promise.all([mkdir(confDir), mkdir(binDir), mkdir(image)]);
  // The executable the agent's image ships: a launcher that runs the plugin with this Node.js.
  const launcher = path.join(image, 'ambient-lab-cni');
  await writeFile(
    launcher,
    `#!/bin/sh\nexec ${JSON.stringify(process.execPath)} ${JSON.stringify(path.join(repo, 'bin/ambient-lab-cni.js'))} "$@"\n`,
  );
  await chmod(launcher, 0o755);
  const primaryFile = path.join(confDir, PRIMARY_CONFLIST_FILE);
  const primary = primaryConfList({ node: 0, ipv6: false, dataDir: path.join(tmp, 'ipam') });
  await writeFile(primaryFile, `${JSON.stringify(primary, null, 2)}\n`);
  const fs = new NodeFileSystem();
  const installers: CniInstaller[] = [];
  try {
    await withCluster({ nodes: 1 }, async (c) => {
      const cache = new FileResultCache(path.join(tmp, 'cache'));
      const exec = new NetnsPluginExec({ netns: c.nodes[0]!.netns, dirs: [binDir, DEBIAN_CNI_DIR] });
      const opts = { path: [binDir, DEBIAN_CNI_DIR] };
      await fn(c, {
        tmp,
        confDir,
        binDir,
        primaryFile,
        installer: (fields = {}) => {
          const config: CniInstallConfig = {
            cniBinDir: binDir,
            cniConfDir: confDir,
            mode: 'chained',
            ownConfListName: '01-ambient-lab.conflist',
            pluginSource: launcher,
            payload: [],
            kubeconfigFile: path.join(tmp, 'run', 'cni-kubeconfig'),
            pluginFields: {
              agentSocket: path.join(tmp, 'run', 'agent.sock'),
              kubeconfig: path.join(tmp, 'run', 'cni-kubeconfig'),
              // nothing listens on port 9 in the node netns: the API is unreachable
              apiAttempts: 1,
              apiRetryDelayMs: 0,
              ...fields,
            },
            resyncMs: 60_000,
          };
          const inst = new CniInstaller(config, {
            fs,
            clock: new SystemClock(),
            log: new MemoryLogger(),
            credentials: async () => ({ server: 'http://127.0.0.1:9', caPem: undefined, token: 'al-test-token' }),
          });
          installers.push(inst);
          return inst;
        },
        networks: async () => {
          const first = choosePrimary(await readdir(confDir), undefined);
          if (!first) throw new Error(`no CNI config in ${confDir}`);
          const list = parseConfList(await readFile(path.join(confDir, first), 'utf8'));
          return [
            { chain: new CniChain(LOOPBACK, exec, cache, opts), ifname: 'lo' },
            { chain: new CniChain(list, exec, cache, opts), ifname: 'eth0' },
          ];
        },
      });
    });
  } finally {
    for (const i of installers) i.stop();
    await rm(tmp, { recursive: true, force: true });
  }
}

const types = async (file: string): Promise<string[]> =>
  parseConfList(await readFile(file, 'utf8')).plugins.map((p) => p.type);

test('installed into a real conf dir, a pod ADD runs through the real primary plugins into our plugin; a primary rewrite is re-inserted by the watch; uninstall restores a working chain', async () => {
  await withRig(async (c, r) => {
    const originalText = await readFile(r.primaryFile, 'utf8');

    // 1. install; the API is unreachable, so our plugin must refuse the pod (fail closed)
    const strict = r.installer();
    expect((await strict.start()).state).toEqual({ phase: 'installed', confFile: '10-al-podnet.conflist' });
    expect(await types(r.primaryFile)).toEqual(['bridge', 'ambient-lab-cni']);
    expect(existsSync(path.join(r.binDir, 'ambient-lab-cni'))).toBe(true);
    const refused = await startPodWithCni(c, 'node-0', 'a', await r.networks(), ['sleep', '600']).catch(
      (e: unknown) => e,
    );
    expect(refused).toBeInstanceOf(CniChainError);
    expect((refused as CniChainError).pluginType).toBe('ambient-lab-cni');
    expect((refused as CniChainError).pluginIndex).toBe(1); // after the bridge, which succeeded
    expect((refused as CniChainError).msg).toContain('cannot decide whether default/a belongs in the mesh');
    expect((refused as CniChainError).code).toBe(11); // try again later: the kubelet retries the sandbox
    strict.stop();

    // 2. the same node with the pod's namespace excluded: our plugin passes the bridge's result through
    const inst = r.installer({ excludeNamespaces: ['default'] });
    const rep = await inst.start();
    expect(rep.wrote).toEqual(['10-al-podnet.conflist']); // only the entry changed
    const nets = await r.networks();
    expect(nets[1]!.chain.list.plugins.map((p) => p.type)).toEqual(['bridge', 'ambient-lab-cni']);
    const b = await startPodWithCni(c, 'node-0', 'b', nets, ['sleep', '600']);
    expect(b.results[1]!.ips?.[0]?.address).toMatch(/^10\.244\.0\.\d+\/24$/);

    // 3. the primary CNI rewrites its file (atomically, as CNIs do) without us: the watch re-inserts
    const tmpPrimary = path.join(r.confDir, '.primary.tmp');
    await writeFile(tmpPrimary, originalText);
    await rename(tmpPrimary, r.primaryFile);
    await expect.poll(() => types(r.primaryFile), { timeout: 15_000 }).toEqual(['bridge', 'ambient-lab-cni']);
    const doc = JSON.parse(await readFile(r.primaryFile, 'utf8')) as { plugins: Array<Record<string, unknown>> };
    expect(doc.plugins[1]!['excludeNamespaces']).toEqual(['default']);

    // 4. uninstall: the file is the primary's own again, our executable and kubeconfig are gone
    await stopPodWithCni(c, b, nets);
    await inst.uninstall();
    expect(JSON.parse(await readFile(r.primaryFile, 'utf8'))).toEqual(JSON.parse(originalText));
    expect(existsSync(path.join(r.binDir, 'ambient-lab-cni'))).toBe(false);
    expect(existsSync(path.join(r.tmp, 'run', 'cni-kubeconfig'))).toBe(false);
    const after = await r.networks();
    expect(after[1]!.chain.list.plugins.map((p) => p.type)).toEqual(['bridge']);
    const d = await startPodWithCni(c, 'node-0', 'd', after, ['sleep', '600']);
    expect(d.results[1]!.ips?.[0]?.address).toMatch(/^10\.244\.0\.\d+\/24$/);
    await stopPodWithCni(c, d, after);
    // no leftovers of ours in the conf dir (temporaries included)
    expect(await readdir(r.confDir)).toEqual(['10-al-podnet.conflist']);
  });
});

test("the agent's readiness check follows the real files (install, a primary rewrite, re-insert); the installer's exit with its DaemonSet gone leaves no file of ours, and pods start with the primary alone", async () => {
  await withRig(async (c, r) => {
    const originalText = await readFile(r.primaryFile, 'utf8');
    const binBefore = (await readdir(r.binDir)).sort();
    const log = new MemoryLogger();
    const check = new PluginInstallCheck(
      { cniBinDir: r.binDir, cniConfDir: r.confDir, resyncMs: 60_000 },
      { fs: new NodeFileSystem(), clock: new SystemClock(), log },
    );
    try {
      await check.start();
      expect(check.state).toMatchObject({ installed: false, detail: expect.stringContaining('is not installed') });
      const inst = r.installer({ excludeNamespaces: ['default'] });
      await inst.start();
      // inotify on the conf dir: the check sees the chained entry without waiting for its resync
      await expect.poll(() => check.state.installed, { timeout: 10_000 }).toBe(true);
      // the primary rewrites its file without us: not ready until the installer's watch re-inserts
      inst.stop();
      const tmpPrimary = path.join(r.confDir, '.primary.tmp');
      await writeFile(tmpPrimary, originalText);
      await rename(tmpPrimary, r.primaryFile);
      await expect.poll(() => check.state.detail, { timeout: 10_000 }).toContain('does not chain');
      await inst.start();
      await expect.poll(() => check.state.installed, { timeout: 10_000 }).toBe(true);

      // the DaemonSet is deleted: SIGTERM, the owner lookup says absent, the installer uninstalls
      const decision = await decideUninstallOnExit('when-daemonset-gone', {
        owner: async () => 'absent',
        clock: new SystemClock(),
        log,
      });
      expect(decision).toMatchObject({ uninstall: true });
      await inst.uninstall();
      await expect.poll(() => check.state.installed, { timeout: 10_000 }).toBe(false);
      // no ambient-lab file remains in the CNI dirs; the primary's file is its own again
      expect(await readdir(r.confDir)).toEqual(['10-al-podnet.conflist']);
      expect(JSON.parse(await readFile(r.primaryFile, 'utf8'))).toEqual(JSON.parse(originalText));
      expect((await readdir(r.binDir)).sort()).toEqual(binBefore.filter((n) => n !== 'ambient-lab-cni'));
      expect((await readdir(r.binDir)).filter((n) => n.includes('ambient-lab'))).toEqual([]);
      const nets = await r.networks();
      const pod = await startPodWithCni(c, 'node-0', 'after', nets, ['sleep', '600']);
      expect(pod.results[1]!.ips?.[0]?.address).toMatch(/^10\.244\.0\.\d+\/24$/);
      await stopPodWithCni(c, pod, nets);
    } finally {
      check.stop();
    }
  });
});
