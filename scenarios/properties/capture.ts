/**
 * Outbound and inbound capture (docs/design.md, 'Properties').
 *
 * Outbound: whatever an app in a capture subject sends (TCP, and — stated wider than upstream's
 * TCP-only promise on purpose — UDP and raw frames too) is accepted by the node proxy for that
 * pod (outbound listener, or the DNS listener for DNS) or fails. Upstream's narrower scope shows
 * up as expected bypass B8 (docs/bypass-classes.md#b8) in the table rather than being defined away.
 *
 * Inbound: every connection or datagram delivered to an app in a capture subject came through
 * the pod's own node proxy (the proxy of the pod's node, acting as that pod's inbound), or
 * matches an inbound carve-out.
 */
import { podKey, type Acceptor, type Delivery, type PodObservation } from '../world.js';
import { inboundCarveOut, outboundCarveOut, sourcePod } from './carve-outs.js';
import { findPod, isCaptureSubject } from './subjects.js';
import { violation, type ConnectionContext, type ConnectionProperty, type Violation } from './types.js';

const SOURCE_PROXY: readonly Acceptor[] = ['proxy-outbound', 'proxy-dns'];

function summary(ctx: ConnectionContext): Record<string, unknown> {
  return {
    from: ctx.from,
    to: ctx.to,
    opts: ctx.opts,
    outcome: ctx.result.outcome,
    acceptedBy: ctx.result.acceptedBy,
    acceptedIn: ctx.result.acceptedIn,
    deliveries: ctx.result.deliveries,
    ...(ctx.result.trace ? { trace: ctx.result.trace } : {}),
  };
}

export function outboundViolations(ctx: ConnectionContext): Violation[] {
  const src = sourcePod(ctx);
  if (!src || !isCaptureSubject(src, ctx)) return [];
  if (outboundCarveOut(ctx)) return [];
  const r = ctx.result;
  const out: Violation[] = [];
  const acceptedInSource = r.acceptedIn !== undefined && 'name' in r.acceptedIn && podKey(r.acceptedIn) === podKey(src);
  if (r.acceptedBy !== undefined && !(SOURCE_PROXY.includes(r.acceptedBy) && acceptedInSource)) {
    out.push(
      violation(
        'outbound-capture',
        `${podKey(src)}: ${ctx.opts.proto ?? 'tcp'} to ${describeDst(ctx)} was first accepted by ${r.acceptedBy}${r.acceptedIn ? ` in ${'name' in r.acceptedIn ? podKey(r.acceptedIn) : r.acceptedIn.node}` : ''}, not by the pod's node proxy`,
        summary(ctx),
      ),
    );
  }
  // Datagrams and raw frames have no acceptor; any delivery the source proxy did not make is a bypass.
  for (const d of r.deliveries) {
    if (!d.viaProxy && podKey(d.pod) !== podKey(src) && r.acceptedBy === undefined) {
      out.push(
        violation(
          'outbound-capture',
          `${podKey(src)}: ${ctx.opts.proto ?? 'tcp'}${ctx.opts.raw ? ' (raw)' : ''} reached app ${podKey(d.pod)}:${d.port} without the node proxy`,
          summary(ctx),
        ),
      );
    }
  }
  // An established connection has a first hop; one the world did not see is no evidence of
  // capture (even when a proxy made some delivery later), so it is judged as uncaptured.
  if (
    r.acceptedBy === undefined &&
    (r.outcome === 'established' || (r.outcome === 'delivered' && r.deliveries.length === 0))
  ) {
    out.push(
      violation(
        'outbound-capture',
        `${podKey(src)}: ${ctx.opts.proto ?? 'tcp'} to ${describeDst(ctx)} was ${r.outcome} outside the mesh (no proxy accepted it; the world saw no first hop)`,
        summary(ctx),
      ),
    );
  }
  return out;
}

/**
 * The pod a connection was aimed at: the destination pod, or the (non-hostNetwork) pod that
 * holds the destination address. A hostNetwork pod's address is its node's: not a pod target.
 */
export function destinationPod(ctx: ConnectionContext): PodObservation | undefined {
  const to = ctx.to;
  if (to.kind === 'pod') return findPod(ctx, to.pod);
  return ctx.pods.find((p) => !p.hostNetwork && p.ips.includes(to.ip));
}

const ANY_PROXY: readonly Acceptor[] = ['proxy-outbound', 'proxy-inbound', 'proxy-hbone', 'proxy-dns'];

