/**
 * The HBONE transports' CertificateSource in the CA mode: each identity's certificate comes from
 * the proxy's CertificateManager (impl/ztunnel/cert-manager.ts), which fetches it from the mesh
 * CA and renews it; the proxy holds no CA key. No valid certificate → undefined, and the
 * transport fails that connection closed ('no-certificate').
 */
import { spiffeId, type PeerIdentity } from '../api/identity.js';
import type { WorkloadCertificate } from '../host/certificates.js';
import type { CertificateManager } from '../ztunnel/cert-manager.js';
import type { CertificateSource, IssuedCertificate } from './mesh-ca.js';

export class ManagedCertificates implements CertificateSource {
  // One IssuedCertificate per fetched certificate: the transports cache a TLS context per object.
  private readonly issued = new WeakMap<WorkloadCertificate, IssuedCertificate>();

  constructor(
    private readonly manager: CertificateManager,
    readonly trustDomain: string,
    readonly rootPem: string,
  ) {}

  async certificateFor(id: PeerIdentity): Promise<IssuedCertificate | undefined> {
    if (id.trustDomain !== this.trustDomain) return undefined;
    const cert = await this.manager.certificateFor(spiffeId(id));
    if (!cert) return undefined;
    let issued = this.issued.get(cert);
    if (!issued) {
      issued = { identity: id, certPem: [cert.certPem, ...cert.chainPem].join(''), keyPem: cert.keyPem };
      this.issued.set(cert, issued);
    }
    return issued;
  }
}
