/**
 * The proxy's DNS listener end to end in the simulated kernel: pod a (node1) has the upstream
 * in-pod rules with DNS capture on; its app asks the node's resolver (10.244.1.1:53). The
 * capture rule sends the query to the proxy's 15053; cluster names are answered by the proxy,
 * others are forwarded from the pod netns on a marked socket (not re-captured) to the resolver,
 * and the reply comes back to the app from the address it asked.
 */
import { test, expect } from '@playwright/test';
import { netnsId, podUid } from '../../../../impl/api/ids.js';
import { buildInpodPlan } from '../../../../impl/node-agent/rule-builder.js';
import { RCODE, RR_TYPE } from '../../../../impl/ztunnel/dns/constants.js';
import { MemoryDnsLog } from '../../../../impl/ztunnel/dns/dns-log.js';
import { decodeMessage, encodeMessage, type DnsMessage } from '../../../../impl/ztunnel/dns/message.js';
import { staticNames } from '../../../../impl/ztunnel/dns/name-source.js';
import { frame, FrameReader } from '../../../../impl/ztunnel/dns/tcp-framing.js';
import type { SocketAddress, UdpSocket } from '../../../../impl/host/sockets.js';
import { SimNetnsRules } from '../../../../sim/kernel/netns-rules-adapter.js';
import { SimSockets } from '../../../../sim/kernel/sockets-adapter.js';
import { formatSockAddr, type SimSocket } from '../../../../sim/kernel/socket.js';
import { proxyAcceptor } from '../../../../scenarios/worlds/sim/attribution.js';
import { outboundCarveOut } from '../../../../scenarios/properties/carve-outs.js';
import type { ConnectionContext } from '../../../../scenarios/properties/types.js';
import { APP, PODS, buildMesh, handleFor, infoOf, type Mesh } from '../../../../sim/proxy-mesh/proxy-mesh.js';

const RESOLVER: SocketAddress = { family: 4, address: '10.244.1.1', port: 53 };
const EXTERNAL_ANSWER = [203, 0, 113, 7];

function query(id: number, name: string, type: number = RR_TYPE.A): Uint8Array {
  return encodeMessage({
    header: {
      id,
      response: false,
      opcode: 0,
      authoritative: false,
      truncated: false,
      recursionDesired: true,
      recursionAvailable: false,
      rcode: 0,
    },
    questions: [{ name, type, class: 1 }],
    answers: [],
    authority: [],
    additional: [],
  });
}

/** The node's resolver: answers every A question with 203.0.113.7 and records who asked what. */
function resolverReply(bytes: Uint8Array): Uint8Array {
  const q = decodeMessage(bytes);
  const m: DnsMessage = {
    header: { ...q.header, response: true, recursionAvailable: true },
    questions: q.questions,
    answers: q.questions.map((x) => ({
      name: x.name,
      type: RR_TYPE.A,
      class: 1,
      ttl: 60,
      data: Uint8Array.from(EXTERNAL_ANSWER),
    })),
    authority: [],
    additional: [],
  };
  return encodeMessage(m);
}

async function settle(): Promise<void> {
  for (let i = 0; i < 50; i++) await new Promise((r) => setImmediate(r));
}

interface Lab {
  readonly mesh: Mesh;
  readonly dnsLog: MemoryDnsLog;
  /** "src-ip:port name" of every query the resolver saw. */
  readonly resolverSaw: string[];
}

async function lab(): Promise<Lab> {
  const mesh = await buildMesh({ applyRules: false });
  // Pod a only, with DNS capture; the fixture's default proxies have no DNS option.
  await new SimNetnsRules(mesh.k).apply(
    netnsId('a'),
    buildInpodPlan({ profile: 'upstream', ipv6: false, dnsCapture: true, ingressMode: false, virtualInterfaces: [] }),
  );
  const resolverSaw: string[] = [];
  const resolverSockets = new SimSockets({ kernel: mesh.k, owner: APP, defaultNetns: 'node1', label: 'resolver' });
  const rs: { sock?: UdpSocket } = {};
  const u = await resolverSockets.bindUdp({ family: 4, address: RESOLVER.address, port: 53 }, (d) => {
    resolverSaw.push(`${d.from.address} ${decodeMessage(d.bytes).questions[0]!.name}`);
    void rs.sock!.send(d.from, resolverReply(d.bytes));
  });
  if (!u.ok) throw new Error(u.message);
  rs.sock = u.value;
  const t = await resolverSockets.listenTcp({ family: 4, address: RESOLVER.address, port: 53 }, (c) => {
    void (async () => {
      const r = new FrameReader();
      for (;;) {
        const x = await c.read();
        if (x.done) return;
        for (const m of r.push(x.bytes)) {
          resolverSaw.push(`${c.remoteAddress.address} tcp ${decodeMessage(m).questions[0]!.name}`);
          await c.write(frame(resolverReply(m)));
        }
      }
    })();
  });
  if (!t.ok) throw new Error(t.message);
  const dnsLog = new MemoryDnsLog();
  const { proxy } = mesh.newProxy('node1', {
    dns: { upstream: [RESOLVER], log: dnsLog, names: staticNames({ 'web.default.svc.cluster.local': ['10.96.0.20'] }) },
  });
  const a = PODS.find((p) => p.name === 'a')!;
  await proxy.onAdd(podUid('uid-a'), infoOf(a), handleFor('a'));
  return { mesh, dnsLog, resolverSaw };
}

