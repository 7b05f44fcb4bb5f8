/**
 * rebootNode on the sim, in the order a real reboot has: the kubelet brings the pods' sandboxes
 * back before the node agent runs again. Their CNI ADD is refused while the agent is down (fail
 * closed: the pod waits, never running without rules), and once the agent and proxy are back
 * the pods start enrolled in their new netns.
 */
import { test, expect } from '@playwright/test';
import { createSimWorld } from '../../../scenarios/worlds/sim-world.js';

test('reboot: sandboxes come back before the agent; their ADD fails closed, and they start enrolled once the agent is back', async () => {
  const w = await createSimWorld({ nodes: 2, profile: 'strict', kernelVersion: '6.1', ipv6: false, dnsCapture: false, seed: 5 });
  try {
    await w.createNamespace('mesh', { 'istio.io/dataplane-mode': 'ambient' });
    const before = await w.createPod({ namespace: 'mesh', name: 'a', node: 'node-0', app: { uid: 1000, caps: [], tcpPorts: [8080] } });
    const mark = w.log.entries.length;
    await w.rebootNode('node-0');
    const during = w.log.entries.slice(mark);
    // The kubelet tried the sandbox while the agent was down, and the plugin refused it.
    expect(during.some((e) => e.msg === 'cni command failed' && e.fields['node'] === 'node-0')).toBe(true);
    const right = (await w.pods()).find((p) => p.name === 'a')!;
    expect(right.started && !right.redirected).toBe(false);
    await w.settle();
    const after = (await w.pods()).find((p) => p.name === 'a')!;
    expect(after).toMatchObject({ started: true, redirected: true, served: true, annotation: 'enabled' });
    const c = await w.connect({ kind: 'outside' }, { kind: 'pod', pod: { namespace: 'mesh', name: 'a' }, port: 8080 });
    expect(c.acceptedBy).toBe('proxy-inbound');
    expect(before.uid).toBe(after.uid);
  } finally { await w.close(); }
});
