/**
 * The CertificateFetcher port over the mesh CA's HTTPS endpoint (impl/mesh-ca/http-api.ts), as
 * ztunnel's CaClient does over istiod's gRPC: for each fetch a new ECDSA P-256 key, a PKCS #10
 * request whose only SAN is the identity's URI, and `POST /v1/certificates` authenticated by the
 * proxy's own service-account token. The token file is read at every fetch, because kubelet
 * rotates a projected token in place. The CA's TLS certificate is verified against the mesh root
 * bundle, and so is what it answers: the leaf must name exactly the identity asked for and be
 * signed by that root, or the fetch fails (a CA answering the wrong identity gives no certificate).
 */
// first: mesh-ca.js loads the Reflect polyfill @peculiar/x509 needs and sets its crypto provider
import { ALG, pem } from './mesh-ca.js';
import * as x509 from '@peculiar/x509';
import * as fs from 'node:fs';
import * as https from 'node:https';
import { webcrypto } from 'node:crypto';
import type { CertificateFetcher, WorkloadCertificate } from '../host/certificates.js';
import { CA_PATH } from '../mesh-ca/http-api.js';
/** A CA's answer is two certificates and a few fields; anything far past that is not one. */

const MAX_ANSWER_BYTES = 64 * 1024;

interface CaClientOptions {
  /** `https://host:port` of the CA (upstream's CA_ADDRESS). */
  readonly address: string;
  /** The mesh root bundle (PEM): the CA's serving certificate and every issued leaf chain to it. */
  readonly rootPem: string;
  /** The projected service-account token (audience: the CA's). */
  readonly tokenFile: string;
  /** Asked lifetime; absent: the CA's default. */
  readonly ttlSeconds?: number;
  /** Per request, connect to answer (default 10 s). */
  readonly timeoutMs?: number;
}

/** `https://host:port` with nothing else, or a thrown Error naming what is wrong. */
export function parseCaAddress(address: string): URL {
  let url: URL;
  try {
    url = new URL(address);
  } catch {
    throw new Error(`CA address ${JSON.stringify(address)} is not a URL; expected https://HOST:PORT`);
  }
  if (url.protocol !== 'https:' || url.pathname !== '/' || url.search !== '' || url.username !== '')
    throw new Error(`CA address ${JSON.stringify(address)}: expected https://HOST:PORT and nothing else`);
  return url;
}

export class CaClient implements CertificateFetcher {
  private readonly url: URL;
  private readonly root: x509.X509Certificate;

  constructor(private readonly opts: CaClientOptions) {
    this.url = parseCaAddress(opts.address);
    try {
      this.root = new x509.X509Certificate(opts.rootPem);
    } catch (e) {
      throw new Error(`the mesh root bundle is not PEM X.509: ${(e as Error).message}`, { cause: e });
    }
  }

  async fetch(identity: string): Promise<WorkloadCertificate> {
    let token: string;
    try {
      token = fs.readFileSync(this.opts.tokenFile, 'utf8').trim();
    } catch (e) {
      throw new Error(`cannot read the service-account token ${this.opts.tokenFile}: ${(e as Error).message}`, {
        cause: e,
      });
    }
    if (token === '') throw new Error(`the service-account token file ${this.opts.tokenFile} is empty`);
    const keys = (await webcrypto.subtle.generateKey(ALG, true, ['sign', 'verify'])) as webcrypto.CryptoKeyPair;
    const csr = await x509.Pkcs10CertificateRequestGenerator.create({
      name: '',
      keys,
      signingAlgorithm: ALG,
      extensions: [new x509.SubjectAlternativeNameExtension([{ type: 'url', value: identity }])],
    });
    const body = JSON.stringify({
      csr: csr.toString('pem'),
      identity,
      ...(this.opts.ttlSeconds !== undefined ? { ttlSeconds: this.opts.ttlSeconds } : {}),
    });
    const res = await this.post(body, token);
    let doc: unknown;
    try {
      doc = JSON.parse(res.body);
    } catch {
      throw new Error(`CA ${this.url.host} answered ${res.status} with a body that is not JSON`);
    }
    const o = (typeof doc === 'object' && doc !== null ? doc : {}) as Record<string, unknown>;
    if (res.status !== 200)
      throw new Error(
        `CA ${this.url.host} refused ${identity}: ${res.status} ${typeof o['error'] === 'string' ? o['error'] : ''}`.trim(),
      );
    const chain = o['certChain'];
    if (!Array.isArray(chain) || chain.length < 1 || !chain.every((c) => typeof c === 'string'))
      throw new Error(`CA ${this.url.host} answered 200 without a certChain of PEM strings`);
    const leaf = await this.checkLeaf(chain[0] as string, identity, keys.publicKey);
    const key = await webcrypto.subtle.exportKey('pkcs8', keys.privateKey);
    return {
      identity,
      certPem: leaf.toString('pem'),
      // the intermediates as answered, without the root: the peer has the root already
      chainPem: (chain.slice(1) as string[]).filter((c) => c.trim() !== this.opts.rootPem.trim()),
      keyPem: pem('PRIVATE KEY', key),
      notBeforeMs: leaf.notBefore.getTime(),
      notAfterMs: leaf.notAfter.getTime(),
    };
  }

