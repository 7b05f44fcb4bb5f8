/**
 * Issue 19 on the real kernel: an app with NET_ADMIN inserts an ACCEPT at the top of nat OUTPUT,
 * ahead of the hook into ISTIO_OUTPUT (World.appExec iptables-insert, the real
 * `iptables-restore --noflush` as the app). Every rule of the plan stays, so upstream's repair
 * (own chains and hooks only) leaves it and the pod stays uncaptured; strict's repair pass sees a
 * foreign rule in the plan's tables and restores them whole, so the pod is captured again.
 */
import { test, expect } from '@playwright/test';
import type { PodRef } from '../../../scenarios/world.js';
import { MESH, skipUnlessSuiteWorldAvailable, withNetnsWorld } from './fixture.js';

skipUnlessSuiteWorldAvailable();
test.setTimeout(600_000); // generous: the suite must pass on a loaded machine (npm run test:netns:loaded)

const a: PodRef = { namespace: 'mesh', name: 'a' };
const q: PodRef = { namespace: 'plain', name: 'q' };

for (const profile of ['strict', 'upstream'] as const) {
  const repaired = profile === 'strict';
  test(`${profile}: an ACCEPT the app inserts ahead of the nat OUTPUT hook ${repaired ? 'is removed by the repair pass' : 'stays (as upstream istio-cni)'}`, async () => {
    await withNetnsWorld({ profile }, async (w) => {
      await w.createNamespace('mesh', MESH);
      await w.createNamespace('plain');
      await w.createPod({ ...a, node: 'node-0', app: { uid: 0, caps: ['NET_ADMIN'], tcpPorts: [8080] } });
      await w.createPod({ ...q, node: 'node-1', app: { uid: 1000, caps: [], tcpPorts: [8080] } });
      await w.settle();
      // The repair pass (every 2 s) may race the attempt right after the insert: node-0's agent
      // (our world's process, by pid) is frozen until the bypass has been observed.
      const agent = w.lab.state.components['node-0/agent']!;
      process.kill(agent.pid, 'SIGSTOP');
      try {
        expect(await w.appExec(a, { kind: 'iptables-insert', rule: 'nat-output-accept' })).toEqual({ ok: true });
        const bypass = await w.connect({ kind: 'pod', pod: a }, { kind: 'pod', pod: q, port: 8080 });
        expect(bypass.acceptedBy, bypass.trace).toBe('app');
      } finally {
        process.kill(agent.pid, 'SIGCONT');
      }
      await w.settle();
      const after = await w.connect({ kind: 'pod', pod: a }, { kind: 'pod', pod: q, port: 8080 });
      expect(after.acceptedBy, after.trace).toBe(repaired ? 'proxy-outbound' : 'app');
    });
  });
}
