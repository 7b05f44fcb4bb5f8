/**
 * The netns world's kubelet retries a refused sandbox, as a real kubelet and the sim world's do:
 * a mesh pod created while its node agent is down fails closed (the plugin cannot reach the agent,
 * the ADD fails, the pod stays Pending with no sandbox); once the agent is back, a retry makes
 * the sandbox and the pod starts captured and served. Without the retry the pod would stay
 * Pending for good — a world that cannot recover from one refused ADD (e.g. a plugin timeout
 * under load) judges a pod nobody would leave broken.
 */
import { test, expect } from '@playwright/test';
import * as fs from 'node:fs';
import * as path from 'node:path';
import type { PodRef } from '../../../scenarios/world.js';
import { MESH, skipUnlessSuiteWorldAvailable, withNetnsWorld } from './fixture.js';

skipUnlessSuiteWorldAvailable();
test.setTimeout(600_000); // generous: the suite must pass on a loaded machine (npm run test:netns:loaded)

const a: PodRef = { namespace: 'mesh', name: 'a' };

test('a pod refused while its agent is down is retried by the kubelet and starts captured once the agent is back', async () => {
  await withNetnsWorld({}, async (w) => {
    await w.createNamespace('mesh', MESH);
    await w.stop('agent', 'node-0');
    await w.createPod({ ...a, node: 'node-0', app: { uid: 1000, caps: [], tcpPorts: [8080] } });
    await w.settle();
    const refused = (await w.pods()).find((p) => p.name === 'a')!;
    expect(refused, 'fail closed: no sandbox while the agent is down').toMatchObject({
      phase: 'Pending',
      started: false,
      redirected: false,
      served: false,
    });
    const st = w.lab.state.pods['mesh/a']!;
    expect(st.error, 'the refused ADD is recorded').toBeTruthy();
    // settle() returned only after a retry since the last change: the kubelet kept trying.
    expect(st.sandboxAttempts ?? 0).toBeGreaterThanOrEqual(2);

    await w.start('agent', 'node-0');
    await w.settle();
    const started = (await w.pods()).find((p) => p.name === 'a')!;
    // on failure: what the last retry met (the refusal, the attempt counts) and how settle ended
    const why = (): string =>
      JSON.stringify({
        settle: w.lastSettle,
        error: st.error,
        attempts: st.sandboxAttempts,
        failures: st.sandboxFailures,
        agentLog: fs
          .readFileSync(path.join(w.lab.nodeDir('node-0'), 'agent.log'), 'utf8')
          .split('\n')
          .slice(-15),
      });
    expect(started, why()).toMatchObject({
      phase: 'Running',
      started: true,
      redirected: true,
      served: true,
    });
    expect(st.sandboxFailures).toBe(0);
  });
});

test('deleting a pod whose sandbox is being retried stops the retries and leaves nothing behind', async () => {
  await withNetnsWorld({}, async (w) => {
    await w.createNamespace('mesh', MESH);
    await w.stop('agent', 'node-0');
    await w.createPod({ ...a, node: 'node-0', app: { uid: 1000, caps: [], tcpPorts: [8080] } });
    await w.deletePod(a);
    await w.start('agent', 'node-0');
    await w.settle();
    expect((await w.pods()).map((p) => p.name)).toEqual([]);
    // withNetnsWorld checks that close() leaves no namespace or process of the run.
  });
});
