/**
 * The upstream in-pod ruleset (default.golden and its ip rule) end to end in the simulated kernel: every
 * path the node proxy depends on, each asserted on which socket accepted the connection, the
 * original destination that socket reads, and the source it sees.
 */
import { test, expect } from '@playwright/test';
import { formatSockAddr } from '../../../sim/kernel/socket.js';
import { renderTrace } from '../../../sim/kernel/trace.js';
import { APP, HOST, HOSTPROBE_V4, PROXY, buildInpodLab, listen } from './inpod-fixture.js';

test('outbound TCP from the app lands on the proxy outbound listener (15001) with the original destination', () => {
  const { k, proxy } = buildInpodLab();
  const c = k.socket('pod-a', 'tcp', 4, APP, 'app client');
  const r = k.connect(c, '10.244.1.6', 8080);
  expect(r.outcome, renderTrace(r.trace)).toBe('established');
  expect(r.listener).toBe(proxy.outbound);
  expect(formatSockAddr(k.originalDst(r.server!))).toBe('10.244.1.6:8080');
  expect(r.server!.remote!.addr).toEqual(c.local!.addr);
  // The app believes it talks to the real destination.
  expect(formatSockAddr(c.remote!)).toBe('10.244.1.6:8080');
});

test('inbound TCP to the pod lands on the proxy inbound listener (15006) with the original destination and the real source', () => {
  const { k, proxy } = buildInpodLab();
  const c = k.socket('pod-b', 'tcp', 4, APP, 'pod-b client');
  const r = k.connect(c, '10.244.1.5', 8080);
  expect(r.outcome, renderTrace(r.trace)).toBe('established');
  expect(r.listener).toBe(proxy.inbound);
  expect(formatSockAddr(k.originalDst(r.server!))).toBe('10.244.1.5:8080');
  expect(formatSockAddr(r.server!.remote!)).toBe(formatSockAddr(c.local!));
});

test('inbound TCP to 15008 passes to the HBONE listener unredirected', () => {
  const { k, proxy } = buildInpodLab();
  const c = k.socket('pod-b', 'tcp', 4, APP);
  const r = k.connect(c, '10.244.1.5', 15008);
  expect(r.outcome, renderTrace(r.trace)).toBe('established');
  expect(r.listener).toBe(proxy.hbone);
  expect(formatSockAddr(k.originalDst(r.server!))).toBe('10.244.1.5:15008');
});

test('a kubelet probe from the node, SNATed to 169.254.7.127 by the host rule, reaches the app directly', () => {
  const { k, appA } = buildInpodLab();
  k.ipsetRestore('node', 'create istio-inpod-probes-v4 hash:ip family inet\nadd istio-inpod-probes-v4 10.244.1.5\n');
  k.iptablesRestore('node', 4, HOSTPROBE_V4);
  const c = k.socket('node', 'tcp', 4, HOST, 'kubelet');
  const r = k.connect(c, '10.244.1.5', 8080);
  expect(r.outcome, renderTrace(r.trace)).toBe('established');
  expect(r.listener).toBe(appA);
  expect(formatSockAddr(r.server!.remote!).startsWith('169.254.7.127:')).toBe(true);
});

test('without the host probe SNAT a connection from the node is captured like any inbound connection', () => {
  const { k, proxy } = buildInpodLab();
  const c = k.socket('node', 'tcp', 4, HOST, 'kubelet');
  const r = k.connect(c, '10.244.1.5', 8080);
  expect(r.outcome, renderTrace(r.trace)).toBe('established');
  expect(r.listener).toBe(proxy.inbound);
});

test('traffic carrying the proxy mark 0x539 is not redirected', () => {
  const { k, appB } = buildInpodLab();
  const c = k.socket('pod-a', 'tcp', 4, PROXY, 'proxy upstream');
  k.setsockopt(c, 'SO_MARK', 0x539);
  const r = k.connect(c, '10.244.1.6', 8080);
  expect(r.outcome, renderTrace(r.trace)).toBe('established');
  expect(r.listener).toBe(appB);
});

test('replies to a proxy-originated inbound connection return to the proxy via connmark, fwmark rule and table 100', () => {
  const { k, appA } = buildInpodLab();
  // The proxy connects to the app on the client's behalf, spoofing the client's address.
  const c = k.socket('pod-a', 'tcp', 4, PROXY, 'proxy to app');
  k.setsockopt(c, 'SO_MARK', 0x539);
  k.setsockopt(c, 'IP_TRANSPARENT', true);
  k.bind(c, '10.244.1.6', 0);
  const r = k.connect(c, '10.244.1.5', 8080);
  expect(r.outcome, renderTrace(r.trace)).toBe('established');
  expect(r.listener).toBe(appA);
  expect(formatSockAddr(r.server!.remote!)).toBe(formatSockAddr(c.local!));
  expect(r.server!.remote!.addr).toEqual({ family: 4, value: 0x0af40106n });
});

test('without the fwmark rule the app reply to a spoofed source leaves by eth0 and the proxy connection times out', () => {
  const { k } = buildInpodLab({ ipRule: false });
  const c = k.socket('pod-a', 'tcp', 4, PROXY, 'proxy to app');
  k.setsockopt(c, 'SO_MARK', 0x539);
  k.setsockopt(c, 'IP_TRANSPARENT', true);
  k.bind(c, '10.244.1.6', 0);
  const r = k.connect(c, '10.244.1.5', 8080);
  expect(r.outcome).toBe('timeout');
  expect(r.reason).toContain('SYN-ACK');
});

test('loopback traffic inside the pod is not captured', () => {
  const { k } = buildInpodLab();
  const local = listen(k, 'pod-a', 9000, APP, 'local', { addr: '127.0.0.1' });
  const c = k.socket('pod-a', 'tcp', 4, APP);
  const r = k.connect(c, '127.0.0.1', 9000);
  expect(r.outcome, renderTrace(r.trace)).toBe('established');
  expect(r.listener).toBe(local);
});

test('calls to the pod own IP are not captured (upstream carve-out: out lo to a non-127 address)', () => {
  const { k, appA } = buildInpodLab();
  const c = k.socket('pod-a', 'tcp', 4, APP);
  const r = k.connect(c, '10.244.1.5', 8080);
  expect(r.outcome, renderTrace(r.trace)).toBe('established');
  expect(r.listener).toBe(appA);
});
