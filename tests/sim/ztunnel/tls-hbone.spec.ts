/**
 * The real HBONE transport (mutual TLS 1.3 + HTTP/2 CONNECT, certificates from a CA made at
 * run time) under the same proxy, over the simulated sockets: identities come from the
 * certificates' SPIFFE SANs, and the checks hold as with the sim stand-in.
 */
import { test, expect } from '@playwright/test';
import { MeshCa } from '../../../impl/linux/mesh-ca.js';
import { TlsHbone } from '../../../impl/linux/hbone-tls.js';
import { buildMesh, echoServer, exchange, TRUST_DOMAIN } from '../../../sim/proxy-mesh/proxy-mesh.js';

test('real TLS HBONE over sim sockets: same node and across nodes, identities from certificates, policy applies', async () => {
  const ca = await MeshCa.create(TRUST_DOMAIN);
  const m = await buildMesh({ hbone: new TlsHbone({ certificates: ca }) });
  const b = await echoServer(m.app('b'));
  const c = await echoServer(m.app('c'));
  expect((await exchange(m.app('a'), '10.244.1.6', 8080, 'tls-local')).reply).toBe('tls-local');
  expect((await exchange(m.app('a'), '10.244.2.5', 8080, 'tls-remote')).reply).toBe('tls-remote');
  expect([b.peers, c.peers]).toEqual([['10.244.1.5'], ['10.244.1.5']]);
  const inb = m.logs.node2.records.find((r) => r.event === 'forwarded')!;
  expect([inb.direction, inb.srcIdentity, inb.dstIdentity]).toEqual([
    'inbound-hbone',
    'spiffe://cluster.local/ns/default/sa/sa-a',
    'spiffe://cluster.local/ns/default/sa/sa-c',
  ]);

  m.authz.setRule((r) => r.srcIdentity?.serviceAccount !== 'sa-a');
  const denied = await exchange(m.app('a'), '10.244.2.5', 8080, 'x');
  expect(denied.reply).not.toBe('x');
  expect(m.logs.node1.records.find((r) => r.event === 'failed')!.reason).toContain('401');
  expect(c.peers.length).toBe(1);
});

test('real TLS HBONE: a workload whose certificate the CA refuses cannot connect (fail closed); another mesh root is rejected', async () => {
  const ca = await MeshCa.create(TRUST_DOMAIN);
  const m = await buildMesh({ hbone: new TlsHbone({ certificates: ca }) });
  const b = await echoServer(m.app('b'));
  ca.refuse.add('spiffe://cluster.local/ns/default/sa/sa-a');
  expect((await exchange(m.app('a'), '10.244.1.6', 8080)).reply).not.toBe('hello');
  expect(m.logs.node1.records.some((r) => r.event === 'failed' && r.reason?.includes('no-certificate'))).toBe(true);
  // A client with a certificate from another root, straight to b's 15008.
  const other = new TlsHbone({ certificates: await MeshCa.create(TRUST_DOMAIN) });
  const tcp = await m.app('p').connectTcp({ family: 4, dst: { family: 4, address: '10.244.1.6', port: 15008 } });
  expect(tcp.ok).toBe(true);
  if (!tcp.ok) return;
  const r = await other.connect(tcp.value, {
    local: { trustDomain: TRUST_DOMAIN, namespace: 'default', serviceAccount: 'sa-p' },
    expectedPeers: [],
    authority: { family: 4, address: '10.244.1.6', port: 8080 },
  });
  expect(!r.ok && r.kind).toMatch(/handshake|closed/);
  expect(b.peers).toEqual([]);
});
