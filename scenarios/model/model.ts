/**
 * The model of the cluster the commands keep beside the real World. It is deliberately a
 * simplification (fast-check's model-based testing docs warn against copying the system): it
 * records what the history asked for — which namespaces and pods exist with which labels, which
 * policies are in force, which components are down — and nothing the system decides (enrollment,
 * rules, identities). Commands use it to pick valid targets; properties read it as the intent.
 */
import type { AppSpec, Component, PodRef, PolicyObject, Profile } from '../world.js';
import { podKey } from '../world.js';
import type { ThreatSpec } from './contracts.js';
import { referenceSelects } from '../properties/enrollment-model.js';

export interface ModelPod {
  readonly ref: PodRef;
  /** Node asked for (the world may choose; filled from the observation). */
  node: string;
  labels: Record<string, string>;
  readonly annotations: Readonly<Record<string, string>>;
  readonly app: AppSpec;
  readonly hostNetwork: boolean;
  /** IPs observed at creation (the model never computes addresses). */
  ips: readonly string[];
  /** The pod's API uid (observed). */
  uid: string;
  /** Did the pod start (the world reports; fail-closed starts may be refused). */
  started: boolean;
}

export interface ClusterModel {
  readonly nodes: readonly string[];
  readonly profile: Profile;
  readonly threat: ThreatSpec;
  readonly namespaces: Map<string, Record<string, string>>;
  readonly pods: Map<string, ModelPod>;
  readonly policies: Map<string, PolicyObject>;
  /** `${component}@${node}` for every component the history stopped. */
  readonly down: Set<string>;
  /** Counter for generated pod names, so a replay names pods identically. */
  nextPod: number;
  /** No change since the last Settle (enrollment had the chance to complete). */
  quiescent: boolean;
  /** Pod uids created while the node agent of their node was down (fail closed). */
  readonly createdWhileAgentDown: Set<string>;
  /** Pod uids whose CNI ADD the node agent refused under World.agentAddFault (fail closed). */
  readonly addRefusedByAgent: Set<string>;
  /**
   * Since the last Settle: pods (by podKey) whose labels, or whose namespace's labels, the
   * history wrote while they existed (carve-out pending-enrollment). Cleared by Settle.
   */
  readonly relabelled: Set<string>;
  /**
   * Since the last Settle: every policy set in force, oldest (the settled one) first; empty when
   * no policy changed (carve-out policy-propagation). Cleared by Settle.
   */
  policySets: PolicyObject[][];
}

/** What properties may read: the same model, read-only by convention. */
export type ModelView = Readonly<ClusterModel>;

export function emptyModel(nodes: readonly string[], profile: Profile, threat: ThreatSpec): ClusterModel {
  return {
    nodes,
    profile,
    threat,
    namespaces: new Map(),
    pods: new Map(),
    policies: new Map(),
    down: new Set(),
    nextPod: 0,
    quiescent: true,
    createdWhileAgentDown: new Set(),
    addRefusedByAgent: new Set(),
    relabelled: new Set(),
    policySets: [],
  };
}

/** The cluster settled: enrollment and policy had the chance to complete, the windows close. */
export function markSettled(model: ClusterModel): void {
  model.quiescent = true;
  model.relabelled.clear();
  model.policySets = [];
}

/** A label write reached these pods (pending-enrollment window until the next settle). */
export function markRelabelled(model: ClusterModel, keys: Iterable<string>): void {
  for (const k of keys) model.relabelled.add(k);
}

/** The pods of a namespace the model knows now (a namespace label write reaches them). */
export function podsInNamespace(model: ModelView, namespace: string): string[] {
  return [...model.pods.values()].filter((p) => p.ref.namespace === namespace).map((p) => podKey(p.ref));
}

/** Record a policy change (`change` mutates model.policies); keeps the sets for policy-propagation. */
export function changePolicies(model: ClusterModel, change: () => void): void {
  if (model.policySets.length === 0) model.policySets.push([...model.policies.values()]);
  change();
  model.policySets.push([...model.policies.values()]);
}

export function componentKey(component: Component, node: string): string {
  return `${component}@${node}`;
}

export function isUp(model: ModelView, component: Component, node: string): boolean {
  return !model.down.has(componentKey(component, node));
}

/** Pods in a stable order, so an index drawn by fast-check resolves the same way on replay. */
export function podList(model: ModelView): ModelPod[] {
  return [...model.pods.values()].sort((a, b) => (podKey(a.ref) < podKey(b.ref) ? -1 : 1));
}

/** Resolve a drawn index to a pod (undefined when there are none). */
export function pickPod(
  model: ModelView,
  index: number,
  filter: (p: ModelPod) => boolean = () => true,
): ModelPod | undefined {
  const list = podList(model).filter(filter);
  return list.length === 0 ? undefined : list[index % list.length];
}

export function pickNamespace(model: ModelView, index: number): string | undefined {
  const list = [...model.namespaces.keys()].sort();
  return list.length === 0 ? undefined : list[index % list.length];
}

/** A deep copy (the world pool keeps the post-prelude model and hands each reused history its own). */
export function cloneModel(m: ModelView): ClusterModel {
  return {
    ...m,
    namespaces: new Map([...m.namespaces].map(([k, v]) => [k, { ...v }])),
    pods: new Map([...m.pods].map(([k, p]) => [k, { ...p, labels: { ...p.labels } }])),
    policies: new Map(m.policies),
    down: new Set(m.down),
    createdWhileAgentDown: new Set(m.createdWhileAgentDown),
    addRefusedByAgent: new Set(m.addRefusedByAgent),
    relabelled: new Set(m.relabelled),
    policySets: m.policySets.map((set) => [...set]),
  };
}

/**
 * Does the reference model select a pod of this shape in `namespace`, with the namespace labels
 * the model holds now? Fail closed is owed only to pods that were ambient when their sandbox was
 * made: a pod created outside the mesh while its agent was down, whose namespace is labelled
 * later, cannot be enrolled until the agent returns — that is convergence's business, which
 * skips such nodes, not a fail-closed bypass (a default check found the judge calling it one).
 */
export function selectedAtCreation(
  m: Readonly<ClusterModel>,
  pod: {
    readonly namespace: string;
    readonly labels: Readonly<Record<string, string>>;
    readonly annotations: Readonly<Record<string, string>>;
    readonly hostNetwork: boolean;
  },
): boolean {
  return referenceSelects({
    namespace: pod.namespace,
    labels: pod.labels,
    namespaceLabels: m.namespaces.get(pod.namespace),
    hostNetwork: pod.hostNetwork,
    phase: 'Pending',
    annotations: pod.annotations,
    excludedNamespaces: ['kube-system'],
  }).selected;
}
