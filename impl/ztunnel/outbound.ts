/**
 * Outbound (15001): a connection the pod's app opened, redirected to the proxy. Decision as
 * ztunnel's build_request (istio/ztunnel src/proxy/outbound.rs), minus services and waypoints:
 * 1. loopback destination on a proxy port -> self-call, denied;
 * 2. the pod's own workload must be known and match the ZDS info, else dropped (fail closed);
 * 3. destination IP is an enrolled workload -> HBONE to its 15008 with :authority = ip:port,
 *    presenting the source pod's identity and expecting the destination's;
 * 4. strict only: destination IP is a workload pending enrollment (ambient.istio.io/redirection:
 *    pending — the agent selected it by its pod or namespace label, no node proxy has taken it)
 *    -> denied, fail closed until it is served. Upstream sends it plaintext: istiod gives such a
 *    pod tunnel protocol NONE (setTunnelProtocol: HBONE only for redirection "enabled"), and
 *    ztunnel's build_request sends InboundProtocol::TCP to the workload's own address
 *    (src/proxy/outbound.rs) — so whatever holds the pod's 15006 (its proxy once it is up, or
 *    a squatter while it is not) gets the peer's traffic without identity, and DENY policies
 *    naming the peer's principal are skipped;
 * 5. anything else -> plain TCP passthrough to the original destination.
 * Every upstream socket is opened in the source pod's netns with the proxy mark (so the pod's
 * rules let it out) and never spoofs the source (upstream dropped outbound spoofing).
 * No authorization here: policy is enforced by the destination proxy.
 */
import { INBOUND_HBONE_PORT } from '../api/ports.js';
import type { ByteStream } from '../host/hbone.js';
import type { TcpConnection } from '../host/sockets.js';
import { spiffeId } from '../api/identity.js';
import { canonical, fmt, ILLEGAL_PORTS, isLoopback, record, type PodContext } from './pod-context.js';
import { relayConnections } from './relay.js';

export async function handleOutbound(ctx: PodContext, down: TcpConnection): Promise<void> {
  const { deps } = ctx;
  const dst = canonical(down.originalDst() ?? down.localAddress);
  const base = {
    direction: 'outbound' as const,
    downstream: { src: fmt(down.remoteAddress), dst: fmt(down.localAddress) },
    target: fmt(dst),
  };
  record(ctx, { ...base, event: 'accepted' });
  /** `metricReason`: the denied metric's label when `reason` names a pod (one series per cause, not per pod). */
  const deny = (reason: string, metricReason = reason): void => {
    deps.metrics.denied('outbound', metricReason);
    record(ctx, { ...base, event: 'denied', reason });
    ctx.log.info('connection denied', { direction: 'outbound', src: base.downstream.src, target: base.target, reason });
    down.reset();
  };
  if (ctx.stopping) return deny('pod proxy is shutting down');
  if (isLoopback(dst.address) && ILLEGAL_PORTS.has(dst.port))
    return deny('self-call: loopback destination on a proxy port');
  const self = ctx.ownWorkload();
  const srcIdentity = ctx.ownIdentity();
  if (!self || !srcIdentity)
    return deny('unknown source workload: the pod is not in the workload index (or does not match its ZDS info)');

  const dstWl = deps.workloads.byIp(dst.address);
  const hbone = dstWl !== undefined && dstWl.enrolled;
  if (!hbone && dstWl?.pending === true && deps.profile === 'strict')
    return deny(
      `destination ${dstWl.namespace}/${dstWl.name} is pending enrollment (selected for the mesh, not yet served by its node proxy): strict does not downgrade to plaintext`,
      'destination-pending-enrollment',
    );
  const nextHop = hbone ? { family: dst.family, address: dst.address, port: INBOUND_HBONE_PORT as number } : dst;
  const up = await deps.sockets.connectTcp({
    netns: ctx.netns,
    family: nextHop.family,
    dst: nextHop,
    mark: deps.mark,
    timeoutMs: deps.connectTimeoutMs,
  });
  if (!up.ok) {
    record(ctx, {
      ...base,
      event: 'failed',
      mode: hbone ? 'hbone' : 'passthrough',
      srcIdentity: spiffeId(srcIdentity),
      reason: `connect ${fmt(nextHop)}: ${up.kind} (${up.message})`,
    });
    deps.metrics.denied('outbound', `upstream-${up.kind}`);
    down.reset();
    return;
  }
  const upConn = up.value;
  const upstream = { src: fmt(upConn.localAddress), dst: fmt(upConn.remoteAddress) };
  let stream: ByteStream = upConn;
  if (hbone) {
    const t = await deps.hbone.connect(upConn, {
      local: srcIdentity,
      expectedPeers: [dstWl.identity],
      authority: dst,
      forwardedFor: down.remoteAddress.address,
    });
    if (!t.ok) {
      record(ctx, {
        ...base,
        event: 'failed',
        mode: 'hbone',
        upstream,
        srcIdentity: spiffeId(srcIdentity),
        dstIdentity: spiffeId(dstWl.identity),
        reason: `HBONE ${t.kind}${t.status ? ` ${t.status}` : ''}: ${t.message}`,
      });
      deps.metrics.denied('outbound', `hbone-${t.kind}`);
      upConn.close();
      down.reset();
      return;
    }
    stream = t.value;
  }
  const rec = record(ctx, {
    ...base,
    event: 'forwarded',
    mode: hbone ? 'hbone' : 'passthrough',
    upstream,
    srcIdentity: spiffeId(srcIdentity),
    ...(hbone ? { dstIdentity: spiffeId(dstWl.identity) } : {}),
  });
  const r = relayConnections(deps.sockets, down, stream);
  const tracked = { relay: r, record: rec };
  ctx.track(tracked);
  const res = await r.done;
  ctx.untrack(tracked);
  record(ctx, {
    ...base,
    event: 'closed',
    mode: rec.mode!,
    upstream,
    srcIdentity: rec.srcIdentity!,
    reason: res.ended,
    bytesSent: res.aToB,
    bytesReceived: res.bToA,
  });
}
