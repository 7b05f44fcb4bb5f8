/**
 * The DNS listener's lifecycle with its pod: opened on Add with the other listeners, closed on
 * Del; a DNS port that cannot be bound fails the Add (nack) without leaving listeners behind;
 * the DNS option on an adapter without UDP is refused at construction.
 */
import { test, expect } from '@playwright/test';
import { podUid } from '../../../../impl/api/ids.js';
import type { Sockets } from '../../../../impl/host/sockets.js';
import { RR_TYPE } from '../../../../impl/ztunnel/dns/constants.js';
import { encodeMessage } from '../../../../impl/ztunnel/dns/message.js';
import { NodeProxy } from '../../../../impl/ztunnel/node-proxy.js';
import { APP, PODS, buildMesh, handleFor, infoOf } from '../../../../sim/proxy-mesh/proxy-mesh.js';

const UPSTREAM = [{ family: 4 as const, address: '10.244.1.1', port: 53 }];

function listenersOn(k: Awaited<ReturnType<typeof buildMesh>>['k'], ns: string, port: number): string[] {
  return k
    .netns(ns)
    .sockets.all()
    .filter((s) => s.state !== 'closed' && s.local?.port === port)
    .map((s) => `${s.proto} ${s.label}`)
    .sort();
}

test('Add opens UDP and TCP 15053 on loopback with the proxy mark; Del closes them', async () => {
  const mesh = await buildMesh({ applyRules: false });
  const { proxy } = mesh.newProxy('node1', { dns: { upstream: UPSTREAM } });
  await proxy.onAdd(podUid('uid-a'), infoOf(PODS[0]!), handleFor('a'));
  const socks = mesh.k
    .netns('a')
    .sockets.all()
    .filter((s) => s.state !== 'closed' && s.local?.port === 15053);
  expect(socks.map((s) => [s.proto, s.mark, s.local!.addr.family === 4 ? 'v4' : 'v6']).sort()).toEqual([
    ['tcp', 0x539, 'v4'],
    ['udp', 0x539, 'v4'],
  ]);
  expect(listenersOn(mesh.k, 'a', 15053)).toEqual(['tcp ztunnel@node1', 'udp ztunnel@node1']);
  await proxy.onDel(podUid('uid-a'));
  expect(listenersOn(mesh.k, 'a', 15053)).toEqual([]);
  // A query now finds no socket on 15053 (fails closed), as before the proxy served DNS.
  const s = mesh.k.socket('a', 'udp', 4, APP, 'default/a/app');
  const q = encodeMessage({
    header: {
      id: 1,
      response: false,
      opcode: 0,
      authoritative: false,
      truncated: false,
      recursionDesired: true,
      recursionAvailable: false,
      rcode: 0,
    },
    questions: [{ name: 'x', type: RR_TYPE.A, class: 1 }],
    answers: [],
    authority: [],
    additional: [],
  });
  expect(mesh.k.sendUdp(s, '127.0.0.1', 15053, Buffer.from(q).toString('latin1')).outcome).toBe('no-socket');
});

test('a pod whose loopback has IPv6 turned off gets DNS on 127.0.0.1 only (as upstream ztunnel checks per pod), not a refused Add', async () => {
  const mesh = await buildMesh({ applyRules: false });
  const { proxy } = mesh.newProxy('node1', { dns: { upstream: UPSTREAM }, families: [4, 6] });
  const dnsFamilies = (ns: string): string[] =>
    mesh.k
      .netns(ns)
      .sockets.all()
      .filter((s) => s.state !== 'closed' && s.local?.port === 15053 && s.label === 'ztunnel@node1')
      .map((s) => `${s.proto}/${s.local!.addr.family}`)
      .sort();
  await proxy.onAdd(podUid('uid-b'), infoOf(PODS[1]!), handleFor('b'));
  expect(dnsFamilies('b')).toEqual(['tcp/4', 'tcp/6', 'udp/4', 'udp/6']);
  mesh.k.setIpv6Disabled('a', 'lo', true);
  await proxy.onAdd(podUid('uid-a'), infoOf(PODS[0]!), handleFor('a'));
  expect(proxy.servedPods()).toContain(podUid('uid-a'));
  expect(dnsFamilies('a')).toEqual(['tcp/4', 'udp/4']);
});

test('a DNS port held by someone else fails the Add and leaves no listener of the pod open', async () => {
  const mesh = await buildMesh({ applyRules: false });
  // Another process (no SO_REUSEPORT) holds UDP 127.0.0.1:15053 in pod a.
  const squatter = mesh.k.socket('a', 'udp', 4, APP, 'squatter');
  mesh.k.bind(squatter, '127.0.0.1', 15053);
  const { proxy } = mesh.newProxy('node1', { dns: { upstream: UPSTREAM } });
  await expect(proxy.onAdd(podUid('uid-a'), infoOf(PODS[0]!), handleFor('a'))).rejects.toThrow(
    /cannot open the DNS listener in a: UDP 127\.0\.0\.1:15053: addr-in-use/,
  );
  expect(proxy.servedPods()).toEqual([]);
  const ours = mesh.k
    .netns('a')
    .sockets.all()
    .filter(
      (s) =>
        s.label === 'ztunnel@node1' && s.state === 'listening' && [15001, 15006, 15008, 15053].includes(s.local!.port),
    );
  // Only the fixture's first proxy (no DNS option) still has its listeners; none of the new one's remain.
  expect(ours.length).toBe(3);
});

test('the DNS option on a Sockets adapter without UDP is refused at construction', async () => {
  const mesh = await buildMesh({ applyRules: false });
  const full = mesh.app('a');
  const tcpOnly: Sockets = { listenTcp: full.listenTcp.bind(full), connectTcp: full.connectTcp.bind(full) };
  expect(
    () =>
      new NodeProxy({
        // The constructor fails before HBONE is used, so no transport is needed.
        sockets: tcpOnly,
        hbone: {} as never,
        authorizer: mesh.authz,
        workloads: mesh.workloads,
        clock: mesh.clock,
        log: mesh.log,
        dns: { upstream: UPSTREAM },
      }),
  ).toThrow(/DNS option needs UDP/);
});
