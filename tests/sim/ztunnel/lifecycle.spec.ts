/**
 * Lifecycle of the node proxy in the sim: a policy change closes a now-denied live connection;
 * a restart hands over with SO_REUSEPORT and no window where traffic reaches the app without a
 * proxy; Del and a changed netns; fail closed on an unknown workload or a missing certificate.
 */
import { test, expect } from '@playwright/test';
import { podUid } from '../../../impl/api/ids.js';
import type { TcpConnection } from '../../../impl/host/sockets.js';
import { settle } from '../../../sim/time/settle.js';
import {
  buildMesh,
  echoServer,
  exchange,
  handleFor,
  infoOf,
  PODS,
  text,
  type Mesh,
} from '../../../sim/proxy-mesh/proxy-mesh.js';

const B = PODS.find((p) => p.name === 'b')!;

async function openEcho(m: Mesh, from: string, ip: string): Promise<TcpConnection> {
  const c = await m.app(from).connectTcp({ family: 4, dst: { family: 4, address: ip, port: 8080 } });
  if (!c.ok) throw new Error(`connect ${from} -> ${ip}: ${c.message}`);
  await c.value.write(Buffer.from('first'));
  expect(text(await c.value.read())).toBe('first');
  return c.value;
}

test('a policy change closes the live connections it now denies, and only those', async () => {
  const m = await buildMesh();
  await echoServer(m.app('b'));
  await echoServer(m.app('c'));
  const fromA = await openEcho(m, 'a', '10.244.1.6'); // HBONE, identity sa-a
  const fromP = await openEcho(m, 'p', '10.244.1.6'); // plaintext, no identity
  const toC = await openEcho(m, 'a', '10.244.2.5'); // other node, identity sa-a
  const gen = m.authz.generation;
  m.authz.setRule((r) => r.srcIdentity?.serviceAccount === 'sa-a' && r.dst.name === 'b');
  expect(m.authz.generation).toBe(gen + 1);
  // Denied now: plaintext to b (no identity) and a -> c; a -> b stays.
  const rP = await fromP.read();
  expect(rP.done && rP.failure?.kind).toBe('reset');
  const rC = await toC.read();
  expect(rC.done).toBe(true);
  await fromA.write(Buffer.from('still'));
  expect(text(await fromA.read())).toBe('still');
  const closed = [...m.logs.node1.records, ...m.logs.node2.records].filter((r) => r.event === 'closed-by-policy');
  expect(closed.map((r) => `${r.pod} ${r.direction}`).sort()).toEqual([
    'default/b inbound-plaintext',
    'default/c inbound-hbone',
  ]);
});

test('restart with SO_REUSEPORT: old and new proxy overlap, the old one drains; every connection is proxied or fails, none reaches the app directly', async () => {
  const m = await buildMesh();
  const app = await echoServer(m.app('b'));
  const viaProxy = (): number =>
    [m.logs.node1, ...extra]
      .flatMap((l) => l.records)
      .filter((r) => r.event === 'forwarded' && r.direction !== 'outbound' && r.pod === 'default/b').length;
  const extra: { records: { event: string; direction: string; pod: string }[] }[] = [];
  const live = await openEcho(m, 'p', '10.244.1.6'); // established before the restart, plaintext into b

  const next = m.newProxy('node1');
  extra.push(next.log);
  await m.addPods(next.proxy, 'node1'); // binds the same ports next to the old listeners
  for (let i = 0; i < 8; i++) {
    expect((await exchange(m.app('p'), '10.244.1.6', 8080, `o${i}`)).reply).toBe(`o${i}`);
    expect((await exchange(m.app('a'), '10.244.1.6', 8080, `h${i}`)).reply).toBe(`h${i}`);
  }
  // Both proxies took connections during the overlap (the reuseport group spreads them).
  const inb = (l: { records: readonly { event: string; direction: string; pod: string }[] }): number =>
    l.records.filter((r) => r.event === 'forwarded' && r.pod === 'default/b').length;
  expect(inb(m.logs.node1)).toBeGreaterThan(1); // the pre-restart connection and some overlap ones
  expect(inb(next.log)).toBeGreaterThan(0);

  // Old proxy: SIGTERM — listeners close at once, live connections get 1 s to finish.
  const shutdown = m.proxies.node1.shutdown('graceful', 1000);
  for (let i = 0; i < 4; i++) expect((await exchange(m.app('p'), '10.244.1.6', 8080, `n${i}`)).reply).toBe(`n${i}`);
  await live.write(Buffer.from('during drain'));
  expect(text(await live.read())).toBe('during drain');
  await settle(m.clock, shutdown); // the drain deadline passes in virtual time
  const after = await live.read();
  expect(after.done).toBe(true);
  expect(m.log.entries.some((e) => e.msg.startsWith('drain duration expired'))).toBe(true);
  // Every connection the app accepted was delivered by a proxy (spoofed source, logged forward).
  expect(app.conns.length).toBe(viaProxy());
  expect(app.conns.length).toBe(1 + 16 + 4);
});

