/**
 * Inbound: plaintext (15006; upstream ztunnel's src/proxy/inbound_passthrough.rs) and HBONE
 * (15008; src/proxy/inbound.rs). Both end in the same place: authorize at the destination, then
 * connect to the app at podIP:port from inside the pod netns with the proxy mark, spoofing the
 * client's address (IP_TRANSPARENT) so the app sees the real source and the reply takes the
 * connmark return path back to the proxy.
 *
 * Plaintext: the original destination must be this pod and not a proxy port; no identity.
 * HBONE: the TLS handshake needs this pod's certificate (unknown workload -> reset, fail
 * closed); per CONNECT: method CONNECT and a parseable ip:port authority (400), the IP must be
 * the one the connection arrived on (400 "ip mismatch"), the port not a proxy port (400
 * self-call), authorization with the peer's certificate identity (401), connect (503), 200.
 */
import type { ByteStream, HboneInboundStream } from '../host/hbone.js';
import type { IpFamily, SocketAddress, TcpConnection } from '../host/sockets.js';
import { type AuthzRequest } from './authz/authorizer.js';
import { spiffeId, type PeerIdentity } from '../api/identity.js';
import { canonical, fmt, ILLEGAL_PORTS, record, type PodContext } from './pod-context.js';
import type { ConnectionDirection, ProxyConnectionRecord } from './proxy-deps.js';
import { relayConnections } from './relay.js';

type Base = Pick<ProxyConnectionRecord, 'direction' | 'downstream' | 'target'>;

function deny(ctx: PodContext, base: Base, reason: string, extra: Partial<ProxyConnectionRecord> = {}): void {
  ctx.deps.metrics.denied(base.direction, reason);
  record(ctx, { ...base, ...extra, event: 'denied', reason });
  ctx.log.info('connection denied', {
    direction: base.direction,
    src: base.downstream.src,
    target: base.target,
    reason,
    ...(extra.srcIdentity !== undefined ? { srcIdentity: extra.srcIdentity } : {}),
  });
}

/** Authorize, connect to the app, relay; returns an HTTP-ish status for HBONE. */
async function deliver(
  ctx: PodContext,
  base: Base,
  client: SocketAddress,
  target: SocketAddress,
  identity: PeerIdentity | undefined,
  openDownstream: () => Promise<ByteStream | undefined>,
  refuse: (status: number, reason: string) => void,
): Promise<void> {
  const { deps } = ctx;
  const self = ctx.ownWorkload();
  const ids = identity ? { srcIdentity: spiffeId(identity) } : {};
  if (!self) {
    refuse(503, 'unknown local workload');
    return deny(ctx, base, 'unknown local workload: the pod is not in the workload index (fail closed)', ids);
  }
  const req: AuthzRequest = {
    srcIp: client.address,
    srcIdentity: identity,
    dst: { name: self.name, namespace: self.namespace, serviceAccount: self.serviceAccount, labels: self.labels },
    dstIp: target.address,
    dstPort: target.port,
  };
  const decision = deps.authorizer.evaluate(req);
  for (const d of decision.dryRun)
    ctx.log.info('dry-run policy would decide differently', {
      policy: d.policy,
      wouldAllow: d.wouldAllow,
      target: base.target,
    });
  if (!decision.allow) {
    refuse(401, 'denied by policy');
    return deny(ctx, base, `policy: ${decision.reason}`, ids);
  }
  const up = await deps.sockets.connectTcp({
    netns: ctx.netns,
    family: target.family,
    dst: target,
    mark: deps.mark,
    timeoutMs: deps.connectTimeoutMs,
    ...(deps.transparent ? { transparent: true, src: { address: client.address } } : {}),
  });
  if (!up.ok) {
    refuse(503, 'upstream connect failed');
    record(ctx, { ...base, ...ids, event: 'failed', reason: `connect app ${fmt(target)}: ${up.kind} (${up.message})` });
    deps.metrics.denied(base.direction, `upstream-${up.kind}`);
    return;
  }
  const app = up.value;
  const down = await openDownstream();
  if (!down || ctx.stopping) {
    app.reset();
    down?.reset();
    return;
  }
  const upstream = { src: fmt(app.localAddress), dst: fmt(app.remoteAddress) };
  const rec = record(ctx, {
    ...base,
    ...ids,
    event: 'forwarded',
    mode: identity ? 'hbone' : 'plaintext',
    upstream,
    dstIdentity: spiffeId(ctx.ownIdentity()!),
    reason: decision.reason,
  });
  const r = relayConnections(deps.sockets, down, app);
  const tracked = { relay: r, authz: req, record: rec };
  ctx.track(tracked);
  const res = await r.done;
  ctx.untrack(tracked);
  record(ctx, {
    ...base,
    ...ids,
    event: 'closed',
    mode: rec.mode!,
    upstream,
    reason: res.ended,
    bytesSent: res.bToA,
    bytesReceived: res.aToB,
  });
}

