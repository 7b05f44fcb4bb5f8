/**
 * The nftables backend's Linux adapter (impl/linux/nft-rules.ts) on the real kernel, with the
 * `upstream` profile's in-pod nftables document (impl/node-agent/nftables/upstream-rules.ts):
 * the kernel takes it whole, the REDIRECT captures a pod's outbound TCP on 15001 (v4 and v6),
 * a second apply changes nothing, a rule someone adds shows as drift and the next apply repairs
 * it, a document the kernel rejects changes nothing, and remove leaves no table.
 */
import { test, expect } from '@playwright/test';
import { withCluster } from '../../../e2e/netns/cluster.js';
import { execIn } from '../../../e2e/netns/ip.js';
import { acceptedBy, connectFrom, startListener } from '../../../e2e/netns/tcp-probe.js';
import { netnsId, type NetnsId } from '../../../impl/api/ids.js';
import { LinuxNftRules } from '../../../impl/linux/nft-rules.js';
import type { NftTableRef } from '../../../impl/api/nft-tables.js';
import { documentTables, renderNft, type NftDocument } from '../../../impl/node-agent/nftables/nft-document.js';
import { buildUpstreamHostNft, buildUpstreamHostSetsNft } from '../../../impl/node-agent/nftables/upstream-rules.js';
import { nftTool } from '../../worlds.js';
import { UPSTREAM_INPOD_NFT } from './upstream-inpod-plan.js';

const t = nftTool();
test.skip(!t.available, t.reason);

const linux = new LinuxNftRules();
/** The adapter with documents as the agent renders them. */
const nft = {
  apply: (id: NetnsId, doc: NftDocument) => linux.apply(id, renderNft(doc), documentTables(doc)),
  read: (id: NetnsId, tables: readonly NftTableRef[]) => linux.read(id, tables),
  remove: (id: NetnsId, tables: readonly NftTableRef[]) => linux.remove(id, tables),
};
const DOC = UPSTREAM_INPOD_NFT;
const TABLES = documentTables(DOC);
const NAT: NftTableRef = { family: 'inet', name: 'istio-ambient-nat' };

test("apply: the pod's outbound TCP goes to 15001 (v4, v6); apply again is a no-op; drift is seen and repaired; a rejected document changes nothing; remove leaves nothing", async () => {
  await withCluster({ nodes: 2 }, async (c) => {
    const a = await c.addPod('node-0', 'a');
    const d = await c.addPod('node-1', 'd');
    const id = netnsId(a.netnsPath);
    await startListener(c, d.netns, '0.0.0.0', 8080, 'app-d');
    await startListener(c, d.netns, '::', 8080, 'app-d6');
    const proxy4 = await startListener(c, a.netns, '0.0.0.0', 15001, 'proxy');
    await startListener(c, a.netns, '::', 15001, 'proxy6');
    expect(await nft.read(id, TABLES)).toEqual({
      'inet istio-ambient-nat': undefined,
      'inet istio-ambient-mangle': undefined,
      'inet istio-ambient-raw': undefined,
    });
    expect(await connectFrom(c, a.netns, d.ipv4!, 8080)).toBe('app-d 10.244.1.2 8080');

    const applied = await nft.apply(id, DOC);
    // each listing is the table's objects from `nft -j -s list ruleset`, the table first, no handles
    for (const t of TABLES) {
      const objs = JSON.parse(applied[`inet ${t.name}`]!) as Record<string, Record<string, unknown>>[];
      expect(objs[0], t.name).toEqual({ table: { family: 'inet', name: t.name } });
      expect(objs.length, t.name).toBeGreaterThan(1);
      expect(JSON.stringify(objs), t.name).not.toContain('"handle"');
    }
    expect(applied['inet istio-ambient-nat']).toMatch(/"redirect":\{"port":15001\}/);
    expect(await connectFrom(c, a.netns, d.ipv4!, 8080)).toBe('proxy 127.0.0.1 15001');
    expect(await connectFrom(c, a.netns, d.ipv6!, 8080)).toBe('proxy6 ::1 15001');
    expect(acceptedBy(proxy4).map((x) => x.remote)).toEqual(['10.244.0.2']);

    // idempotent: each table is flushed and refilled
    expect(await nft.apply(id, DOC)).toEqual(applied);
    expect(await nft.read(id, TABLES)).toEqual(applied);

    // drift: an ACCEPT someone puts ahead of the capture is a different listing; apply repairs it
    await execIn(a.netns, ['nft', 'insert', 'rule', 'inet', 'istio-ambient-nat', 'istio-output', 'accept']);
    expect(await connectFrom(c, a.netns, d.ipv4!, 8080)).toBe('app-d 10.244.1.2 8080');
    expect((await nft.read(id, TABLES))['inet istio-ambient-nat']).not.toEqual(applied['inet istio-ambient-nat']);
    expect(await nft.apply(id, DOC)).toEqual(applied);
    expect(await connectFrom(c, a.netns, d.ipv4!, 8080)).toBe('proxy 127.0.0.1 15001');

    // all or nothing: one bad rule and the whole document is refused; the applied rules stay
    const bad: NftDocument = {
      tables: DOC.tables.map((x) =>
        x.name === 'istio-ambient-raw'
          ? { ...x, rules: [...x.rules, { chain: 'istio-output', text: 'tcp dport 99999 accept' }] }
          : x,
      ),
    };
    await expect(nft.apply(id, bad)).rejects.toThrow(
      new RegExp(
        `applying the nftables rules in ${a.netnsPath} failed \\(nothing changed: nft commits a document whole\\): \`nsenter --net=${a.netnsPath} nft -f -\` exited 1: .*99999`,
        's',
      ),
    );
    expect(await nft.read(id, TABLES)).toEqual(applied);

    await nft.remove(id, TABLES);
    expect(Object.values(await nft.read(id, TABLES))).toEqual([undefined, undefined, undefined]);
    expect(await execIn(a.netns, ['nft', 'list', 'ruleset'])).toBe('');
    await nft.remove(id, TABLES); // absent: fine
    expect(await connectFrom(c, a.netns, d.ipv4!, 8080)).toBe('app-d 10.244.1.2 8080');
  });
});

