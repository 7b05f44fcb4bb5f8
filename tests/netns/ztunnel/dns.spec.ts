/**
 * The proxy's DNS listener on the real kernel (private al- namespaces, upstream and strict in-pod rules
 * with DNS capture on, Linux Sockets adapter): pod a's app asks a resolver in pod p (outside
 * the mesh) over UDP and TCP; the capture rule sends the query to the proxy on 15053, which
 * answers a cluster name itself and forwards an external name on a marked socket (so it is not
 * captured again) — the resolver sees it from pod a — and relays the reply, which the app
 * receives from the address it asked.
 */
import { test, expect } from '@playwright/test';
import { netnsId, podUid } from '../../../impl/api/ids.js';
import type { SocketAddress, UdpDatagram, UdpSocket } from '../../../impl/host/sockets.js';
import { SystemClock } from '../../../impl/linux/clock.js';
import { LinuxNetnsRules } from '../../../impl/linux/netns-rules.js';
import { LinuxSockets } from '../../../impl/linux/sockets.js';
import { buildInpodPlan } from '../../../impl/node-agent/rule-builder.js';
import { RCODE, RR_TYPE } from '../../../impl/ztunnel/dns/constants.js';
import { MemoryDnsLog } from '../../../impl/ztunnel/dns/dns-log.js';
import { decodeMessage, encodeMessage, type DnsMessage } from '../../../impl/ztunnel/dns/message.js';
import { frame, FrameReader } from '../../../impl/ztunnel/dns/tcp-framing.js';
import { NodeProxy } from '../../../impl/ztunnel/node-proxy.js';
import { withCluster } from '../../../e2e/netns/cluster.js';
import { MemoryLogger } from '../../../sim/log/memory-logger.js';
import { FakeAuthorizer, FakeWorkloads, TRUST_DOMAIN } from '../../../sim/proxy-mesh/proxy-mesh.js';
import { SimHbone, SimMeshCa } from '../../../sim/hbone/sim-hbone.js';
import { netnsWorld } from '../../worlds.js';

const w = netnsWorld();
test.skip(!w.available, w.reason);

function query(id: number, name: string): Uint8Array {
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
    questions: [{ name, type: RR_TYPE.A, class: 1 }],
    answers: [],
    authority: [],
    additional: [],
  });
}

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
      data: Uint8Array.of(198, 51, 100, 9),
    })),
    authority: [],
    additional: [],
  };
  return encodeMessage(m);
}

function within<T>(p: Promise<T>, ms: number, what: string): Promise<T> {
  return new Promise((resolve, reject) => {
    const t = setTimeout(() => reject(new Error(`${what}: nothing within ${ms} ms`)), ms);
    void p.then(
      (v) => {
        clearTimeout(t);
        resolve(v);
      },
      (e: unknown) => {
        clearTimeout(t);
        reject(e as Error);
      },
    );
  });
}

