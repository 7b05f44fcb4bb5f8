/**
 * Identity: no delivery is authorized under an identity its sender does not hold. A forged
 * identity skips authorization as surely as a bypassed redirect: an ALLOW for `friend` lets in
 * whoever the destination proxy believes is `friend`.
 *
 * Who holds what (docs/mesh-identity.md, 'The identity property'):
 * - an app in a pod of its own netns holds its pod's identity (namespace and service account),
 *   which its node proxy presents for it;
 * - root on a node — a host process as uid 0, or a hostNetwork pod running as uid 0 — holds
 *   what that node's proxy holds: the identities of the pods scheduled on the node. The node is
 *   the unit of trust, as in upstream ambient (ztunnel holds them, and the CA grants a node
 *   nothing else); what this property checks is that it is no more than that;
 * - nothing else holds an identity: a host process of another uid cannot read the proxy's token,
 *   a client outside the cluster has no proxy.
 * One carve-out (carve-outs.ts virtual-interface-reroute): a pod whose owner reroutes its
 * virtual interfaces sends what arrives there to itself under its own identity.
 * Evidence: the destination proxy's allowing inbound decision for the delivered pod names the
 * peer identity it verified. A plaintext delivery carries no identity and is never an identity
 * violation (whether it should have been let in is authorization's question).
 */
import { podKey, type PodObservation, type Source } from '../world.js';
import { identityCarveOut, sourcePod } from './carve-outs.js';
import { findPod, identityOf } from './subjects.js';
import { violation, type ConnectionContext, type ConnectionProperty, type Violation } from './types.js';

/** The identities the sender of `ctx` holds (see the module comment). */
function heldIdentities(ctx: ConnectionContext): ReadonlySet<string> {
  const f: Source = ctx.from;
  if (f.kind === 'outside') return new Set();
  if (f.kind === 'host') return f.uid === 0 ? nodeIdentities(ctx, f.node) : new Set();
  const pod = sourcePod(ctx);
  if (!pod) return new Set();
  if (!pod.hostNetwork) return new Set([identityOf(pod, ctx)]);
  // A hostNetwork app is a process of its node's host network namespace.
  return ctx.specs[podKey(pod)]?.uid === 0 ? nodeIdentities(ctx, pod.node) : new Set();
}

function nodeIdentities(ctx: ConnectionContext, node: string): ReadonlySet<string> {
  return new Set(ctx.pods.filter((p: PodObservation) => p.node === node).map((p) => identityOf(p, ctx)));
}

function senderText(ctx: ConnectionContext): string {
  const f = ctx.from;
  if (f.kind === 'outside') return 'a client outside the cluster';
  if (f.kind === 'host') return `a host process on ${f.node} as uid ${f.uid}`;
  return `pod ${podKey(f.pod)}`;
}

function identityViolations(ctx: ConnectionContext): Violation[] {
  const out: Violation[] = [];
  let held: ReadonlySet<string> | undefined;
  for (const d of ctx.result.deliveries) {
    if (!d.viaProxy) continue;
    const pod = findPod(ctx, d.pod);
    if (!pod) continue;
    // Only the pod's own node proxy authorizes its inbound (as authorization.ts reads the log).
    const decisions = ctx.result.proxyLog.filter(
      (e) =>
        e.node === pod.node &&
        e.pod !== undefined &&
        podKey(e.pod) === podKey(pod) &&
        e.direction !== 'outbound' &&
        e.allowed === true &&
        e.srcIdentity !== undefined,
    );
    for (const e of decisions) {
      held ??= heldIdentities(ctx);
      if (held.has(e.srcIdentity!)) continue;
      if (identityCarveOut(ctx, pod, e.srcIdentity!, identityOf(pod, ctx))) continue;
      out.push(
        violation(
          'identity',
          `app ${podKey(pod)}:${d.port} got a connection its proxy authorized as ${e.srcIdentity}, which ${senderText(ctx)} does not hold (it holds ${held.size === 0 ? 'no identity' : [...held].sort().join(', ')})`,
          {
            delivery: d,
            from: ctx.from,
            to: ctx.to,
            srcIdentity: e.srcIdentity,
            held: [...held].sort(),
            proxyLog: ctx.result.proxyLog,
          },
        ),
      );
    }
  }
  return out;
}

export const identity: ConnectionProperty = {
  name: 'identity',
  doc: 'no delivery is authorized under an identity its sender does not hold (a pod holds its own; root on a node holds the identities of that node’s pods, as its proxy does)',
  check: identityViolations,
};
