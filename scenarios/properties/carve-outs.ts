/**
 * The documented carve-outs, in ONE place: traffic the capture properties deliberately do not
 * require to pass the node proxy. Each is a named predicate over one connection attempt; a
 * property asks `outboundCarveOut(ctx)` / `inboundCarveOut(ctx, pod)` and reports the name it
 * matched in its evidence, so a report shows which exception let a connection through.
 *
 * Anything not listed here that reaches an app without the proxy is a violation.
 */
import type { ClusterContext, ConnectionContext } from './types.js';
import type { Delivery, PodObservation, PolicyObject } from '../world.js';
import { podKey } from '../world.js';

/** The proxy's DNS listener (upstream's port, too). */
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

// ---------------------------------------------------------------- both directions

export const PENDING_ENROLLMENT: CarveOut = {
  name: 'pending-enrollment',
  doc:
    "a running pod becomes selected by a label write (its own, or its namespace's) and the node agent enrolls it only after its informer sees the change (upstream istio-cni's informer works the same way: a pod or namespace Update enqueues the pod, then AddPodToMesh; upstream inherent). " +
    "Until then the pod is outside the mesh, exactly as it was a moment before the label. Narrow on purpose: only a pod whose labels or whose namespace's labels were written since the last settle (while it existed: a pod created into a selected namespace is enrolled at CNI ADD, before it starts, and gets no window — unless a Race issued its creation before the namespace write completed), " +
    'only while the cluster has not settled since, and only when the world observed it NOT redirected right before the attempt (ConnectionContext.podsBefore). ' +
    'The window must close: after a settle the carve-out is gone, capture applies to every selected pod (subjects.ts) and convergence requires it redirected and served. ' +
    'Chosen over an expected-table entry: a table entry would mark whole cells as bypass and hide any other bypass in them; the attacker cannot write labels, so this is not an attack',
};

/** The pod's observation right before the attempt, when the caller recorded one. */
function observedBefore(ctx: ConnectionContext, pod: PodObservation): PodObservation | undefined {
  return ctx.podsBefore?.find((p) => podKey(p) === podKey(pod));
}

/** PENDING_ENROLLMENT when it applies to `pod` in this attempt (see its doc), else undefined. */
export function pendingEnrollment(ctx: ConnectionContext, pod: PodObservation): CarveOut | undefined {
  if (ctx.quiescent || !ctx.relabelledSinceSettle?.has(podKey(pod))) return undefined;
  const before = observedBefore(ctx, pod);
  return before !== undefined && !before.redirected ? PENDING_ENROLLMENT : undefined;
}

// ---------------------------------------------------------------- outbound

export const LOOPBACK: CarveOut = {
  name: 'loopback',
  doc: "connections to 127.0.0.0/8 or ::1 never leave the pod (upstream's redirects carry `! -d 127.0.0.1`; B11)",
};
export const OWN_POD_IP: CarveOut = {
  name: 'own-pod-ip',
  doc: 'a pod calling its own IP goes out lo and is not captured (upstream TestPodIP; rule nat/out/loopback-own-ip)',
};
export const DNS_TO_PROXY: CarveOut = {
  name: 'dns-to-proxy-dns-port',
  doc: 'with DNS capture on, app DNS (UDP/TCP 53) is answered by the proxy DNS listener (15053), not the outbound listener',
};

/** Outbound traffic that may skip the proxy's outbound listener, or undefined. */
export function outboundCarveOut(ctx: ConnectionContext): CarveOut | undefined {
  const dst = destinationIp(ctx);
  if (dst !== undefined && isLoopbackIp(dst)) return LOOPBACK;
  const src = sourcePod(ctx);
  if (src && dst !== undefined && src.ips.includes(dst)) return OWN_POD_IP;
  if (ctx.mesh.dnsCapture && ctx.to.port === DNS_PORT && ctx.result.acceptedBy === 'proxy-dns') return DNS_TO_PROXY;
  if (src) return pendingEnrollment(ctx, src);
  return undefined;
}

// ---------------------------------------------------------------- inbound

