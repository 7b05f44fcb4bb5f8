/**
 * Which pods the capture properties protect, decided from observations and the reference
 * enrollment model only (never from what the agent believes).
 *
 * A pod is a capture subject when it is running in its own netns and either the mesh says it is
 * enrolled (redirection annotation written, or redirection present) or it should be (selected
 * by the reference model) while its node agent is up and the cluster is quiescent — so a pod
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
  if (pod.annotation === 'enabled' || pod.redirected) return true;
  const agentUp = ctx.components[pod.node]?.agent !== 'down';
  return agentUp && ctx.quiescent && selectionOf(pod, ctx).selected;
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
