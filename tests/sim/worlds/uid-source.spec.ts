/**
 * Where an app's uid comes from (AppSpec.uidSource) and what the strict agent does with it: a pod
 * that declares the node proxy's uid as runAsUser is refused (its sandbox never starts, the
 * kubelet keeps trying), while the same uid taken from the image's USER is invisible to the agent
 * and the pod starts captured — the B1 residual the threat app-proxy-uid-net-raw stages. Upstream
 * exempts by mark alone, so it admits both.
 */
import { test, expect } from '@playwright/test';
import type { KubeObjectOf } from '../../../impl/host/kube.js';
import { containerCredentials, imageUser } from '../../../sim/node/container.js';
import { createSimWorld } from '../../../scenarios/worlds/sim-world.js';
import type { PodRef, Profile } from '../../../scenarios/world.js';

const declared: PodRef = { namespace: 'mesh', name: 'declared' };
const fromImage: PodRef = { namespace: 'mesh', name: 'from-image' };

test("an image's USER is in its tag; a container without runAsUser runs as it, and a non-root USER has no effective capabilities", () => {
  expect(imageUser('sim/app:user-1337')).toEqual({ uid: 1337, gid: 0 });
  expect(imageUser('sim/app')).toEqual({ uid: 0, gid: 0 });
  expect(imageUser('sim/app:user-x')).toEqual({ uid: 0, gid: 0 });
  const container = {
    name: 'app',
    image: 'sim/app:user-1337',
    securityContext: { capabilities: { add: ['NET_RAW'] } },
  };
  const pod = { metadata: { name: 'p', namespace: 'n' }, spec: { containers: [container] } } as KubeObjectOf<'Pod'>;
  const creds = containerCredentials(pod, container);
  expect(creds.uid).toBe(1337);
  expect([...creds.caps]).toEqual([]);
  // A declared runAsUser wins over the image's USER.
  const declaredRoot = { ...container, securityContext: { ...container.securityContext, runAsUser: 0 } };
  expect(containerCredentials(pod, declaredRoot).uid).toBe(0);
});

for (const profile of ['strict', 'upstream'] as const satisfies readonly Profile[]) {
  test(`${profile}: a pod declaring runAsUser 1337 is ${profile === 'strict' ? 'refused' : 'admitted'}; the same uid from the image is admitted and captured`, async () => {
    const w = await createSimWorld({
      nodes: 1,
      profile,
      kernelVersion: '6.1',
      ipv6: false,
      dnsCapture: false,
      seed: 3,
    });
    try {
      await w.createNamespace('mesh', { 'istio.io/dataplane-mode': 'ambient' });
      await w.createPod({ ...declared, app: { uid: 1337, caps: ['NET_RAW'], tcpPorts: [8080] } });
      await w.createPod({ ...fromImage, app: { uid: 1337, uidSource: 'image', caps: ['NET_RAW'], tcpPorts: [8080] } });
      await w.settle();
      const pods = await w.pods();
      const get = (r: PodRef) => pods.find((p) => p.name === r.name)!;
      expect(get(fromImage)).toMatchObject({ phase: 'Running', started: true, redirected: true, served: true });
      if (profile === 'strict')
        expect(get(declared)).toMatchObject({ phase: 'Pending', started: false, redirected: false });
      else expect(get(declared)).toMatchObject({ phase: 'Running', started: true, redirected: true });
    } finally {
      await w.close();
    }
  });
}
