/**
 * The mesh CA's request handling (istiod's CreateCertificate, security/pkg/server/ca/server.go):
 * authenticate the caller by a TokenReview of its bearer token; the identity it gets is its own,
 * or — asked for another (upstream's ImpersonatedIdentity, what a node proxy does for the pods it
 * serves) — one node authorization allows; the CSR must ask for exactly that identity; the
 * certificate is short-lived (upstream's defaults: 24 h, at most 90 days). An authentication or
 * authorization failure answers opaquely, as upstream does ("request authenticate failure"),
 * and the log line says why; a bad CSR answers with its reason (it reveals nothing the caller
 * did not send).
 */
import { spiffeId } from '../api/identity.js';
import type { WallClock } from '../host/clock.js';
import type { CsrSigner } from '../host/csr-signer.js';
import type { KubeApi } from '../host/kube.js';
import type { LogFields, Logger } from '../host/log.js';
import { callerFromTokenReview } from './caller.js';
import { checkCsr } from './csr.js';
import { authorizeImpersonation, type PodView } from './node-authorizer.js';

interface CaServiceConfig {
  readonly trustDomain: string;
  /** The audience the callers' tokens must be minted for (upstream: istio-ca). */
  readonly audience: string;
  /** Service accounts (`namespace/name`) that may ask for other identities: the node proxy's. */
  readonly trustedNodeAccounts: ReadonlySet<string>;
  /** Lifetime when the request names none. */
  readonly defaultTtlSeconds: number;
  /** Longest lifetime granted; a longer request gets this. */
  readonly maxTtlSeconds: number;
}

export const CA_DEFAULTS = { audience: 'istio-ca', defaultTtlSeconds: 24 * 3600, maxTtlSeconds: 90 * 24 * 3600 };

interface CertificateRequest {
  /** The caller's bearer token (a bound service-account token). */
  readonly token: string;
  readonly csrPem: string;
  /** The identity asked for; absent: the caller's own. */
  readonly identity?: string;
  readonly ttlSeconds?: number;
}

type CertificateAnswer =
  | { readonly ok: true; readonly identity: string; readonly certChain: readonly string[]; readonly notAfterMs: number }
  | { readonly ok: false; readonly code: 'unauthenticated' | 'invalid-argument'; readonly message: string };

type IdentityDecision =
  | { readonly ok: true; readonly identity: string; readonly caller: string }
  | { readonly ok: false; readonly code: 'unauthenticated'; readonly message: string };

/** Backdating of notBefore: a peer whose clock is a little behind still accepts the certificate. */
const BACKDATE_MS = 60_000;

export class CaService {
  constructor(
    private readonly cfg: CaServiceConfig,
    private readonly deps: {
      readonly kube: Pick<KubeApi, 'reviewToken'>;
      readonly pods: PodView;
      readonly signer: CsrSigner;
      /** Certificate validity is wall time: peers compare it with their own clocks. */
      readonly clock: WallClock;
      readonly log: Logger;
    },
  ) {}

  /**
   * The decision alone: which identity this token may have a certificate for (`identity`, or
   * absent the caller's own). Refusals are logged with their reason and answered opaquely.
   * createCertificate starts with it; the sim's in-process CA (opaque certificates, no CSR)
   * runs only this.
   */
  async authorize(token: string, identity: string | undefined): Promise<IdentityDecision> {
    const refuse = (why: string, fields: LogFields = {}): IdentityDecision => {
      this.deps.log.warn('certificate request refused', { reason: why, ...fields });
      return { ok: false, code: 'unauthenticated', message: 'request authenticate failure' };
    };
    if (token === '') return refuse('no bearer token');
    const review = await this.deps.kube.reviewToken(token, [this.cfg.audience]);
    const who = callerFromTokenReview(review, this.cfg.audience);
    if (!who.ok) return refuse(who.reason);
    const caller = who.caller;
    const own = spiffeId({
      trustDomain: this.cfg.trustDomain,
      namespace: caller.namespace,
      serviceAccount: caller.serviceAccount,
    });
    const wanted = identity ?? own;
    const callerText = `${caller.namespace}/${caller.serviceAccount} (pod ${caller.podName})`;
    if (wanted !== own) {
      const auth = authorizeImpersonation(this.cfg, this.deps.pods, caller, wanted);
      if (!auth.ok) return refuse(auth.reason, { caller: callerText, identity: wanted });
    }
    return { ok: true, identity: wanted, caller: callerText };
  }

  async createCertificate(req: CertificateRequest): Promise<CertificateAnswer> {
    const decision = await this.authorize(req.token, req.identity);
    if (!decision.ok) return decision;
    const { identity, caller: callerText } = decision;
    const csr = await checkCsr(req.csrPem, identity, (r) => this.deps.signer.verifyRequest(r));
    if (!csr.ok) {
      this.deps.log.warn('certificate request refused', { reason: csr.reason, caller: callerText, identity });
      return { ok: false, code: 'invalid-argument', message: csr.reason };
    }
    if (req.ttlSeconds !== undefined && (!Number.isInteger(req.ttlSeconds) || req.ttlSeconds <= 0))
      return {
        ok: false,
        code: 'invalid-argument',
        message: `ttlSeconds ${req.ttlSeconds}: a positive whole number of seconds`,
      };
    const ttl = Math.min(req.ttlSeconds ?? this.cfg.defaultTtlSeconds, this.cfg.maxTtlSeconds);
    const now = this.deps.clock.epochMs();
    const notAfterMs = now + ttl * 1000;
    const cert = await this.deps.signer.sign(csr.request, identity, now - BACKDATE_MS, notAfterMs);
    this.deps.log.info('certificate issued', { caller: callerText, identity, ttlSeconds: ttl });
    return { ok: true, identity, certChain: [cert, this.deps.signer.rootPem], notAfterMs };
  }
}
