/** The upstream in-pod ruleset for IPv6 (ip6tables) end to end in the simulated kernel. */
import { test, expect } from '@playwright/test';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { SimKernel } from '../../../sim/kernel/kernel.js';
import { formatSockAddr, type SimSocket } from '../../../sim/kernel/socket.js';
import { renderTrace } from '../../../sim/kernel/trace.js';
import { APP, PROXY, repo } from './inpod-fixture.js';

const INPOD_V6 = fs.readFileSync(path.join(repo, 'fixtures/rules/upstream-inpod-v6.rules'), 'utf8');

function listen6(k: SimKernel, ns: string, port: number, who = APP, label = 'app', mark?: number): SimSocket {
  const s = k.socket(ns, 'tcp', 6, who, label);
  if (mark !== undefined) k.setsockopt(s, 'SO_MARK', mark);
  k.bind(s, '::', port);
  k.listen(s);
  return s;
}

function build(opts: { v6Rules?: boolean } = {}): {
  k: SimKernel;
  out: SimSocket;
  inb: SimSocket;
  appA: SimSocket;
  appB: SimSocket;
} {
  const k = new SimKernel();
  k.addNetns('node');
  k.setLink('node', 'lo', true);
  k.addBridge('node', 'cni0');
  k.addAddress('node', 'cni0', 'fd00:10:244:1::1/64');
  k.setLink('node', 'cni0', true);
  k.setForwarding('node', 6, true);
  for (const [pod, ip, dev] of [
    ['pod-a', 'fd00:10:244:1::5', 'veth-a'],
    ['pod-b', 'fd00:10:244:1::6', 'veth-b'],
  ] as const) {
    k.addNetns(pod);
    k.setLink(pod, 'lo', true);
    k.addVeth(pod, 'eth0', 'node', dev);
    k.setMaster('node', dev, 'cni0');
    k.addAddress(pod, 'eth0', `${ip}/64`);
    k.setLink(pod, 'eth0', true);
    k.setLink('node', dev, true);
    k.addRoute(pod, { dst: 'default', family: 6, via: 'fd00:10:244:1::1' });
  }
  if (opts.v6Rules ?? true) {
    k.iptablesRestore('pod-a', 6, INPOD_V6);
    k.addRule('pod-a', { family: 6, priority: 32764, fwmark: 0x111, mask: 0xfff, table: 100 });
    k.addRoute('pod-a', { dst: '::/0', type: 'local', dev: 'lo', table: 100 });
  }
  return {
    k,
    out: listen6(k, 'pod-a', 15001, PROXY, 'proxy outbound', 0x539),
    inb: listen6(k, 'pod-a', 15006, PROXY, 'proxy inbound', 0x539),
    appA: listen6(k, 'pod-a', 8080, APP, 'app-a'),
    appB: listen6(k, 'pod-b', 8080, APP, 'app-b'),
  };
}

test('IPv6 outbound TCP lands on the proxy outbound listener via REDIRECT to ::1 with the original destination', () => {
  const { k, out } = build();
  const c = k.socket('pod-a', 'tcp', 6, APP);
  const r = k.connect(c, 'fd00:10:244:1::6', 8080);
  expect(r.outcome, renderTrace(r.trace)).toBe('established');
  expect(r.listener).toBe(out);
  expect(formatSockAddr(r.server!.local!)).toBe('[::1]:15001');
  expect(formatSockAddr(k.originalDst(r.server!))).toBe('[fd00:10:244:1::6]:8080');
});

test('IPv6 inbound TCP lands on the proxy inbound listener at the ingress address', () => {
  const { k, inb } = build();
  const c = k.socket('pod-b', 'tcp', 6, APP);
  const r = k.connect(c, 'fd00:10:244:1::5', 8080);
  expect(r.outcome, renderTrace(r.trace)).toBe('established');
  expect(r.listener).toBe(inb);
  expect(formatSockAddr(r.server!.local!)).toBe('[fd00:10:244:1::5]:15006');
  expect(formatSockAddr(k.originalDst(r.server!))).toBe('[fd00:10:244:1::5]:8080');
});

test('IPv6 replies to a spoofed proxy connection return through connmark, fwmark rule and table 100', () => {
  const { k, appA } = build();
  const c = k.socket('pod-a', 'tcp', 6, PROXY, 'proxy to app');
  k.setsockopt(c, 'SO_MARK', 0x539);
  k.setsockopt(c, 'IP_TRANSPARENT', true);
  k.bind(c, 'fd00:10:244:1::6', 0);
  const r = k.connect(c, 'fd00:10:244:1::5', 8080);
  expect(r.outcome, renderTrace(r.trace)).toBe('established');
  expect(r.listener).toBe(appA);
});

test('without ip6tables rules IPv6 traffic bypasses the proxy entirely (the v4-only bypass class)', () => {
  const { k, appB } = build({ v6Rules: false });
  const c = k.socket('pod-a', 'tcp', 6, APP);
  const r = k.connect(c, 'fd00:10:244:1::6', 8080);
  expect(r.outcome).toBe('established');
  expect(r.listener).toBe(appB);
});
