/**
 * Vocabulary of the security properties (docs/design.md, 'Properties'). Properties are pure functions
 * over what a World can observe, so the same check runs in the sim, the netns world and kind.
 *
 * Two kinds:
 * - a connection check reads one attempt (`World.connect`) with the cluster state around it;
 * - a state check reads the observed pods after the cluster settled.
 * Both return violations (empty = the property held on this evidence).
 */
import type {
  ConnectOptions,
  ConnectResult,
  Destination,
  PodObservation,
  PodRef,
  PolicyObject,
  Profile,
  Source,
} from '../world.js';

export type PropertyName =
  'outbound-capture' | 'inbound-capture' | 'authorization' | 'identity' | 'convergence' | 'fail-closed' | 'liveness';
export const PROPERTY_NAMES: readonly PropertyName[] = [
  'outbound-capture',
  'inbound-capture',
  'authorization',
  'identity',
  'convergence',
  'fail-closed',
  'liveness',
];

export interface Violation {
  readonly property: PropertyName;
  /** One line: what went wrong, on what (pod, port), in the property's words. */
  readonly message: string;
  /** The observation that shows it (connect result excerpt, pod observation...), for reports and replay. */
  readonly evidence: Readonly<Record<string, unknown>>;
}

export type ComponentStatus = 'up' | 'down';
/** Per node: is the node agent / node proxy running (as the caller commanded it). */
export type ComponentStates = Readonly<
  Record<string, { readonly agent: ComponentStatus; readonly proxy: ComponentStatus }>
>;

/** Mesh settings the properties need to interpret an observation. */
export interface MeshSettings {
  readonly profile: Profile;
  /** Is DNS captured (the proxy's DNS port is then a carve-out for UDP/TCP 53). */
  readonly dnsCapture: boolean;
  /** Namespaces the mesh never enrolls (default ['kube-system']). */
  readonly excludedNamespaces?: readonly string[];
  /** Uid of the kubelet on every node (strict: the only host socket the probe carve-out serves; default 0). */
  readonly kubeletUid?: number;
  /** SPIFFE trust domain of workload identities (default 'cluster.local'). */
  readonly trustDomain?: string;
}

/** What the caller knows about the cluster besides pod observations (the model keeps it). */
export interface ClusterContext {
  readonly mesh: MeshSettings;
  readonly pods: readonly PodObservation[];
  /** Namespace labels as last written (the World does not observe namespaces). */
  readonly namespaces: Readonly<Record<string, Readonly<Record<string, string>>>>;
  /**
   * Pod facts the observation lacks: declared probe ports, service account, and annotations
   * written on the pod spec (e.g. sidecar.istio.io/status). Keyed by podKey.
   */
  readonly specs: Readonly<Record<string, PodFacts>>;
  readonly components: ComponentStates;
  /** AuthorizationPolicies in force (as applied, settled). */
  readonly policies: readonly PolicyObject[];
  /** The cluster settled since the last change (enrollment had the chance to complete). */
  readonly quiescent: boolean;
  /** Pods (by uid) created while the node agent of their node was down (fail closed: they must not start). */
  readonly createdWhileAgentDown?: ReadonlySet<string>;
  /**
   * Pods (by uid) whose CNI ADD the node agent answered ok:false (World.agentAddFault) while its
   * node agent was up: fail closed — they must never run unredirected while selected.
   */
  readonly addRefusedByAgent?: ReadonlySet<string>;
  /**
   * Pods (by podKey) whose own labels or whose namespace's labels were written since the last
   * settle, while the pod existed (carve-out pending-enrollment). Absent: none.
   */
  readonly relabelledSinceSettle?: ReadonlySet<string>;
  /**
   * Every set of policies that was in force since the last settle, oldest (the settled set)
   * first, `policies` last (carve-out policy-propagation). Absent or empty: only `policies`.
   */
  readonly policySetsSinceSettle?: readonly (readonly PolicyObject[])[];
}

export interface PodFacts {
  /** The app's uid (hostNetwork pods: decides the probe carve-out). */
  readonly uid?: number;
  readonly serviceAccount?: string;
  readonly probePorts?: readonly number[];
  readonly annotations?: Readonly<Record<string, string>>;
  /** App TCP ports (liveness connects to them). */
  readonly tcpPorts?: readonly number[];
}

/** One connection attempt and everything needed to judge it. */
export interface ConnectionContext extends ClusterContext {
  readonly from: Source;
  readonly to: Destination;
  readonly opts: ConnectOptions;
  readonly result: ConnectResult;
  /**
   * The pods as observed right before the attempt (`pods` is read after it, and the attempt
   * drives the clock, so an enrollment may complete during it). Only the pending-enrollment
   * carve-out reads it; absent, that carve-out never applies.
   */
  readonly podsBefore?: readonly PodObservation[];
}

export interface ConnectionProperty {
  readonly name: PropertyName;
  readonly doc: string;
  check(ctx: ConnectionContext): Violation[];
}

export interface StateProperty {
  readonly name: PropertyName;
  readonly doc: string;
  check(pods: readonly PodObservation[], ctx: ClusterContext): Violation[];
}

export function violation(
  property: PropertyName,
  message: string,
  evidence: Readonly<Record<string, unknown>>,
): Violation {
  return { property, message, evidence };
}

export type { PodRef };
