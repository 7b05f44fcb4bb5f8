/**
 * The contract between the proxy's connection handling and its authorization engine: what the
 * destination proxy knows about a connection when it decides, and what it decides. The engine
 * (this folder) implements AuthorizationPolicy L4 semantics (istio/ztunnel src/rbac.rs and src/state.rs); the listeners
 * (impl/ztunnel/inbound*.ts) call it for 15006 and 15008 and again when policies change.
 */
import type { PeerIdentity } from '../../api/identity.js';

/** The destination workload the connection is for (the pod this proxy serves). */
export interface DestinationWorkload {
  readonly name: string;
  readonly namespace: string;
  readonly serviceAccount: string;
  readonly labels: Readonly<Record<string, string>>;
}

export interface AuthzRequest {
  /** Source address as the destination proxy sees it (the client's IP). */
  readonly srcIp: string;
  /** Peer identity from mTLS (HBONE, 15008); undefined for plaintext (15006). */
  readonly srcIdentity: PeerIdentity | undefined;
  readonly dst: DestinationWorkload;
  /** Destination address and port the client asked for (original destination / CONNECT target). */
  readonly dstIp: string;
  readonly dstPort: number;
}

export interface AuthzDecision {
  readonly allow: boolean;
  /** Human-readable why: the policy (namespace/name) and rule that decided, or the default. */
  readonly reason: string;
  /**
   * Dry-run policies (istio.io/dry-run) as upstream logs them, never enforced (engine.ts steps
   * 4 and 6): a matching dry-run DENY → wouldAllow false; a matching dry-run ALLOW → wouldAllow
   * true; with no enforced ALLOW and no dry-run ALLOW matching → each dry-run ALLOW, wouldAllow false.
   */
  readonly dryRun: readonly { readonly policy: string; readonly wouldAllow: boolean }[];
}

export interface Authorizer {
  evaluate(req: AuthzRequest): AuthzDecision;
  /** Bumped whenever the policy set changes; live connections are re-checked on a change. */
  readonly generation: number;
  onChange(listener: () => void): () => void;
}
