/**
 * Strict on the real kernel: a pod whose spec declares the node proxy's uid (runAsUser 1337) is
 * refused at CNI ADD, with the reason recorded and the kubelet retrying; a pod whose app runs as
 * 1337 from its image's USER (nothing declared) is invisible to the agent and starts captured —
 * the residual only admission closes (docs/bypass-classes.md, B1).
 */
import { test, expect } from '@playwright/test';
import * as fs from 'node:fs';
import type { PodRef } from '../../../scenarios/world.js';
import { MESH, skipUnlessSuiteWorldAvailable, withNetnsWorld } from './fixture.js';

skipUnlessSuiteWorldAvailable();
test.setTimeout(300_000);

const declared: PodRef = { namespace: 'mesh', name: 'declared' };
const fromImage: PodRef = { namespace: 'mesh', name: 'from-image' };

test("strict refuses a pod declaring the proxy's uid; the same uid from the image starts captured", async () => {
  await withNetnsWorld({ nodes: 1, profile: 'strict' }, async (w) => {
    await w.createNamespace('mesh', MESH);
    await w.createPod({ ...declared, node: 'node-0', app: { uid: 1337, caps: [], tcpPorts: [8080] } });
    await w.createPod({
      ...fromImage,
      node: 'node-0',
      app: { uid: 1337, uidSource: 'image', caps: [], tcpPorts: [8080] },
    });
    await w.settle();
    // A pod refused for good is a steady state: settle converges although the kubelet keeps
    // retrying it (each retry in flight used to reset settle's mark, so it ran out its bound).
    expect(w.lastSettle?.converged, w.lastSettle?.pending.join('; ')).toBe(true);
    const pods = await w.pods();
    const get = (r: PodRef) => pods.find((p) => p.name === r.name)!;
    expect(get(declared)).toMatchObject({ phase: 'Pending', started: false, redirected: false });
    expect(w.lab.state.pods['mesh/declared']!.error).toMatch(
      /runs as the node proxy's uid 1337 \(spec\.containers\[app\]\.securityContext\.runAsUser\)/,
    );
    expect(get(fromImage)).toMatchObject({ phase: 'Running', started: true, redirected: true, served: true });
    // The app really runs as 1337, though its spec says nothing.
    const app = w.lab.state.pods['mesh/from-image']!.app!;
    expect(/^Uid:\s+1337\s/m.test(fs.readFileSync(`/proc/${app.pid}/status`, 'utf8'))).toBe(true);
    const spec = (await w.lab.api.get('Pod', 'from-image', 'mesh')) as {
      spec?: { containers?: { securityContext?: { runAsUser?: number } }[] };
    };
    expect(spec.spec?.containers?.[0]?.securityContext?.runAsUser).toBeUndefined();
  });
});
