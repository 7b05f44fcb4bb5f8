/**
 * Workload identity, shared by the HBONE port (impl/host/hbone.ts), its adapters, the node proxy
 * and its authorization engine: a peer's SPIFFE identity and its URI form.
 */
import { DNS1123_LABEL, DNS1123_SUBDOMAIN } from './dns-names.js';

/** SPIFFE identity of a peer: spiffe://<trust-domain>/ns/<namespace>/sa/<service-account>. */
export interface PeerIdentity {
  readonly trustDomain: string;
  readonly namespace: string;
  readonly serviceAccount: string;
}

export function spiffeId(id: PeerIdentity): string {
  return `spiffe://${id.trustDomain}/ns/${id.namespace}/sa/${id.serviceAccount}`;
}

/**
 * The identity a SPIFFE ID names, or undefined when the text is not exactly
 * spiffe://<trust-domain>/ns/<namespace>/sa/<service-account> (Istio's form: no other path
 * segments, no query, no port, lowercase names a Kubernetes object may have).
 */
export function parseSpiffeId(text: string): PeerIdentity | undefined {
  const m = /^spiffe:\/\/([^/]+)\/ns\/([^/]+)\/sa\/([^/]+)$/.exec(text);
  if (!m) return undefined;
  const [, trustDomain, namespace, serviceAccount] = m as unknown as [string, string, string, string];
  if (!DNS1123_SUBDOMAIN.test(trustDomain) || !DNS1123_LABEL.test(namespace) || !DNS1123_SUBDOMAIN.test(serviceAccount))
    return undefined;
  return { trustDomain, namespace, serviceAccount };
}
