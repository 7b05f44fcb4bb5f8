/**
 * The `upstream` profile's nftables rules and its iptables rules do the same to a pod's traffic on
 * the real kernel: two pods on one node, one with upstream's iptables plan (the fixture of
 * tests/netns/rules/apply.spec.ts), one with our nftables document, the same connection
 * attempts out of and into each, and the same listener answers in both — the proxy's outbound
 * 15001, inbound 15006, HBONE 15008 and DNS 15053 where upstream captures, the app where it
 * does not.
 */
import { test, expect } from '@playwright/test';
import { withCluster } from '../../../e2e/netns/cluster.js';
import { connectFrom, startListener } from '../../../e2e/netns/tcp-probe.js';
import { netnsId } from '../../../impl/api/ids.js';
import { LinuxNetnsRules } from '../../../impl/linux/netns-rules.js';
import { LinuxNftRules } from '../../../impl/linux/nft-rules.js';
import { documentTables, renderNft } from '../../../impl/node-agent/nftables/nft-document.js';
import { nftTool } from '../../worlds.js';
import { UPSTREAM_INPOD_NFT, UPSTREAM_INPOD_PLAN } from './upstream-inpod-plan.js';

const t = nftTool();
test.skip(!t.available, t.reason);

const DOC = UPSTREAM_INPOD_NFT;

test('iptables and nftables (upstream): the same listener answers every attempt out of and into the pod', async () => {
  await withCluster({ nodes: 2 }, async (c) => {
    const ipt = await c.addPod('node-0', 'ipt');
    const nft = await c.addPod('node-0', 'nft');
    const r = await c.addPod('node-1', 'r');
    for (const [host, port, tag] of [
      ['0.0.0.0', 8080, 'remote-app'],
      ['::', 8080, 'remote-app'],
      ['0.0.0.0', 53, 'remote-dns'],
    ] as const)
      await startListener(c, r.netns, host, port, tag);
    for (const p of [ipt, nft])
      for (const [port, tag] of [
        [15001, 'outbound'],
        [15006, 'inbound'],
        [15008, 'hbone'],
        [15053, 'dns'],
        [8080, 'app'],
      ] as const) {
        await startListener(c, p.netns, '0.0.0.0', port, tag);
        await startListener(c, p.netns, '::', port, tag);
      }
    await new LinuxNetnsRules().apply(netnsId(ipt.netnsPath), UPSTREAM_INPOD_PLAN);
    await new LinuxNftRules().apply(netnsId(nft.netnsPath), renderNft(DOC), documentTables(DOC));

    const answers = async (p: typeof ipt): Promise<Record<string, string>> => {
      const first = (s: string): string => s.split(' ')[0]!;
      return {
        'out tcp v4 → remote app': first(await connectFrom(c, p.netns, r.ipv4!, 8080)),
        'out tcp v6 → remote app': first(await connectFrom(c, p.netns, r.ipv6!, 8080)),
        'out tcp → remote :53': first(await connectFrom(c, p.netns, r.ipv4!, 53)),
        'out → own address': first(await connectFrom(c, p.netns, p.ipv4!, 8080)),
        'out → 127.0.0.1': first(await connectFrom(c, p.netns, '127.0.0.1', 8080)),
        'in tcp v4 → app': first(await connectFrom(c, r.netns, p.ipv4!, 8080)),
        'in tcp v6 → app': first(await connectFrom(c, r.netns, p.ipv6!, 8080)),
        'in → 15008': first(await connectFrom(c, r.netns, p.ipv4!, 15008)),
      };
    };
    const viaIptables = await answers(ipt);
    expect(viaIptables).toEqual({
      'out tcp v4 → remote app': 'outbound',
      'out tcp v6 → remote app': 'outbound',
      'out tcp → remote :53': 'dns',
      'out → own address': 'app',
      'out → 127.0.0.1': 'app',
      'in tcp v4 → app': 'inbound',
      'in tcp v6 → app': 'inbound',
      'in → 15008': 'hbone',
    });
    expect(await answers(nft)).toEqual(viaIptables);
  });
});