/** The app in pod a sends one datagram to the resolver address; returns who took it and the reply. */
async function askUdp(
  l: Lab,
  bytes: Uint8Array,
): Promise<{ taker: SimSocket | undefined; reply: { from: string; msg: Uint8Array } | undefined }> {
  const k = l.mesh.k;
  const s = k.socket('a', 'udp', 4, APP, 'default/a/app');
  const r = k.sendUdp(s, RESOLVER.address, RESOLVER.port, Buffer.from(bytes).toString('latin1'));
  await settle();
  const got = s.inbox.shift();
  k.close(s);
  return {
    taker: r.socket,
    reply: got
      ? { from: formatSockAddr(got.from), msg: new Uint8Array(Buffer.from(got.payload, 'latin1')) }
      : undefined,
  };
}

test('a cluster name is answered by the proxy: the query reaches 15053, not the resolver', async () => {
  const l = await lab();
  const { taker, reply } = await askUdp(l, query(11, '10-244-1-6.default.pod.cluster.local'));
  expect(taker?.label.startsWith('ztunnel@node1')).toBe(true);
  expect(proxyAcceptor(taker!.local!.port)).toBe('proxy-dns');
  expect(reply?.from).toBe('10.244.1.1:53'); // de-NATed: the stub resolver accepts it
  const m = decodeMessage(reply!.msg);
  expect(m.header).toMatchObject({ id: 11, response: true, rcode: RCODE.NOERROR });
  expect(m.answers.map((a) => [...a.data].join('.'))).toEqual(['10.244.1.6']);
  expect(l.resolverSaw).toEqual([]);
  expect(l.dnsLog.records.map((r) => [r.event, r.question?.name, r.proto])).toEqual([
    ['answered-locally', '10-244-1-6.default.pod.cluster.local', 'udp'],
  ]);

  // A service name from the configured table, and AAAA for a v4-only name (NODATA, still local).
  const svc = decodeMessage((await askUdp(l, query(12, 'WEB.default.svc.cluster.local'))).reply!.msg);
  expect(svc.answers.map((a) => [...a.data].join('.'))).toEqual(['10.96.0.20']);
  const v6 = decodeMessage(
    (await askUdp(l, query(13, '10-244-1-6.default.pod.cluster.local', RR_TYPE.AAAA))).reply!.msg,
  );
  expect([v6.header.rcode, v6.answers.length]).toEqual([RCODE.NOERROR, 0]);
  // A pod IP name in the wrong namespace is not ours: forwarded.
  await askUdp(l, query(14, '10-244-1-6.other.pod.cluster.local'));
  expect(l.resolverSaw).toEqual(['10.244.1.5 10-244-1-6.other.pod.cluster.local']);
});

test('an external name is forwarded from the pod netns on a marked socket and the answer relayed', async () => {
  const l = await lab();
  const { taker, reply } = await askUdp(l, query(21, 'example.com'));
  expect(proxyAcceptor(taker!.local!.port)).toBe('proxy-dns');
  // The forwarded query left pod a (its IP) and was not captured again (it reached the resolver).
  expect(l.resolverSaw).toEqual(['10.244.1.5 example.com']);
  const m = decodeMessage(reply!.msg);
  expect(m.header).toMatchObject({ id: 21, rcode: RCODE.NOERROR });
  expect(m.answers.map((a) => [...a.data])).toEqual([EXTERNAL_ANSWER]);
  expect(l.dnsLog.records.map((r) => [r.event, r.upstream])).toEqual([['forwarded', '10.244.1.1:53']]);
});