export async function handleInboundPlaintext(ctx: PodContext, down: TcpConnection): Promise<void> {
  const direction: ConnectionDirection = 'inbound-plaintext';
  const target = canonical(down.originalDst() ?? down.localAddress);
  const base: Base = {
    direction,
    downstream: { src: fmt(down.remoteAddress), dst: fmt(down.localAddress) },
    target: fmt(target),
  };
  record(ctx, { ...base, event: 'accepted' });
  if (ctx.stopping) {
    down.reset();
    return deny(ctx, base, 'pod proxy is shutting down');
  }
  if (ILLEGAL_PORTS.has(target.port)) {
    down.reset();
    return deny(ctx, base, 'self-call: destination is a proxy port');
  }
  const self = ctx.ownWorkload();
  if (self && !self.ips.includes(target.address)) {
    down.reset();
    return deny(ctx, base, `original destination ${target.address} is not this pod (${self.ips.join(', ')})`);
  }
  await deliver(
    ctx,
    base,
    canonical(down.remoteAddress),
    target,
    undefined,
    async () => down,
    () => down.reset(),
  );
}

/** Parse an `ip:port` or `[v6]:port` authority. */
function parseAuthority(a: string): SocketAddress | undefined {
  const m = /^\[([0-9a-fA-F:.]+)\]:(\d{1,5})$/.exec(a) ?? /^(\d{1,3}(?:\.\d{1,3}){3}):(\d{1,5})$/.exec(a);
  if (!m) return undefined;
  const port = Number(m[2]);
  if (port < 1 || port > 65535) return undefined;
  const family: IpFamily = m[1]!.includes(':') ? 6 : 4;
  return canonical({ family, address: m[1]!.toLowerCase(), port });
}

export async function handleInboundHbone(ctx: PodContext, conn: TcpConnection): Promise<void> {
  const direction: ConnectionDirection = 'inbound-hbone';
  const downstream = { src: fmt(conn.remoteAddress), dst: fmt(conn.localAddress) };
  const identity = ctx.ownIdentity();
  if (ctx.stopping || !identity || !ctx.ownWorkload()) {
    conn.reset();
    return deny(
      ctx,
      { direction, downstream, target: fmt(conn.localAddress) },
      ctx.stopping ? 'pod proxy is shutting down' : 'unknown local workload: no certificate to present (fail closed)',
    );
  }
  const arrivedOn = canonical(conn.localAddress).address;
  const streams: Promise<void>[] = [];
  const served = await ctx.deps.hbone.serve(conn, {
    local: identity,
    onStream: (s) => streams.push(onStream(ctx, conn, arrivedOn, s)),
  });
  if (!served.ok) {
    deny(ctx, { direction, downstream, target: fmt(conn.localAddress) }, `HBONE ${served.kind}: ${served.message}`);
    return;
  }
  await Promise.all(streams);
}

async function onStream(ctx: PodContext, conn: TcpConnection, arrivedOn: string, s: HboneInboundStream): Promise<void> {
  const base: Base = {
    direction: 'inbound-hbone',
    downstream: { src: fmt(conn.remoteAddress), dst: fmt(conn.localAddress) },
    target: s.authority,
  };
  const ids = { srcIdentity: spiffeId(s.peerIdentity) };
  if (s.method !== 'CONNECT') {
    s.reject(400, 'method must be CONNECT');
    return deny(ctx, base, `bad request: method ${s.method}`, ids);
  }
  const target = parseAuthority(s.authority);
  if (!target) {
    s.reject(400, 'bad authority');
    return deny(ctx, base, `bad request: authority ${JSON.stringify(s.authority)}`, ids);
  }
  if (target.address !== arrivedOn) {
    s.reject(400, 'ip mismatch');
    return deny(ctx, base, `ip mismatch: CONNECT to ${target.address} arrived on ${arrivedOn}`, ids);
  }
  if (ILLEGAL_PORTS.has(target.port)) {
    s.reject(400, 'self-call');
    return deny(ctx, base, 'self-call: CONNECT target is a proxy port', ids);
  }
  await deliver(
    ctx,
    base,
    canonical(conn.remoteAddress),
    target,
    s.peerIdentity,
    async () => {
      const a = await s.accept();
      return a.ok ? a.value : undefined;
    },
    (status, reason) => s.reject(status, reason),
  );
}
