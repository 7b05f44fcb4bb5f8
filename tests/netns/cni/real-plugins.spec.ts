/**
 * The CNI chain on Debian's real plugins (/usr/lib/cni bridge + host-local + loopback), run per
 * the exec protocol inside a node netns of a private NetnsCluster, against a real pod netns:
 * ADD wires the pod (reachable over TCP from another node's pod), CHECK passes and then fails
 * when the interface is gone, DEL releases the address and repeats safely, VERSION answers, and
 * a failing chained plugin (a script printing error JSON) keeps the pod from starting.
 */
import { test, expect } from '@playwright/test';
import { mkdtemp, readdir, rm, writeFile, chmod } from 'node:fs/promises';
import { existsSync } from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
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
import { ipIn } from '../../../e2e/netns/ip.js';
import { primaryConfList } from '../../../e2e/netns/primary-conflist.js';
import { connectFrom, startListener } from '../../../e2e/netns/tcp-probe.js';
import { CniChain, CniChainError } from '../../../sim/cni/chain.js';
import type { CniConfList } from '../../../impl/api/cni.js';

const w = netnsWorld();
test.skip(!w.available, w.reason);
test.skip(
  !existsSync(path.join(DEBIAN_CNI_DIR, 'bridge')),
  `needs containernetworking-plugins in ${DEBIAN_CNI_DIR} (apt-get install -y containernetworking-plugins)`,
);

const LOOPBACK: CniConfList = { cniVersion: '1.0.0', name: 'cni-loopback', plugins: [{ type: 'loopback' }] };

interface Rig {
  tmp: string;
  networks(node: number, extra?: CniConfList['plugins']): PodNetwork[];
}

async function withRig(nodes: number, fn: (c: NetnsCluster, r: Rig) => Promise<void>): Promise<void> {
  const tmp = await mkdtemp(path.join(os.tmpdir(), 'al-cni-'));
  try {
    await withCluster({ nodes }, async (c) => {
      const cache = new FileResultCache(path.join(tmp, 'cache'));
      await fn(c, {
        tmp,
        networks: (node, extra = []) => {
          const exec = new NetnsPluginExec({
            netns: c.nodes[node]!.netns,
            dirs: [DEBIAN_CNI_DIR, path.join(tmp, 'bin')],
          });
          const opts = { path: [DEBIAN_CNI_DIR, path.join(tmp, 'bin')] };
          return [
            { chain: new CniChain(LOOPBACK, exec, cache, opts), ifname: 'lo' },
            {
              chain: new CniChain(
                primaryConfList({ node, ipv6: false, dataDir: path.join(tmp, `ipam-${node}`), chained: extra }),
                exec,
                cache,
                opts,
              ),
              ifname: 'eth0',
            },
          ];
        },
      });
    });
  } finally {
    await rm(tmp, { recursive: true, force: true });
  }
}

test('ADD on the real plugins wires pods on two nodes that reach each other; CHECK passes; DEL releases and repeats; VERSION answers', async () => {
  await withRig(2, async (c, r) => {
    const nets0 = r.networks(0);
    const nets1 = r.networks(1);
    const a = await startPodWithCni(c, 'node-0', 'a', nets0, ['sleep', '600']);
    const b = await startPodWithCni(c, 'node-1', 'b', nets1, ['sleep', '600']);
    const res = a.results[1]!;
    expect(res.cniVersion).toBe('1.0.0');
    expect(res.ips?.[0]).toMatchObject({ address: '10.244.0.2/24', gateway: '10.244.0.1' });
    const iface = res.interfaces?.[res.ips![0]!.interface!];
    expect(iface).toMatchObject({ name: 'eth0', sandbox: a.pod.netnsPath });
    expect(a.results[0]!.interfaces?.[0]?.name).toBe('lo');
    const addrs = JSON.parse(await ipIn(a.pod.netns, ['-j', 'addr', 'show'])) as Array<{
      ifname: string;
      operstate: string;
      addr_info: Array<{ local: string }>;
    }>;
    expect(addrs.find((l) => l.ifname === 'eth0')?.addr_info.map((x) => x.local)).toContain('10.244.0.2');
    expect(addrs.find((l) => l.ifname === 'lo')?.addr_info.map((x) => x.local)).toContain('127.0.0.1');
    expect(await ipIn(a.pod.netns, ['route', 'show', 'default'])).toContain('via 10.244.0.1');
    expect(await ipIn(c.node('node-0').netns, ['-br', 'link', 'show', 'type', 'bridge'])).toContain('cni0');
    expect(a.process.running).toBe(true);

    // Pod to pod across nodes over the fabric, no NAT: the listener sees a's address.
    const listener = await startListener(c, b.pod.netns, '0.0.0.0', 8080, 'b');
    expect(await connectFrom(c, a.pod.netns, c.pod('b').ipv4!, 8080)).toBe(`b ${c.pod('b').ipv4} 8080`);
    expect(listener.stdout).toContain('"remote":"10.244.0.2"');

    const att = { containerId: a.containerId, netns: a.pod.netnsPath, ifname: 'eth0' };
    await nets0[1]!.chain.check(att);
    const versions = await nets0[1]!.chain.versions();
    expect(versions[0]!.supportedVersions).toContain('1.0.0');
    expect(versions[0]!.supportedVersions).not.toContain('1.1.0');

    const ipamDir = path.join(r.tmp, 'ipam-0', 'al-podnet');
    expect(await readdir(ipamDir)).toContain('10.244.0.2');
    await nets0[1]!.chain.del(att);
    expect(await readdir(ipamDir)).not.toContain('10.244.0.2');
    expect(await nets0[1]!.chain.cached(att)).toBeUndefined();
    await nets0[1]!.chain.del(att); // repeated DEL succeeds
    await nets0[0]!.chain.del({ ...att, ifname: 'lo' });
    await c.removePod('a');
    await stopPodWithCni(c, b, nets1);
  });
});

