/**
 * The native HBONE addon's boundary (impl/linux/native/hbone-tunnel.cc): bad arguments and bad
 * key material fail at once with an error naming what is wrong, never a crash or a half-made
 * object; the tunnel refuses calls out of order. The protocol behaviour is conformance.spec.ts's.
 */
import * as net from 'node:net';
import { test, expect } from '@playwright/test';
import { loadHboneAddon } from '../../../impl/linux/hbone-native-addon.js';
import { MeshCa } from '../../../impl/linux/mesh-ca.js';

const loaded = loadHboneAddon();
test.skip(!('addon' in loaded), 'reason' in loaded ? loaded.reason : '');
const addon = 'addon' in loaded ? loaded.addon : undefined;

const ID = { trustDomain: 'cluster.local', namespace: 'default', serviceAccount: 'sa-a' };

test('a TLS context refuses PEM text that holds no certificate, no key, a key of another certificate, or no root', async () => {
  const ca = await MeshCa.create('cluster.local');
  const a = (await ca.certificateFor(ID))!;
  const b = (await ca.certificateFor({ ...ID, serviceAccount: 'sa-b' }))!;
  const make = (cert: string, key: string, root: string): unknown => new addon!.TlsContext(cert, key, root, true);
  expect(() => make('not a certificate', a.keyPem, ca.rootPem)).toThrow(/no certificate in certPem/);
  expect(() => make(a.certPem, 'not a key', ca.rootPem)).toThrow(/keyPem holds no private key/);
  expect(() => make(a.certPem, b.keyPem, ca.rootPem)).toThrow(/does not match the certificate/);
  expect(() => make(a.certPem, a.keyPem, '')).toThrow(/no certificate in rootPem/);
  // @ts-expect-error wrong argument types on purpose
  expect(() => new addon!.TlsContext(1, 2, 3, 'yes')).toThrow(TypeError);
  expect(make(a.certPem, a.keyPem, ca.rootPem)).toBeTruthy(); // the control: good material works
});

test('a tunnel refuses a closed fd, a non-context, and a request before its handshake', async () => {
  const ca = await MeshCa.create('cluster.local');
  const a = (await ca.certificateFor(ID))!;
  const ctx = new addon!.TlsContext(a.certPem, a.keyPem, ca.rootPem, false);
  expect(() => new addon!.HboneTunnel(1 << 20, ctx, false, () => undefined)).toThrow(/F_DUPFD_CLOEXEC.*EBADF/);
  // @ts-expect-error not a TlsContext on purpose
  expect(() => new addon!.HboneTunnel(0, {}, false, () => undefined)).toThrow(/not a usable TlsContext|TlsContext/);
  // A connected socket whose peer never answers: the handshake cannot have finished.
  const server = net.createServer(() => undefined);
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const sock = net.connect((server.address() as net.AddressInfo).port, '127.0.0.1');
  await new Promise<void>((r) => sock.once('connect', r));
  const events: string[] = [];
  const fd = (sock as unknown as { _handle: { fd: number } })._handle.fd; // Node's TCP handle, as the Linux adapter reads it
  const t = new addon!.HboneTunnel(fd, ctx, false, (...e) => {
    events.push(e[0]);
  });
  sock.destroy();
  try {
    expect(() => t.request('10.0.0.1:80', '')).toThrow(/only once, after the handshake/);
    expect(t.write(1, new Uint8Array(4))).toBe(-1); // no such stream yet: closed, not a crash
    expect(events).toEqual([]);
  } finally {
    t.close();
    server.close();
  }
  expect(() => t.request('10.0.0.1:80', '')).toThrow(/tunnel is closed/);
});
