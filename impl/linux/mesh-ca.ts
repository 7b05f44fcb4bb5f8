/**
 * A mesh root CA made at run time for tests and local runs: ECDSA P-256 keys from Node's
 * webcrypto, X.509 certificates from @peculiar/x509. Workload certificates carry exactly one
 * URI SAN, the SPIFFE ID spiffe://<trust-domain>/ns/<ns>/sa/<sa>, and are valid for client and
 * server authentication (HBONE is mutual TLS). Issued certificates are cached per identity.
 */
import 'reflect-metadata'; // @peculiar/x509 -> tsyringe needs the Reflect metadata polyfill
import * as x509 from '@peculiar/x509';
import { webcrypto } from 'node:crypto';

type CryptoKeyPair = webcrypto.CryptoKeyPair;
import type { PeerIdentity } from '../api/identity.js';
import type { CsrSigner } from '../host/csr-signer.js';
import { parseSpiffeId, spiffeId } from '../api/identity.js';

// Node's webcrypto is the standard Crypto; the library's parameter type names the DOM one.
x509.cryptoProvider.set(webcrypto as unknown as Parameters<typeof x509.cryptoProvider.set>[0]);

/** The key and signature algorithm of the mesh's certificates (roots and workloads). */
export const ALG = { name: 'ECDSA', namedCurve: 'P-256', hash: 'SHA-256' } as const;
const DAY_MS = 86_400_000;

export interface IssuedCertificate {
  readonly identity: PeerIdentity;
  readonly certPem: string;
  readonly keyPem: string;
}

/** Where the HBONE transport gets certificates; undefined = none for this identity (fail closed). */
export interface CertificateSource {
  readonly trustDomain: string;
  readonly rootPem: string;
  certificateFor(id: PeerIdentity): Promise<IssuedCertificate | undefined>;
}

/** DER bytes as PEM text with `label`, 64 characters a line. */
export function pem(label: string, der: ArrayBuffer): string {
  const b64 = Buffer.from(der).toString('base64').replace(/.{64}/g, '$&\n');
  return `-----BEGIN ${label}-----\n${b64}${b64.endsWith('\n') ? '' : '\n'}-----END ${label}-----\n`;
}

export class MeshCa implements CertificateSource, CsrSigner {
  private serial = 1;
  private readonly cache = new Map<string, Promise<IssuedCertificate | undefined>>();
  /** Identities this CA refuses (a failing certificate fetch). */
  readonly refuse = new Set<string>();

  private constructor(
    readonly trustDomain: string,
    readonly rootPem: string,
    private readonly keys: CryptoKeyPair,
    private readonly root: x509.X509Certificate,
  ) {}

  static async create(trustDomain: string, now = new Date()): Promise<MeshCa> {
    const keys = (await webcrypto.subtle.generateKey(ALG, true, ['sign', 'verify'])) as CryptoKeyPair;
    const root = await x509.X509CertificateGenerator.createSelfSigned({
      serialNumber: '01',
      name: `CN=ambient-lab test root ${trustDomain}, O=${trustDomain}`,
      notBefore: new Date(now.getTime() - 60_000),
      notAfter: new Date(now.getTime() + 7 * DAY_MS),
      keys,
      signingAlgorithm: ALG,
      extensions: [
        new x509.BasicConstraintsExtension(true, 0, true),
        new x509.KeyUsagesExtension(x509.KeyUsageFlags.keyCertSign | x509.KeyUsageFlags.cRLSign, true),
      ],
    });
    return new MeshCa(trustDomain, root.toString('pem'), keys, root);
  }

  /** The root certificate and its private key, for handing one CA to several proxy processes. */
  async exportRoot(): Promise<{ readonly certPem: string; readonly keyPem: string }> {
    const key = await webcrypto.subtle.exportKey('pkcs8', this.keys.privateKey);
    return { certPem: this.rootPem, keyPem: pem('PRIVATE KEY', key) };
  }

  /**
   * A CA from an exported root (every proxy of a cluster must chain to one root, or HBONE between
   * nodes fails the handshake). Throws naming what is wrong with the PEM input.
   */
  static async load(trustDomain: string, certPem: string, keyPem: string): Promise<MeshCa> {
    let root: x509.X509Certificate;
    try {
      root = new x509.X509Certificate(certPem);
    } catch (e) {
      throw new Error(`mesh CA: the root certificate is not valid PEM X.509: ${(e as Error).message}`, { cause: e });
    }
    const b64 = keyPem.replace(/-----(BEGIN|END) PRIVATE KEY-----/g, '').replace(/\s+/g, '');
    let privateKey: webcrypto.CryptoKey;
    try {
      privateKey = await webcrypto.subtle.importKey('pkcs8', Buffer.from(b64, 'base64'), ALG, true, ['sign']);
    } catch (e) {
      throw new Error(`mesh CA: the root key is not a PKCS#8 ECDSA P-256 key: ${(e as Error).message}`, { cause: e });
    }
    const publicKey = await root.publicKey.export(ALG, ['verify']);
    return new MeshCa(trustDomain, root.toString('pem'), { privateKey, publicKey } as CryptoKeyPair, root);
  }

