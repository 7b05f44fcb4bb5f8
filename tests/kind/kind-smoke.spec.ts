/**
 * The kind world: a throwaway cluster comes up, client-node sees a Ready node, and the cluster is
 * deleted. Runs only with KIND=1, Docker and kind (see tests/worlds.ts).
 */
import { test, expect } from '@playwright/test';
import { execa } from 'execa';
import * as k8s from '@kubernetes/client-node';
import { kindWorld } from '../worlds.js';

const world = kindWorld();
test.skip(!world.available, world.reason);

test('a kind cluster comes up with a Ready node and is deleted afterwards', async () => {
  const name = `al-${process.pid.toString(36)}`;
  await execa('kind', ['create', 'cluster', '--name', name, '--wait', '180s']);
  try {
    const { stdout } = await execa('kind', ['get', 'kubeconfig', '--name', name]);
    const kc = new k8s.KubeConfig();
    kc.loadFromString(stdout);
    const core = kc.makeApiClient(k8s.CoreV1Api);
    const nodes = await core.listNode();
    expect(nodes.items.length).toBeGreaterThan(0);
    const ready = nodes.items.every((n) =>
      n.status?.conditions?.some((c) => c.type === 'Ready' && c.status === 'True'),
    );
    expect(ready).toBe(true);
  } finally {
    await execa('kind', ['delete', 'cluster', '--name', name]);
  }
  const { stdout: clusters } = await execa('kind', ['get', 'clusters']);
  expect(clusters.split('\n')).not.toContain(name);
});
