/**
 * World.zdsClient on the real kernel (catalog rogue-zds-client, finding-m): a host process that
 * speaks ZDS to the node agent as if it were the node proxy. As root (the host-root threat) the
 * agent turns it away by its peer credentials; the positive control is a client at the proxy's
 * uid and group (1337, as the manifests run the proxy), which the agent takes as its proxy and
 * streams the node's enrolled pods to — so a rejection above is the agent's check, not a client
 * that could not connect.
 */
import { test, expect } from '@playwright/test';
import type { PodRef } from '../../../scenarios/world.js';
import { MESH, skipUnlessSuiteWorldAvailable, withNetnsWorld } from './fixture.js';

skipUnlessSuiteWorldAvailable();
test.setTimeout(600_000); // generous: the suite must pass on a loaded machine (npm run test:netns:loaded)

const a: PodRef = { namespace: 'mesh', name: 'a' };

test('a root host process is turned away by the node agent; one at the proxy uid is served the pods (control)', async () => {
  await withNetnsWorld({ profile: 'strict' }, async (w) => {
    await w.createNamespace('mesh', MESH);
    await w.createPod({ ...a, node: 'node-0', app: { uid: 1000, caps: [], tcpPorts: [8080] } });
    await w.settle();
    const root = await w.zdsClient('node-0', 0);
    expect(root.accepted, root.detail).toBe(false);
    expect(root.workloads).toBe(0);
    const proxyUid = await w.zdsClient('node-0', 1337);
    expect(proxyUid.accepted, proxyUid.detail).toBe(true);
    expect(proxyUid.workloads, proxyUid.detail).toBeGreaterThan(0);
  });
});
