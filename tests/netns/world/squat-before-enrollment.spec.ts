/**
 * Issue 19, port squatting before enrollment, on the real kernel: the app of pod e (plain
 * namespace, node-0; uid 1000 without capabilities, or root with SO_REUSEPORT) listens on its own
 * 15006 before any proxy served the pod; then e is labelled ambient. The agent writes e's rules,
 * the node proxy cannot bind 15006 (EADDRINUSE; a root app's reuseport group is its own uid's), and
 * e stays `pending`. Client c (plain, node-1) connects to e:8080.
 * - upstream: nat REDIRECT hands c's connection to the squatter's 15006 — no proxy took it;
 * - strict: TPROXY assigns it only to a transparent socket, the squatter is not one, so nothing
 *   reaches e (fail closed).
 * The same phase runs in the catalog (squat-before-enrollment) on every world.
 */
import { test, expect } from '@playwright/test';
import type { PodRef } from '../../../scenarios/world.js';
import { skipUnlessSuiteWorldAvailable, withNetnsWorld } from './fixture.js';

skipUnlessSuiteWorldAvailable();
test.setTimeout(600_000); // generous: the suite must pass on a loaded machine (npm run test:netns:loaded)

const e: PodRef = { namespace: 'plain', name: 'e' };
const c: PodRef = { namespace: 'plain', name: 'c' };

// Root under upstream is the same REDIRECT as uid 1000 (the sim catalog runs both: port-squat-before-enrollment-root).
for (const [profile, uid] of [
  ['strict', 1000],
  ['strict', 0],
  ['upstream', 1000],
] as const) {
  const strict = profile === 'strict';
  test(`${profile}: inbound to a pod whose app (uid ${uid}) took 15006 before enrollment ${strict ? 'reaches nothing' : 'lands on the squatter (finding)'}`, async () => {
    await withNetnsWorld({ profile }, async (w) => {
      await w.createNamespace('plain');
      await w.createPod({ ...e, node: 'node-0', app: { uid, caps: [], tcpPorts: [8080] } });
      await w.createPod({ ...c, node: 'node-1', app: { uid: 1000, caps: [], tcpPorts: [8080] } });
      await w.settle();
      expect(await w.appExec(e, { kind: 'listen', port: 15006, reusePort: uid === 0 })).toEqual({ ok: true });
      await w.labelPod(e, { 'istio.io/dataplane-mode': 'ambient' });
      await w.settle();
      const pe = (await w.pods()).find((p) => p.namespace === 'plain' && p.name === 'e')!;
      expect({ redirected: pe.redirected, served: pe.served, annotation: pe.annotation }).toEqual({
        redirected: true,
        served: false,
        annotation: 'pending',
      });
      const r = await w.connect({ kind: 'pod', pod: c }, { kind: 'pod', pod: e, port: 8080 });
      const atE = r.deliveries.filter((d) => d.pod.name === 'e');
      if (strict) {
        expect(atE, r.trace).toEqual([]);
        expect(r.outcome, r.trace).toBe('timeout');
      } else {
        expect(r.acceptedBy, r.trace).toBe('app');
        expect(atE, r.trace).toEqual([expect.objectContaining({ port: 15006, viaProxy: false })]);
      }
    });
  });
}