  certificateFor(id: PeerIdentity): Promise<IssuedCertificate | undefined> {
    const uri = spiffeId(id);
    if (id.trustDomain !== this.trustDomain || this.refuse.has(uri)) return Promise.resolve(undefined);
    let p = this.cache.get(uri);
    if (!p) this.cache.set(uri, (p = this.issue(id)));
    return p;
  }

  verifyRequest(request: x509.Pkcs10CertificateRequest): Promise<boolean> {
    return request.verify(webcrypto as unknown as Parameters<typeof request.verify>[0]);
  }

  async sign(
    request: x509.Pkcs10CertificateRequest,
    identity: string,
    notBeforeMs: number,
    notAfterMs: number,
  ): Promise<string> {
    const cert = await this.leaf(request.publicKey, '', notBeforeMs, notAfterMs, workloadExtensions(identity));
    return cert.toString('pem');
  }

  /** A serving certificate and key for the CA's own endpoint (DNS names and IP addresses), signed by the root. */
  async servingCertificate(
    dnsNames: readonly string[],
    ips: readonly string[],
  ): Promise<{ certPem: string; keyPem: string }> {
    const keys = (await webcrypto.subtle.generateKey(ALG, true, ['sign', 'verify'])) as CryptoKeyPair;
    const now = Date.now();
    const cert = await this.leaf(
      keys.publicKey,
      `CN=${dnsNames[0] ?? ips[0] ?? 'mesh-ca'}`,
      now - 60_000,
      now + 7 * DAY_MS,
      [
        new x509.SubjectAlternativeNameExtension([
          ...dnsNames.map((value) => ({ type: 'dns' as const, value })),
          ...ips.map((value) => ({ type: 'ip' as const, value })),
        ]),
        new x509.KeyUsagesExtension(x509.KeyUsageFlags.digitalSignature, true),
        new x509.ExtendedKeyUsageExtension([x509.ExtendedKeyUsage.serverAuth]),
        new x509.BasicConstraintsExtension(false, undefined, true),
      ],
    );
    const key = await webcrypto.subtle.exportKey('pkcs8', keys.privateKey);
    return { certPem: cert.toString('pem'), keyPem: pem('PRIVATE KEY', key) };
  }

  private async issue(id: PeerIdentity): Promise<IssuedCertificate> {
    const keys = (await webcrypto.subtle.generateKey(ALG, true, ['sign', 'verify'])) as CryptoKeyPair;
    const now = Date.now();
    const cert = await this.leaf(keys.publicKey, '', now - 60_000, now + DAY_MS, workloadExtensions(spiffeId(id)));
    const key = await webcrypto.subtle.exportKey('pkcs8', keys.privateKey);
    return { identity: id, certPem: cert.toString('pem'), keyPem: pem('PRIVATE KEY', key) };
  }

  /** A certificate over `publicKey`, signed by the root, with the next serial number. */
  private leaf(
    publicKey: webcrypto.CryptoKey | x509.PublicKey,
    subject: string,
    notBeforeMs: number,
    notAfterMs: number,
    extensions: x509.Extension[],
  ): Promise<x509.X509Certificate> {
    return x509.X509CertificateGenerator.create({
      serialNumber: (++this.serial).toString(16).padStart(2, '0'),
      subject,
      issuer: this.root.subject,
      notBefore: new Date(notBeforeMs),
      notAfter: new Date(notAfterMs),
      publicKey,
      signingKey: this.keys.privateKey,
      signingAlgorithm: ALG,
      extensions,
    });
  }
}

/** A workload certificate's extensions: one critical URI SAN, mutual-TLS key usages, not a CA. */
function workloadExtensions(identity: string): x509.Extension[] {
  return [
    new x509.SubjectAlternativeNameExtension([{ type: 'url', value: identity }], true),
    new x509.KeyUsagesExtension(x509.KeyUsageFlags.digitalSignature | x509.KeyUsageFlags.keyEncipherment, true),
    new x509.ExtendedKeyUsageExtension([x509.ExtendedKeyUsage.serverAuth, x509.ExtendedKeyUsage.clientAuth]),
    new x509.BasicConstraintsExtension(false, undefined, true),
  ];
}

/** The SPIFFE identity in a certificate's subjectAltName text ("URI:spiffe://td/ns/x/sa/y"). */
export function identityFromSan(san: string | undefined): PeerIdentity | undefined {
  if (!san) return undefined;
  const uris = san
    .split(',')
    .map((s) => s.trim())
    .filter((s) => s.startsWith('URI:'))
    .map((s) => s.slice(4));
  return uris.length === 1 ? parseSpiffeId(uris[0]!) : undefined; // SPIFFE: exactly one URI SAN
}
