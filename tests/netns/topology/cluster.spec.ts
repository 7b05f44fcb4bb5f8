/**
 * The netns cluster builder on the real kernel: a 2-node, 4-pod dual-stack topology carries TCP
 * where the design says it should (pod to pod on one node and across nodes, outside and node to
 * pod), without NAT, and never touches the root network namespace.
 */
import { test, expect } from '@playwright/test';
import { netnsWorld } from '../../worlds.js';
import { withCluster } from '../../../e2e/netns/cluster.js';
import { acceptedBy, connectFrom, startListener } from '../../../e2e/netns/tcp-probe.js';
import { rootSnapshot } from '../../../e2e/netns/root-snapshot.js';
import { ipIn } from '../../../e2e/netns/ip.js';

const w = netnsWorld();
test.skip(!w.available, w.reason);

test('2 nodes x 2 pods: addresses follow the plan, TCP v4 and v6 crosses the topology without NAT, root netns untouched', async () => {
  const rootBefore = await rootSnapshot();
  await withCluster({ nodes: 2 }, async (c) => {
    const a = await c.addPod('node-0', 'a');
    const b = await c.addPod('node-0', 'b');
    const d = await c.addPod('node-1', 'd');
    const e = await c.addPod('node-1', 'e');
    expect([a.ipv4, b.ipv4, d.ipv4, e.ipv4]).toEqual(['10.244.0.2', '10.244.0.3', '10.244.1.2', '10.244.1.3']);
    expect([a.ipv6, d.ipv6]).toEqual(['fd00:10:244::2', 'fd00:10:244:1::2']);
    for (const ns of [a, b, d, e]
      .map((p) => p.netns)
      .concat(
        c.nodes.map((n) => n.netns),
        [c.outside.netns, c.fabric.netns],
      )) {
      expect(ns.startsWith(c.prefix)).toBe(true);
    }
    // The pod's own view: its /32 on eth0 and a default route via the node gateway.
    expect(await ipIn(a.netns, ['-4', '-o', 'addr', 'show', 'dev', 'eth0'])).toContain('inet 10.244.0.2/32');
    expect(await ipIn(a.netns, ['route', 'show', 'default'])).toContain('default via 10.244.0.1 dev eth0');
    expect(await ipIn(c.nodes[0]!.netns, ['route', 'show', '10.244.1.0/24'])).toContain('via 192.0.2.11');

    // Each listener greets with its own tag, so a reply proves which socket accepted.
    const lb = await startListener(c, b.netns, '0.0.0.0', 8080, 'b');
    const ld = await startListener(c, d.netns, '0.0.0.0', 8080, 'd');
    const ld6 = await startListener(c, d.netns, '::', 8086, 'd6');
    const le = await startListener(c, e.netns, '0.0.0.0', 8080, 'e');

    expect(await connectFrom(c, a.netns, b.ipv4!, 8080)).toBe('b 10.244.0.3 8080'); // same node
    expect(await connectFrom(c, a.netns, d.ipv4!, 8080)).toBe('d 10.244.1.2 8080'); // across nodes
    expect(await connectFrom(c, b.netns, e.ipv4!, 8080)).toBe('e 10.244.1.3 8080'); // across nodes, other pair
    expect(await connectFrom(c, c.outside.netns, d.ipv4!, 8080)).toBe('d 10.244.1.2 8080'); // outside -> pod
    expect(await connectFrom(c, c.nodes[0]!.netns, d.ipv4!, 8080)).toBe('d 10.244.1.2 8080'); // node -> remote pod
    expect(await connectFrom(c, a.netns, d.ipv6!, 8086)).toBe('d6 fd00:10:244:1::2 8086'); // v6 across nodes
    expect(await connectFrom(c, c.outside.netns, d.ipv6!, 8086)).toBe('d6 fd00:10:244:1::2 8086'); // v6 outside -> pod
    // A port nobody listens on is refused, not silently accepted elsewhere.
    expect(await connectFrom(c, a.netns, d.ipv4!, 9999)).toBe('ERROR ECONNREFUSED');

    // Sources arrive unchanged: pods, the outside and the node address are seen as themselves.
    expect(acceptedBy(lb).map((x) => x.remote)).toEqual(['10.244.0.2']);
    expect(acceptedBy(ld).map((x) => x.remote)).toEqual(['10.244.0.2', '203.0.113.10', '192.0.2.10']);
    expect(acceptedBy(ld6).map((x) => x.remote)).toEqual(['fd00:10:244::2', 'fd00:203::10']);
    expect(acceptedBy(le).map((x) => x.remote)).toEqual(['10.244.0.3']);
  });
  expect(await rootSnapshot()).toEqual(rootBefore);
});

