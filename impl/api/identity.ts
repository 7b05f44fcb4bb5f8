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
