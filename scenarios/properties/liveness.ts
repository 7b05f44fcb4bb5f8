/**
 * Liveness: with an allow-all policy and healthy components, enrolled pods reach each other
 * through the proxies with the right identities; pods outside the mesh are untouched (reach
 * each other directly, no proxy involved). Judged only for plain attempts (TCP, no mark, no raw,
 * no spoofed source) to a port the destination app listens on — attacks are not owed liveness,
 * nor are pods that reroute their own interfaces (istio.io/reroute-virtual-interfaces).
 */
import { podKey } from '../world.js';

const VIRTUAL_INTERFACES = 'istio.io/reroute-virtual-interfaces';
import { sourcePod } from './carve-outs.js';
import { referenceDecision } from './policy-oracle.js';
import { findPod, identityOf, isFullyEnrolled, isOutsideMesh } from './subjects.js';
import { violation, type ConnectionContext, type ConnectionProperty, type Violation } from './types.js';

function plain(ctx: ConnectionContext): boolean {
  const o = ctx.opts;
  return (o.proto ?? 'tcp') === 'tcp' && o.mark === undefined && !o.raw && o.sourceIp === undefined;
}

function livenessViolations(ctx: ConnectionContext): Violation[] {
  if (!plain(ctx) || ctx.to.kind !== 'pod') return [];
  const src = sourcePod(ctx);
  const dst = findPod(ctx, ctx.to.pod);
  if (!src || !dst || podKey(src) === podKey(dst)) return [];
  // A pod whose own annotation reroutes its interfaces (e.g. eth0 named virtual: upstream then
  // sends its inbound to the outbound listener, as istio-cni does) broke its own traffic: like an
  // attack, that is not owed liveness. Capture and authorization still judge it.
  if ([src, dst].some((p) => ctx.specs[podKey(p)]?.annotations?.[VIRTUAL_INTERFACES] !== undefined)) return [];
  const healthy = [src.node, dst.node].every(
    (n) => ctx.components[n]?.agent !== 'down' && ctx.components[n]?.proxy !== 'down',
  );
  if (!healthy || !ctx.quiescent) return [];
  if (!(ctx.specs[podKey(dst)]?.tcpPorts ?? []).includes(ctx.to.port)) return [];
  const r = ctx.result;
  const ev = {
    from: ctx.from,
    to: ctx.to,
    outcome: r.outcome,
    acceptedBy: r.acceptedBy,
    deliveries: r.deliveries,
    proxyLog: r.proxyLog,
  };
  const delivered = r.deliveries.find((d) => podKey(d.pod) === podKey(dst) && d.port === ctx.to.port);
  if (isFullyEnrolled(src, ctx) && isFullyEnrolled(dst, ctx)) {
    const want = identityOf(src, ctx);
    if (
      referenceDecision(ctx.policies, {
        dstNamespace: dst.namespace,
        dstLabels: dst.labels,
        port: ctx.to.port,
        srcIdentity: want,
      }) !== 'allow'
    )
      return [];
    if (r.outcome !== 'established' || !delivered || !delivered.viaProxy) {
      return [
        violation(
          'liveness',
          `enrolled ${podKey(src)} could not reach enrolled ${podKey(dst)}:${ctx.to.port} through the mesh (${r.outcome})`,
          ev,
        ),
      ];
    }
    const seen = r.proxyLog.find(
      (e) =>
        e.pod !== undefined && podKey(e.pod) === podKey(dst) && e.direction === 'inbound-hbone' && e.allowed === true,
    );
    if (!seen || seen.srcIdentity !== want) {
      return [
        violation(
          'liveness',
          `${podKey(dst)} saw ${seen?.srcIdentity ?? 'no HBONE identity'} for ${podKey(src)}, want ${want}`,
          ev,
        ),
      ];
    }
    return [];
  }
  if (isOutsideMesh(src, ctx) && isOutsideMesh(dst, ctx) && !src.hostNetwork && !dst.hostNetwork) {
    const out: Violation[] = [];
    if (r.outcome !== 'established' || r.acceptedBy !== 'app' || !delivered)
      out.push(
        violation(
          'liveness',
          `${podKey(src)} → ${podKey(dst)}:${ctx.to.port} (both outside the mesh) was not delivered directly (${r.outcome}, ${r.acceptedBy ?? 'no acceptor'})`,
          ev,
        ),
      );
    else if (delivered.viaProxy || r.proxyLog.length > 0)
      out.push(
        violation(
          'liveness',
          `${podKey(src)} → ${podKey(dst)}:${ctx.to.port} (both outside the mesh) passed a node proxy`,
          ev,
        ),
      );
    return out;
  }
  return [];
}

export const liveness: ConnectionProperty = {
  name: 'liveness',
  doc: 'with allow-all and healthy components enrolled pods reach each other with the right identities; pods outside the mesh are untouched',
  check: livenessViolations,
};
