/**
 * rebootNode on the sim, in the order a real reboot has: the kubelet brings the pods' sandboxes
 * back before the node agent runs again. Their CNI ADD is refused while the agent is down (fail
 * closed: the pod waits, never running without rules), and once the agent and proxy are back
 * the pods start enrolled in their new netns.
 */
import { test, expect } from '@playwright/test';
import { createSimWorld } from '../../../scenarios/worlds/sim-world.js';

test('reboot: sandboxes come back before the agent; their ADD fails closed, and they start enrolled once the agent is back', async () => {
  const w = await createSimWorld({
    nodes: 2,
    profile: 'strict',
    kernelVersion: '6.1',
    ipv6: false,
    dnsCapture: false,
    seed: 5,
  });
  try {
    await w.createNamespace('mesh', { 'istio.io/dataplane-mode': 'ambient' });
    const before = await w.createPod({
      namespace: 'mesh',
      name: 'a',
      node: 'node-0',
      app: { uid: 1000, caps: [], tcpPorts: [8080] },
    });
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
  } finally {
    await w.close();
  }
});

test('reboot empties the host netns kernel state (rules, ipsets, conntrack); the agent puts its host rules and probe sets back', async () => {
  const w = await createSimWorld({
    nodes: 2,
    profile: 'strict',
    kernelVersion: '6.1',
    ipv6: false,
    dnsCapture: false,
    seed: 6,
  });
  try {
    await w.createNamespace('mesh', { 'istio.io/dataplane-mode': 'ambient' });
    await w.createPod({ namespace: 'mesh', name: 'a', node: 'node-0', app: { uid: 1000, caps: [], tcpPorts: [8080] } });
    await w.settle();
    const k = w.sim.kernel;
    const node = w.sim.nodes.find((n) => n.name === 'node-0')!;
    const host = node.hostNetns;
    const rulesBefore = k.iptablesSave(host, 4);
    const setsBefore = k.ipsetsOf(host).names();
    expect(rulesBefore).toMatch(/-A /); // the agent's host rules (probe SNAT) are there
    expect(setsBefore.length).toBeGreaterThan(0);
    const other = w.sim.nodes.find((n) => n.name === 'node-1')!.hostNetns;
    const otherRules = k.iptablesSave(other, 4);

    // the bare node reboot (no agent restart): what the kernel keeps is only boot configuration
    await node.reboot();
    expect(k.iptablesSave(host, 4)).not.toMatch(/-A /);
    expect(k.iptablesSave(host, 6)).not.toMatch(/-A /);
    expect(k.ipsetsOf(host).names()).toEqual([]);
    expect(k.netns(host).conntrack.entries()).toEqual([]);
    expect(k.iptablesSave(other, 4)).toBe(otherRules); // the other node is untouched

    // the full world reboot brings the agent back, which rebuilds its host state
    await w.rebootNode('node-0');
    await w.settle();
    // the same rules as before the reboot
    const ruleLines = (text: string): string[] => text.split('\n').filter((l) => l.startsWith('-A '));
    expect(ruleLines(k.iptablesSave(host, 4))).toEqual(ruleLines(rulesBefore));
    expect(k.ipsetsOf(host).names().sort()).toEqual([...setsBefore].sort());
    const a = (await w.pods()).find((p) => p.name === 'a')!;
    expect(a).toMatchObject({ started: true, redirected: true, served: true });
  } finally {
    await w.close();
  }
});
