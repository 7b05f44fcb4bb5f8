/**
 * Who is asking the mesh CA: the caller a Kubernetes TokenReview of its bearer token names.
 *
 * The CA accepts only bound service-account tokens (projected into a pod, audience-scoped,
 * expiring), as istiod's KubeJWTAuthenticator does through tokenreview.ValidateK8sJwt: the API
 * server says whether the token is authenticated and for which of the requested audiences
 * (expiry, signature and the bound pod's existence are its checks), the username is
 * `system:serviceaccount:<namespace>:<name>`, and the pod the token is bound to is in the extra
 * fields (`authentication.kubernetes.io/pod-name`, `pod-uid`; `node-name` on Kubernetes 1.30+).
 * A token without a pod binding (a legacy Secret token, a TokenRequest without boundObjectRef)
 * is refused: node authorization needs the caller's pod.
 */
import type { TokenReviewStatus } from '../host/kube.js';

/** A caller the API vouched for: a pod's service account, and the pod the token is bound to. */
export interface Caller {
  readonly namespace: string;
  readonly serviceAccount: string;
  readonly podName: string;
  readonly podUid: string;
  /** The node the API says the pod is bound to (Kubernetes 1.30+), when it says so. */
  readonly nodeName: string | undefined;
}

type CallerResult = { readonly ok: true; readonly caller: Caller } | { readonly ok: false; readonly reason: string };

const SA_USER = /^system:serviceaccount:([a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?):([a-z0-9][-a-z0-9.]{0,251})$/;
const EXTRA = 'authentication.kubernetes.io/';

/** An extra field with exactly one non-empty value. */
function single(extra: Readonly<Record<string, readonly string[]>> | undefined, key: string): string | undefined {
  const v = extra?.[`${EXTRA}${key}`];
  return v !== undefined && v.length === 1 && v[0] !== '' ? v[0] : undefined;
}

/** The caller a TokenReview answer names, for a review that asked for `audience`. */
export function callerFromTokenReview(status: TokenReviewStatus, audience: string): CallerResult {
  if (status.authenticated !== true)
    return { ok: false, reason: `the token is not authenticated${status.error ? `: ${status.error}` : ''}` };
  // The API answers with the requested audiences the token is valid for; none means it was minted for another.
  if (!(status.audiences ?? []).includes(audience))
    return {
      ok: false,
      reason: `the token is not valid for audience ${JSON.stringify(audience)} (the API says: ${JSON.stringify(status.audiences ?? [])})`,
    };
  const username = status.user?.username ?? '';
  const m = SA_USER.exec(username);
  if (!m) return { ok: false, reason: `${JSON.stringify(username)} is not a service account` };
  const podName = single(status.user?.extra, 'pod-name');
  const podUid = single(status.user?.extra, 'pod-uid');
  if (podName === undefined || podUid === undefined)
    return {
      ok: false,
      reason: `the token of ${username} is not bound to a pod (no pod-name and pod-uid in its extra fields)`,
    };
  return {
    ok: true,
    caller: {
      namespace: m[1]!,
      serviceAccount: m[3]!,
      podName,
      podUid,
      nodeName: single(status.user?.extra, 'node-name'),
    },
  };
}
