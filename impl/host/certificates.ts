/**
 * The node proxy's way to a workload certificate, as a port: make a key, send a CSR for the
 * identity to the mesh CA with the proxy's token, and return what the CA signed. The manager
 * that caches and renews (impl/ztunnel/cert-manager.ts) sits on top of it.
 */

export interface WorkloadCertificate {
  readonly identity: string;
  readonly certPem: string;
  /** Intermediates and the root, as the CA answered them. */
  readonly chainPem: readonly string[];
  readonly keyPem: string;
  /** Validity, wall time (ms since the Unix epoch). */
  readonly notBeforeMs: number;
  readonly notAfterMs: number;
}

export interface CertificateFetcher {
  /** A new key and a certificate for it from the CA; rejects with what failed. */
  fetch(identity: string): Promise<WorkloadCertificate>;
}
