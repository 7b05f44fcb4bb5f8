/**
 * Strict's mark exemption is the proxy's uid: a pod that declares that uid could pass as the
 * proxy, so strict refuses its sandbox (the CNI ADD fails, naming the field) and warns about a
 * running pod it cannot refuse; upstream admits both (its exemption is the mark alone).
 */
import { test, expect } from '@playwright/test';
import { AgentWorld } from './harness.js';
import type { Profile } from '../../../../impl/api/profile.js';
import { fieldsRunningAs } from '../../../../impl/node-agent/proxy-uid-pods.js';

const AMBIENT = { 'istio.io/dataplane-mode': 'ambient' };

async function world(profile: Profile): Promise<AgentWorld> {
  const w = new AgentWorld(profile);
  await w.namespace('shop', AMBIENT);
  await w.startAgent();
  w.startProxy();
  await w.run(100);
  return w;
}

test('fieldsRunningAs: the pod-level uid applies to containers without their own; a container value overrides it', () => {
  const pod = {
    metadata: { name: 'p', namespace: 'n' },
    spec: {
      securityContext: { runAsUser: 1337 },
      initContainers: [{ name: 'init', securityContext: { runAsUser: 0 } }],
      containers: [{ name: 'app' }, { name: 'side', securityContext: { runAsUser: 1000 } }],
      ephemeralContainers: [{ name: 'debug', securityContext: { runAsUser: 1337 } }],
    },
  };
  expect(fieldsRunningAs(pod, 1337)).toEqual([
    'spec.securityContext.runAsUser (container containers[app])',
    'spec.ephemeralContainers[debug].securityContext.runAsUser',
  ]);
  expect(fieldsRunningAs(pod, 1000)).toEqual(['spec.containers[side].securityContext.runAsUser']);
  expect(fieldsRunningAs({ spec: { containers: [{ name: 'app' }] } }, 1337)).toEqual([]);
});

test("strict: a sandbox whose container runs as the proxy's uid is refused, naming the field; another uid is admitted", async () => {
  const w = await world('strict');
  const bad = await w.pod('shop', 'as-proxy', {
    spec: { containers: [{ name: 'app', image: 'app', securityContext: { runAsUser: 1337 } }] },
  });
  expect(bad.cni.exitCode).toBe(1);
  const details = String(JSON.parse(bad.cni.stdout).details);
  expect(details).toContain("runs as the node proxy's uid 1337");
  expect(details).toContain('spec.containers[app].securityContext.runAsUser');
  expect(w.rulesIn(bad.netns)).toBe(false);
  // positive control: the same pod at another uid
  const ok = await w.pod('shop', 'as-app', {
    spec: { containers: [{ name: 'app', image: 'app', securityContext: { runAsUser: 1000 } }] },
  });
  expect(ok.cni.exitCode, ok.cni.stdout).toBe(0);
  await w.run(100);
  expect(w.rulesIn(ok.netns)).toBe(true);
});

test("upstream admits a pod at the proxy's uid (its exemption is the mark alone)", async () => {
  const w = await world('upstream');
  const r = await w.pod('shop', 'as-proxy', { spec: { securityContext: { runAsUser: 1337 } } });
  expect(r.cni.exitCode, r.cni.stdout).toBe(0);
  await w.run(100);
  expect(w.rulesIn(r.netns)).toBe(true);
});

test("strict: a running pod at the proxy's uid selected later is captured and warned about (refusing would leave it unprotected)", async () => {
  const w = await world('strict');
  await w.namespace('late');
  const { netns } = await w.pod('late', 'api', { spec: { securityContext: { runAsUser: 1337 } } });
  await w.run(100);
  expect(w.rulesIn(netns)).toBe(false);
  await w.labelNamespace('late', AMBIENT);
  await w.run(1000);
  expect(w.rulesIn(netns)).toBe(true);
  const events = (await w.store.list('Event', { namespace: 'late' })).items.filter(
    (e) => e.reason === 'PodRunsAsProxyUid',
  );
  expect(events).toHaveLength(1);
  expect(events[0]!.message).toContain('spec.securityContext.runAsUser (container containers[app])');
});