test('a v4-only pod has no global IPv6 address and no v6 default route', async () => {
  await withCluster({ nodes: 1 }, async (c) => {
    const p = await c.addPod('node-0', 'v4only', { ipv6: false });
    expect(p.ipv6).toBeUndefined();
    expect(await ipIn(p.netns, ['-6', '-o', 'addr', 'show', 'scope', 'global'])).toBe('');
    expect(await ipIn(p.netns, ['-6', 'route', 'show', 'default'])).toBe('');
    expect(await ipIn(p.netns, ['-4', '-o', 'addr', 'show', 'dev', 'eth0'])).toContain('inet 10.244.0.2/32');
  });
});

test('removePod takes the pod netns and its node-side veth away; other pods keep working; addresses are not reused', async () => {
  await withCluster({ nodes: 1 }, async (c) => {
    const a = await c.addPod('node-0', 'a');
    const b = await c.addPod('node-0', 'b');
    const lb = await startListener(c, b.netns, '0.0.0.0', 8080, 'b');
    const listenerInA = await startListener(c, a.netns, '0.0.0.0', 8080, 'a');
    await c.removePod('a');
    expect(listenerInA.running).toBe(false);
    expect(await c.remaining()).not.toContain(a.netns);
    expect(await ipIn(c.nodes[0]!.netns, ['-o', 'link', 'show'])).not.toContain(`${a.hostVeth}@`);
    expect(() => c.pod('a')).toThrow(/no pod "a"/);
    const a2 = await c.addPod('node-0', 'a');
    expect(a2.ipv4).toBe('10.244.0.4');
    expect(await connectFrom(c, a2.netns, b.ipv4!, 8080)).toBe('b 10.244.0.3 8080');
    expect(acceptedBy(lb).map((x) => x.remote)).toEqual(['10.244.0.4']);
  });
});

test('a process spawned as a uid with a capability set runs with exactly that identity, and its pid is the tracked one', async () => {
  await withCluster({ nodes: 1 }, async (c) => {
    const p = await c.addPod('node-0', 'a');
    const script = `const fs=require('node:fs');process.stdout.write('PID '+process.pid+'\\n'+fs.readFileSync('/proc/self/status','utf8'));`;
    const limited = c.spawn(p.netns, [process.execPath, '-e', script], { uid: 1000, gid: 1001, caps: ['net_admin'] });
    await limited.exited;
    expect(limited.stdout).toContain(`PID ${limited.pid}\n`);
    expect(limited.stdout).toMatch(/^Uid:\s+1000\s+1000\s+1000\s+1000$/m);
    expect(limited.stdout).toMatch(/^Gid:\s+1001\s+1001\s+1001\s+1001$/m);
    expect(limited.stdout).toMatch(/^Groups:\s*$/m);
    expect(limited.stdout).toMatch(/^CapEff:\s+0000000000001000$/m); // CAP_NET_ADMIN = bit 12
    expect(limited.stdout).toMatch(/^CapBnd:\s+0000000000001000$/m);

    const none = c.spawn(p.netns, [process.execPath, '-e', script], { uid: 1000 });
    await none.exited;
    expect(none.stdout).toMatch(/^CapEff:\s+0000000000000000$/m);

    // It really is inside the pod netns: it sees the pod's eth0 address.
    const addrs = c.spawn(
      p.netns,
      [
        process.execPath,
        '-e',
        `process.stdout.write(JSON.stringify(require('node:os').networkInterfaces().eth0.map(a=>a.address)))`,
      ],
      { uid: 1000 },
    );
    await addrs.exited;
    expect(JSON.parse(addrs.stdout)).toContain('10.244.0.2');
  });
});

test("spawn refuses namespaces that are not the cluster's", async () => {
  await withCluster({ nodes: 1 }, async (c) => {
    expect(() => c.spawn('al-someone-else-node-0', ['true'])).toThrow(/does not belong to cluster/);
  });
});
