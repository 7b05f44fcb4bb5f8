/**
 * The sim World answers attacker-shaped requests with outcomes, never exceptions: a port
 * conflict between hostNetwork apps is a failed listen (the second app runs without it), and a
 * send whose address families disagree is an error outcome (EAFNOSUPPORT), as the socket calls
 * would answer.
 */
import { test, expect } from '@playwright/test';
import { createSimWorld } from '../../../scenarios/worlds/sim-world.js';
import type { PodRef } from '../../../scenarios/world.js';

const h1: PodRef = { namespace: 'plain', name: 'h1' };
const h2: PodRef = { namespace: 'plain', name: 'h2' };

test('two hostNetwork pods binding the same port on a node: both run, the second listen fails with EADDRINUSE, connections reach the first', async () => {
  const w = await createSimWorld({
    nodes: 2,
    profile: 'strict',
    kernelVersion: '6.1',
    ipv6: true,
    dnsCapture: false,
    seed: 5,
  });
  try {
    await w.createNamespace('plain');
    const app = { uid: 1000, caps: [], tcpPorts: [8080], udpPorts: [9999] };
    const o1 = await w.createPod({ ...h1, node: 'node-0', hostNetwork: true, app });
    const o2 = await w.createPod({ ...h2, node: 'node-0', hostNetwork: true, app });
    expect(o1.started).toBe(true);
    expect(o2.started).toBe(true);
    // v4 and v6, TCP and UDP: every listen of the second app conflicts with the first's.
    expect(w.failedListens.filter((f) => f.startsWith('plain/h2 ')).sort()).toEqual([
      'plain/h2 tcp 0.0.0.0:8080: EADDRINUSE',
      'plain/h2 tcp [::]:8080: EADDRINUSE',
      'plain/h2 udp 0.0.0.0:9999: EADDRINUSE',
      'plain/h2 udp [::]:9999: EADDRINUSE',
    ]);
    expect(w.failedListens.some((f) => f.startsWith('plain/h1 '))).toBe(false);
    const r = await w.connect({ kind: 'outside' }, { kind: 'pod', pod: h2, port: 8080 });
    expect(r.outcome).toBe('established');
    expect(r.deliveries.map((d) => d.pod.name)).toEqual(['h1']);
    // A hostNetwork app on the other node has the port to itself.
    const h3: PodRef = { namespace: 'plain', name: 'h3' };
    await w.createPod({ ...h3, node: 'node-1', hostNetwork: true, app });
    expect(w.failedListens.some((f) => f.startsWith('plain/h3 '))).toBe(false);
    const r3 = await w.connect({ kind: 'outside' }, { kind: 'pod', pod: h3, port: 8080 });
    expect(r3.deliveries.map((d) => d.pod.name)).toEqual(['h3']);
  } finally {
    await w.close();
  }
});

test('address families that disagree are an error outcome (EAFNOSUPPORT / EINVAL), for raw, TCP and UDP, not an exception', async () => {
  const w = await createSimWorld({
    nodes: 2,
    profile: 'strict',
    kernelVersion: '6.1',
    ipv6: true,
    dnsCapture: false,
    seed: 5,
  });
  try {
    await w.createNamespace('plain');
    const p = await w.createPod({
      namespace: 'plain',
      name: 'p',
      node: 'node-0',
      app: { uid: 0, caps: ['NET_RAW'], tcpPorts: [8080] },
    });
    const v4 = p.ips.find((ip) => !ip.includes(':'))!;
    const v6 = p.ips.find((ip) => ip.includes(':'))!;
    const host = { kind: 'host' as const, node: 'node-1', uid: 0, caps: ['NET_RAW' as const] };
    const cases = [
      { opts: { raw: true, family: 6 as const }, ip: v4, want: /^sendto\(AF_PACKET\): EAFNOSUPPORT/ },
      {
        opts: { raw: true, family: 6 as const, proto: 'udp' as const },
        ip: v4,
        want: /^sendto\(AF_PACKET\): EAFNOSUPPORT/,
      },
      { opts: { raw: true, family: 4 as const }, ip: v6, want: /^sendto\(AF_PACKET\): EAFNOSUPPORT/ },
      { opts: { family: 6 as const }, ip: v4, want: /^connect: EAFNOSUPPORT/ },
      { opts: { family: 4 as const, proto: 'udp' as const }, ip: v6, want: /^connect: EAFNOSUPPORT/ },
      { opts: { sourceIp: v6 }, ip: v4, want: /^bind: EAFNOSUPPORT/ },
      { opts: {}, ip: 'not-an-ip', want: /^connect: EINVAL/ },
    ];
    for (const c of cases) {
      const r = await w.connect(host, { kind: 'ip', ip: c.ip, port: 8080 }, c.opts);
      expect(r.outcome, JSON.stringify(c)).toBe('error');
      expect(r.error, JSON.stringify(c)).toMatch(c.want);
      expect(r.deliveries).toEqual([]);
    }
    // The matching family still works (the check does not refuse good sends).
    const ok = await w.connect(host, { kind: 'ip', ip: v6, port: 8080 }, { raw: true, family: 6 });
    expect(ok.outcome).toBe('delivered');
  } finally {
    await w.close();
  }
});

test('a raw v6 send in a v4-only world is an outcome, not an exception', async () => {
  const w = await createSimWorld({
    nodes: 2,
    profile: 'strict',
    kernelVersion: '6.1',
    ipv6: false,
    dnsCapture: false,
    seed: 5,
  });
  try {
    const r = await w.connect(
      { kind: 'host', node: 'node-0', uid: 0, caps: ['NET_RAW'] },
      { kind: 'ip', ip: 'fd00::1', port: 8080 },
      { raw: true },
    );
    expect(['error', 'not-delivered']).toContain(r.outcome);
    const t = await w.connect(
      { kind: 'host', node: 'node-0', uid: 0, caps: [] },
      { kind: 'ip', ip: 'fd00::1', port: 8080 },
    );
    expect(['error', 'unreachable', 'timeout']).toContain(t.outcome);
  } finally {
    await w.close();
  }
});