test('DNS over TCP: captured to 15053, answered locally or forwarded over TCP, 2-byte framing', async () => {
  const l = await lab();
  const c = await l.mesh.app('a').connectTcp({ family: 4, dst: RESOLVER });
  if (!c.ok) throw new Error(c.message);
  await c.value.write(
    Uint8Array.from([...frame(query(31, '10-244-1-6.default.pod.cluster.local')), ...frame(query(32, 'example.org'))]),
  );
  const r = new FrameReader();
  const got: DnsMessage[] = [];
  while (got.length < 2) {
    const x = await c.value.read();
    if (x.done) break;
    got.push(...r.push(x.bytes).map(decodeMessage));
  }
  c.value.close();
  expect(got.map((m) => [m.header.id, m.answers.map((a) => [...a.data].join('.'))])).toEqual([
    [31, ['10.244.1.6']],
    [32, ['203.0.113.7']],
  ]);
  expect(l.resolverSaw).toEqual(['10.244.1.5 tcp example.org']);
  expect(l.dnsLog.records.map((r) => [r.event, r.proto])).toEqual([
    ['answered-locally', 'tcp'],
    ['forwarded', 'tcp'],
  ]);
});

test('malformed frames get FORMERR or are dropped, and the listener keeps serving', async () => {
  const l = await lab();
  const tiny = await askUdp(l, Uint8Array.of(1, 2, 3));
  expect(tiny.reply).toBeUndefined();
  // A header that promises a question that is not there.
  const cut = await askUdp(l, Uint8Array.of(0x12, 0x34, 1, 0, 0, 1, 0, 0, 0, 0, 0, 0));
  expect(decodeMessage(cut.reply!.msg).header).toMatchObject({ id: 0x1234, rcode: RCODE.FORMERR });
  // A name that points at itself.
  const loop = await askUdp(l, Uint8Array.of(0, 9, 1, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0xc0, 12, 0, 1, 0, 1));
  expect(decodeMessage(loop.reply!.msg).header).toMatchObject({ id: 9, rcode: RCODE.FORMERR });
  expect(l.dnsLog.records.map((r) => [r.event, r.rcode])).toEqual([
    ['malformed', undefined],
    ['malformed', RCODE.FORMERR],
    ['malformed', RCODE.FORMERR],
  ]);
  const ok = await askUdp(l, query(5, '10-244-1-6.default.pod.cluster.local'));
  expect(decodeMessage(ok.reply!.msg).header.rcode).toBe(RCODE.NOERROR);
});

test('a resolver that does not answer yields SERVFAIL after the forward timeout, logged as failed', async () => {
  const mesh = await buildMesh({ applyRules: false });
  await new SimNetnsRules(mesh.k).apply(
    netnsId('a'),
    buildInpodPlan({ profile: 'upstream', ipv6: false, dnsCapture: true, ingressMode: false, virtualInterfaces: [] }),
  );
  const dnsLog = new MemoryDnsLog();
  const { proxy } = mesh.newProxy('node1', { dns: { upstream: [RESOLVER], log: dnsLog, forwardTimeoutMs: 2000 } });
  await proxy.onAdd(podUid('uid-a'), infoOf(PODS[0]!), handleFor('a'));
  const k = mesh.k;
  const s = k.socket('a', 'udp', 4, APP, 'default/a/app');
  k.sendUdp(s, RESOLVER.address, 53, Buffer.from(query(41, 'example.net')).toString('latin1'));
  await settle();
  expect(s.inbox).toEqual([]);
  mesh.clock.advance(2000);
  await settle();
  const m = decodeMessage(new Uint8Array(Buffer.from(s.inbox.shift()!.payload, 'latin1')));
  expect(m.header).toMatchObject({ id: 41, rcode: RCODE.SERVFAIL });
  expect(dnsLog.records.map((r) => r.event)).toEqual(['failed']);
});

test('the DNS carve-out matches what the proxy DNS listener accepts', async () => {
  const l = await lab();
  const { taker } = await askUdp(l, query(51, 'example.com'));
  // Only the fields the outbound carve-out reads (destination, source pod, DNS capture, acceptor).
  const ctx = {
    to: { kind: 'ip', ip: RESOLVER.address, port: 53 },
    opts: {},
    from: { kind: 'pod', pod: { namespace: 'default', name: 'a' } },
    pods: [{ namespace: 'default', name: 'a', ips: ['10.244.1.5'] }],
    mesh: { dnsCapture: true },
    result: { acceptedBy: proxyAcceptor(taker!.local!.port) },
    quiescent: true,
  } as unknown as ConnectionContext; // a partial context: the carve-out reads only these fields
  expect(outboundCarveOut(ctx)?.name).toBe('dns-to-proxy-dns-port');
});