test('stop first, start later: in the gap connections fail (refused), they never reach the app', async () => {
  const m = await buildMesh();
  const app = await echoServer(m.app('b'));
  await m.proxies.node1.shutdown('immediate');
  const plain = await settle(m.clock, exchange(m.app('p'), '10.244.1.6', 8080));
  expect(plain.connect.ok).toBe(false);
  if (!plain.connect.ok) expect(plain.connect.kind).toBe('refused');
  const out = await settle(m.clock, exchange(m.app('a'), '10.244.1.6', 8080));
  expect(out.connect.ok).toBe(false); // a's own outbound listener is gone: redirected to nothing
  const local = await settle(m.clock, exchange(m.app('a'), '10.244.1.7', 8080));
  expect(local.connect.ok).toBe(false); // even passthrough destinations: capture without a proxy fails
  expect(app.conns.length).toBe(0);
  const next = m.newProxy('node1');
  await m.addPods(next.proxy, 'node1');
  expect((await exchange(m.app('p'), '10.244.1.6', 8080, 'back')).reply).toBe('back');
  expect(app.peers).toEqual(['10.244.1.7']);
});

test("Del closes the pod's listeners and connections; traffic to it then fails", async () => {
  const m = await buildMesh();
  const app = await echoServer(m.app('b'));
  const live = await openEcho(m, 'a', '10.244.1.6');
  await m.proxies.node1.onDel(podUid('uid-b'));
  const r = await live.read();
  expect(r.done).toBe(true);
  expect(m.proxies.node1.servedPods()).toEqual([podUid('uid-a')]);
  const again = await settle(m.clock, exchange(m.app('a'), '10.244.1.6', 8080));
  expect(again.reply ?? 'no connection').not.toBe('hello');
  const plain = await settle(m.clock, exchange(m.app('p'), '10.244.1.6', 8080));
  expect(plain.connect.ok).toBe(false);
  expect(app.conns.length).toBe(1);
});

test('Add: same netns identity is a no-op (new handle closed); a new netns replaces the proxy (old handle closed)', async () => {
  const m = await buildMesh();
  await echoServer(m.app('b'));
  const px = m.proxies.node1;
  const first = px.pod(podUid('uid-b'))!;
  const dup = handleFor('b');
  await px.onAdd(podUid('uid-b'), infoOf(B), dup);
  expect(dup.closed).toBe(true);
  expect(px.pod(podUid('uid-b'))).toBe(first);
  const v2 = handleFor('b', 'b-sandbox-2');
  await px.onAdd(podUid('uid-b'), infoOf(B), v2);
  expect(v2.closed).toBe(false);
  expect(px.pod(podUid('uid-b'))).not.toBe(first);
  expect(first.stopping).toBe(true);
  expect((await exchange(m.app('p'), '10.244.1.6', 8080, 'v2')).reply).toBe('v2');
});

