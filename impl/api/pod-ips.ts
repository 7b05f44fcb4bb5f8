/**
 * A pod's addresses as the API reports them. `status.podIPs` lists every family (primary
 * first); `status.podIP` is the primary alone, and a client or an older API server may fill only
 * that one — upstream's agent reads both (istio/istio cni/pkg/util podutil), so a pod with only
 * `status.podIP` is still enrolled. Values that are not IP addresses are dropped: they come from
 * the API and must not reach ipset or rule text.
 */
import { isIpAddress } from './ip/address.js';

interface PodStatusAddresses {
  readonly status?:
    | {
        readonly podIP?: string | undefined;
        readonly podIPs?: ReadonlyArray<{ readonly ip?: string | undefined }> | undefined;
      }
    | undefined;
}

export function podIps(pod: PodStatusAddresses): string[] {
  const listed = (pod.status?.podIPs ?? []).map((x) => x.ip);
  const all = [...listed, pod.status?.podIP].filter((ip): ip is string => isIpAddress(ip));
  return [...new Set(all)];
}
