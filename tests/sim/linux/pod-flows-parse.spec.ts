/**
 * The Linux PodFlows adapter's reading of `ss -tnHe state connected` and `conntrack -L` (lines as
 * iproute2 6.1 and conntrack-tools 1.4.7 print them on the lab kernel), and the join of a socket
 * to its conntrack entry: an escaped connection's entry is not NATed, a captured one's reply comes
 * from the proxy's port, an inbound one was opened by the peer. Pure: no kernel needed.
 */
import { test, expect } from '@playwright/test';
import { conntrackOf, parseConntrackLine, parseSsLine } from '../../../impl/linux/pod-flows.js';

const APP = 'ESTAB 0      0      10.99.0.1:56094 10.99.0.2:8080 ino:10394755 sk:1015 cgroup:unreachable:1 <->';
const PROXY =
  'ESTAB 0      0      10.99.0.1:43918 10.99.0.2:8080 uid:1337 ino:10401829 sk:101f fwmark:0x539 cgroup:unreachable:1 <->';

test('ss lines: addresses, uid (absent = 0), fwmark, cookie; v6 and scoped addresses', () => {
  expect(parseSsLine(APP)).toEqual({
    state: 'ESTAB',
    local: { ip: '10.99.0.1', port: 56094 },
    peer: { ip: '10.99.0.2', port: 8080 },
    uid: 0,
    mark: 0,
    cookie: '1015',
  });
  expect(parseSsLine(PROXY)).toMatchObject({ uid: 1337, mark: 0x539, cookie: '101f' });
  expect(parseSsLine('ESTAB 0 0 [::ffff:10.0.0.1]:80 [fe80::1]%eth0:4000 sk:1 <->')).toMatchObject({
    local: { ip: '::ffff:10.0.0.1', port: 80 },
    peer: { ip: 'fe80::1', port: 4000 },
  });
  expect(parseSsLine('garbage')).toBeUndefined();
});

test('conntrack lines: both tuples and the mark; other zones are not the socket', () => {
  const escaped =
    'tcp      6 431999 ESTABLISHED src=10.99.0.1 dst=10.99.0.2 sport=56094 dport=8080 src=10.99.0.2 dst=10.99.0.1 sport=8080 dport=56094 [ASSURED] mark=0 use=1';
  expect(parseConntrackLine(escaped)).toEqual({
    orig: '10.99.0.1|56094|10.99.0.2|8080',
    reply: '10.99.0.2|8080|10.99.0.1|56094',
    mark: 0,
  });
  expect(parseConntrackLine(escaped.replace('mark=0', 'mark=0 zone=1'))).toBeUndefined();
  expect(parseConntrackLine('conntrack v1.4.7 (conntrack-tools): 1 flow entries have been shown.')).toBeUndefined();
});

test('join: escaped (no NAT), captured (reply from 127.0.0.1:15001), inbound (opened by the peer), none', () => {
  const sock = parseSsLine(APP)!;
  const row = (l: string) => parseConntrackLine(l)!;
  const escaped = row(
    'tcp 6 100 ESTABLISHED src=10.99.0.1 dst=10.99.0.2 sport=56094 dport=8080 src=10.99.0.2 dst=10.99.0.1 sport=8080 dport=56094 mark=0 use=1',
  );
  const captured = row(
    'tcp 6 100 ESTABLISHED src=10.99.0.1 dst=10.99.0.2 sport=56094 dport=8080 src=127.0.0.1 dst=10.99.0.1 sport=15001 dport=56094 mark=0 use=1',
  );
  const inbound = row(
    'tcp 6 100 ESTABLISHED src=10.99.0.2 dst=10.99.0.1 sport=8080 dport=56094 src=10.99.0.1 dst=10.99.0.2 sport=56094 dport=8080 mark=273 use=1',
  );
  expect(conntrackOf(sock, [escaped])).toEqual({ initiator: 'local', nat: false, mark: 0 });
  expect(conntrackOf(sock, [captured])).toEqual({ initiator: 'local', nat: true, mark: 0 });
  expect(conntrackOf(sock, [inbound])).toEqual({ initiator: 'peer', nat: false, mark: 0x111 });
  expect(conntrackOf(sock, [])).toBeUndefined();
});
