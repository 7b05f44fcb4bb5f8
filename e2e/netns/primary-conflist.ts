/**
 * The node's "primary CNI" on the real kernel: a bridge (cni0, the pods' gateway) with host-local
 * addresses from the node's pod CIDR (addressing.ts). It stands for the network plugin a cluster
 * already has, which ours chains into. One builder, so the netns world, the container world and
 * the real-plugin tests run the same primary network and differ only in what they pass here.
 */
import type { CniConfList } from '../../impl/api/cni.js';
import { podCidr } from './addressing.js';

/** The primary conflist's file name in a node's CNI conf dir. */
export const PRIMARY_CONFLIST_FILE = '10-al-podnet.conflist';

interface PrimaryConfListOptions {
  /** The node's index in the address plan: its pod CIDR is the host-local range. */
  readonly node: number;
  /** Dual-stack: a second host-local range from the node's IPv6 pod CIDR. */
  readonly ipv6: boolean;
  /** host-local's dataDir (its allocations; a node reboot clears it when it is under /run). */
  readonly dataDir: string;
  /** Plugins chained after the bridge (e.g. ours, as install-cni would leave it). */
  readonly chained?: CniConfList['plugins'];
}

/** The primary network's conflist for one node (bridge + host-local, then `chained`). */
export function primaryConfList(o: PrimaryConfListOptions): CniConfList {
  const cidr = podCidr(o.node);
  return {
    cniVersion: '1.0.0',
    name: 'al-podnet',
    plugins: [
      {
        type: 'bridge',
        bridge: 'cni0',
        isGateway: true,
        isDefaultGateway: true,
        ipMasq: false,
        ipam: {
          type: 'host-local',
          dataDir: o.dataDir,
          ranges: [[{ subnet: cidr.ipv4 }], ...(o.ipv6 ? [[{ subnet: cidr.ipv6 }]] : [])],
        },
      },
      ...(o.chained ?? []),
    ],
  };
}
