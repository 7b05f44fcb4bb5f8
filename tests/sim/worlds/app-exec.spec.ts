/**
 * World.appExec on the simulator: an app acting on its own pod netns, as itself. The flush
 * needs NET_ADMIN (EPERM otherwise) and removes the pod's redirection until the agent's next
 * repair pass; a listener on a proxy port conflicts with the proxy's exactly as bind(2) does.
 */
import { test, expect } from '@playwright/test';
import { createSimWorld, type SimMeshWorld } from '../../../scenarios/worlds/sim-world.js';
import type { AppSpec, PodObservation, PodRef, Profile } from '../../../scenarios/world.js';
import { expectHijackVerdict, squatInboundPortWithoutCapabilities } from '../../port-hijack.js';

const a: PodRef = { namespace: 'mesh', name: 'a' };
const b: PodRef = { namespace: 'mesh', name: 'b' };
const q: PodRef = { namespace: 'plain', name: 'q' };

async function cluster(aApp: AppSpec, profile: Profile = 'strict'): Promise<SimMeshWorld> {
  const w = await createSimWorld({
    nodes: 2,
    profile,
    kernelVersion: '6.1',
    ipv6: false,
    dnsCapture: false,
    seed: 5,
  });
  await w.createNamespace('mesh', { 'istio.io/dataplane-mode': 'ambient' });
  await w.createNamespace('plain');
  await w.createPod({ ...a, node: 'node-0', app: aApp });
  await w.createPod({ ...b, node: 'node-1', app: { uid: 1000, caps: [], tcpPorts: [8080] } });
  await w.createPod({ ...q, node: 'node-1', app: { uid: 1000, caps: [], tcpPorts: [8080] } });
  return w;
}

const obs = (all: readonly PodObservation[], ref: PodRef): PodObservation =>
  all.find((x) => x.name === ref.name && x.namespace === ref.namespace)!;

test('iptables-flush without NET_ADMIN (root without capabilities) fails with EPERM and the pod stays redirected', async () => {
  const w = await cluster({ uid: 0, caps: [], tcpPorts: [8080] });
  try {
    const r = await w.appExec(a, { kind: 'iptables-flush' });
    expect(r.ok).toBe(false);
    expect(r.error).toContain('EPERM');
    expect(obs(await w.pods(), a).redirected).toBe(true);
    const c = await w.connect({ kind: 'pod', pod: a }, { kind: 'pod', pod: q, port: 8080 });
    expect(c.acceptedBy).toBe('proxy-outbound');
  } finally {
    await w.close();
  }
});

test('iptables-flush with NET_ADMIN removes the redirection: the app reaches a pod outside the mesh directly, until the agent repairs the rules', async () => {
  const w = await cluster({ uid: 0, caps: ['NET_ADMIN'], tcpPorts: [8080] });
  try {
    expect(await w.appExec(a, { kind: 'iptables-flush' })).toEqual({ ok: true });
    expect(obs(await w.pods(), a).redirected).toBe(false);
    const bypass = await w.connect({ kind: 'pod', pod: a }, { kind: 'pod', pod: q, port: 8080 });
    expect(bypass.acceptedBy).toBe('app');
    expect(bypass.deliveries.some((d) => d.pod.name === 'q' && !d.viaProxy)).toBe(true);
    await w.settle();
    expect(obs(await w.pods(), a).redirected).toBe(true);
    const after = await w.connect({ kind: 'pod', pod: a }, { kind: 'pod', pod: q, port: 8080 });
    expect(after.acceptedBy).toBe('proxy-outbound');
  } finally {
    await w.close();
  }
});

test('listen on a proxy port the proxy holds fails with EADDRINUSE, with or without SO_REUSEPORT (another uid)', async () => {
  const w = await cluster({ uid: 1000, caps: [], tcpPorts: [8080] });
  try {
    const plain = await w.appExec(a, { kind: 'listen', port: 15006 });
    expect(plain.ok).toBe(false);
    expect(plain.error).toContain('EADDRINUSE');
    const reuse = await w.appExec(a, { kind: 'listen', port: 15001, reusePort: true });
    expect(reuse.ok).toBe(false);
    expect(reuse.error).toContain('EADDRINUSE');
    // A free port is fine: the action itself works.
    expect(await w.appExec(a, { kind: 'listen', port: 9000 })).toEqual({ ok: true });
  } finally {
    await w.close();
  }
});