  /** The leaf, once it is one certificate for `identity` over our key, signed by the mesh root. */
  private async checkLeaf(
    leafPem: string,
    identity: string,
    publicKey: webcrypto.CryptoKey,
  ): Promise<x509.X509Certificate> {
    let leaf: x509.X509Certificate;
    try {
      leaf = new x509.X509Certificate(leafPem);
    } catch (e) {
      throw new Error(`CA ${this.url.host} answered a leaf that is not X.509: ${(e as Error).message}`, { cause: e });
    }
    const san = leaf.getExtension(x509.SubjectAlternativeNameExtension);
    const uris = san?.names.items.filter((n) => n.type === 'url').map((n) => n.value) ?? [];
    if (uris.length !== 1 || uris[0] !== identity)
      throw new Error(`CA ${this.url.host} answered a certificate for [${uris.join(', ')}], not for ${identity}`);
    const ours = Buffer.from(await webcrypto.subtle.exportKey('spki', publicKey));
    if (!ours.equals(Buffer.from(leaf.publicKey.rawData)))
      throw new Error(`CA ${this.url.host} answered a certificate for another key than the request's`);
    const signed = await leaf.verify(
      { publicKey: this.root.publicKey, signatureOnly: true },
      webcrypto as unknown as Parameters<typeof leaf.verify>[1],
    );
    if (!signed) throw new Error(`CA ${this.url.host} answered a certificate the mesh root did not sign`);
    return leaf;
  }

  private post(body: string, token: string): Promise<{ status: number; body: string }> {
    const timeoutMs = this.opts.timeoutMs ?? 10_000;
    return new Promise((resolve, reject) => {
      const req = https.request(
        {
          host: this.url.hostname.replace(/^\[|\]$/g, ''),
          port: this.url.port === '' ? 443 : Number(this.url.port),
          servername: /^[\d.]+$|:/.test(this.url.hostname) ? undefined : this.url.hostname,
          ca: this.opts.rootPem,
          method: 'POST',
          path: CA_PATH,
          timeout: timeoutMs,
          agent: false,
          headers: {
            'content-type': 'application/json',
            'content-length': Buffer.byteLength(body),
            authorization: `Bearer ${token}`,
          },
        },
        (res) => {
          const chunks: Buffer[] = [];
          let size = 0;
          res.on('data', (c: Buffer) => {
            size += c.length;
            if (size > MAX_ANSWER_BYTES) {
              req.destroy(new Error(`CA ${this.url.host} answered more than ${MAX_ANSWER_BYTES} bytes`));
              return;
            }
            chunks.push(c);
          });
          res.on('end', () => resolve({ status: res.statusCode ?? 0, body: Buffer.concat(chunks).toString('utf8') }));
          res.on('error', reject);
        },
      );
      req.on('timeout', () => req.destroy(new Error(`CA ${this.url.host} did not answer within ${timeoutMs} ms`)));
      req.on('error', (e) => reject(new Error(`CA request to ${this.url.host} failed: ${e.message}`, { cause: e })));
      req.end(body);
    });
  }
}