test('host probe (upstream): the kubelet uid’s TCP to a probe-set member is SNATed to the probe address, other uids’ is not, and leaving the set ends it', async () => {
  await withCluster({ nodes: 1 }, async (c) => {
    const node = c.nodes[0]!;
    const nodeId = netnsId(node.netnsPath);
    const a = await c.addPod('node-0', 'a');
    const app = await startListener(c, a.netns, '0.0.0.0', 8080, 'app-a');
    const KUBELET = 4242;
    const probe = { ipv4: '169.254.7.127', ipv6: 'fd16:9254:7127:1337:ffff:ffff:ffff:ffff' };
    await nft.apply(nodeId, buildUpstreamHostSetsNft({ ipv6: true }));
    await nft.apply(nodeId, buildUpstreamHostNft({ ipv6: true, kubeletUid: KUBELET, probeSnat: probe }));
    await linux.addElement(nodeId, NAT, 'istio-inpod-probes-v4', a.ipv4!, 'pod-uid-a');
    await linux.addElement(nodeId, NAT, 'istio-inpod-probes-v4', a.ipv4!, 'pod-uid-a'); // again: fine

    expect(await connectFrom(c, node.netns, a.ipv4!, 8080, 5_000, { uid: KUBELET })).toBe('app-a 10.244.0.2 8080');
    expect(await connectFrom(c, node.netns, a.ipv4!, 8080, 5_000, { uid: 1000 })).toBe('app-a 10.244.0.2 8080');
    await linux.deleteElement(nodeId, NAT, 'istio-inpod-probes-v4', a.ipv4!);
    await linux.deleteElement(nodeId, NAT, 'istio-inpod-probes-v4', a.ipv4!); // absent: fine
    expect(await connectFrom(c, node.netns, a.ipv4!, 8080, 5_000, { uid: KUBELET })).toBe('app-a 10.244.0.2 8080');
    // the source each connection arrived from, as the pod's app saw it
    expect(acceptedBy(app).map((x) => x.remote)).toEqual([probe.ipv4, node.address.ipv4, node.address.ipv4]);

    await expect(
      linux.addElement(nodeId, NAT, 'istio-inpod-probes-v4', '10.0.0.1 }; flush ruleset; {', 'x'),
    ).rejects.toThrow('not an address');
    await nft.remove(nodeId, [NAT]);
    expect(await execIn(node.netns, ['nft', 'list', 'ruleset'])).toBe('');
  });
});
