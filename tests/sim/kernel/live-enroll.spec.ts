/**
 * Issue 19, 'live enrollment resets existing connections', in the simulated kernel — the twin of
 * tests/netns/rules/live-enroll.spec.ts: a TCP connection is open between pods `a` and `d` when
 * one of them is enrolled with the profile's plan (the rule builder's, applied through the sim
 * NetnsRules adapter, strict exclusively as the agent does), with the node proxy's listeners in
 * the enrolled pod. A fresh pod namespace tracks nothing (no rule needs conntrack), so the
 * capture rules pick the connection up mid-stream: its next segment is REDIRECTed to a proxy
 * listener, whose RST resets the connection — in both profiles, as upstream (istio/istio#48876).
 * When the namespace already tracked the connection, it finishes unredirected; so does one that
 * sends a segment in the commit window (after the tables that turn conntrack on, before nat).
 */
import { test, expect } from '@playwright/test';
import { netnsId } from '../../../impl/api/ids.js';
import { port } from '../../../impl/api/ports.js';
import type { Profile } from '../../../impl/api/profile.js';
import { buildInpodPlan, type InpodOptions } from '../../../impl/node-agent/rule-builder.js';
import { SimKernel } from '../../../sim/kernel/kernel.js';
import { SimNetnsRules } from '../../../sim/kernel/netns-rules-adapter.js';
import { credentials } from '../../../sim/kernel/process.js';
import type { SimSocket } from '../../../sim/kernel/socket.js';
import { renderTrace } from '../../../sim/kernel/trace.js';
import { conntrackOn, eventsOf } from './behaviour/world.js';

const APP = credentials(1000, 1000);
const PROXY = credentials(1337, 1337, ['NET_ADMIN', 'NET_RAW']);
const PROXY_MARK = 0x539;

function options(profile: Profile): InpodOptions {
  const common = { ipv6: false, dnsCapture: true, ingressMode: false, virtualInterfaces: [] };
  return profile === 'strict'
    ? { ...common, profile: 'strict', proxyUid: 1337, probePorts: [port(8080)] }
    : { ...common, profile: 'upstream' };
}

/** a (10.244.1.5) and d (10.244.1.6) on a node bridge; an app listener on d:8080. */
function twoPods(): { k: SimKernel; server: SimSocket } {
  const k = new SimKernel({ kernelVersion: '6.1' });
  k.addNetns('node');
  k.setLink('node', 'lo', true);
  k.addBridge('node', 'cni0');
  k.addAddress('node', 'cni0', '10.244.1.1/24');
  k.setLink('node', 'cni0', true);
  for (const [name, ip, dev] of [
    ['a', '10.244.1.5', 'veth-a'],
    ['d', '10.244.1.6', 'veth-d'],
  ] as const) {
    k.addNetns(name);
    k.setLink(name, 'lo', true);
    k.addVeth(name, 'eth0', 'node', dev);
    k.setMaster('node', dev, 'cni0');
    k.addAddress(name, 'eth0', `${ip}/24`);
    k.setLink(name, 'eth0', true);
    k.setLink('node', dev, true);
    k.addRoute(name, { dst: 'default', family: 4, via: '10.244.1.1' });
  }
  return { k, server: listen(k, 'd', 8080, APP, 'app') };
}

function listen(k: SimKernel, ns: string, p: number, who: typeof APP, label: string, mark?: number): SimSocket {
  const s = k.socket(ns, 'tcp', 4, who, label);
  if (mark !== undefined) k.setsockopt(s, 'SO_MARK', mark);
  // As the real proxy's listeners: transparent, so strict's TPROXY may hand them connections.
  if (who === PROXY) k.setsockopt(s, 'IP_TRANSPARENT', 1);
  k.bind(s, '0.0.0.0', p);
  k.listen(s);
  return s;
}

interface Run {
  readonly k: SimKernel;
  readonly server: SimSocket;
  readonly client: SimSocket;
  readonly after: ReturnType<SimKernel['sendTcp']>;
  readonly freshListener: string | undefined;
}

