/**
 * The TCP ports a pod's kubelet probes target (httpGet, tcpSocket, grpc on liveness, readiness
 * and startup probes; named ports resolved through the container's ports). The strict profile
 * limits the probe carve-out to these. Exec probes run inside the pod and need no port.
 */
import type { KubeObjectOf } from '../host/kube.js';

type Pod = KubeObjectOf<'Pod'>;

class ProbePortError extends Error {}

export function probePorts(pod: Pod): number[] {
  const out = new Set<number>();
  const where = `${pod.metadata?.namespace ?? '?'}/${pod.metadata?.name ?? '?'}`;
  for (const c of [...(pod.spec?.initContainers ?? []), ...(pod.spec?.containers ?? [])]) {
    const named = new Map<string, number>();
    for (const p of c.ports ?? []) if (p.name) named.set(p.name, p.containerPort);
    for (const probe of [c.livenessProbe, c.readinessProbe, c.startupProbe]) {
      if (!probe) continue;
      const raw: unknown = probe.httpGet?.port ?? probe.tcpSocket?.port ?? probe.grpc?.port;
      if (raw === undefined) continue;
      let port: number | undefined;
      if (typeof raw === 'number') port = raw;
      else if (typeof raw === 'string' && /^[0-9]+$/.test(raw)) port = Number(raw);
      else if (typeof raw === 'string') port = named.get(raw);
      if (port === undefined || !Number.isInteger(port) || port < 1 || port > 65535) {
        throw new ProbePortError(
          `pod ${where}: container ${c.name} has a probe on port ${JSON.stringify(raw)} that does not resolve to a TCP port`,
        );
      }
      out.add(port);
    }
  }
  return [...out].sort((a, b) => a - b);
}
