/**
 * May this caller have a certificate for that identity? The mesh CA's node authorization,
 * following istiod's ClusterNodeAuthorizer (security/pkg/server/ca/node_auth.go), which
 * implements a subset of Kubernetes Node Authorization for node proxies:
 *
 *  1. the caller's service account is one the CA trusts to ask for others (the node proxy's;
 *     upstream CA_TRUSTED_NODE_ACCOUNTS) — a workload asking for itself is not this path;
 *  2. the requested identity is a well-formed SPIFFE ID of the CA's trust domain;
 *  3. the caller's pod exists with the uid and service account its token is bound to (a pod
 *     re-created under the same name is another pod: the client retries with its new token);
 *  4. some pod that has not failed, with the requested namespace and service account, is
 *     scheduled on the caller's node (its spec.nodeName).
 *
 * Stricter than upstream: the trust domain is checked, and a token the API says is bound to
 * another node than the caller pod's is refused. As upstream, a pod being deleted still counts
 * (its containers may run until they stop), and a pod without a service account name never
 * matches.
 */
import { parseSpiffeId, type PeerIdentity } from '../api/identity.js';
import type { KubeObjectOf } from '../host/kube.js';
import type { Caller } from './caller.js';

type Pod = KubeObjectOf<'Pod'>;

/** The pods the CA can see (an informer's cache in practice). */
export interface PodView {
  /** The pod named `name` in `namespace`, if any. */
  get(namespace: string, name: string): PodFacts | undefined;
  /** Every pod scheduled on `node`. */
  onNode(node: string): readonly PodFacts[];
}

/** What node authorization reads of a pod. */
export interface PodFacts {
  readonly namespace: string;
  readonly name: string;
  readonly uid: string;
  readonly serviceAccount: string;
  readonly nodeName: string | undefined;
  readonly phase: string | undefined;
}

/** A pod as node authorization reads it (spec.serviceAccountName, spec.nodeName, status.phase). */
export function podFacts(pod: Pod): PodFacts {
  return {
    namespace: pod.metadata?.namespace ?? '',
    name: pod.metadata?.name ?? '',
    uid: pod.metadata?.uid ?? '',
    serviceAccount: pod.spec?.serviceAccountName ?? '',
    nodeName: pod.spec?.nodeName,
    phase: pod.status?.phase,
  };
}

interface NodeAuthorizerConfig {
  readonly trustDomain: string;
  /** Service accounts allowed to ask for other identities, as `namespace/name`. */
  readonly trustedNodeAccounts: ReadonlySet<string>;
}

type Authorization =
  | { readonly ok: true; readonly identity: PeerIdentity; readonly node: string }
  | { readonly ok: false; readonly reason: string };

export function authorizeImpersonation(
  cfg: NodeAuthorizerConfig,
  pods: PodView,
  caller: Caller,
  requested: string,
): Authorization {
  const who = `${caller.namespace}/${caller.serviceAccount}`;
  if (!cfg.trustedNodeAccounts.has(who))
    return { ok: false, reason: `caller ${who} (pod ${caller.podName}) is not allowed to ask for other identities` };
  const identity = parseSpiffeId(requested);
  if (!identity)
    return {
      ok: false,
      reason: `${JSON.stringify(requested)} is not a SPIFFE ID of the form spiffe://<trust-domain>/ns/<namespace>/sa/<name>`,
    };
  if (identity.trustDomain !== cfg.trustDomain)
    return { ok: false, reason: `${requested} is not in this CA's trust domain ${cfg.trustDomain}` };
  const pod = pods.get(caller.namespace, caller.podName);
  if (!pod) return { ok: false, reason: `the caller's pod ${caller.namespace}/${caller.podName} does not exist` };
  if (pod.uid !== caller.podUid)
    return {
      ok: false,
      reason: `the caller's pod ${caller.namespace}/${caller.podName} is now uid ${pod.uid}, not the token's ${caller.podUid} (retry with the current pod's token)`,
    };
  if (pod.serviceAccount !== caller.serviceAccount)
    return {
      ok: false,
      reason: `the caller's pod ${caller.namespace}/${caller.podName} runs as ${pod.serviceAccount}, not ${caller.serviceAccount}`,
    };
  const node = pod.nodeName;
  if (node === undefined || node === '')
    return { ok: false, reason: `the caller's pod ${caller.namespace}/${caller.podName} is not scheduled on a node` };
  if (caller.nodeName !== undefined && caller.nodeName !== node)
    return { ok: false, reason: `the caller's token is bound to node ${caller.nodeName}, its pod runs on ${node}` };
  const there = pods
    .onNode(node)
    .some(
      (p) =>
        p.namespace === identity.namespace &&
        p.serviceAccount !== '' &&
        p.serviceAccount === identity.serviceAccount &&
        p.phase !== 'Failed',
    );
  if (!there)
    return { ok: false, reason: `no pod of ${identity.namespace}/${identity.serviceAccount} runs on node ${node}` };
  return { ok: true, identity, node };
}
