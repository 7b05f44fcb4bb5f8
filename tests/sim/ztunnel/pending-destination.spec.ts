/**
 * Issue 19, plaintext fallback: a destination pending enrollment (ambient.istio.io/redirection:
 * pending — selected for the mesh, no node proxy has taken it) gets plaintext from a mesh peer
 * under upstream (istiod gives it tunnel protocol NONE, ztunnel sends TCP to its own address), so
 * whatever holds its 15006 gets the peer's traffic without identity. Under strict the source
 * proxy refuses the connection (fail closed) with a connection-log reason and a denied metric;
 * other destinations are unchanged.
 */
import { test, expect } from '@playwright/test';
import type { Profile } from '../../../impl/api/profile.js';
import { CountingMetrics } from '../../../impl/ztunnel/proxy-deps.js';
import { buildMesh, echoServer, exchange, PODS, workloadOf } from '../../../sim/proxy-mesh/proxy-mesh.js';

const P_IP = '10.244.1.7';

/** The standard mesh with node1's proxy replaced by one of `profile`, and p (outside the mesh) marked pending. */
async function meshWith(profile: Profile) {
  const m = await buildMesh();
  await m.proxies.node1.shutdown('immediate');
  const metrics = new CountingMetrics();
  const { proxy, log } = m.newProxy('node1', { profile, metrics });
  await m.addPods(proxy, 'node1');
  const p = PODS.find((x) => x.name === 'p')!;
  m.workloads.all.set('uid-p', { ...workloadOf(p), pending: true });
  return { m, proxy, log, metrics };
}

test('upstream: a mesh pod sends plaintext to a destination pending enrollment (as ztunnel with tunnel protocol NONE)', async () => {
  const { m, log } = await meshWith('upstream');
  const p = await echoServer(m.app('p'));
  const r = await exchange(m.app('a'), P_IP, 8080, 'plain');
  expect(r.reply).toBe('plain');
  expect(p.peers).toEqual(['10.244.1.5']);
  const out = log.records.find((x) => x.event === 'forwarded')!;
  expect([out.direction, out.mode, out.upstream!.dst]).toEqual(['outbound', 'passthrough', `${P_IP}:8080`]);
});

test('strict: the source proxy refuses plaintext to a destination pending enrollment; the connection log and the denied metric say why', async () => {
  const { m, log, metrics } = await meshWith('strict');
  const p = await echoServer(m.app('p'));
  const r = await exchange(m.app('a'), P_IP, 8080, 'plain');
  // The app's connection was taken by its own 15001 (the handshake completes there), then reset.
  expect(r.connect.ok).toBe(true);
  expect(r.reply).toMatch(/^<(done|write failed):reset>$/);
  expect(p.peers).toEqual([]);
  const d = log.records.find((x) => x.event === 'denied')!;
  expect([d.pod, d.direction, d.target]).toEqual(['default/a', 'outbound', `${P_IP}:8080`]);
  expect(d.reason).toBe(
    'destination default/p is pending enrollment (selected for the mesh, not yet served by its node proxy): strict does not downgrade to plaintext',
  );
  expect(log.records.some((x) => x.event === 'forwarded')).toBe(false);
  expect(metrics.deniedBy.get('outbound:destination-pending-enrollment')).toBe(1);
});

test('strict: the same destination once it is no longer pending (outside the mesh) gets plaintext, and an enrolled one HBONE, as upstream', async () => {
  const { m, log } = await meshWith('strict');
  const p = await echoServer(m.app('p'));
  await echoServer(m.app('c'));
  m.workloads.all.set('uid-p', workloadOf(PODS.find((x) => x.name === 'p')!));
  expect((await exchange(m.app('a'), P_IP, 8080, 'plain')).reply).toBe('plain');
  expect(p.peers).toEqual(['10.244.1.5']);
  expect((await exchange(m.app('a'), '10.244.2.5', 8080, 'mesh')).reply).toBe('mesh');
  const fwd = log.records.filter((x) => x.event === 'forwarded').map((x) => x.mode);
  expect(fwd).toEqual(['passthrough', 'hbone']);
});
