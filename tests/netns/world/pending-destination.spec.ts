/**
 * Issue 19, plaintext fallback, on the real kernel: pod a (ambient namespace, node-0) takes its
 * own 15006 while its node proxy is stopped, so the restarted proxy cannot bind it (EADDRINUSE)
 * and the agent leaves a `pending` with its rules in place. Mesh peer b (node-1) then connects to
 * it. Upstream: b's node proxy sends plaintext (a is not `enabled`), a's inbound redirect hands it
 * to the app's own 15006 — no identity, no authorization. Strict (the proxy runs the manifests'
 * AMBIENT_LAB_PROFILE): b's node proxy refuses it (connection log: pending enrollment) and nothing
 * reaches a. The same test on the simulator: tests/sim/worlds/pending-destination.spec.ts.
 */
import { test, expect } from '@playwright/test';
import type { PodRef } from '../../../scenarios/world.js';
import { MESH, skipUnlessSuiteWorldAvailable, withNetnsWorld } from './fixture.js';

skipUnlessSuiteWorldAvailable();
test.setTimeout(600_000); // generous: the suite must pass on a loaded machine (npm run test:netns:loaded)

const a: PodRef = { namespace: 'mesh', name: 'a' };
const b: PodRef = { namespace: 'mesh', name: 'b' };

for (const profile of ['strict', 'upstream'] as const) {
  const refused = profile === 'strict';
  test(`${profile}: a mesh peer's connection to a pod pending enrollment whose 15006 its app holds ${refused ? "is refused by the peer's proxy" : 'arrives plaintext at the squatter'}`, async () => {
    await withNetnsWorld({ profile }, async (w) => {
      await w.createNamespace('mesh', MESH);
      await w.createPod({ ...a, node: 'node-0', app: { uid: 1000, caps: [], tcpPorts: [8080] } });
      await w.createPod({ ...b, node: 'node-1', app: { uid: 1000, caps: [], tcpPorts: [8080] } });
      await w.settle();
      await w.stop('proxy', 'node-0');
      expect(await w.appExec(a, { kind: 'listen', port: 15006 })).toEqual({ ok: true });
      await w.start('proxy', 'node-0');
      await w.settle();
      const pa = (await w.pods()).find((p) => p.name === 'a' && p.namespace === 'mesh')!;
      expect({ redirected: pa.redirected, served: pa.served, annotation: pa.annotation }).toEqual({
        redirected: true,
        served: false,
        annotation: 'pending',
      });

      const r = await w.connect({ kind: 'pod', pod: b }, { kind: 'pod', pod: a, port: 8080 });
      // b's own outbound listener takes the connection in both profiles.
      expect(r.acceptedBy, r.trace).toBe('proxy-outbound');
      const atA = r.deliveries.filter((d) => d.pod.name === 'a');
      const out = r.proxyLog.filter((e) => e.node === 'node-1' && e.direction === 'outbound');
      if (refused) {
        expect(atA, r.trace).toEqual([]);
        expect(
          out.map((e) => [e.event, e.reason]),
          r.trace,
        ).toEqual([
          ['accepted', ''],
          [
            'denied',
            'destination mesh/a is pending enrollment (selected for the mesh, not yet served by its node proxy): strict does not downgrade to plaintext',
          ],
        ]);
      } else {
        // Plaintext from b's node proxy, taken by the app's socket on a's 15006.
        expect(atA, r.trace).toEqual([expect.objectContaining({ port: 15006, viaProxy: true, proxyNode: 'node-1' })]);
        expect(
          out.some((e) => e.event === 'forwarded'),
          r.trace,
        ).toBe(true);
        expect(out.some((e) => e.event === 'denied')).toBe(false);
      }
    });
  });
}
