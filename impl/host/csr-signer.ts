/**
 * The mesh CA's key, as a port: the CA service (impl/mesh-ca/) decides what to sign; this signs
 * it, and checks a request's self-signature (both need a crypto implementation, which the core
 * does not touch). The root key never leaves the implementation.
 */
import type { Pkcs10CertificateRequest } from '@peculiar/x509';

export interface CsrSigner {
  /** The root certificate (PEM): what every workload trusts. */
  readonly rootPem: string;
  /** Does the request's signature verify with the public key it carries? */
  verifyRequest(request: Pkcs10CertificateRequest): Promise<boolean>;
  /**
   * A workload certificate (PEM) over the request's public key with exactly one URI SAN,
   * `identity`, valid for client and server authentication from `notBeforeMs` to `notAfterMs`
   * (epoch milliseconds), signed by the root.
   */
  sign(request: Pkcs10CertificateRequest, identity: string, notBeforeMs: number, notAfterMs: number): Promise<string>;
}
