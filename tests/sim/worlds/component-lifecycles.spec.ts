/**
 * Lifecycle operations on one component of one node take effect in the order they were called
 * (scenarios/worlds/component-lifecycles.ts), so a model that applies them as they complete
 * agrees with the world; operations on different components still overlap.
 */
import { test, expect } from '@playwright/test';
import { ComponentLifecycles } from '../../../scenarios/worlds/component-lifecycles.js';
import { simWorldFactory } from '../../../scenarios/worlds/sim-world.js';

const tick = (): Promise<void> => new Promise((r) => setImmediate(r));

test('operations on one component complete in call order, even when a later one is quicker', async () => {
  const q = new ComponentLifecycles();
  const done: string[] = [];
  const slow = q.run('node-0', ['proxy'], async () => {
    for (let i = 0; i < 20; i++) await tick();
    done.push('restart');
  });
  const quick = q.run('node-0', ['proxy'], async () => {
    done.push('stop');
  });
  await Promise.all([slow, quick]);
  expect(done).toEqual(['restart', 'stop']);
});

test('operations on different components or nodes are not serialized', async () => {
  const q = new ComponentLifecycles();
  const done: string[] = [];
  const slow = q.run('node-0', ['proxy'], async () => {
    for (let i = 0; i < 20; i++) await tick();
    done.push('proxy node-0');
  });
  const agent = q.run('node-0', ['agent'], async () => {
    done.push('agent node-0');
  });
  const other = q.run('node-1', ['proxy'], async () => {
    done.push('proxy node-1');
  });
  await Promise.all([slow, agent, other]);
  expect(done).toEqual(['agent node-0', 'proxy node-1', 'proxy node-0']);
});

test('a failed operation is reported to its caller and does not wedge the queue', async () => {
  const q = new ComponentLifecycles();
  const failed = q.run('node-0', ['agent'], async () => {
    throw new Error('boom');
  });
  const next = q.run('node-0', ['agent'], async () => 'ran');
  await expect(failed).rejects.toThrow('boom');
  await expect(next).resolves.toBe('ran');
});

test('a reboot waits for both components of its node, and later operations wait for it', async () => {
  const q = new ComponentLifecycles();
  const done: string[] = [];
  const proxy = q.run('node-0', ['proxy'], async () => {
    for (let i = 0; i < 10; i++) await tick();
    done.push('proxy');
  });
  const reboot = q.run('node-0', ['agent', 'proxy'], async () => {
    done.push('reboot');
  });
  const agent = q.run('node-0', ['agent'], async () => {
    done.push('agent');
  });
  await Promise.all([proxy, reboot, agent]);
  expect(done).toEqual(['proxy', 'reboot', 'agent']);
});

test('sim world: restart || stop of one proxy complete in call order and leave it stopped', async () => {
  const w = await simWorldFactory.create({
    nodes: 1,
    profile: 'strict',
    kernelVersion: '6.1',
    ipv6: false,
    dnsCapture: false,
    seed: 7,
  });
  try {
    await w.createNamespace('a', { 'istio.io/dataplane-mode': 'ambient' });
    await w.createPod({ namespace: 'a', name: 'p', app: { uid: 1000, caps: [], tcpPorts: [8080] } });
    await w.settle();
    expect((await w.pods()).find((p) => p.name === 'p')?.served).toBe(true);
    const completed: string[] = [];
    const node = w.nodes[0]!;
    await Promise.all([
      w.restart('proxy', node).then(() => completed.push('restart')),
      w.stop('proxy', node).then(() => completed.push('stop')),
    ]);
    expect(completed).toEqual(['restart', 'stop']);
    await w.settle();
    expect((await w.pods()).find((p) => p.name === 'p')?.served).toBe(false);
    await w.start('proxy', node);
    await w.settle();
    expect((await w.pods()).find((p) => p.name === 'p')?.served).toBe(true);
  } finally {
    await w.close();
  }
});
