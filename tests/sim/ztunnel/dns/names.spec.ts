import { test, expect } from '@playwright/test';
import { JsonLinesDnsLog, DnsCounters, MemoryDnsLog } from '../../../../impl/ztunnel/dns/dns-log.js';
import { firstOf, podIpNames, staticNames } from '../../../../impl/ztunnel/dns/name-source.js';
import { VirtualClock } from '../../../../sim/time/virtual-clock.js';
import { FakeWorkloads, PODS, workloadOf } from '../../../../sim/proxy-mesh/proxy-mesh.js';

test('pod-IP names: dashed IPv4 and IPv6 in the right namespace under the cluster domain', () => {
  const w = new FakeWorkloads();
  for (const p of PODS) w.all.set(`uid-${p.name}`, workloadOf(p));
  w.all.set('uid-v6', { ...workloadOf(PODS[0]!), uid: 'uid-v6', ips: ['fd00::5'] });
  const names = podIpNames(w, 'Cluster.Local');
  expect(names.lookup('10-244-1-6.default.pod.cluster.local', 4)).toEqual(['10.244.1.6']);
  expect(names.lookup('10-244-1-6.default.pod.cluster.local', 6)).toEqual([]); // known, no AAAA
  expect(names.lookup('fd00--5.default.pod.cluster.local', 6)).toEqual(['fd00::5']);
  expect(names.lookup('10-244-1-6.kube-system.pod.cluster.local', 4)).toBeUndefined(); // wrong namespace
  expect(names.lookup('10-244-9-9.default.pod.cluster.local', 4)).toBeUndefined(); // unknown IP
  expect(names.lookup('10-244-1-6.default.pod.example.org', 4)).toBeUndefined(); // other domain
  expect(names.lookup('x.10-244-1-6.default.pod.cluster.local', 4)).toBeUndefined();
  const both = firstOf(names, staticNames({ 'Web.default.svc.cluster.local.': ['10.96.0.20', 'fd00:96::20'] }));
  expect(both.lookup('web.default.svc.cluster.local', 6)).toEqual(['fd00:96::20']);
  expect(both.lookup('example.com', 4)).toBeUndefined();
});

test('the DNS log writes one versioned JSON line per request with the clock time; counters count by event', () => {
  const clock = new VirtualClock();
  clock.advance(1234);
  const lines: string[] = [];
  const mem = new MemoryDnsLog();
  const counters = new DnsCounters(new JsonLinesDnsLog(clock, (l) => lines.push(l)));
  const both = {
    record: (r: Parameters<MemoryDnsLog['record']>[0]): void => {
      counters.record(r);
      mem.record(r);
    },
  };
  both.record({
    event: 'forwarded',
    pod: 'default/a',
    proto: 'udp',
    client: '10.244.1.5:40000',
    question: { name: 'example.com', type: 'A' },
    upstream: '10.96.0.10:53',
    rcode: 0,
  });
  both.record({ event: 'malformed', pod: 'default/a', proto: 'tcp', client: '10.244.1.5:40001', reason: 'x' });
  expect(lines.every((l) => l.endsWith('\n'))).toBe(true);
  expect(JSON.parse(lines[0]!)).toEqual({
    v: 1,
    time: 1234,
    kind: 'dns',
    event: 'forwarded',
    pod: 'default/a',
    proto: 'udp',
    client: '10.244.1.5:40000',
    question: { name: 'example.com', type: 'A' },
    upstream: '10.96.0.10:53',
    rcode: 0,
  });
  expect([...counters.byEvent]).toEqual([
    ['forwarded', 1],
    ['malformed', 1],
  ]);
  expect(mem.records.length).toBe(2);
});
