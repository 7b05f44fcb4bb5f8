/**
 * Issue 19, live enrollment, through the World on the real kernel (the catalog's live-enrollment
 * phase, staged by hand): pod e (plain namespace, node-0) holds a connection in from client c and
 * one out to sink s (both plain, node-1), straight to the apps (World.holdConnection). Then e is
 * labelled ambient. In both profiles neither connection carries data afterwards:
 * - upstream: their next segment is picked up mid-stream by the new capture rules and reset
 *   (istio/istio#48876: by design; tests/netns/rules/live-enroll.spec.ts shows the mechanism);
 * - strict: the agent ends them itself right after its first apply (SOCK_DESTROY in e's
 *   namespace), and says so: `uncaptured connections ended at enrollment` with both flows.
 * The control: a connection opened after the enrollment is captured, and keeps working.
 */
import * as fs from 'node:fs';
import * as path from 'node:path';
import { test, expect } from '@playwright/test';
import type { PodRef } from '../../../scenarios/world.js';
import { skipUnlessSuiteWorldAvailable, withNetnsWorld } from './fixture.js';

skipUnlessSuiteWorldAvailable();
test.setTimeout(600_000); // generous: the suite must pass on a loaded machine (npm run test:netns:loaded)

const e: PodRef = { namespace: 'plain', name: 'e' };
const c: PodRef = { namespace: 'plain', name: 'c' };
const s: PodRef = { namespace: 'plain', name: 's' };
const app = { uid: 1000, caps: [], tcpPorts: [8080] };

for (const profile of ['strict', 'upstream'] as const) {
  const strict = profile === 'strict';
  test(`${profile}: connections open when a pod is enrolled are ended${strict ? ' by the agent at enrollment' : ' (reset mid-stream, as upstream)'}; a new one is captured`, async () => {
    await withNetnsWorld({ profile }, async (w) => {
      await w.createNamespace('plain');
      await w.createPod({ ...e, node: 'node-0', app });
      await w.createPod({ ...c, node: 'node-1', app });
      await w.createPod({ ...s, node: 'node-1', app });
      await w.settle();
      const inbound = await w.holdConnection({ kind: 'pod', pod: c }, { kind: 'pod', pod: e, port: 8080 });
      const outbound = await w.holdConnection({ kind: 'pod', pod: e }, { kind: 'pod', pod: s, port: 8080 });
      try {
        expect([inbound.outcome, inbound.acceptedBy, outbound.outcome, outbound.acceptedBy]).toEqual([
          'established',
          'app',
          'established',
          'app',
        ]);
        // Before the enrollment both carry data (the positive control of the sends below).
        for (const h of [inbound, outbound]) {
          const before = await h.send();
          expect(before.delivered, before.detail).toBe(true);
        }
        await w.labelPod(e, { 'istio.io/dataplane-mode': 'ambient' });
        await w.settle();
        const pe = (await w.pods()).find((p) => p.namespace === 'plain' && p.name === 'e')!;
        expect({ redirected: pe.redirected, served: pe.served }).toEqual({ redirected: true, served: true });
        for (const h of [inbound, outbound]) {
          const after = await h.send();
          expect(after.delivered, after.detail).toBe(false);
        }
        const swept = fs
          .readFileSync(path.join(w.lab.nodeDir('node-0'), 'agent.log'), 'utf8')
          .split('\n')
          .filter((l) => l.includes('"uncaptured connections ended at enrollment"'))
          .map((l) => JSON.parse(l) as Record<string, unknown>);
        if (strict) {
          expect(swept, JSON.stringify(swept)).toHaveLength(1);
          expect(swept[0]!.pod).toBe('plain/e');
          expect(swept[0]!.flowsEnded).toBe(2);
        } else expect(swept).toEqual([]);
        const fresh = await w.holdConnection({ kind: 'pod', pod: e }, { kind: 'pod', pod: s, port: 8080 });
        try {
          expect([fresh.outcome, fresh.acceptedBy]).toEqual(['established', 'proxy-outbound']);
          const sent = await fresh.send();
          expect(sent.delivered, sent.detail).toBe(true);
        } finally {
          await fresh.close();
        }
      } finally {
        await inbound.close();
        await outbound.close();
      }
    });
  });
}
