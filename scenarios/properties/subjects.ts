/**
 * Which pods the capture properties protect, decided from observations and the reference
 * enrollment model only (never from what the agent believes).
 *
 * A pod is a capture subject when it is running in its own netns and either its netns holds the
 * redirection, or it is selected by the reference model and the mesh says it is enrolled (status
 * annotation `enabled`), or it is selected while its node agent is up and the cluster is quiescent — so a pod
 * that started without rules (B5) or lost them (reboot, B14; docs/bypass-classes.md) is still protected by the checks.
 */
import type { PodObservation, PodRef, Source } from '../world.js';
import { podKey } from '../world.js';
import { selectionOf } from './enrollment-model.js';
import type { ClusterContext } from './types.js';

export function findPod(ctx: Pick<ClusterContext, 'pods'>, ref: PodRef): PodObservation | undefined {
  return ctx.pods.find((p) => p.namespace === ref.namespace && p.name === ref.name);
}

export function isCaptureSubject(pod: PodObservation, ctx: ClusterContext): boolean {
  if (!pod.started || pod.hostNetwork) return false;
  if (pod.redirected) return true;
  const selected = selectionOf(pod, ctx).selected;
  // The status annotation counts only on a pod the mesh should hold: anyone who may create a pod
  // can write `ambient.istio.io/redirection: enabled` on a pod that opted out (mode none), and
  // while its node agent is down nobody removes it. Such a pod is outside the mesh by its owner's
  // choice; its unproxied traffic is no bypass (found by a soak: check --seed 2826944233).
  if (pod.annotation === 'enabled' && selected) return true;
  const agentUp = ctx.components[pod.node]?.agent !== 'down';
  return agentUp && ctx.quiescent && selected;
}

/** In the mesh by every account (for liveness: enrolled and served). */
export function isFullyEnrolled(pod: PodObservation, ctx: ClusterContext): boolean {
  return pod.started && !pod.hostNetwork && pod.redirected && pod.served && selectionOf(pod, ctx).selected;
}

/** Outside the mesh by every account (liveness: must be untouched). */
export function isOutsideMesh(pod: PodObservation, ctx: ClusterContext): boolean {
  return pod.started && !pod.redirected && pod.annotation === undefined && !selectionOf(pod, ctx).selected;
}

export function identityOf(pod: PodRef, ctx: ClusterContext): string {
  const sa = ctx.specs[podKey(pod)]?.serviceAccount ?? 'default';
  return `spiffe://${ctx.mesh.trustDomain ?? 'cluster.local'}/ns/${pod.namespace}/sa/${sa}`;
}

export function nodesOf(ctx: ClusterContext, from: Source, dst: PodObservation | undefined): string[] {
  const out = new Set<string>();
  if (from.kind === 'host') out.add(from.node);
  if (from.kind === 'pod') {
    const p = findPod(ctx, from.pod);
    if (p) out.add(p.node);
  }
  if (dst) out.add(dst.node);
  return [...out];
}
