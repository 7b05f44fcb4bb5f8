/**
 * Workload identity, shared by the HBONE port (impl/host/hbone.ts), its adapters, the node proxy
 * and its authorization engine: a peer's SPIFFE identity and its URI form.
 */

/** SPIFFE identity of a peer: spiffe://<trust-domain>/ns/<namespace>/sa/<service-account>. */
export interface PeerIdentity {
  readonly trustDomain: string;
  readonly namespace: string;
  readonly serviceAccount: string;
}

export function spiffeId(id: PeerIdentity): string {
  return `spiffe://${id.trustDomain}/ns/${id.namespace}/sa/${id.serviceAccount}`;
}

/** A DNS-1123 label: what a namespace name is. */
const LABEL = /^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$/;
/** A DNS-1123 subdomain (service account names; trust domains such as cluster.local). */
const SUBDOMAIN = /^(?=.{1,253}$)[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$/;

/**
 * The identity a SPIFFE ID names, or undefined when the text is not exactly
 * spiffe://<trust-domain>/ns/<namespace>/sa/<service-account> (Istio's form: no other path
 * segments, no query, no port, lowercase names a Kubernetes object may have).
 */
export function parseSpiffeId(text: string): PeerIdentity | undefined {
  const m = /^spiffe:\/\/([^/]+)\/ns\/([^/]+)\/sa\/([^/]+)$/.exec(text);
  if (!m) return undefined;
  const [, trustDomain, namespace, serviceAccount] = m as unknown as [string, string, string, string];
  if (!SUBDOMAIN.test(trustDomain) || !LABEL.test(namespace) || !SUBDOMAIN.test(serviceAccount)) return undefined;
  return { trustDomain, namespace, serviceAccount };
}
