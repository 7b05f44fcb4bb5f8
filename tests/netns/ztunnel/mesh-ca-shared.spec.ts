/** A mesh root exported by one process and loaded by another issues certificates that chain to it. */
import 'reflect-metadata'; // @peculiar/x509 needs the Reflect polyfill before it loads
import { test, expect } from '@playwright/test';
import * as x509 from '@peculiar/x509';
import { MeshCa } from '../../../impl/linux/mesh-ca.js';

test('an exported mesh root loads elsewhere and signs workload certificates that verify against it', async () => {
  const a = await MeshCa.create('cluster.local');
  const root = await a.exportRoot();
  const b = await MeshCa.load('cluster.local', root.certPem, root.keyPem);
  expect(b.rootPem).toBe(a.rootPem);
  const issued = await b.certificateFor({ trustDomain: 'cluster.local', namespace: 'shop', serviceAccount: 'web' });
  const cert = new x509.X509Certificate(issued!.certPem);
  const rootCert = new x509.X509Certificate(root.certPem);
  expect(await cert.verify({ publicKey: rootCert.publicKey, signatureOnly: true })).toBe(true);
  const other = await MeshCa.create('cluster.local');
  expect(await cert.verify({ publicKey: new x509.X509Certificate(other.rootPem).publicKey, signatureOnly: true })).toBe(
    false,
  );
  await expect(MeshCa.load('cluster.local', 'not pem', root.keyPem)).rejects.toThrow('root certificate is not valid');
  await expect(
    MeshCa.load('cluster.local', root.certPem, '-----BEGIN PRIVATE KEY-----\nAAAA\n-----END PRIVATE KEY-----\n'),
  ).rejects.toThrow('root key is not a PKCS#8');
});
