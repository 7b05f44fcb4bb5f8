/**
 * Issue 18 on the real kernel (and in the container world): the proxies run as the manifests say,
 * with certificates from the mesh CA (the CA Deployment's process, beside the API) and no root
 * key. A cross-node connection is authorized under the source pod's identity; each proxy holds
 * certificates for its own node's pods only; with the CA down, a pod whose identity no proxy holds
 * yet gets no HBONE (fail closed, said in the connection log), and it does once the CA is back.
 */
import { test, expect } from '@playwright/test';
import * as fs from 'node:fs';
import type { PodRef } from '../../../scenarios/world.js';
import { MESH, skipUnlessSuiteWorldAvailable, withNetnsWorld } from './fixture.js';

skipUnlessSuiteWorldAvailable();
test.setTimeout(600_000); // generous: the suite must pass on a loaded machine (npm run test:netns:loaded)

const a: PodRef = { namespace: 'mesh', name: 'a' };
const b: PodRef = { namespace: 'mesh', name: 'b' };
const c: PodRef = { namespace: 'late', name: 'c' };
const app = { uid: 1000, caps: [], tcpPorts: [8080] };

test('certificates from the mesh CA: cross-node HBONE under the pod identity, own-node identities only, fail closed without the CA', async () => {
  await withNetnsWorld({ profile: 'strict' }, async (w) => {
    await w.createNamespace('mesh', MESH);
    await w.createPod({ ...a, node: 'node-0', app });
    await w.createPod({ ...b, node: 'node-1', app });
    await w.settle();

    const r = await w.connect({ kind: 'pod', pod: a }, { kind: 'pod', pod: b, port: 8080 });
    expect(
      r.deliveries.filter((d) => d.pod.name === 'b'),
      r.trace,
    ).toEqual([expect.objectContaining({ port: 8080, viaProxy: true })]);
    const inbound = r.proxyLog.find((e) => e.node === 'node-1' && e.event === 'forwarded');
    expect(inbound?.srcIdentity, r.trace).toBe('spiffe://cluster.local/ns/mesh/sa/default');

    // Each proxy holds the identities of its own node's pods (prefetched as it serves them), and
    // no key: its command line names the CA, not a root key.
    const held = async (node: string): Promise<string[]> => {
      const s = await w.lab.componentStatus('proxy', node);
      return ((s.status?.['certificates'] ?? []) as { identity: string; notAfterMs?: number }[])
        .filter((x) => x.notAfterMs !== undefined)
        .map((x) => x.identity);
    };
    expect(await held('node-0')).toEqual(['spiffe://cluster.local/ns/mesh/sa/default']);
    expect(await held('node-1')).toEqual(['spiffe://cluster.local/ns/mesh/sa/default']);
    const caLog = fs.readFileSync(`${w.lab.state.runDir}/ca.log`, 'utf8');
    expect(caLog).toContain('mesh CA serving');

    // The CA goes down; a pod of a new identity arrives on node-0.
    await w.lab.stopCa();
    await w.createNamespace('late', MESH);
    await w.createPod({ ...c, node: 'node-0', app });
    await w.settle();
    const denied = await w.connect({ kind: 'pod', pod: c }, { kind: 'pod', pod: b, port: 8080 });
    expect(
      denied.deliveries.filter((d) => d.pod.name === 'b'),
      denied.trace,
    ).toEqual([]);
    expect(
      denied.proxyLog.some((e) => e.node === 'node-0' && /no-certificate|no certificate/.test(e.reason)),
      denied.trace,
    ).toBe(true);

    // Back: the next connection fetches the certificate and goes through.
    await w.lab.startCa();
    const ok = await w.connect({ kind: 'pod', pod: c }, { kind: 'pod', pod: b, port: 8080 });
    expect(
      ok.deliveries.filter((d) => d.pod.name === 'b'),
      ok.trace,
    ).toEqual([expect.objectContaining({ port: 8080, viaProxy: true })]);
    expect(ok.proxyLog.find((e) => e.node === 'node-1' && e.event === 'forwarded')?.srcIdentity).toBe(
      'spiffe://cluster.local/ns/late/sa/default',
    );
  });
});