test('a listener that cannot be opened fails the Add (nack) and leaves nothing half-open', async () => {
  const m = await buildMesh();
  // Another process (another uid) holds 15006 in pod b without being in the reuseport group.
  const other = m.app('b');
  const squat = await other.listenTcp({ family: 4, address: '0.0.0.0', port: 15006, reusePort: true }, () => undefined);
  expect(squat.ok).toBe(false); // the running proxy (uid 1337) already holds it: EADDRINUSE
  await m.proxies.node1.onDel(podUid('uid-b'));
  const held = await other.listenTcp({ family: 4, address: '0.0.0.0', port: 15006, reusePort: true }, () => undefined);
  expect(held.ok).toBe(true);
  await expect(m.proxies.node1.onAdd(podUid('uid-b'), infoOf(B), handleFor('b'))).rejects.toThrow(/15006.*addr-in-use/);
  expect(m.proxies.node1.servedPods()).not.toContain(podUid('uid-b'));
  // The 15001 listener opened before the failure was closed again: a fresh proxy can bind it without reuseport.
  const probe = await m
    .newProxy('node1', { reusePort: false })
    .proxy.deps.sockets.listenTcp({ netns: 'b' as never, family: 4, address: '0.0.0.0', port: 15001 }, () => undefined);
  expect(probe.ok).toBe(true);
});

test('fail closed: unknown source workload, unknown destination workload, no certificate', async () => {
  const m = await buildMesh();
  const app = await echoServer(m.app('b'));
  const wA = m.workloads.all.get('uid-a')!;
  m.workloads.all.delete('uid-a'); // a is enrolled on the node but its workload is not (yet) known
  m.workloads.all.set('uid-a-other', { ...wA, uid: 'uid-a-other' }); // its IP still resolves, so b would accept
  const r1 = await exchange(m.app('a'), '10.244.1.6', 8080);
  expect(r1.reply).not.toBe('hello');
  expect(m.logs.node1.records.find((r) => r.event === 'denied')!.reason).toContain('unknown source workload');
  m.workloads.all.set('uid-a', wA);
  m.workloads.all.delete('uid-a-other');

  const wB = m.workloads.all.get('uid-b')!;
  m.workloads.all.set('uid-b', { ...wB, serviceAccount: 'other-sa' }); // does not match its ZDS info
  expect((await exchange(m.app('p'), '10.244.1.6', 8080)).reply).not.toBe('hello');
  expect((await exchange(m.app('a'), '10.244.1.6', 8080)).reply).not.toBe('hello');
  m.workloads.all.set('uid-b', wB);

  m.ca.refuse.add('spiffe://cluster.local/ns/default/sa/sa-a');
  expect((await exchange(m.app('a'), '10.244.1.6', 8080)).reply).not.toBe('hello');
  expect(m.logs.node1.records.some((r) => r.event === 'failed' && r.reason?.includes('no-certificate'))).toBe(true);
  expect(app.conns.length).toBe(0);
  m.ca.refuse.clear();
  expect((await exchange(m.app('a'), '10.244.1.6', 8080)).reply).toBe('hello'); // the control
});

test('identity certificates follow the served pods: prefetched as a pod is served, forgotten with the last pod of that identity', async () => {
  const m = await buildMesh();
  const events: string[] = [];
  const { proxy } = m.newProxy('node1', {
    identities: { prefetch: (id) => events.push(`prefetch ${id}`), forget: (id) => events.push(`forget ${id}`) },
  });
  const A = PODS.find((p) => p.name === 'a')!;
  const sa = (s: string) => `spiffe://cluster.local/ns/default/sa/${s}`;
  await proxy.onAdd(podUid('uid-a'), infoOf(A), handleFor('a'));
  await proxy.onAdd(podUid('uid-b'), infoOf(B), handleFor('b'));
  // a second pod of b's identity (another uid, its own sandbox): one identity, still held when one goes
  await proxy.onAdd(podUid('uid-b2'), infoOf(B), handleFor('b', 'b-sandbox-2'));
  expect(events).toEqual([`prefetch ${sa('sa-a')}`, `prefetch ${sa('sa-b')}`, `prefetch ${sa('sa-b')}`]);
  events.length = 0;
  await proxy.onDel(podUid('uid-b'));
  expect(events).toEqual([]);
  await proxy.onDel(podUid('uid-b2'));
  expect(events).toEqual([`forget ${sa('sa-b')}`]);
  // the end of a snapshot that names no pod drops a: its identity goes too
  await proxy.onSnapshotSent(new Set());
  expect(events).toEqual([`forget ${sa('sa-b')}`, `forget ${sa('sa-a')}`]);
  await proxy.shutdown('immediate');
});
