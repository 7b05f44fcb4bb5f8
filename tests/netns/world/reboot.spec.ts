/**
 * A node reboot in the netns world (NetnsLab.rebootNode): the agent and proxy stop, every pod
 * sandbox of the node goes without CNI DEL, the node's ipsets are destroyed, the components start
 * again and each pod gets a new sandbox — a new netns with the same pod UID — that is captured and
 * served again. The probe set and host rules the agent keeps in the node netns come back.
 */
import { test, expect } from '@playwright/test';
import { execIn } from '../../../e2e/netns/ip.js';
import type { PodRef } from '../../../scenarios/world.js';
import { MESH, skipUnlessSuiteWorldAvailable, withNetnsWorld } from './fixture.js';

skipUnlessSuiteWorldAvailable();
test.setTimeout(600_000); // generous: the suite must pass on a loaded machine (npm run test:netns:loaded)

const a: PodRef = { namespace: 'mesh', name: 'a' };

test('after a reboot the pod runs in a new netns, captured and served, and the node ipsets are rebuilt', async () => {
  await withNetnsWorld({}, async (w) => {
    await w.createNamespace('mesh', MESH);
    await w.createPod({ ...a, node: 'node-0', app: { uid: 1000, caps: [], tcpPorts: [8080] } });
    await w.settle();
    const before = w.lab.state.pods['mesh/a']!;
    const netnsBefore = before.netns;
    const uidBefore = before.uid;
    expect(
      (await w.pods()).find((p) => p.name === 'a'),
      JSON.stringify(w.lastSettle),
    ).toMatchObject({ started: true, redirected: true, served: true });
    const nodeNetns = w.lab.state.nodes.find((n) => n.name === 'node-0')!.netns;
    const setsBefore = (await execIn(nodeNetns, ['ipset', 'list', '-n'])).split('\n').filter((l) => l.trim() !== '');
    expect(setsBefore.length, 'the agent keeps its probe set(s) in the node netns').toBeGreaterThan(0);

    await w.rebootNode('node-0');
    await w.settle();
    const after = w.lab.state.pods['mesh/a']!;
    expect(after.netns, 'a new sandbox').not.toBe(netnsBefore);
    expect(after.uid).toBe(uidBefore);
    expect(
      (await w.pods()).find((p) => p.name === 'a'),
      JSON.stringify(w.lastSettle),
    ).toMatchObject({ started: true, redirected: true, served: true });
    const members = await execIn(nodeNetns, ['ipset', 'list']);
    for (const ip of after.ips) expect(members, `probe set holds ${ip} again`).toContain(ip);
    // The reboot flushed the node's rules; the agent put its host probe rules back.
    expect(await execIn(nodeNetns, ['iptables-save']), 'host probe rules are back').toMatch(
      /-A ISTIO_POSTRT .*--match-set \S+ dst -j SNAT/,
    );
  });
});
