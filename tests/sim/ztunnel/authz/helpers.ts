/** Builders for authorization tests: policies as the API serves them, requests, an authorizer. */
import type { AuthorizationPolicy } from '../../../../impl/host/kube.js';
import type { AuthzRequest } from '../../../../impl/ztunnel/authz/authorizer.js';
import type { PeerIdentity } from '../../../../impl/api/identity.js';
import { PolicyAuthorizer } from '../../../../impl/ztunnel/authz/engine.js';
import type { PeerAuthenticationModes } from '../../../../impl/ztunnel/authz/peer-authentication.js';
import { PolicyStore } from '../../../../impl/ztunnel/authz/policy-store.js';

export const ROOT = 'istio-system';

/** An AuthorizationPolicy object; `spec` is untyped on purpose so tests can send malformed ones. */
export function ap(ns: string, name: string, spec: unknown, annotations?: Record<string, string>): AuthorizationPolicy {
  return {
    apiVersion: 'security.istio.io/v1',
    kind: 'AuthorizationPolicy',
    metadata: { namespace: ns, name, ...(annotations ? { annotations } : {}) },
    spec: spec as AuthorizationPolicy['spec'],
  };
}

export const CLIENT: PeerIdentity = { trustDomain: 'cluster.local', namespace: 'client', serviceAccount: 'client-sa' };

/** Default: HBONE from client/client-sa at 10.244.2.20 to app/server (app=server) 10.244.1.10:8080. */
export function req(
  over: Partial<Omit<AuthzRequest, 'dst'>> & { dst?: Partial<AuthzRequest['dst']> } = {},
): AuthzRequest {
  const { dst, ...rest } = over;
  return {
    srcIp: '10.244.2.20',
    srcIdentity: CLIENT,
    dstIp: '10.244.1.10',
    dstPort: 8080,
    ...rest,
    dst: { name: 'server', namespace: 'app', serviceAccount: 'server', labels: { app: 'server' }, ...dst },
  };
}

export const plaintext = (over: Parameters<typeof req>[0] = {}): AuthzRequest =>
  req({ ...over, srcIdentity: undefined });

export function authorizer(
  policies: AuthorizationPolicy[],
  peerAuthentication?: PeerAuthenticationModes,
): { store: PolicyStore; authz: PolicyAuthorizer } {
  const store = new PolicyStore({ rootNamespace: ROOT });
  store.replaceAll(policies);
  store.markSynced();
  return { store, authz: new PolicyAuthorizer({ store, peerAuthentication }) };
}
