/**
 * Host sources in the netns world: a host socket's connection to a pod leaves the node SNATed
 * (the host probe source, 169.254.7.127), so the proxy that takes it logs the translated tuple,
 * not the one the client bound. The world reads the translation from the node's conntrack entry
 * and still names the proxy as the first hop; a conntrack that cannot be read is a harness
 * error, never "first hop other". And a hostNetwork pod whose app listens on nothing keeps
 * running, as its container would.
 */
import { test, expect } from '@playwright/test';
import { chmod, mkdtemp, rm, writeFile } from 'node:fs/promises';
import * as os from 'node:os';
import * as path from 'node:path';
import { isOurs } from '../../../e2e/netns/world-lab.js';
import type { PodRef } from '../../../scenarios/world.js';
import { MESH, skipUnlessSuiteWorldAvailable, withNetnsWorld } from './fixture.js';

skipUnlessSuiteWorldAvailable();
test.setTimeout(300_000);

const victim: PodRef = { namespace: 'mesh', name: 'victim' };
const hostpod: PodRef = { namespace: 'plain', name: 'hostpod' };

test('a host root socket to an ambient pod: strict takes it into the inbound proxy (SNATed source attributed), upstream lets the app take it', async () => {
  for (const profile of ['strict', 'upstream'] as const) {
    await withNetnsWorld({ nodes: 1, profile }, async (w) => {
      await w.createNamespace('mesh', MESH);
      await w.createPod({ ...victim, node: 'node-0', app: { uid: 1000, caps: [], tcpPorts: [8080] } });
      await w.settle();
      const r = await w.connect(
        { kind: 'host', node: 'node-0', uid: 0, caps: [] },
        { kind: 'pod', pod: victim, port: 8080 },
        { proto: 'tcp' },
      );
      expect(r.outcome, `${profile}: ${r.error ?? ''}`).toBe('established');
      // The app sees the probe SNAT source, whichever profile.
      expect(r.deliveries).toEqual([expect.objectContaining({ pod: victim, port: 8080 })]);
      expect(r.deliveries[0]!.peer).toMatch(/^169\.254\.7\.127:\d+$/);
      if (profile === 'strict') {
        expect(r.acceptedBy, 'strict: the inbound proxy is the first hop').toBe('proxy-inbound');
        expect(r.acceptedIn).toEqual(victim);
        expect(r.deliveries[0]!.viaProxy).toBe(true);
      } else {
        // Upstream accepts every TCP from the probe source on any port (finding-k): no proxy.
        expect(r.acceptedBy, 'upstream: the app is the first hop').toBe('app');
        expect(r.deliveries[0]!.viaProxy).toBe(false);
      }
    });
  }
});

test("the host source's NAT is read from conntrack: a conntrack that fails is a harness error, not a first hop 'other'", async () => {
  const dir = await mkdtemp(path.join(os.tmpdir(), 'al-shim-'));
  await writeFile(path.join(dir, 'conntrack'), '#!/bin/sh\necho "conntrack: fake failure" >&2\nexit 1\n');
  await chmod(path.join(dir, 'conntrack'), 0o755);
  const saved = process.env['PATH'] ?? '';
  try {
    await withNetnsWorld({ nodes: 1, profile: 'strict' }, async (w) => {
      await w.createNamespace('mesh', MESH);
      await w.createPod({ ...victim, node: 'node-0', app: { uid: 1000, caps: [], tcpPorts: [8080] } });
      await w.settle();
      const attempt = (): ReturnType<typeof w.connect> =>
        w.connect({ kind: 'host', node: 'node-0', uid: 0, caps: [] }, { kind: 'pod', pod: victim, port: 8080 });
      process.env['PATH'] = `${dir}:${saved}`;
      try {
        await expect(attempt()).rejects.toThrow(
          /conntrack -L -f ipv4 -p tcp --orig-port-src \d+ --orig-dst 10\.244\.0\.\d+ --orig-port-dst 8080.*fake failure/,
        );
      } finally {
        process.env['PATH'] = saved;
      }
      // positive control: the real tool
      expect((await attempt()).acceptedBy).toBe('proxy-inbound');
    });
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
});

test('a hostNetwork pod whose app listens on nothing (root, no capabilities) starts and keeps running', async () => {
  await withNetnsWorld({ nodes: 1, profile: 'strict', dnsCapture: true }, async (w) => {
    await w.createNamespace('plain', {});
    await w.createPod({ ...hostpod, node: 'node-0', hostNetwork: true, app: { uid: 0, caps: [], tcpPorts: [] } });
    await w.settle();
    const seen = (await w.pods()).find((p) => p.name === 'hostpod');
    expect(seen?.started).toBe(true);
    const app = Object.values(w.lab.state.pods).find((p) => p.name === 'hostpod')?.app;
    expect(app, 'the app this world started').toBeDefined();
    await new Promise((r) => setTimeout(r, 1500));
    expect(isOurs(app!), 'the hostpod app is still running').toBe(true);
  });
});
