/**
 * The node proxy on the real kernel (private namespaces, upstream in-pod rules): pod to pod on
 * one node and across nodes via real TLS HBONE with the right identities, passthrough to a pod
 * outside the mesh, inbound plaintext from a non-mesh client allowed or denied, and a policy
 * change closing a live connection.
 */
import { test, expect } from '@playwright/test';
import type { NetnsId } from '../../../impl/api/ids.js';
import type { ReadResult, Sockets, TcpConnection } from '../../../impl/host/sockets.js';
import { netnsWorld } from '../../worlds.js';
import { withNetnsMesh } from '../../../e2e/netns/proxy-mesh.js';

const w = netnsWorld();
test.skip(!w.available, w.reason);

const text = (r: ReadResult): string =>
  r.done ? `<done${r.failure ? `:${r.failure.kind}` : ''}>` : Buffer.from(r.bytes).toString('utf8');

async function echo(s: Sockets, netns: NetnsId): Promise<{ peers: string[]; close(): Promise<void> }> {
  const peers: string[] = [];
  const l = await s.listenTcp({ netns, family: 4, address: '0.0.0.0', port: 8080 }, (c) => {
    peers.push(c.remoteAddress.address);
    void (async () => {
      for (;;) {
        const r = await c.read();
        if (r.done) {
          c.close();
          return;
        }
        if (!(await c.write(r.bytes)).ok) return;
      }
    })();
  });
  if (!l.ok) throw new Error(l.message);
  return { peers, close: () => l.value.close() };
}

async function open(s: Sockets, netns: NetnsId, ip: string): Promise<TcpConnection | string> {
  const c = await s.connectTcp({ netns, family: 4, dst: { family: 4, address: ip, port: 8080 }, timeoutMs: 3000 });
  return c.ok ? c.value : `<connect ${c.kind}>`;
}

async function exchange(s: Sockets, netns: NetnsId, ip: string, msg: string): Promise<string> {
  const c = await open(s, netns, ip);
  if (typeof c === 'string') return c;
  await c.write(Buffer.from(msg));
  const r = text(await c.read());
  c.close();
  return r;
}

test('real kernel: same node and cross node via real TLS HBONE with identities; passthrough; plaintext allowed then denied; policy change closes a live connection', async () => {
  test.setTimeout(120_000);
  await withNetnsMesh(async (m) => {
    const { pods, sockets: s } = m;
    const appB = await echo(s, m.netnsOf('b'));
    const appC = await echo(s, m.netnsOf('c'));
    const appP = await echo(s, m.netnsOf('p'));

    expect(await exchange(s, m.netnsOf('a'), pods.b.ipv4!, 'local')).toBe('local');
    expect(await exchange(s, m.netnsOf('a'), pods.c.ipv4!, 'remote')).toBe('remote');
    expect(appB.peers).toEqual([pods.a.ipv4]);
    expect(appC.peers).toEqual([pods.a.ipv4]);
    const outA = m.logs[0]!.records.filter((r) => r.event === 'forwarded' && r.direction === 'outbound');
    expect(outA.map((r) => `${r.mode} ${r.upstream!.dst}`)).toEqual([
      `hbone ${pods.b.ipv4}:15008`,
      `hbone ${pods.c.ipv4}:15008`,
    ]);
    const inC = m.logs[1]!.records.find((r) => r.event === 'forwarded')!;
    expect([inC.direction, inC.srcIdentity, inC.dstIdentity]).toEqual([
      'inbound-hbone',
      'spiffe://cluster.local/ns/default/sa/sa-a',
      'spiffe://cluster.local/ns/default/sa/sa-c',
    ]);

    expect(await exchange(s, m.netnsOf('a'), pods.p.ipv4!, 'plain')).toBe('plain');
    expect(appP.peers).toEqual([pods.a.ipv4]);
    expect(m.logs[0]!.records.find((r) => r.event === 'forwarded' && r.target === `${pods.p.ipv4}:8080`)!.mode).toBe(
      'passthrough',
    );

    // Inbound plaintext from p (outside the mesh) to b: allowed (no policy), the app sees p's IP.
    expect(await exchange(s, m.netnsOf('p'), pods.b.ipv4!, 'hi')).toBe('hi');
    expect(appB.peers).toEqual([pods.a.ipv4, pods.p.ipv4]);

    // A live plaintext connection, then a policy requiring an identity: it is closed; new ones denied.
    const live = await open(s, m.netnsOf('p'), pods.b.ipv4!);
    if (typeof live === 'string') throw new Error(live);
    await live.write(Buffer.from('one'));
    expect(text(await live.read())).toBe('one');
    m.authz.setRule((r) => r.srcIdentity !== undefined);
    expect(text(await live.read())).toMatch(/^<done/);
    expect(await exchange(s, m.netnsOf('p'), pods.b.ipv4!, 'again')).toMatch(/^<(done|connect reset)/); // reset by the proxy, before or after connect returned
    expect(appB.peers).toEqual([pods.a.ipv4, pods.p.ipv4, pods.p.ipv4]);
    expect(m.logs[0]!.records.some((r) => r.event === 'closed-by-policy' && r.direction === 'inbound-plaintext')).toBe(
      true,
    );
    // Mesh traffic still allowed by that policy.
    expect(await exchange(s, m.netnsOf('a'), pods.b.ipv4!, 'mesh')).toBe('mesh');
    for (const app of [appB, appC, appP]) await app.close();
  });
});
