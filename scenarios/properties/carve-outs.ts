/**
 * The documented carve-outs, in ONE place: traffic the capture properties deliberately do not
 * require to pass the node proxy. Each is a named predicate over one connection attempt; a
 * property asks `outboundCarveOut(ctx)` / `inboundCarveOut(ctx, pod)` and reports the name it
 * matched in its evidence, so a report shows which exception let a connection through.
 *
 * Anything not listed here that reaches an app without the proxy is a violation.
 */
import type { ConnectionContext } from './types.js';
import type { PodObservation } from '../world.js';
import { podKey } from '../world.js';

/** The proxy's DNS listener (istio-cni.md §3.1). */
export const PROXY_DNS_PORT = 15053;
export const DNS_PORT = 53;

export interface CarveOut {
  readonly name: string;
  /** Why this traffic may skip the proxy, with the source of the decision. */
  readonly doc: string;
}

function destinationIp(ctx: ConnectionContext): string | undefined {
  const to = ctx.to;
  if (to.kind === 'ip') return to.ip;
  const fam = ctx.opts.family ?? 4;
  const p = ctx.pods.find((x) => x.namespace === to.pod.namespace && x.name === to.pod.name);
  return p?.ips.find((ip) => (fam === 6) === ip.includes(':'));
}

export function sourcePod(ctx: ConnectionContext): PodObservation | undefined {
  const f = ctx.from;
  if (f.kind !== 'pod') return undefined;
  return ctx.pods.find((p) => p.namespace === f.pod.namespace && p.name === f.pod.name);
}

export function isLoopbackIp(ip: string): boolean {
  return ip === '::1' || /^127\./.test(ip);
}

// ---------------------------------------------------------------- outbound

export const LOOPBACK: CarveOut = { name: 'loopback', doc: 'connections to 127.0.0.0/8 or ::1 never leave the pod (istio-cni.md §3.2: `! -d 127.0.0.1`; peers B11)' };
export const OWN_POD_IP: CarveOut = { name: 'own-pod-ip', doc: 'a pod calling its own IP goes out lo and is not captured (upstream TestPodIP; rule nat/out/loopback-own-ip)' };
export const DNS_TO_PROXY: CarveOut = { name: 'dns-to-proxy-dns-port', doc: 'with DNS capture on, app DNS (UDP/TCP 53) is answered by the proxy DNS listener (15053), not the outbound listener' };

/** Outbound traffic that may skip the proxy's outbound listener, or undefined. */
export function outboundCarveOut(ctx: ConnectionContext): CarveOut | undefined {
  const dst = destinationIp(ctx);
  if (dst !== undefined && isLoopbackIp(dst)) return LOOPBACK;
  const src = sourcePod(ctx);
  if (src && dst !== undefined && src.ips.includes(dst)) return OWN_POD_IP;
  if (ctx.mesh.dnsCapture && ctx.to.port === DNS_PORT && ctx.result.acceptedBy === 'proxy-dns') return DNS_TO_PROXY;
  return undefined;
}

// ---------------------------------------------------------------- inbound

export const SELF: CarveOut = { name: 'self', doc: 'the pod reaching itself (loopback or own IP) is not inbound traffic from anyone else' };
export const PROBE_FROM_NODE_UPSTREAM: CarveOut = {
  name: 'probe-from-node (upstream)',
  doc: 'kubelet probes: TCP from a host socket owned by the kubelet uid on the pod\'s own node, any port (upstream accepts the probe SNAT source on every port, istio-cni.md §3.2). Other host processes and hostNetwork pods are SNATed too (--socket-exists, §6 k) but are NOT carved out: the table records that as bypass B12',
};
export const PROBE_FROM_KUBELET_STRICT: CarveOut = {
  name: 'probe-from-kubelet (strict)',
  doc: 'strict exempts only the kubelet uid on the pod\'s own node, and only to the pod\'s declared probe ports (profiles.ts probe-ports, host-probe-kubelet-uid). A root host process is indistinguishable from the kubelet by uid: a documented residual',
};

/**
 * Inbound traffic to `pod` that may skip its inbound listener, or undefined. Probe traffic is
 * recognised by who sent it (a host-netns socket of the kubelet uid on the pod's node), never by
 * the address it arrives from, so a host process using the probe SNAT is judged as itself.
 */
export function inboundCarveOut(ctx: ConnectionContext, pod: PodObservation, port: number): CarveOut | undefined {
  const src = sourcePod(ctx);
  if (src && podKey(src) === podKey(pod)) return SELF;
  if (ctx.opts.proto === 'udp') return undefined;
  const f = ctx.from;
  let uid: number | undefined;
  if (f.kind === 'host' && f.node === pod.node) uid = f.uid;
  else if (src !== undefined && src.hostNetwork && src.node === pod.node) uid = ctx.specs[podKey(src)]?.uid;
  if (uid === undefined || uid !== (ctx.mesh.kubeletUid ?? 0)) return undefined;
  if (ctx.mesh.profile === 'upstream') return PROBE_FROM_NODE_UPSTREAM;
  const probePorts = ctx.specs[podKey(pod)]?.probePorts ?? [];
  return probePorts.includes(port) ? PROBE_FROM_KUBELET_STRICT : undefined;
}

export const ALL_CARVE_OUTS: readonly CarveOut[] = [LOOPBACK, OWN_POD_IP, DNS_TO_PROXY, SELF, PROBE_FROM_NODE_UPSTREAM, PROBE_FROM_KUBELET_STRICT];
