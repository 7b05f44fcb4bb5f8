/**
 * Which kernel interface writes the redirection: `iptables` (iptables-restore, the default as in
 * upstream istio-cni) or `nftables` (one `nft -f` document per namespace, as upstream's native
 * nftables backend). Both enforce the same profile.
 */
export type Backend = 'iptables' | 'nftables';

export const BACKENDS: readonly Backend[] = ['iptables', 'nftables'];
