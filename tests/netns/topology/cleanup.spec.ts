/**
 * Cleanup is part of the contract: dispose() removes every namespace and stops every process the
 * cluster started, also when the test body throws; a crashed run's leftovers can be removed by
 * prefix; cleanup never reaches beyond ambient-lab's own prefixes.
 */
import { test, expect } from '@playwright/test';
import { netnsWorld } from '../../worlds.js';
import { NetnsCluster, withCluster } from '../../../e2e/netns/cluster.js';
import { NetnsRun, newRunPrefix } from '../../../e2e/netns/netns-run.js';
import { removeLeftovers } from '../../../e2e/netns/leftovers.js';
import { listNetns } from '../../../e2e/netns/ip.js';
import { startListener } from '../../../e2e/netns/tcp-probe.js';
import type { NetnsProcess } from '../../../e2e/netns/processes.js';

const w = netnsWorld();
test.skip(!w.available, w.reason);

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

test("dispose stops the cluster's processes by pid and removes every namespace", async () => {
  const c = await NetnsCluster.create({ nodes: 2 });
  await c.addPod('node-0', 'a');
  await c.addPod('node-1', 'b');
  const l = await startListener(c, c.pod('a').netns, '0.0.0.0', 8080);
  const l2 = await startListener(c, c.nodes[1]!.netns, '0.0.0.0', 8081);
  expect(alive(l.pid)).toBe(true);
  expect((await c.remaining()).length).toBe(6);
  await c.dispose();
  expect(l.running).toBe(false);
  expect(alive(l.pid)).toBe(false);
  expect(alive(l2.pid)).toBe(false);
  expect((await listNetns()).filter((n) => n.startsWith(c.prefix))).toEqual([]);
  await c.dispose(); // idempotent
  await expect(c.addPod('node-0', 'z')).rejects.toThrow(/already disposed/);
});

test("withCluster cleans up when the test body throws, and the body's error is what surfaces", async () => {
  let prefix = '';
  let listener: NetnsProcess | undefined;
  await expect(
    withCluster({ nodes: 2 }, async (c) => {
      prefix = c.prefix;
      await c.addPod('node-0', 'a');
      listener = await startListener(c, c.pod('a').netns, '0.0.0.0', 8080);
      throw new Error('planted failure in the test body');
    }),
  ).rejects.toThrow('planted failure in the test body');
  expect(prefix).not.toBe('');
  expect((await listNetns()).filter((n) => n.startsWith(prefix))).toEqual([]);
  expect(listener !== undefined && alive(listener.pid)).toBe(false);
});

test("removeLeftovers removes a crashed run's namespaces by prefix and nothing else", async () => {
  const crashed = new NetnsRun(newRunPrefix());
  const bystander = new NetnsRun(newRunPrefix());
  try {
    await crashed.create('node-0');
    await crashed.create('pod-a');
    await bystander.create('node-0');
    // The crashed run never calls dispose(); a later run cleans up by its prefix.
    const report = await removeLeftovers(crashed.prefix);
    expect([...report.removed].sort()).toEqual([`${crashed.prefix}node-0`, `${crashed.prefix}pod-a`]);
    expect(await crashed.remaining()).toEqual([]);
    expect(await bystander.remaining()).toEqual([`${bystander.prefix}node-0`]);
    expect((await removeLeftovers(crashed.prefix)).removed).toEqual([]);
  } finally {
    await bystander.dispose();
    await removeLeftovers(crashed.prefix);
  }
});

test('removeLeftovers refuses prefixes that are not one ambient-lab run', async () => {
  await expect(removeLeftovers('cni-')).rejects.toThrow(/only ambient-lab prefixes/);
  await expect(removeLeftovers('')).rejects.toThrow(/only ambient-lab prefixes/);
  await expect(removeLeftovers('al-')).rejects.toThrow(/every ambient-lab run/);
});