async function liveEnroll(profile: Profile, side: 'destination' | 'source', tracked: boolean): Promise<Run> {
  const { k, server } = twoPods();
  const enrolled = side === 'destination' ? 'd' : 'a';
  if (tracked) conntrackOn(k, enrolled, [4]);
  listen(k, enrolled, 15001, PROXY, 'proxy outbound', PROXY_MARK);
  listen(k, enrolled, 15006, PROXY, 'proxy inbound', PROXY_MARK);
  const client = k.socket('a', 'tcp', 4, APP, 'client');
  const r = k.connect(client, '10.244.1.6', 8080);
  expect(r.outcome, renderTrace(r.trace)).toBe('established');
  expect(r.listener).toBe(server);
  for (let i = 0; i < 5; i++) expect(k.sendTcp(client, `line ${i}`).delivered).toBe(true);
  await new SimNetnsRules(k).apply(
    netnsId(enrolled),
    buildInpodPlan(options(profile)),
    profile === 'strict' ? 'exclusive' : 'merge',
  );
  const after = k.sendTcp(client, 'after enrollment');
  const fresh = k.connect(k.socket('a', 'tcp', 4, APP, 'fresh'), '10.244.1.6', 8080);
  return { k, server, client, after, freshListener: fresh.listener?.label };
}

for (const profile of ['upstream', 'strict'] as const) {
  for (const side of ['destination', 'source'] as const) {
    test(`${profile}: enrolling the ${side} of an open connection resets it (as upstream); a new connection is captured`, async () => {
      const r = await liveEnroll(profile, side, false);
      expect(r.after.delivered, renderTrace(r.after.trace)).toBe(false);
      expect(r.after.reset, `${r.after.reason}\n${renderTrace(r.after.trace)}`).toBe(true);
      // Picked up mid-stream in the enrolled namespace and REDIRECTed to the proxy.
      const enrolled = side === 'destination' ? 'd' : 'a';
      expect(eventsOf(r.after.trace, 'conntrack').find((e) => e.ns === enrolled)).toMatchObject({
        state: 'NEW',
        direction: 'original',
      });
      const to = side === 'destination' ? '10.244.1.6:15006' : '127.0.0.1:15001';
      expect(eventsOf(r.after.trace, 'nat').find((e) => e.ns === enrolled)?.what).toBe(
        `destination 10.244.1.6:8080 -> ${to}`,
      );
      expect(r.client.state).toBe('closed');
      expect(r.server.acceptQueue[0]!.inbox.map((d) => d.payload)).not.toContain('after enrollment');
      expect(r.freshListener).toBe(side === 'destination' ? 'proxy inbound' : 'proxy outbound');
    });
  }

  test(`${profile}: when the namespace already tracked the open connection, enrollment leaves it alone (it finishes uncaptured); a new connection is captured`, async () => {
    const r = await liveEnroll(profile, 'destination', true);
    expect(r.after.delivered, renderTrace(r.after.trace)).toBe(true);
    expect(eventsOf(r.after.trace, 'nat')).toEqual([]);
    expect(r.server.acceptQueue[0]!.inbox.map((d) => d.payload)).toContain('after enrollment');
    expect(r.freshListener).toBe('proxy inbound');
  });
}

/** The `*table ... COMMIT` blocks of a restore text, by table. */
function tableBlocks(text: string): Map<string, string> {
  const out = new Map<string, string>();
  let table: string | undefined;
  let lines: string[] = [];
  for (const l of text.split('\n')) {
    const m = /^\*(\S+)$/.exec(l);
    if (m) {
      table = m[1];
      lines = [l];
    } else if (table !== undefined) {
      lines.push(l);
      if (l === 'COMMIT') {
        out.set(table, `${lines.join('\n')}\n`);
        table = undefined;
      }
    }
  }
  return out;
}

for (const profile of ['upstream', 'strict'] as const) {
  test(`${profile}: the commit window — a segment between the raw/mangle commit and the nat commit leaves the connection uncaptured`, () => {
    const { k, server } = twoPods();
    listen(k, 'd', 15006, PROXY, 'proxy inbound', PROXY_MARK);
    const client = k.socket('a', 'tcp', 4, APP, 'client');
    expect(k.connect(client, '10.244.1.6', 8080).listener).toBe(server);
    const blocks = tableBlocks(buildInpodPlan(options(profile)).iptables.ipv4!);
    const first = [...blocks]
      .filter(([t]) => t !== 'nat')
      .map(([, b]) => b)
      .join('');
    k.iptablesRestore('d', 4, first, { noflush: true });
    expect(k.sendTcp(client, 'in the window').delivered).toBe(true); // tracked now, no NAT
    k.iptablesRestore('d', 4, blocks.get('nat')!, { noflush: true });
    const after = k.sendTcp(client, 'after the nat commit');
    expect(after.delivered, renderTrace(after.trace)).toBe(true);
    expect(eventsOf(after.trace, 'nat')).toEqual([]);
    const fresh = k.connect(k.socket('a', 'tcp', 4, APP, 'fresh'), '10.244.1.6', 8080);
    expect(fresh.listener?.label).toBe('proxy inbound');
  });
}