test('CHECK on the real bridge plugin fails when the pod interface was removed behind its back', async () => {
  await withRig(1, async (c, r) => {
    const nets = r.networks(0);
    const a = await startPodWithCni(c, 'node-0', 'a', nets, ['sleep', '600']);
    await ipIn(a.pod.netns, ['link', 'del', 'eth0']);
    const err = await nets[1]!.chain
      .check({ containerId: a.containerId, netns: a.pod.netnsPath, ifname: 'eth0' })
      .catch((e: unknown) => e);
    expect(err).toBeInstanceOf(CniChainError);
    expect((err as CniChainError).pluginType).toBe('bridge');
    await stopPodWithCni(c, a, nets); // DEL still succeeds with the interface gone
  });
});

test('a failing chained plugin keeps the pod from starting: its error JSON and code reach the runtime, DEL cleans up, no process runs', async () => {
  await withRig(1, async (c, r) => {
    const bin = path.join(r.tmp, 'bin');
    await rm(bin, { recursive: true, force: true });
    await import('node:fs/promises').then((fs) => fs.mkdir(bin, { recursive: true }));
    const log = path.join(r.tmp, 'fake.log');
    const script = [
      '#!/bin/sh',
      `echo "$CNI_COMMAND" >> ${log}`,
      'cat > /dev/null',
      'if [ "$CNI_COMMAND" = ADD ]; then',
      `  echo '{"cniVersion":"1.0.0","code":11,"msg":"node agent unreachable","details":"dial unix /var/run/al-agent.sock: connection refused"}'`,
      '  exit 1',
      'fi',
      'exit 0',
    ].join('\n');
    await writeFile(path.join(bin, 'al-fake-agent'), script);
    await chmod(path.join(bin, 'al-fake-agent'), 0o755);
    const nets = r.networks(0, [{ type: 'al-fake-agent' }]);
    const err = await startPodWithCni(c, 'node-0', 'mesh', nets, ['sleep', '600']).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(CniChainError);
    expect((err as CniChainError).code).toBe(11);
    expect((err as CniChainError).message).toBe(
      'plugin type="al-fake-agent" name="al-podnet" failed (add): node agent unreachable: dial unix /var/run/al-agent.sock: connection refused (CNI error code 11)',
    );
    expect(c.processes.running()).toEqual([]);
    expect(c.pods()).toEqual([]);
    expect(await c.remaining()).not.toContain(`${c.prefix}pod-mesh`);
    // DEL ran for the whole list after the failed ADD: the fake saw it and host-local released the address.
    const { readFile } = await import('node:fs/promises');
    expect((await readFile(log, 'utf8')).trim().split('\n')).toEqual(['ADD', 'DEL']);
    expect((await readdir(path.join(r.tmp, 'ipam-0', 'al-podnet'))).filter((f) => f.startsWith('10.'))).toEqual([]);
  });
});
