/**
 * Which pods the capture properties protect (scenarios/properties/subjects.ts): the status
 * annotation makes a pod a subject only when the mesh should hold it — a pod author can write
 * `ambient.istio.io/redirection: enabled` on a pod that opted out, and while the node agent is
 * down nobody removes it (soak seed 2826944233 judged such a pod's direct traffic a bypass).
 */
import { test, expect } from '@playwright/test';
import { isCaptureSubject } from '../../../scenarios/properties/subjects.js';
import type { ClusterContext } from '../../../scenarios/properties/types.js';
import type { PodObservation } from '../../../scenarios/world.js';

const pod = (o: Partial<PodObservation>): PodObservation => ({
  namespace: 'ambient-a',
  name: 'p3',
  uid: 'u3',
  node: 'node-0',
  labels: {},
  phase: 'Running',
  started: true,
  hostNetwork: false,
  ips: ['10.244.0.3'],
  annotation: undefined,
  redirected: false,
  served: false,
  ...o,
});

const ctx = (agent: 'up' | 'down', quiescent = true): ClusterContext => ({
  mesh: { profile: 'strict', dnsCapture: false },
  pods: [],
  namespaces: { 'ambient-a': { 'istio.io/dataplane-mode': 'ambient' } },
  specs: {},
  components: { 'node-0': { agent, proxy: 'up' } },
  policies: [],
  quiescent,
});

test('a pod that opted out (mode none) with a spoofed enabled annotation is not protected, agent up or down', () => {
  const spoofed = pod({ labels: { 'istio.io/dataplane-mode': 'none' }, annotation: 'enabled' });
  expect(isCaptureSubject(spoofed, ctx('down'))).toBe(false);
  expect(isCaptureSubject(spoofed, ctx('up'))).toBe(false);
});

test('a selected pod annotated enabled is protected even while its agent is down and the cluster is busy', () => {
  expect(isCaptureSubject(pod({ annotation: 'enabled' }), ctx('down', false))).toBe(true);
});

test('redirection in the netns protects a pod whatever its labels say (e.g. relabelled out, removal pending)', () => {
  expect(
    isCaptureSubject(pod({ labels: { 'istio.io/dataplane-mode': 'none' }, redirected: true }), ctx('down', false)),
  ).toBe(true);
});

test('a selected pod without annotation or rules is protected once the cluster settled with its agent up, not before', () => {
  expect(isCaptureSubject(pod({}), ctx('up', true))).toBe(true);
  expect(isCaptureSubject(pod({}), ctx('up', false))).toBe(false);
  expect(isCaptureSubject(pod({}), ctx('down', true))).toBe(false);
});
