/**
 * Names the proxy answers itself, from discovery it already has. A source returns the
 * addresses of a name it knows (an empty list: known, but no address of that family), or
 * undefined for a name it does not know — which the proxy forwards upstream.
 *
 * - podIpNames: Kubernetes pod A records, <a-b-c-d>.<namespace>.pod.<cluster-domain> (dashed
 *   IPv4, or IPv6 with ':' as '-'), answered when the workload index knows that IP in that
 *   namespace. This is all the workload store offers today (it has no services).
 * - staticNames: a fixed table (service names, <svc>.<ns>.svc.<cluster-domain> -> cluster IPs),
 *   for a world or a deployment that knows its services.
 * - firstOf: several sources, the first that knows the name wins.
 */
import type { WorkloadLookup } from '../proxy-deps.js';

export interface DnsNameSource {
  lookup(name: string, family: 4 | 6): readonly string[] | undefined;
}

function familyOf(ip: string): 4 | 6 {
  return ip.includes(':') ? 6 : 4;
}

export function podIpNames(workloads: WorkloadLookup, clusterDomain: string): DnsNameSource {
  const suffix = `.pod.${clusterDomain.toLowerCase()}`;
  return {
    lookup(name, family) {
      if (!name.endsWith(suffix)) return undefined;
      const parts = name.slice(0, -suffix.length).split('.');
      if (parts.length !== 2) return undefined;
      const [dashed, namespace] = parts as [string, string];
      const ip =
        dashed.includes('-') && /^[0-9-]+$/.test(dashed) && dashed.split('-').length === 4
          ? dashed.replaceAll('-', '.')
          : dashed.replaceAll('-', ':');
      const w = workloads.byIp(ip);
      if (!w || w.namespace !== namespace) return undefined;
      return familyOf(ip) === family ? [ip] : [];
    },
  };
}

/** name (any case, trailing dot optional) -> addresses of both families. */
export function staticNames(table: Readonly<Record<string, readonly string[]>>): DnsNameSource {
  const m = new Map<string, readonly string[]>();
  for (const [k, v] of Object.entries(table)) m.set(k.toLowerCase().replace(/\.$/, ''), v);
  return {
    lookup(name, family) {
      const ips = m.get(name);
      return ips ? ips.filter((ip) => familyOf(ip) === family) : undefined;
    },
  };
}

export function firstOf(...sources: readonly DnsNameSource[]): DnsNameSource {
  return {
    lookup(name, family) {
      for (const s of sources) {
        const r = s.lookup(name, family);
        if (r) return r;
      }
      return undefined;
    },
  };
}
