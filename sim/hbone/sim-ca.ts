/**
 * The sim's mesh CA: the real CA's decision — impl/mesh-ca/ca-service.ts `authorize`, a
 * TokenReview through the sim API and node authorization over the store's pods — run
 * in-process, with the sim's opaque certificates (SimMeshCa, sim-hbone.ts) in place of a CSR and
 * an X.509 signature. The sim HBONE drops the cryptography (it would dominate a sim run); what a
 * proxy may hold is decided by the same code as in every other world, so a CA that grants too
 * much is caught here too.
 *
 * `SimCaFetcher` is the proxy's CertificateFetcher over it: the proxy's certificate manager
 * (impl/ztunnel/cert-manager.ts) runs unchanged on top, with its caching, renewal and backoff
 * in virtual time.
 */
import { parseSpiffeId, spiffeId, type PeerIdentity } from '../../impl/api/identity.js';
import type { CertificateFetcher, WorkloadCertificate } from '../../impl/host/certificates.js';
import type { WallClock } from '../../impl/host/clock.js';
import type { CsrSigner } from '../../impl/host/csr-signer.js';
import type { KubeApi } from '../../impl/host/kube.js';
import type { Logger } from '../../impl/host/log.js';
import { CA_DEFAULTS, CaService } from '../../impl/mesh-ca/ca-service.js';
import type { PodView } from '../../impl/mesh-ca/node-authorizer.js';
import type { CertificateManager } from '../../impl/ztunnel/cert-manager.js';
import type { SimMeshCa } from './sim-hbone.js';

/** The CA's answer to a request, as the attacker actions report it. */
type SimCaAnswer =
  | { readonly ok: true; readonly certificate: string; readonly notAfterMs: number }
  | { readonly ok: false; readonly message: string };

/**
 * The sim's CA signs no CSR: its certificates come from `SimCaAuthority.request`. A call here is
 * a wiring mistake, said as such.
 */
const NO_CSR_SIGNER: CsrSigner = {
  rootPem: '',
  verifyRequest: () => Promise.reject(new Error('the sim mesh CA checks no CSR: use SimCaAuthority.request')),
  sign: () => Promise.reject(new Error('the sim mesh CA signs no CSR: use SimCaAuthority.request')),
};

interface SimCaAuthorityOptions {
  readonly trustDomain: string;
  /** The proxy's service account(s), `namespace/name` (the CA's --trusted-node-accounts). */
  readonly trustedNodeAccounts: ReadonlySet<string>;
  readonly kube: Pick<KubeApi, 'reviewToken'>;
  readonly pods: PodView;
  /** Issues and verifies the opaque certificates (the mesh root of the sim HBONE). */
  readonly issuer: SimMeshCa;
  readonly clock: WallClock;
  readonly log: Logger;
}

export class SimCaAuthority {
  private readonly service: CaService;

  constructor(private readonly o: SimCaAuthorityOptions) {
    this.service = new CaService(
      {
        trustDomain: o.trustDomain,
        audience: CA_DEFAULTS.audience,
        trustedNodeAccounts: o.trustedNodeAccounts,
        defaultTtlSeconds: CA_DEFAULTS.defaultTtlSeconds,
        maxTtlSeconds: CA_DEFAULTS.maxTtlSeconds,
      },
      { kube: o.kube, pods: o.pods, signer: NO_CSR_SIGNER, clock: o.clock, log: o.log },
    );
  }

  /** A certificate for `identity` for the bearer of `token`, if the CA's decision allows it. */
  async request(token: string, identity: string): Promise<SimCaAnswer> {
    const decision = await this.service.authorize(token, identity);
    if (!decision.ok) return { ok: false, message: decision.message };
    const id = parseSpiffeId(decision.identity);
    const certificate = id && this.o.issuer.issue(id);
    if (!certificate) return { ok: false, message: `${this.o.issuer.name} cannot issue ${decision.identity}` };
    return {
      ok: true,
      certificate,
      notAfterMs: this.o.clock.epochMs() + CA_DEFAULTS.defaultTtlSeconds * 1000,
    };
  }
}

/** One node proxy's way to its certificates: its projected token, presented to the sim CA. */
export class SimCaFetcher implements CertificateFetcher {
  constructor(
    private readonly o: {
      readonly ca: SimCaAuthority;
      /** The token file's content now (read at every fetch, as the real fetcher does). */
      readonly token: () => string;
      readonly clock: WallClock;
    },
  ) {}

  async fetch(identity: string): Promise<WorkloadCertificate> {
    const notBeforeMs = this.o.clock.epochMs();
    const a = await this.o.ca.request(this.o.token(), identity);
    if (!a.ok) throw new Error(`the mesh CA refused a certificate for ${identity}: ${a.message}`);
    // The opaque certificate stands in for the PEM; the sim HBONE carries no key.
    return { identity, certPem: a.certificate, chainPem: [], keyPem: '', notBeforeMs, notAfterMs: a.notAfterMs };
  }
}

/** The sim HBONE's certificate source over a proxy's certificate manager (ManagedCertificates' sim twin). */
export function managedSimCertificates(manager: CertificateManager): {
  certificateFor(id: PeerIdentity): Promise<string | undefined>;
} {
  return {
    certificateFor: async (id) => {
      const cert = await manager.certificateFor(spiffeId(id));
      return cert?.certPem;
    },
  };
}
