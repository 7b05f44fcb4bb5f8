/**
 * The probe's AF_PACKET attempt (probe-protocol `raw-send`, native packetSend/packetRecv) on the
 * real kernel, in a private cluster: without CAP_NET_RAW the packet socket is refused with EPERM
 * (uid 1000 without capabilities, and root with NET_ADMIN only); with it, a crafted UDP datagram
 * reaches a listener in another pod with the crafted source, and a crafted TCP SYN is answered
 * with a SYN-ACK by a listening port and with a RST by a closed one — over IPv4 and IPv6.
 */
import { test, expect } from '@playwright/test';
import { netnsWorld } from '../../worlds.js';
import { withCluster } from '../../../e2e/netns/cluster.js';
import { ipIn } from '../../../e2e/netns/ip.js';
import { ProbePool, ROOT_ADMIN, type ProbeOwner } from '../../../e2e/netns/probe.js';
import type { DatagramEvent, ProbeEvent, RawSendOutcome, RawSendRequest } from '../../../e2e/netns/probe-protocol.js';

const w = netnsWorld();
test.skip(!w.available, w.reason);
test.setTimeout(120_000);

const TCP = { 4: 8080, 6: 8086 } as const;
const UDP = { 4: 5353, 6: 5356 } as const;
const NET_RAW: ProbeOwner = { uid: 0, gid: 0, caps: ['NET_RAW'] };

test('AF_PACKET from a pod: EPERM without CAP_NET_RAW; with it UDP is delivered with the crafted source and a SYN gets SYN-ACK (open) or RST (closed), v4 and v6', async () => {
  const pool = new ProbePool();
  const pids: number[] = [];
  try {
    await withCluster({ nodes: 1 }, async (c) => {
      const a = await c.addPod('node-0', 'a');
      const b = await c.addPod('node-0', 'b');
      // The next hop of a's frames is its node-side veth (the builder's gateway address lives there).
      const gwMac = (
        JSON.parse(await ipIn(c.nodes[0]!.netns, ['-j', 'link', 'show', a.hostVeth!])) as { address: string }[]
      )[0]!.address;
      const listener = await pool.get(b.netns, ROOT_ADMIN);
      for (const [family, addr] of [
        [4, '0.0.0.0'],
        [6, '::'],
      ] as const) {
        // Own ports per family: a '::' socket here is not v6-only and would take the v4 port too.
        await listener.request({
          op: 'listen',
          name: `tcp${family}`,
          proto: 'tcp',
          family,
          address: addr,
          port: TCP[family],
          mark: undefined,
          transparent: false,
          reuseport: false,
        });
        await listener.request({
          op: 'listen',
          name: `udp${family}`,
          proto: 'udp',
          family,
          address: addr,
          port: UDP[family],
          mark: undefined,
          transparent: false,
          reuseport: false,
        });
      }
      const send = async (
        owner: ProbeOwner,
        req: Omit<RawSendRequest, 'op' | 'ifname' | 'dstMac' | 'timeoutMs'>,
      ): Promise<RawSendOutcome> =>
        (await (
          await pool.get(a.netns, owner)
        ).request({ op: 'raw-send', ifname: 'eth0', dstMac: gwMac, timeoutMs: 2000, ...req })) as RawSendOutcome;

      for (const family of [4, 6] as const) {
        const src = family === 4 ? a.ipv4! : a.ipv6!;
        const dst = family === 4 ? b.ipv4! : b.ipv6!;
        for (const owner of [
          { uid: 1000, gid: 1000, caps: [] },
          { uid: 0, gid: 0, caps: ['NET_ADMIN'] },
        ]) {
          const denied = await send(owner, {
            tag: 'x',
            proto: 'udp',
            source: src,
            sourcePort: 40000,
            address: dst,
            port: UDP[family],
          });
          expect(denied).toMatchObject({ result: 'error', code: 'EPERM', call: 'socket' });
        }
        pool.events.drain();
        const tag = `raw-udp-v${family}`;
        expect(
          (await send(NET_RAW, { tag, proto: 'udp', source: src, sourcePort: 40001, address: dst, port: UDP[family] }))
            .result,
        ).toBe('sent');
        const dg = await pool.events.take(
          (e: ProbeEvent): e is DatagramEvent => e.ev === 'datagram' && e.tag === tag,
          3000,
        );
        expect(dg?.listener).toBe(`udp${family}`);
        expect(dg?.peer).toBe(family === 4 ? `${src}:40001` : `[${src}]:40001`);
        expect(
          (
            await send(NET_RAW, {
              tag: 's',
              proto: 'tcp',
              source: src,
              sourcePort: 40002,
              address: dst,
              port: TCP[family],
            })
          ).result,
        ).toBe('syn-ack');
        expect(
          (
            await send(NET_RAW, {
              tag: 's',
              proto: 'tcp',
              source: src,
              sourcePort: 40003,
              address: dst,
              port: TCP[family] + 1,
            })
          ).result,
        ).toBe('rst');
      }
      pids.push(...(await pool.pids()));
      await pool.stopAll();
    });
    // withCluster has verified that no namespace is left; the probes are gone too.
    expect(pids.length).toBe(4); // b's listener; a as uid 1000, as root with NET_ADMIN, as root with NET_RAW
    expect(
      pids.filter((pid) => {
        try {
          process.kill(pid, 0);
          return true;
        } catch {
          return false;
        }
      }),
    ).toEqual([]);
  } finally {
    await pool.stopAll();
  }
});