export const SELF: CarveOut = {
  name: 'self',
  doc: 'the pod reaching itself (loopback or own IP) is not inbound traffic from anyone else',
};
export const PROBE_FROM_NODE_UPSTREAM: CarveOut = {
  name: 'probe-from-node (upstream)',
  doc: "kubelet probes: TCP from a host socket owned by the kubelet uid on the pod's own node, any port (upstream accepts the probe SNAT source on every port). Other host processes and hostNetwork pods are SNATed too (--socket-exists, finding-k) but are NOT carved out: the table records that as bypass B12",
};
export const PROBE_FROM_KUBELET_STRICT: CarveOut = {
  name: 'probe-from-kubelet (strict)',
  doc: "strict exempts only the kubelet uid on the pod's own node, and only to the pod's declared probe ports (profiles.ts probe-ports, host-probe-kubelet-uid). A root host process is indistinguishable from the kubelet by uid: a documented residual",
};

export const INGRESS_MODE: CarveOut = {
  name: 'ingress-mode',
  doc:
    'the pod\'s owner opted out of inbound capture with `ambient.istio.io/bypass-inbound-capture: "true"` (ingress mode, for gateways, as upstream — the probe-accept and REDIRECT-to-15006 rules are dropped by design; outbound is still captured). ' +
    "Only TCP (strict still drops non-TCP both ways in ingress mode), and only deliveries that did not pass the pod's own node proxy: inbound HBONE still goes through the proxy, and what the proxy delivers must still be authorized. " +
    'Recognised from the pod spec as the profile reads it (docs/design.md, "Pod annotations"). strict: the value exactly "true", `ambient.istio.io/dns-capture` absent or exactly "true"/"false" ' +
    '(an invalid annotation set is refused or ignored — full capture — so the carve-out must not follow it); upstream: any true of Go\'s strconv.ParseBool ("1", "t", "True", ...), whatever the DNS annotation holds (upstream ignores what it cannot parse). ' +
    'Under both, no `istio.io/reroute-virtual-interfaces` (a virtual-interface list with ingress mode is judged as fully captured, conservatively). ' +
    'Outbound capture, convergence and liveness are unchanged for the pod',
};

const BYPASS_INBOUND = 'ambient.istio.io/bypass-inbound-capture';
const DNS_CAPTURE_ANNOTATION = 'ambient.istio.io/dns-capture';
const VIRTUAL_INTERFACES = 'istio.io/reroute-virtual-interfaces';

/** Go's strconv.ParseBool true values: what upstream's agent takes as "true" (written here, not imported, so the judge stays independent of impl/). */
const GO_TRUE = new Set(['1', 't', 'T', 'TRUE', 'true', 'True']);

/** The pod spec asks for ingress mode with an annotation set the mesh must honour (INGRESS_MODE's doc). */
export function isIngressMode(ctx: Pick<ClusterContext, 'specs' | 'mesh'>, pod: PodObservation): boolean {
  const a = ctx.specs[podKey(pod)]?.annotations ?? {};
  if (a[VIRTUAL_INTERFACES] !== undefined) return false;
  const bypass = a[BYPASS_INBOUND];
  if (ctx.mesh.profile === 'upstream') return bypass !== undefined && GO_TRUE.has(bypass);
  if (bypass !== 'true') return false;
  const dns = a[DNS_CAPTURE_ANNOTATION];
  return dns === undefined || dns === 'true' || dns === 'false';
}

/** The delivery came through the pod's own node proxy acting as its inbound (capture.ts wrongProxy, stated positively). */
function viaOwnProxy(d: Delivery, pod: PodObservation): boolean {
  return d.viaProxy && d.proxyNode === pod.node && (d.proxyFor === undefined || podKey(d.proxyFor) === podKey(pod));
}

/**
 * Inbound traffic to `pod` that may skip its inbound listener, or undefined. Probe traffic is
 * recognised by who sent it (a host-netns socket of the kubelet uid on the pod's node), never by
 * the address it arrives from, so a host process using the probe SNAT is judged as itself.
 * `delivery` is the delivery being judged (ingress mode exempts only those that skipped the proxy).
 */