/**
 * Why an answered attempt at a capture subject was taken at its first hop by something that is
 * neither a node proxy nor an app (whose delivery the callers judge), or undefined. Deliveries
 * alone do not cover it: a socket that is not the app's (a host socket, a stray listener in the
 * pod) took the connection and no delivery was recorded — and an established connection with
 * no first hop at all is an observation the properties cannot call captured.
 */
export function unprotectedFirstHop(ctx: ConnectionContext): string | undefined {
  const r = ctx.result;
  if (r.outcome !== 'established' && r.outcome !== 'delivered') return undefined;
  if (r.acceptedBy === 'app' || (r.acceptedBy !== undefined && ANY_PROXY.includes(r.acceptedBy))) return undefined;
  if (r.acceptedBy === undefined) {
    if (r.outcome === 'delivered' && r.deliveries.length > 0) return undefined; // datagrams: the deliveries are the evidence
    return `it was ${r.outcome} but the world saw no first hop (no socket accepted it)`;
  }
  const where = r.acceptedIn ? ` in ${'name' in r.acceptedIn ? podKey(r.acceptedIn) : r.acceptedIn.node}` : '';
  return `its first hop was ${r.acceptedBy}${where}, neither a node proxy nor the app`;
}

/**
 * Why a proxied delivery to `pod` did not come through the pod's OWN node proxy, or undefined
 * when it did. Any proxy is not enough: a leg another node's proxy (or the proxy acting for
 * another pod) opened straight to the app passed no inbound listener of the destination — no
 * inbound authorization, no identity check (e.g. a hijacked 15006 taking a peer's plaintext
 * leg). A world that cannot say which proxy delivered gets no benefit of the doubt.
 */
function wrongProxy(d: Delivery, pod: PodObservation): string | undefined {
  if (d.proxyNode === undefined)
    return 'the world did not report which node proxy made the connection (Delivery.proxyNode)';
  if (d.proxyNode !== pod.node)
    return `the node proxy of ${d.proxyNode} made the connection, not the one of the pod's node ${pod.node}`;
  if (d.proxyFor !== undefined && podKey(d.proxyFor) !== podKey(pod))
    return `the proxy made it on behalf of ${podKey(d.proxyFor)} (from that pod's netns), not as ${podKey(pod)}'s inbound`;
  return undefined;
}

export function inboundViolations(ctx: ConnectionContext): Violation[] {
  const out: Violation[] = [];
  const target = destinationPod(ctx);
  if (target && isCaptureSubject(target, ctx) && !inboundCarveOut(ctx, target, ctx.to.port)) {
    const hop = unprotectedFirstHop(ctx);
    if (hop)
      out.push(
        violation(
          'inbound-capture',
          `${ctx.opts.proto ?? 'tcp'} to ${podKey(target)}:${ctx.to.port}: ${hop}`,
          summary(ctx),
        ),
      );
  }
  for (const d of ctx.result.deliveries) {
    const pod = findPod(ctx, d.pod);
    if (!pod || !isCaptureSubject(pod, ctx)) continue;
    if (inboundCarveOut(ctx, pod, d.port, d)) continue;
    const proto = ctx.opts.proto ?? 'tcp';
    if (!d.viaProxy) {
      out.push(
        violation(
          'inbound-capture',
          `app ${podKey(pod)}:${d.port} accepted ${proto} from ${d.peer} without its node proxy`,
          { delivery: d, ...summary(ctx) },
        ),
      );
      continue;
    }
    const wrong = wrongProxy(d, pod);
    if (wrong)
      out.push(
        violation(
          'inbound-capture',
          `app ${podKey(pod)}:${d.port} accepted ${proto} from ${d.peer} through the wrong proxy: ${wrong}`,
          { delivery: d, ...summary(ctx) },
        ),
      );
  }
  return out;
}

function describeDst(ctx: ConnectionContext): string {
  return ctx.to.kind === 'pod' ? `${podKey(ctx.to.pod)}:${ctx.to.port}` : `${ctx.to.ip}:${ctx.to.port}`;
}

export const outboundCapture: ConnectionProperty = {
  name: 'outbound-capture',
  doc: "every TCP connection, UDP datagram or raw frame an app in an enrolled pod sends is accepted by that pod's node proxy or fails (carve-outs: loopback, own pod IP, DNS to the proxy DNS port, a pod pending enrollment)",
  check: outboundViolations,
};

export const inboundCapture: ConnectionProperty = {
  name: 'inbound-capture',
  doc: "every connection or datagram delivered to an app in an enrolled pod came through that pod's own node proxy — not another node's proxy, not a proxy acting for another pod (carve-outs: the pod itself, kubelet probes as the profile documents them, an ingress-mode pod's TCP that skipped its proxy, a pod pending enrollment)",
  check: inboundViolations,
};
