/**
 * The node proxy over the simulated kernel with the upstream in-pod rules: pod to pod on one
 * node and across nodes via HBONE with the right identities, passthrough to a non-mesh pod,
 * inbound plaintext from a non-mesh client allowed or denied, and the connection log.
 */
import { test, expect } from '@playwright/test';
import { buildMesh, echoServer, exchange } from '../../../sim/proxy-mesh/proxy-mesh.js';

test("same node: a -> b goes through a's 15001, HBONE to b's 15008, reaches b's app from a's IP with a's identity", async () => {
  const m = await buildMesh();
  const b = await echoServer(m.app('b'));
  const r = await exchange(m.app('a'), '10.244.1.6', 8080, 'ping');
  expect(r.connect.ok).toBe(true);
  expect(r.reply).toBe('ping');
  // The app saw the real client address (spoofed by b's proxy), not the proxy's.
  expect(b.peers).toEqual(['10.244.1.5']);
  const fwd = m.logs.node1.records.filter((x) => x.event === 'forwarded');
  expect(fwd.map((x) => `${x.pod} ${x.direction} ${x.mode}`)).toEqual([
    'default/a outbound hbone',
    'default/b inbound-hbone hbone',
  ]);
  expect(fwd[0]!.target).toBe('10.244.1.6:8080');
  expect(fwd[0]!.upstream!.dst).toBe('10.244.1.6:15008');
  expect(fwd[1]!.srcIdentity).toBe('spiffe://cluster.local/ns/default/sa/sa-a');
  expect(fwd[1]!.dstIdentity).toBe('spiffe://cluster.local/ns/default/sa/sa-b');
  // The destination authorized with the peer's certificate identity.
  const req = m.authz.seen.at(-1)!;
  expect(req.srcIdentity).toEqual({ trustDomain: 'cluster.local', namespace: 'default', serviceAccount: 'sa-a' });
  expect([req.srcIp, req.dstIp, req.dstPort]).toEqual(['10.244.1.5', '10.244.1.6', 8080]);
});

test("across nodes: a (node1) -> c (node2) via HBONE; node2 sees a's identity and source IP", async () => {
  const m = await buildMesh();
  const c = await echoServer(m.app('c'));
  const r = await exchange(m.app('a'), '10.244.2.5', 8080, 'across');
  expect(r.reply).toBe('across');
  expect(c.peers).toEqual(['10.244.1.5']);
  const out = m.logs.node1.records.find((x) => x.event === 'forwarded')!;
  expect([out.direction, out.mode, out.upstream!.dst]).toEqual(['outbound', 'hbone', '10.244.2.5:15008']);
  const inb = m.logs.node2.records.find((x) => x.event === 'forwarded')!;
  expect([inb.pod, inb.direction, inb.srcIdentity]).toEqual([
    'default/c',
    'inbound-hbone',
    'spiffe://cluster.local/ns/default/sa/sa-a',
  ]);
  expect(inb.downstream.src).toMatch(/^10\.244\.1\.5:/);
});

test('outbound to a pod outside the mesh is plain TCP passthrough from the source pod', async () => {
  const m = await buildMesh();
  const p = await echoServer(m.app('p'));
  const r = await exchange(m.app('a'), '10.244.1.7', 8080, 'plain');
  expect(r.reply).toBe('plain');
  expect(p.peers).toEqual(['10.244.1.5']);
  const out = m.logs.node1.records.find((x) => x.event === 'forwarded')!;
  expect([out.direction, out.mode, out.upstream!.dst]).toEqual(['outbound', 'passthrough', '10.244.1.7:8080']);
  expect(out.dstIdentity).toBeUndefined();
});

test('inbound plaintext from a non-mesh pod: allowed by policy reaches the app with the client IP; denied is reset and never reaches the app', async () => {
  const m = await buildMesh();
  const b = await echoServer(m.app('b'));
  const ok = await exchange(m.app('p'), '10.244.1.6', 8080, 'hi');
  expect(ok.reply).toBe('hi');
  expect(b.peers).toEqual(['10.244.1.7']);
  const inb = m.logs.node1.records.find((x) => x.event === 'forwarded')!;
  expect([inb.direction, inb.mode, inb.srcIdentity]).toEqual(['inbound-plaintext', 'plaintext', undefined]);
  expect(m.authz.seen.at(-1)!.srcIdentity).toBeUndefined();

  m.authz.setRule((r) => r.srcIdentity !== undefined); // STRICT-like: identity required
  const denied = await exchange(m.app('p'), '10.244.1.6', 8080, 'again');
  // The TCP handshake completes with the proxy (as upstream); then the proxy resets.
  expect(denied.connect.ok).toBe(true);
  expect(denied.reply).toMatch(/^<(done|write failed):reset>$/);
  expect(b.peers).toEqual(['10.244.1.7']); // no second delivery
  const d = m.logs.node1.records.find((x) => x.event === 'denied')!;
  expect([d.direction, d.target]).toEqual(['inbound-plaintext', '10.244.1.6:8080']);
  expect(d.reason).toContain('fake: denied');
});

test('HBONE denied by policy at the destination: 401, the client is reset, the app never sees it', async () => {
  const m = await buildMesh();
  const c = await echoServer(m.app('c'));
  m.authz.setRule((r) => r.srcIdentity?.serviceAccount !== 'sa-a');
  const r = await exchange(m.app('a'), '10.244.2.5', 8080);
  expect(r.reply).toBe('<done:reset>');
  expect(c.peers).toEqual([]);
  expect(m.logs.node1.records.find((x) => x.event === 'failed')!.reason).toContain('401');
  expect(m.logs.node2.records.find((x) => x.event === 'denied')!.srcIdentity).toBe(
    'spiffe://cluster.local/ns/default/sa/sa-a',
  );
  // one 'connection denied' line with the documented fields (docs/observability.md, "Logs")
  const lines = m.log.entries.filter((e) => e.msg === 'connection denied');
  expect(lines).toHaveLength(1);
  expect(lines[0]).toMatchObject({
    level: 'info',
    fields: {
      node: 'node2',
      pod: 'default/c',
      direction: 'inbound-hbone',
      target: '10.244.2.5:8080',
      srcIdentity: 'spiffe://cluster.local/ns/default/sa/sa-a',
    },
  });
  expect(lines[0]!.fields).toMatchObject({
    src: expect.stringMatching(/^10\.244\.1\.5:/),
    reason: expect.stringContaining('policy'),
  });
});