// Strict: the proxy here runs in this (root) test process, so its uid is 0. On Linux every
// LOCAL_OUT table matches -o against the route chosen before nat OUTPUT's REDIRECT, so strict's
// filter OUTPUT must let redirected DNS UDP out by destination, not by `-o lo` (it would drop it).
for (const profile of ['upstream', 'strict'] as const) {
  test(`real kernel, ${profile} rules: DNS capture to the proxy; cluster name answered locally, external name forwarded (UDP and TCP)`, async () => {
    test.setTimeout(60_000);
    await withCluster({ nodes: 1 }, async (c) => {
      const a = await c.addPod('node-0', 'a', { ipv6: false });
      const p = await c.addPod('node-0', 'p', { ipv6: false });
      await new LinuxNetnsRules().apply(
        netnsId(a.netnsPath),
        buildInpodPlan(
          profile === 'upstream'
            ? { profile, ipv6: false, dnsCapture: true, ingressMode: false, virtualInterfaces: [] }
            : {
                profile,
                ipv6: false,
                dnsCapture: true,
                ingressMode: false,
                virtualInterfaces: [],
                proxyUid: 0,
                probePorts: [],
              },
        ),
      );
      const sockets = new LinuxSockets();
      const resolver: SocketAddress = { family: 4, address: p.ipv4!, port: 53 };
      const resolverSaw: string[] = [];
      const rs: { sock?: UdpSocket } = {};
      const ru = await sockets.bindUdp(
        { netns: netnsId(p.netnsPath), family: 4, address: '0.0.0.0', port: 53 },
        (d) => {
          resolverSaw.push(`${d.from.address} udp ${decodeMessage(d.bytes).questions[0]!.name}`);
          void rs.sock!.send(d.from, resolverReply(d.bytes));
        },
      );
      if (!ru.ok) throw new Error(ru.message);
      rs.sock = ru.value;
      const rt = await sockets.listenTcp(
        { netns: netnsId(p.netnsPath), family: 4, address: '0.0.0.0', port: 53 },
        (conn) => {
          void (async () => {
            const r = new FrameReader();
            for (;;) {
              const x = await conn.read();
              if (x.done) {
                conn.close();
                return;
              }
              for (const m of r.push(x.bytes)) {
                resolverSaw.push(`${conn.remoteAddress.address} tcp ${decodeMessage(m).questions[0]!.name}`);
                await conn.write(frame(resolverReply(m)));
              }
            }
          })();
        },
      );
      if (!rt.ok) throw new Error(rt.message);

      const workloads = new FakeWorkloads();
      for (const [name, info] of [
        ['a', a],
        ['p', p],
      ] as const) {
        workloads.all.set(`uid-${name}`, {
          uid: `uid-${name}`,
          name,
          namespace: 'default',
          serviceAccount: 'default',
          labels: {},
          ips: [info.ipv4!],
          enrolled: name === 'a',
          identity: { trustDomain: TRUST_DOMAIN, namespace: 'default', serviceAccount: 'default' },
        });
      }
      const dnsLog = new MemoryDnsLog();
      const proxy = new NodeProxy({
        sockets,
        hbone: new SimHbone({ ca: new SimMeshCa(TRUST_DOMAIN) }),
        authorizer: new FakeAuthorizer(),
        workloads,
        clock: new SystemClock(),
        log: new MemoryLogger(),
        trustDomain: TRUST_DOMAIN,
        dns: { upstream: [resolver], log: dnsLog, forwardTimeoutMs: 3000 },
      });
      await proxy.onAdd(
        podUid('uid-a'),
        { name: 'a', namespace: 'default', serviceAccount: 'default' },
        { netns: netnsId(a.netnsPath), identity: a.netns, close: () => undefined },
      );
      try {
        // The app: an unmarked UDP socket in pod a.
        const replies: UdpDatagram[] = [];
        const waiters: (() => void)[] = [];
        const app = await sockets.bindUdp(
          { netns: netnsId(a.netnsPath), family: 4, address: '0.0.0.0', port: 0 },
          (d) => {
            replies.push(d);
            waiters.shift()?.();
          },
        );
        if (!app.ok) throw new Error(app.message);
        const ask = async (id: number, name: string): Promise<{ from: string; msg: DnsMessage }> => {
          const got = new Promise<void>((r) => waiters.push(r));
          expect((await app.value.send(resolver, query(id, name))).ok).toBe(true);
          await within(got, 5000, `reply to ${name}`);
          const d = replies.shift()!;
          return { from: `${d.from.address}:${d.from.port}`, msg: decodeMessage(d.bytes) };
        };
        const podName = `${p.ipv4!.replaceAll('.', '-')}.default.pod.cluster.local`;
        const local = await ask(1, podName);
        expect(local.from).toBe(`${p.ipv4}:53`);
        expect(local.msg.header).toMatchObject({ id: 1, rcode: RCODE.NOERROR });
        expect(local.msg.answers.map((x) => [...x.data].join('.'))).toEqual([p.ipv4]);
        expect(resolverSaw).toEqual([]);

        const ext = await ask(2, 'example.com');
        expect(ext.from).toBe(`${p.ipv4}:53`);
        expect(ext.msg.answers.map((x) => [...x.data].join('.'))).toEqual(['198.51.100.9']);
        expect(resolverSaw).toEqual([`${a.ipv4} udp example.com`]);
        await app.value.close();

        // TCP: both kinds on one connection.
        const conn = await sockets.connectTcp({
          netns: netnsId(a.netnsPath),
          family: 4,
          dst: resolver,
          timeoutMs: 3000,
        });
        if (!conn.ok) throw new Error(conn.message);
        await conn.value.write(Uint8Array.from([...frame(query(3, podName)), ...frame(query(4, 'example.org'))]));
        const reader = new FrameReader();
        const got: DnsMessage[] = [];
        while (got.length < 2) {
          const x = await within(conn.value.read(), 5000, 'TCP DNS reply');
          if (x.done) break;
          got.push(...reader.push(x.bytes).map(decodeMessage));
        }
        conn.value.close();
        expect(got.map((m) => [m.header.id, m.answers.map((x) => [...x.data].join('.'))])).toEqual([
          [3, [p.ipv4]],
          [4, ['198.51.100.9']],
        ]);
        expect(resolverSaw).toEqual([`${a.ipv4} udp example.com`, `${a.ipv4} tcp example.org`]);
        expect(dnsLog.records.map((r) => [r.event, r.proto])).toEqual([
          ['answered-locally', 'udp'],
          ['forwarded', 'udp'],
          ['answered-locally', 'tcp'],
          ['forwarded', 'tcp'],
        ]);
      } finally {
        await proxy.shutdown('immediate');
        await rs.sock.close();
        await rt.value.close();
      }
    });
  });
}
