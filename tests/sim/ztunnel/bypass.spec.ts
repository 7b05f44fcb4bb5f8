/**
 * The bypass-relevant upstream datapath cases (ztunnel's tests/namespaced.rs), re-derived for our proxy in
 * the sim with the upstream in-pod rules:
 * - malicious calls: the proxy's own ports reached from a captured client (loopback, own pod
 *   IP) and from an uncaptured pod are refused as self-calls; 15008 needs mesh TLS; nothing
 *   reaches the app;
 * - a direct HBONE CONNECT with a valid certificate is still subject to policy (401);
 * - an :authority IP other than the one the connection arrived on is refused (400);
 * - a CONNECT to a proxy port is refused (400);
 * - a client from another trust domain fails the handshake.
 */
import { test, expect } from '@playwright/test';
import type { Sockets } from '../../../impl/host/sockets.js';
import { SimHbone, SimMeshCa } from '../../../sim/hbone/sim-hbone.js';
import { buildMesh, echoServer, exchange, TRUST_DOMAIN, type Mesh } from '../../../sim/proxy-mesh/proxy-mesh.js';

const sa = (
  serviceAccount: string,
  trustDomain = TRUST_DOMAIN,
): { trustDomain: string; namespace: string; serviceAccount: string } => ({
  trustDomain,
  namespace: 'default',
  serviceAccount,
});

/** An HBONE client run by hand from pod `from` (outside the mesh: no rules there) to b's 15008. */
async function directHbone(
  m: Mesh,
  from: Sockets,
  authority: { address: string; port: number },
  opts: { ca?: SimMeshCa; as?: string } = {},
) {
  const tcp = await from.connectTcp({ family: 4, dst: { family: 4, address: '10.244.1.6', port: 15008 } });
  if (!tcp.ok) throw new Error(tcp.message);
  const ca = opts.ca ?? m.ca;
  return new SimHbone({ ca }).connect(tcp.value, {
    local: sa(opts.as ?? 'sa-a', ca.trustDomain),
    expectedPeers: [sa('sa-b')],
    authority: { family: 4, ...authority },
  });
}

test('malicious calls from a captured client: loopback and own-IP proxy ports are self-calls, never relayed', async () => {
  const m = await buildMesh();
  const app = await echoServer(m.app('a'));
  for (const [ip, port] of [
    ['127.0.0.1', 15001],
    ['127.0.0.1', 15006],
    ['10.244.1.5', 15001],
    ['10.244.1.5', 15006],
  ] as const) {
    const r = await exchange(m.app('a'), ip, port);
    expect(r.reply, `${ip}:${port}`).not.toBe('hello');
  }
  const denied = m.logs.node1.records
    .filter((r) => r.event === 'denied')
    .map((r) => `${r.direction} ${r.target} ${r.reason?.split(':')[0]}`);
  expect(denied).toEqual([
    'outbound 127.0.0.1:15001 self-call',
    'inbound-plaintext 127.0.0.1:15006 self-call',
    // Own IP on 15001 is not redirected (lo carve-out), so it reaches the outbound listener
    // itself; as upstream, only loopback is checked there, so it is tunnelled to the pod's own
    // 15008, whose CONNECT check refuses the proxy port.
    'inbound-hbone 10.244.1.5:15001 self-call',
    'inbound-plaintext 10.244.1.5:15006 self-call',
  ]);
  expect(app.conns.length).toBe(0);
});

test('malicious calls from an uncaptured pod: every port of a captured pod lands on 15006; proxy ports are refused; 15008 needs mesh TLS', async () => {
  const m = await buildMesh();
  const app = await echoServer(m.app('b'));
  for (const port of [15001, 15006, 15008, 15053, 15021]) {
    const r = await exchange(m.app('p'), '10.244.1.6', port, 'plain bytes\n');
    expect(r.reply, `port ${port}`).not.toBe('plain bytes\n');
  }
  const recs = m.logs.node1.records.filter((r) => r.event === 'denied');
  expect(recs.filter((r) => r.reason?.startsWith('self-call')).map((r) => r.target)).toEqual([
    '10.244.1.6:15001',
    '10.244.1.6:15006',
  ]);
  expect(recs.some((r) => r.direction === 'inbound-hbone' && r.reason?.includes('handshake'))).toBe(true);
  // 15053 and 15021 are ordinary app ports here: redirected to 15006, allowed, and the app (not listening there) refuses.
  expect(m.logs.node1.records.filter((r) => r.event === 'failed').map((r) => r.target)).toEqual([
    '10.244.1.6:15053',
    '10.244.1.6:15021',
  ]);
  expect(app.conns.length).toBe(0);
});

test('a direct HBONE CONNECT with a valid mesh certificate is still authorized at the destination (401 when policy denies)', async () => {
  const m = await buildMesh();
  const app = await echoServer(m.app('b'));
  m.authz.setRule((r) => r.srcIdentity?.serviceAccount === 'waypoint');
  const r = await directHbone(m, m.app('p'), { address: '10.244.1.6', port: 8080 });
  expect(r.ok).toBe(false);
  if (!r.ok) expect([r.kind, r.status]).toEqual(['rejected', 401]);
  const ok = await directHbone(m, m.app('p'), { address: '10.244.1.6', port: 8080 }, { as: 'waypoint' });
  expect(ok.ok).toBe(true); // the control: the allowed principal gets through
  expect(app.conns.length).toBe(1);
});

test('hbone ip mismatch: an :authority IP other than the arrival IP gets 400', async () => {
  const m = await buildMesh();
  await echoServer(m.app('a'));
  const app = await echoServer(m.app('b'));
  const r = await directHbone(m, m.app('p'), { address: '10.244.1.5', port: 8080 });
  expect(!r.ok && [r.kind, r.status]).toEqual(['rejected', 400]);
  expect(m.logs.node1.records.find((x) => x.event === 'denied')!.reason).toContain('ip mismatch');
  expect(app.conns.length).toBe(0);
});

test('CONNECT to a proxy port gets 400 (self-call)', async () => {
  const m = await buildMesh();
  for (const port of [15001, 15006, 15008]) {
    const r = await directHbone(m, m.app('p'), { address: '10.244.1.6', port });
    expect(!r.ok && r.status).toBe(400);
  }
  expect(m.logs.node1.records.filter((x) => x.event === 'denied' && x.reason?.startsWith('self-call')).length).toBe(3);
});

test('trust domain mismatch: a client certificate from another mesh root fails the handshake', async () => {
  const m = await buildMesh();
  const app = await echoServer(m.app('b'));
  const r = await directHbone(
    m,
    m.app('p'),
    { address: '10.244.1.6', port: 8080 },
    { ca: new SimMeshCa('clusterset.local') },
  );
  expect(!r.ok && r.kind).toBe('handshake');
  expect(app.conns.length).toBe(0);
});

test('the server must present the expected identity: a proxy answering with another identity is refused by the client', async () => {
  const m = await buildMesh();
  await echoServer(m.app('b'));
  // b's workload claims another service account than the certificate b's proxy holds.
  const wb = m.workloads.all.get('uid-b')!;
  m.workloads.all.set('uid-b', { ...wb, identity: sa('sa-impostor') });
  const r = await exchange(m.app('a'), '10.244.1.6', 8080);
  expect(r.reply).not.toBe('hello');
  expect(m.logs.node1.records.find((x) => x.event === 'failed')!.reason).toContain('peer-identity');
});
