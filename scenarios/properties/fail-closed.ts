/**
 * Fail closed: with the node agent or the node proxy down, enrolled traffic fails rather than
 * bypasses, and new ambient pods do not start.
 *
 * Connection part: any capture or authorization violation of an attempt that involves a node
 * whose agent or proxy is down is (also) a fail-closed violation. State part: a pod the
 * reference model selects, created while a component of its node was down, must not be
 * running without redirection; nor may a selected pod whose CNI ADD the node agent refused
 * (answered ok:false: netns not found, stale cache) — the plugin must fail that ADD.
 */
import { podKey, type PodObservation } from '../world.js';
import { authorizationViolations } from './authorization.js';
import { inboundViolations, outboundViolations } from './capture.js';
import { selectionOf } from './enrollment-model.js';
import { findPod, nodesOf } from './subjects.js';
import {
  violation,
  type ClusterContext,
  type ConnectionContext,
  type ConnectionProperty,
  type StateProperty,
  type Violation,
} from './types.js';

function downOn(ctx: ClusterContext, node: string): string[] {
  const c = ctx.components[node];
  if (!c) return [];
  return [...(c.agent === 'down' ? ['agent'] : []), ...(c.proxy === 'down' ? ['proxy'] : [])];
}

function failClosedConnectionViolations(ctx: ConnectionContext): Violation[] {
  const dst = ctx.to.kind === 'pod' ? findPod(ctx, ctx.to.pod) : undefined;
  const down = nodesOf(ctx, ctx.from, dst).flatMap((n) => downOn(ctx, n).map((c) => `${c} on ${n}`));
  if (down.length === 0) return [];
  return [...outboundViolations(ctx), ...inboundViolations(ctx), ...authorizationViolations(ctx)].map((v) =>
    violation('fail-closed', `with ${down.join(', ')} down: ${v.message}`, {
      ...v.evidence,
      down,
      underlying: v.property,
    }),
  );
}

function failClosedStateViolations(pods: readonly PodObservation[], ctx: ClusterContext): Violation[] {
  const created = ctx.createdWhileAgentDown ?? new Set<string>();
  const refused = ctx.addRefusedByAgent ?? new Set<string>();
  const out: Violation[] = [];
  for (const p of pods) {
    if (!(created.has(p.uid) || refused.has(p.uid)) || !p.started || p.redirected) continue;
    const sel = selectionOf(p, ctx);
    if (!sel.selected) continue;
    const why = created.has(p.uid)
      ? `was created while the mesh on ${p.node} was down`
      : `had its CNI ADD refused by the node agent on ${p.node} (ok:false)`;
    out.push(
      violation('fail-closed', `${podKey(p)} (${sel.why}) ${why} and is running without redirection`, { pod: p }),
    );
  }
  return out;
}

export const failClosedConnection: ConnectionProperty = {
  name: 'fail-closed',
  doc: 'with the node agent or the proxy down, enrolled traffic fails rather than bypasses',
  check: failClosedConnectionViolations,
};

export const failClosedState: StateProperty = {
  name: 'fail-closed',
  doc: 'ambient pods created while the mesh on their node is down do not start without redirection',
  check: failClosedStateViolations,
};
