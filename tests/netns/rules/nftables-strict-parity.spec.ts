/**
 * The `strict` profile's nftables document (the IR translated, impl/node-agent/nftables/
 * ruleset-to-nft.ts) does to a pod's traffic what its iptables plan does, on the real kernel: two
 * pods on one node, one with strict's iptables plan (exclusive), one with strict's nftables
 * document (and the same ip rule and route for the return path), the same attempts out of and
 * into each, and the same answer in both — captures to the proxy's listeners (inbound by TPROXY
 * to a transparent 15006), the proxy's own marked connections exempt, a spoofed proxy mark
 * dropped, UDP failing closed both ways. The iptables answers are asserted too, so the two cannot
 * agree by both being broken, and a positive control shows a lost rule is seen.
 */
import { test, expect } from '@playwright/test';
import { withCluster, type NetnsCluster } from '../../../e2e/netns/cluster.js';
import { ProbePool, ROOT_ADMIN, type ProbeOwner } from '../../../e2e/netns/probe.js';
import type { AcceptEvent, ConnectOutcome, DatagramEvent, ProbeEvent } from '../../../e2e/netns/probe-protocol.js';
import { netnsId } from '../../../impl/api/ids.js';
import { port } from '../../../impl/api/ports.js';
import { LinuxNetnsRules } from '../../../impl/linux/netns-rules.js';
import { LinuxNftRules } from '../../../impl/linux/nft-rules.js';
import { documentTables, renderNft } from '../../../impl/node-agent/nftables/nft-document.js';
import { inpodNftDocument } from '../../../impl/node-agent/nftables/profile-nft.js';
import { buildInpodRules, renderInpodPlan, type InpodOptions } from '../../../impl/node-agent/rule-builder.js';
import { netnsWorld, nftTool } from '../../worlds.js';

const w = netnsWorld();
const t = nftTool();
test.skip(!w.available, w.reason);
test.skip(!t.available, t.reason);
test.setTimeout(180_000);

const PROXY: ProbeOwner = { uid: 1337, gid: 1337, caps: ['NET_ADMIN', 'NET_RAW'] };
/** An app with containerd's default NET_RAW: enough for SO_MARK. */
const APP: ProbeOwner = { uid: 1000, gid: 1000, caps: ['NET_RAW'] };
const PROXY_MARK = 0x539;

const OPTIONS: InpodOptions = {
  profile: 'strict',
  proxyUid: PROXY.uid,
  probePorts: [port(9090)],
  ipv6: true,
  dnsCapture: true,
  ingressMode: false,
  virtualInterfaces: [],
};

type Pod = Awaited<ReturnType<NetnsCluster['addPod']>>;

