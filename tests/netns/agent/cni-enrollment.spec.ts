/**
 * Issue 6's netns-world criterion: a pod created through the real CNI chain (Debian loopback,
 * bridge + host-local, then our plugin) gets real rules from the real node agent process, and
 * its outbound TCP lands on the real node proxy's port 15001 with the right original destination
 * (read from the proxy's connection log: downstream = the client → 127.0.0.1:15001, target = where
 * the app meant to go). A pod outside the mesh is untouched and connects directly.
 */
import { test, expect } from '@playwright/test';
import { netnsWorldFactory, type NetnsWorld } from '../../../e2e/netns/world.js';
import { execIn } from '../../../e2e/netns/ip.js';
import { parseConnectionLog } from '../../../impl/ztunnel/connection-log.js';
import * as fs from 'node:fs';
import * as path from 'node:path';

const avail = netnsWorldFactory.available();
test.skip(!avail.ok, avail.reason);
test.setTimeout(120_000);

test('a pod through the real CNI chain is enrolled by the agent process and its outbound TCP reaches the proxy on 15001 with the original destination', async () => {
  const w = (await netnsWorldFactory.create({
    nodes: 1,
    profile: 'upstream',
    kernelVersion: '6.1',
    ipv6: false,
    dnsCapture: false,
    seed: 1,
  })) as NetnsWorld;
  try {
    await w.createNamespace('mesh', { 'istio.io/dataplane-mode': 'ambient' });
    await w.createNamespace('plain');
    const a = await w.createPod({ namespace: 'mesh', name: 'a', app: { uid: 1000, caps: [], tcpPorts: [8080] } });
    const b = await w.createPod({ namespace: 'plain', name: 'b', app: { uid: 1000, caps: [], tcpPorts: [9090] } });
    expect(a).toMatchObject({ phase: 'Running', started: true, annotation: 'enabled', redirected: true, served: true });
    expect(b).toMatchObject({
      phase: 'Running',
      started: true,
      annotation: undefined,
      redirected: false,
      served: false,
    });
    // The rules are in the pod's own netns, put there by the agent (not by the harness).
    const save = await execIn(w.lab.state.pods['mesh/a']!.netns!, ['iptables-save', '-t', 'nat']);
    expect(save).toContain('--to-ports 15001');

    const r = await w.connect(
      { kind: 'pod', pod: { namespace: 'mesh', name: 'a' } },
      { kind: 'pod', pod: { namespace: 'plain', name: 'b' }, port: 9090 },
    );
    expect(r.outcome).toBe('established');
    expect(r.acceptedBy).toBe('proxy-outbound');
    expect(r.acceptedIn).toEqual({ namespace: 'mesh', name: 'a' });
    const log = parseConnectionLog(
      fs.readFileSync(path.join(w.lab.nodeDir('node-0'), 'connections.jsonl'), 'utf8'),
    ).records;
    const outbound = log.find((x) => x.direction === 'outbound' && x.downstream.src.ip === a.ips[0]);
    // REDIRECT of a locally generated packet sends it to the loopback address: 127.0.0.1:15001.
    expect(outbound?.downstream.dst).toEqual({ ip: '127.0.0.1', port: 15001 });
    expect(outbound?.target).toEqual({ ip: b.ips[0], port: 9090 });
    // The proxy relayed it: b's app saw the connection, made by the proxy.
    expect(r.deliveries).toEqual([
      expect.objectContaining({ pod: { namespace: 'plain', name: 'b' }, port: 9090, viaProxy: true }),
    ]);

    // The pod outside the mesh connects directly (no proxy on its path).
    const d = await w.connect(
      { kind: 'pod', pod: { namespace: 'plain', name: 'b' } },
      { kind: 'pod', pod: { namespace: 'mesh', name: 'a' }, port: 8080 },
    );
    expect(d.proxyLog.filter((e) => e.direction === 'outbound')).toEqual([]);
  } finally {
    await w.close();
  }
});
