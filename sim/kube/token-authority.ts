/**
 * The sim API's service-account tokens: bound tokens as the TokenRequest API mints them for a
 * pod (kubelet's projected volume), and TokenReview's answer about one. What the real API
 * server checks, this checks: the token is one it issued (here: an opaque random string it
 * remembers, where the real one verifies a JWT signature), it has not expired, the pod it is
 * bound to still exists with the same uid, and it was minted for one of the audiences asked
 * about (none asked: the API's own audience). The answer names the service account and, in the
 * extra fields, the pod and its node (Kubernetes 1.30+), as a bound token's review does.
 * The service account object itself is not checked (the sim does not require SA objects).
 */
import type { Clock } from '../../impl/host/clock.js';
import type { KubeObjectOf, TokenReviewStatus } from '../../impl/host/kube.js';
import type { Random } from '../../impl/host/random.js';

/** The audience of a token requested without one, and of a review that asks for none. */
export const API_AUDIENCE = 'https://kubernetes.default.svc.cluster.local';

interface TokenClaims {
  readonly namespace: string;
  readonly serviceAccount: string;
  readonly pod: { readonly name: string; readonly uid: string } | undefined;
  readonly node: string | undefined;
  readonly audiences: readonly string[];
  readonly expiresAtMs: number;
  readonly id: string;
}

interface TokenRequest {
  readonly namespace: string;
  readonly serviceAccount: string;
  /** The pod the token is bound to (a projected token always is). */
  readonly pod?: { readonly name: string; readonly uid: string; readonly node?: string };
  readonly audiences?: readonly string[];
  /** Lifetime; the API's minimum is 600 s (default 3600 s). */
  readonly expirationSeconds?: number;
}

export class TokenAuthority {
  private readonly tokens = new Map<string, TokenClaims>();

  constructor(
    private readonly clock: Clock,
    private readonly random: Random,
    private readonly getPod: (namespace: string, name: string) => KubeObjectOf<'Pod'> | undefined,
  ) {}

  /** Mint a token; throws what a TokenRequest would refuse. */
  issue(r: TokenRequest): string {
    const ttl = r.expirationSeconds ?? 3600;
    if (!Number.isInteger(ttl) || ttl < 600)
      throw new Error(`TokenRequest: expirationSeconds ${ttl}: may not specify a duration less than 10 minutes`);
    let hex = '';
    for (let i = 0; i < 8; i++) hex += this.random.int(0, 0xffffffff).toString(16).padStart(8, '0');
    const token = `sim-sa-token.${hex}`;
    this.tokens.set(token, {
      namespace: r.namespace,
      serviceAccount: r.serviceAccount,
      pod: r.pod ? { name: r.pod.name, uid: r.pod.uid } : undefined,
      node: r.pod?.node,
      audiences: r.audiences && r.audiences.length > 0 ? [...r.audiences] : [API_AUDIENCE],
      expiresAtMs: this.clock.now() + ttl * 1000,
      id: hex.slice(0, 16),
    });
    return token;
  }

  /** What TokenReview answers about `token` for `audiences`. */
  review(token: string, audiences: readonly string[]): TokenReviewStatus {
    const c = this.tokens.get(token);
    const unauthenticated = (error: string): TokenReviewStatus => ({ authenticated: false, error, user: {} });
    if (!c) return unauthenticated('invalid bearer token');
    if (this.clock.now() >= c.expiresAtMs) return unauthenticated('invalid bearer token, token has expired');
    const wanted = audiences.length > 0 ? audiences : [API_AUDIENCE];
    const valid = wanted.filter((a) => c.audiences.includes(a));
    if (valid.length === 0)
      return unauthenticated(
        `invalid bearer token, token audiences ${JSON.stringify(c.audiences)} is invalid for the target audiences ${JSON.stringify(wanted)}`,
      );
    if (c.pod) {
      const pod = this.getPod(c.namespace, c.pod.name);
      if (!pod) return unauthenticated(`invalid bearer token, pods "${c.pod.name}" not found`);
      if (pod.metadata?.uid !== c.pod.uid)
        return unauthenticated(
          `invalid bearer token, the UID in the bound object reference (${c.pod.uid}) does not match the UID in record (${pod.metadata?.uid ?? ''})`,
        );
    }
    const extra: Record<string, string[]> = { 'authentication.kubernetes.io/credential-id': [`JTI=${c.id}`] };
    if (c.pod) {
      extra['authentication.kubernetes.io/pod-name'] = [c.pod.name];
      extra['authentication.kubernetes.io/pod-uid'] = [c.pod.uid];
    }
    if (c.node) extra['authentication.kubernetes.io/node-name'] = [c.node];
    return {
      authenticated: true,
      audiences: valid,
      user: {
        username: `system:serviceaccount:${c.namespace}:${c.serviceAccount}`,
        groups: ['system:serviceaccounts', `system:serviceaccounts:${c.namespace}`, 'system:authenticated'],
        extra,
      },
    };
  }
}
