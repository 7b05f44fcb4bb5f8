/**
 * Issue 19, port squatting before enrollment, on the real kernel: the apps of pods e1000 (uid 1000
 * without capabilities) and e0 (root with SO_REUSEPORT), plain namespace on node-0, listen on their
 * own 15006 before any proxy served them; then both are labelled ambient. The agent writes their
 * rules, the node proxy cannot bind 15006 (EADDRINUSE; a root app's reuseport group is its own
 * uid's), and both stay `pending`. Client c (plain, node-1) connects to each on 8080.
 * - upstream: nat REDIRECT hands c's connection to the squatter's 15006 — no proxy took it;
 * - strict: TPROXY assigns it only to a transparent socket, the squatter is not one, so nothing
 *   reaches the pod (fail closed).
 * The same phase runs in the catalog (squat-before-enrollment) on every world.
 */
import { test, expect } from '@playwright/test';
import type { PodRef } from '../../../scenarios/world.js';
import { skipUnlessSuiteWorldAvailable, withNetnsWorld } from './fixture.js';

skipUnlessSuiteWorldAvailable();
test.setTimeout(600_000); // generous: the suite must pass on a loaded machine (npm run test:netns:loaded)

const c: PodRef = { namespace: 'plain', name: 'c' };
const squatters = [1000, 0].map((uid) => ({ uid, pod: { namespace: 'plain', name: `e${uid}` } as PodRef }));

for (const profile of ['strict', 'upstream'] as const) {
  const strict = profile === 'strict';
  test(`${profile}: inbound to a pod whose app (uid 1000, or root) took 15006 before enrollment ${strict ? 'reaches nothing' : 'lands on the squatter (finding)'}`, async () => {
    await withNetnsWorld({ profile }, async (w) => {
      await w.createNamespace('plain');
      await w.createPod({ ...c, node: 'node-1', app: { uid: 1000, caps: [], tcpPorts: [8080] } });
      for (const { uid, pod } of squatters)
        await w.createPod({ ...pod, node: 'node-0', app: { uid, caps: [], tcpPorts: [8080] } });
      await w.settle();
      for (const { uid, pod } of squatters) {
        expect(await w.appExec(pod, { kind: 'listen', port: 15006, reusePort: uid === 0 })).toEqual({ ok: true });
        await w.labelPod(pod, { 'istio.io/dataplane-mode': 'ambient' });
      }
      await w.settle();
      const pods = await w.pods();
      for (const { uid, pod } of squatters) {
        const p = pods.find((x) => x.namespace === pod.namespace && x.name === pod.name)!;
        expect({ uid, redirected: p.redirected, served: p.served, annotation: p.annotation }).toEqual({
          uid,
          redirected: true,
          served: false,
          annotation: 'pending',
        });
        const r = await w.connect({ kind: 'pod', pod: c }, { kind: 'pod', pod, port: 8080 });
        const atPod = r.deliveries.filter((d) => d.pod.name === pod.name);
        if (strict) {
          expect(atPod, `uid ${uid}: ${r.trace}`).toEqual([]);
          expect(r.outcome, `uid ${uid}: ${r.trace}`).toBe('timeout');
        } else {
          expect(r.acceptedBy, `uid ${uid}: ${r.trace}`).toBe('app');
          expect(atPod, `uid ${uid}: ${r.trace}`).toEqual([expect.objectContaining({ port: 15006, viaProxy: false })]);
        }
      }
    });
  });
}
