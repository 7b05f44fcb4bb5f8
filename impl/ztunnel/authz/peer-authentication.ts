/**
 * PeerAuthentication STRICT as the destination proxy enforces it (as istiod translates it for ztunnel): a workload
 * whose effective mode is STRICT gets the static DENY policy
 * `<root>/istio_converted_static_strict`, whose one rule is `not_principals: [presence]` — deny
 * every connection without a peer identity (i.e. plaintext on 15006).
 *
 * The Kube port has no PeerAuthentication kind, so the modes are configuration:
 *   { mesh?: MtlsMode; namespaces?: { [ns]: MtlsMode } }
 * Inheritance as istiod: a namespace mode other than UNSET overrides the mesh mode. PERMISSIVE
 * and DISABLE both mean "no static policy" (HBONE is always mTLS). Workload-level and
 * port-level PeerAuthentication are not modelled.
 */
import { match, type L4Policy } from './policy.js';

type MtlsMode = 'UNSET' | 'STRICT' | 'PERMISSIVE' | 'DISABLE';

export interface PeerAuthenticationModes {
  readonly mesh?: MtlsMode;
  readonly namespaces?: Readonly<Record<string, MtlsMode>>;
}

const STATIC_STRICT_POLICY_NAME = 'istio_converted_static_strict';

export function isStrict(modes: PeerAuthenticationModes, namespace: string): boolean {
  const ns = modes.namespaces?.[namespace];
  const effective = ns !== undefined && ns !== 'UNSET' ? ns : modes.mesh;
  return effective === 'STRICT';
}

export function staticStrictPolicy(rootNamespace: string): L4Policy {
  return {
    namespace: rootNamespace,
    name: STATIC_STRICT_POLICY_NAME,
    key: `${rootNamespace}/${STATIC_STRICT_POLICY_NAME}`,
    scope: { kind: 'global' },
    action: 'DENY',
    rules: [{ index: 0, clauses: [[match({ notPrincipals: [{ kind: 'presence' }] })]] }],
    dryRun: false,
    origin: 'static-strict',
  };
}