// Upstream's nat REDIRECT feeds any socket on 15006; strict's TPROXY (inbound-tproxy) only a
// transparent one, and drops the packet otherwise (finding-l).
for (const profile of ['upstream', 'strict'] as const) {
  test(`${profile}: port hijack — a non-root app without capabilities binds 15006 while its node proxy is down; after the proxy starts, inbound plaintext ${profile === 'upstream' ? 'reaches the app without the proxy' : 'is dropped, not delivered to the app'}`, async () => {
    const w = await cluster({ uid: 1000, caps: [], tcpPorts: [8080] }, profile);
    try {
      // Proxy up: inbound goes through the proxy to the app, as before.
      const before = await w.connect({ kind: 'pod', pod: q }, { kind: 'pod', pod: a, port: 8080 });
      expect(before.acceptedBy).toBe('proxy-inbound');
      expect(before.deliveries.some((d) => d.pod.name === 'a' && d.port === 8080 && d.viaProxy)).toBe(true);
      await w.stop('proxy', 'node-0');
      await w.settle();
      // IP_TRANSPARENT needs NET_RAW or NET_ADMIN: EPERM, as on Linux.
      await squatInboundPortWithoutCapabilities(w, a);
      await w.start('proxy', 'node-0');
      await w.settle();
      expectHijackVerdict(await w.connect({ kind: 'pod', pod: q }, { kind: 'pod', pod: a, port: 8080 }), profile, a);
    } finally {
      await w.close();
    }
  });
}

test('strict: port hijack with NET_RAW (root) — the app binds 15006 with IP_TRANSPARENT while its node proxy is down, and TPROXY hands it inbound plaintext without the proxy (the residual)', async () => {
  const w = await cluster({ uid: 0, caps: ['NET_RAW'], tcpPorts: [8080] });
  try {
    await w.stop('proxy', 'node-0');
    await w.settle();
    expect(await w.appExec(a, { kind: 'listen', port: 15006, reusePort: true, transparent: true })).toEqual({
      ok: true,
    });
    await w.start('proxy', 'node-0');
    await w.settle();
    const r = await w.connect({ kind: 'pod', pod: q }, { kind: 'pod', pod: a, port: 8080 });
    expect(r.acceptedBy).toBe('app');
    // TPROXY rewrites nothing: the app's accepted socket has the original destination port.
    expect(r.deliveries.some((d) => d.pod.name === 'a' && d.port === 8080 && !d.viaProxy)).toBe(true);
  } finally {
    await w.close();
  }
});

for (const profile of ['upstream', 'strict'] as const) {
  test(`${profile}: port hijack before enrollment — an app that holds 15006 when its pod joins the mesh keeps it; the proxy cannot serve the pod and inbound plaintext ${profile === 'upstream' ? 'reaches the app' : 'is dropped'}`, async () => {
    const w = await cluster({ uid: 1000, caps: [], tcpPorts: [8080] }, profile);
    const c: PodRef = { namespace: 'plain', name: 'c' };
    try {
      await w.createPod({ ...c, node: 'node-0', app: { uid: 1000, caps: [], tcpPorts: [8080] } });
      expect(await w.appExec(c, { kind: 'listen', port: 15006 })).toEqual({ ok: true });
      await w.labelPod(c, { 'istio.io/dataplane-mode': 'ambient' });
      await w.settle();
      const o = obs(await w.pods(), c);
      // The rules go in, the proxy's listeners cannot (EADDRINUSE): the agent does not claim the pod
      // enrolled (annotation not 'enabled'), which the convergence property reports as not served.
      expect(o.redirected).toBe(true);
      expect(o.served).toBe(false);
      expect(o.annotation).not.toBe('enabled');
      expectHijackVerdict(await w.connect({ kind: 'pod', pod: q }, { kind: 'pod', pod: c, port: 8080 }), profile, c);
    } finally {
      await w.close();
    }
  });
}
