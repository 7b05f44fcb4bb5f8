/**
 * World.nodeAddresses on the real kernel: the addresses the model aims "attempts to node
 * addresses" at are the nodes' own fabric addresses, and an attempt from a mesh pod to one is
 * taken by the node proxy first (captured), as the simulator says for the same attempt.
 */
import { test, expect } from '@playwright/test';
import { nodeAddress } from '../../../e2e/netns/addressing.js';
import type { PodRef } from '../../../scenarios/world.js';
import { MESH, skipUnlessSuiteWorldAvailable, withNetnsWorld } from './fixture.js';

skipUnlessSuiteWorldAvailable();
test.setTimeout(600_000); // generous: the suite must pass on a loaded machine (npm run test:netns:loaded)

const a: PodRef = { namespace: 'mesh', name: 'a' };

test("node addresses are the nodes' fabric addresses; a mesh pod's attempt to one is captured by the proxy", async () => {
  await withNetnsWorld({}, async (w) => {
    expect(await w.nodeAddresses()).toEqual({ 'node-0': [nodeAddress(0).ipv4], 'node-1': [nodeAddress(1).ipv4] });
    await w.createNamespace('mesh', MESH);
    await w.createPod({ ...a, node: 'node-0', app: { uid: 1000, caps: [], tcpPorts: [8080] } });
    await w.settle();
    const r = await w.connect({ kind: 'pod', pod: a }, { kind: 'ip', ip: nodeAddress(1).ipv4, port: 9 });
    expect(r.acceptedBy, r.trace).toBe('proxy-outbound');
  });
});