export function inboundCarveOut(
  ctx: ConnectionContext,
  pod: PodObservation,
  port: number,
  delivery?: Delivery,
): CarveOut | undefined {
  const src = sourcePod(ctx);
  if (src && podKey(src) === podKey(pod)) return SELF;
  const pending = pendingEnrollment(ctx, pod);
  if (pending) return pending;
  if (ctx.opts.proto === 'udp') return undefined;
  if (delivery !== undefined && !viaOwnProxy(delivery, pod) && isIngressMode(ctx, pod)) return INGRESS_MODE;
  const f = ctx.from;
  let uid: number | undefined;
  if (f.kind === 'host' && f.node === pod.node) uid = f.uid;
  else if (src !== undefined && src.hostNetwork && src.node === pod.node) uid = ctx.specs[podKey(src)]?.uid;
  if (uid === undefined || uid !== (ctx.mesh.kubeletUid ?? 0)) return undefined;
  if (ctx.mesh.profile === 'upstream') return PROBE_FROM_NODE_UPSTREAM;
  const probePorts = ctx.specs[podKey(pod)]?.probePorts ?? [];
  return probePorts.includes(port) ? PROBE_FROM_KUBELET_STRICT : undefined;
}

// ---------------------------------------------------------------- authorization

export const POLICY_PROPAGATION: CarveOut = {
  name: 'policy-propagation',
  doc:
    'after an AuthorizationPolicy is applied or deleted, the node proxies enforce it once they receive it (upstream ztunnel receives Authorization resources over delta xDS, eventually consistent; upstream inherent). ' +
    'Until the next settle a delivery is judged against every policy set in force since the last settle (ClusterContext.policySetsSinceSettle), and is a violation only when the reference oracle denies it under all of them. ' +
    'After a settle only the current set counts. A proxy that allows what the settled set and every later one deny (e.g. a restarted proxy serving before it loaded the policies) is still caught',
};

/** The policy sets a delivery may legitimately have been judged under (POLICY_PROPAGATION's doc). */
export function policySetsInForce(ctx: ClusterContext): readonly (readonly PolicyObject[])[] {
  const since = ctx.policySetsSinceSettle ?? [];
  if (ctx.quiescent || since.length === 0) return [ctx.policies];
  return [...since, ctx.policies];
}

// ---------------------------------------------------------------- identity

export const VIRTUAL_INTERFACE_REROUTE: CarveOut = {
  name: 'virtual-interface-reroute',
  doc:
    "the pod's owner listed interfaces in `istio.io/reroute-virtual-interfaces` (for KubeVirt VMs): TCP arriving on them is the pod's own outbound (upstream redirects it to 15001), so the pod's proxy carries it under the pod's own identity. " +
    "Only deliveries to that pod itself authorized as its own identity: the owner gave up his own inbound policy, nobody else's. Any annotation value counts (a list the mesh refused starts no pod, one it ignored reroutes nothing). " +
    "Traffic rerouted to another destination under the pod's identity is not carved out",
};

/** A delivery to `pod` its proxy authorized as `identity` that the identity property accepts anyway (VIRTUAL_INTERFACE_REROUTE). */
export function identityCarveOut(
  ctx: Pick<ClusterContext, 'specs' | 'mesh'>,
  pod: PodObservation,
  identity: string,
  ownIdentity: string,
): CarveOut | undefined {
  const a = ctx.specs[podKey(pod)]?.annotations ?? {};
  return a[VIRTUAL_INTERFACES] !== undefined && identity === ownIdentity ? VIRTUAL_INTERFACE_REROUTE : undefined;
}

export const ALL_CARVE_OUTS: readonly CarveOut[] = [
  LOOPBACK,
  OWN_POD_IP,
  DNS_TO_PROXY,
  SELF,
  PROBE_FROM_NODE_UPSTREAM,
  PROBE_FROM_KUBELET_STRICT,
  PENDING_ENROLLMENT,
  INGRESS_MODE,
  POLICY_PROPAGATION,
  VIRTUAL_INTERFACE_REROUTE,
];