test('strict: iptables and nftables give the same answer to every attempt out of and into the pod', async () => {
  const pool = new ProbePool();
  try {
    await withCluster({ nodes: 2 }, async (c) => {
      const ipt = await c.addPod('node-0', 'ipt');
      const nft = await c.addPod('node-0', 'nft');
      const r = await c.addPod('node-1', 'r');
      const ir = buildInpodRules(OPTIONS);
      const plan = renderInpodPlan(ir);
      const rules = new LinuxNetnsRules();
      await rules.apply(netnsId(ipt.netnsPath), plan, 'exclusive');
      const doc = inpodNftDocument(OPTIONS, ir);
      await rules.apply(netnsId(nft.netnsPath), { iptables: {}, rules: plan.rules, routes: plan.routes });
      await new LinuxNftRules().apply(netnsId(nft.netnsPath), renderNft(doc), documentTables(doc));

      const listen = async (
        netns: string,
        owner: ProbeOwner | typeof ROOT_ADMIN,
        name: string,
        proto: 'tcp' | 'udp',
        p: number,
        o: { transparent?: boolean; families?: readonly (4 | 6)[] } = {},
      ): Promise<void> => {
        const probe = await pool.get(netns, owner);
        // One `::` socket takes both families (no IPV6_V6ONLY), as the proxy's listeners do.
        for (const family of o.families ?? [6])
          await probe.request({
            op: 'listen',
            name: `${name}/${family}`,
            proto,
            family,
            address: family === 4 ? '0.0.0.0' : '::',
            port: p,
            mark: owner === PROXY ? PROXY_MARK : undefined,
            transparent: o.transparent ?? false,
            reuseport: false,
          });
      };
      await listen(r.netns, ROOT_ADMIN, 'remote-app', 'tcp', 8080);
      await listen(r.netns, ROOT_ADMIN, 'remote-dns', 'tcp', 53, { families: [4] });
      await listen(r.netns, ROOT_ADMIN, 'remote-udp', 'udp', 5000, { families: [4] });
      for (const p of [ipt, nft]) {
        await listen(p.netns, PROXY, 'outbound', 'tcp', 15001);
        await listen(p.netns, PROXY, 'inbound', 'tcp', 15006, { transparent: true });
        await listen(p.netns, PROXY, 'hbone', 'tcp', 15008);
        await listen(p.netns, PROXY, 'dns', 'tcp', 15053);
        await listen(p.netns, APP, 'app', 'tcp', 8080);
        await listen(p.netns, APP, 'app-udp', 'udp', 5000, { families: [4] });
      }

      /** Who took the attempt: a listener's role, or what the connect came to. */
      const attempt = async (
        netns: string,
        owner: ProbeOwner | typeof ROOT_ADMIN,
        proto: 'tcp' | 'udp',
        address: string,
        p: number,
        mark?: number,
      ): Promise<string> => {
        pool.events.drain();
        const tag = `t${Math.random().toString(36).slice(2, 8)}`;
        const probe = await pool.get(netns, owner);
        const out = (await probe.request({
          op: 'connect',
          tag,
          proto,
          address,
          port: p,
          mark,
          transparent: false,
          source: undefined,
          sourcePort: undefined,
          timeoutMs: 2_000,
          holdData: proto === 'tcp',
        })) as ConnectOutcome;
        if (proto === 'tcp') {
          if (out.result !== 'established') return `${out.result}${out.code ? ` ${out.code}` : ''}`;
          const acc = await pool.events.take((e: ProbeEvent): e is AcceptEvent => e.ev === 'accept', 3_000);
          await probe.request({ op: 'release', tag });
          return acc ? acc.listener.replace(/\/[46]$/, '') : 'no accept';
        }
        if (out.result === 'error') return `error ${out.code}`;
        const dg = await pool.events.take(
          (e: ProbeEvent): e is DatagramEvent => e.ev === 'datagram' && e.tag === tag,
          1_000,
        );
        return dg ? dg.listener.replace(/\/[46]$/, '') : 'not delivered';
      };

      const answers = async (p: Pod): Promise<Record<string, string>> => ({
        'out tcp v4 → remote app': await attempt(p.netns, APP, 'tcp', r.ipv4!, 8080),
        'out tcp v6 → remote app': await attempt(p.netns, APP, 'tcp', r.ipv6!, 8080),
        'out tcp → remote :53': await attempt(p.netns, APP, 'tcp', r.ipv4!, 53),
        'out → own address': await attempt(p.netns, APP, 'tcp', p.ipv4!, 8080),
        'out → 127.0.0.1': await attempt(p.netns, APP, 'tcp', '127.0.0.1', 8080),
        'out, app sets the proxy mark': await attempt(p.netns, APP, 'tcp', r.ipv4!, 8080, PROXY_MARK),
        'out, the proxy (uid and mark)': await attempt(p.netns, PROXY, 'tcp', r.ipv4!, 8080, PROXY_MARK),
        'out udp → remote': await attempt(p.netns, APP, 'udp', r.ipv4!, 5000),
        'in tcp v4 → app': await attempt(r.netns, ROOT_ADMIN, 'tcp', p.ipv4!, 8080),
        'in tcp v6 → app': await attempt(r.netns, ROOT_ADMIN, 'tcp', p.ipv6!, 8080),
        'in → 15008': await attempt(r.netns, ROOT_ADMIN, 'tcp', p.ipv4!, 15008),
        'in udp → app': await attempt(r.netns, ROOT_ADMIN, 'udp', p.ipv4!, 5000),
      });
      const viaIptables = await answers(ipt);
      expect(viaIptables).toEqual({
        'out tcp v4 → remote app': 'outbound',
        'out tcp v6 → remote app': 'outbound',
        'out tcp → remote :53': 'dns',
        'out → own address': 'app',
        'out → 127.0.0.1': 'app',
        'out, app sets the proxy mark': 'timeout', // SYN dropped; TCP retries until connect gives up
        'out, the proxy (uid and mark)': 'remote-app',
        'out udp → remote': 'error EPERM',
        'in tcp v4 → app': 'inbound',
        'in tcp v6 → app': 'inbound',
        'in → 15008': 'hbone',
        'in udp → app': 'not delivered',
      });
      expect(await answers(nft)).toEqual(viaIptables);

      // Positive control: the same comparison sees a translation that lost a rule (IPv4 TPROXY).
      const lost = {
        ...ir,
        iptables: {
          ...ir.iptables,
          ipv4: {
            ...ir.iptables.ipv4,
            rules: ir.iptables.ipv4.rules.filter((x) => x.id !== 'mangle/prert/tproxy-inbound'),
          },
        },
      };
      const broken = inpodNftDocument(OPTIONS, lost);
      await new LinuxNftRules().apply(netnsId(nft.netnsPath), renderNft(broken), documentTables(broken));
      expect(await attempt(r.netns, ROOT_ADMIN, 'tcp', nft.ipv4!, 8080)).toBe('app');
    });
  } finally {
    await pool.stopAll();
  }
});
