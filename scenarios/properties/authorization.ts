/**
 * Authorization: every delivery to an app in an enrolled pod was allowed by the destination
 * proxy under the policies in force. Evidence required: the proxy logged an allowing inbound
 * decision for that pod during the attempt, and the reference policy oracle (policy-oracle.ts)
 * does not say 'deny' for the identity the proxy should have seen (under any policy set in force
 * since the last settle: carve-out policy-propagation). A delivery that skipped the
 * proxy (and no carve-out applies) was authorized by nobody, so it is a violation too.
 */
import { podKey } from '../world.js';
import { destinationPod, unprotectedFirstHop } from './capture.js';
import { inboundCarveOut, policySetsInForce, sourcePod } from './carve-outs.js';
import { referenceDecision } from './policy-oracle.js';
import { findPod, identityOf, isCaptureSubject } from './subjects.js';
import { violation, type ConnectionContext, type ConnectionProperty, type Violation } from './types.js';

/** The identity the destination should see: the source pod's, if its own proxy carried the connection. */
function expectedIdentity(ctx: ConnectionContext): string | undefined {
  const src = sourcePod(ctx);
  if (!src || !isCaptureSubject(src, ctx)) return undefined;
  const r = ctx.result;
  const viaSourceProxy =
    r.acceptedBy === 'proxy-outbound' &&
    r.acceptedIn !== undefined &&
    'name' in r.acceptedIn &&
    podKey(r.acceptedIn) === podKey(src);
  return viaSourceProxy ? identityOf(src, ctx) : undefined;
}

export function authorizationViolations(ctx: ConnectionContext): Violation[] {
  const out: Violation[] = [];
  const target = destinationPod(ctx);
  if (target && isCaptureSubject(target, ctx) && !inboundCarveOut(ctx, target, ctx.to.port)) {
    const hop = unprotectedFirstHop(ctx);
    if (hop)
      out.push(
        violation(
          'authorization',
          `${ctx.opts.proto ?? 'tcp'} to ${podKey(target)}:${ctx.to.port} was authorized by nobody: ${hop}`,
          {
            from: ctx.from,
            to: ctx.to,
            opts: ctx.opts,
            acceptedBy: ctx.result.acceptedBy,
            acceptedIn: ctx.result.acceptedIn,
            proxyLog: ctx.result.proxyLog,
          },
        ),
      );
  }
  for (const d of ctx.result.deliveries) {
    const pod = findPod(ctx, d.pod);
    if (!pod || !isCaptureSubject(pod, ctx)) continue;
    if (inboundCarveOut(ctx, pod, d.port, d)) continue;
    const ev = {
      delivery: d,
      from: ctx.from,
      to: ctx.to,
      opts: ctx.opts,
      proxyLog: ctx.result.proxyLog,
      ...(ctx.result.trace ? { trace: ctx.result.trace } : {}),
    };
    if (!d.viaProxy) {
      out.push(
        violation(
          'authorization',
          `app ${podKey(pod)}:${d.port} got a connection from ${d.peer} that no proxy authorized`,
          ev,
        ),
      );
      continue;
    }
    // Only the pod's own node proxy authorizes its inbound (another node's log says nothing).
    const allowing = ctx.result.proxyLog.find(
      (e) =>
        e.node === pod.node &&
        e.pod !== undefined &&
        podKey(e.pod) === podKey(pod) &&
        e.direction !== 'outbound' &&
        e.allowed === true,
    );
    if (!allowing) {
      out.push(
        violation(
          'authorization',
          `app ${podKey(pod)}:${d.port} got a proxied connection but its proxy logged no allowing inbound decision`,
          ev,
        ),
      );
      continue;
    }
    const srcIdentity = expectedIdentity(ctx);
    // Right after a policy change the proxy may still enforce an earlier set (carve-out
    // policy-propagation): a violation only when every set in force since the last settle denies.
    const request = { dstNamespace: pod.namespace, dstLabels: pod.labels, port: d.port, srcIdentity };
    const oracle = referenceDecision(ctx.policies, request);
    if (oracle === 'deny' && policySetsInForce(ctx).every((set) => referenceDecision(set, request) === 'deny')) {
      out.push(
        violation(
          'authorization',
          `app ${podKey(pod)}:${d.port} got a connection (as ${srcIdentity ?? 'no identity'}) that the policies in force deny`,
          { ...ev, oracle, srcIdentity },
        ),
      );
    }
  }
  return out;
}

export const authorization: ConnectionProperty = {
  name: 'authorization',
  doc: 'every connection delivered to an app in an enrolled pod was allowed by the destination proxy under the policies in force',
  check: authorizationViolations,
};
