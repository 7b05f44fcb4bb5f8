/**
 * Deliberately wrong netfilter models, plugged into SimKernel through `netfilterFactory` (iptables)
 * or `nftablesFactory` (nftables): the differential property's positive controls. Each must make
 * the property fail.
 */
import type { Family } from '../../impl/api/ip/address.js';
import type { NetfilterEngine } from '../../sim/kernel/netns.js';
import { Netfilter } from '../../sim/kernel/netfilter/netfilter.js';
import type { IpSets } from '../../sim/kernel/netfilter/ipset.js';
import type { Hook, TableName } from '../../sim/kernel/netfilter/types.js';
import { NfTables, type HookChains } from '../../sim/kernel/nftables/nftables.js';

type NetfilterFactory = (family: Family, ipsets: IpSets) => NetfilterEngine;

/** A model whose engine never runs one (table, hook) pair, as if its rules were not there. */
function ignoring(table: TableName, hook: Hook): NetfilterFactory {
  return (family, ipsets) => {
    const real = new Netfilter(family, { ipsets });
    return {
      runTable: (t, h, ctx, opts) => real.runTable(t, h, ctx, opts),
      hasRules: (t, h) => (t === table && h === hook ? false : real.hasRules(t, h)),
      needsConntrack: () => real.needsConntrack(),
      restore: (text, opts) => real.restore(text, opts),
      save: (t) => real.save(t),
    };
  };
}

/** REDIRECT/DNAT of arriving connections forgotten: nat PREROUTING never consulted. */
export const natPreroutingIgnored: NetfilterFactory = ignoring('nat', 'PREROUTING');

/**
 * REDIRECT that keeps the original destination address and only changes the port — as if it
 * were `DNAT --to-destination :PORT`. Linux's REDIRECT (nf_nat_redirect) rewrites the address
 * too: to 127.0.0.1 / ::1 in nat OUTPUT, to the ingress device's primary address in PREROUTING.
 * So a connection an app makes to a remote service, redirected to the node proxy's port on
 * loopback, would instead go out to the remote host's copy of that port.
 */
export const redirectKeepsAddress: NetfilterFactory = (family, ipsets) => {
  const real = new Netfilter(family, { ipsets });
  return {
    runTable: (t, h, ctx, opts) => {
      const run = real.runTable(t, h, ctx, opts);
      const v = run.verdict;
      if (v.kind !== 'nat' || v.action.kind !== 'redirect') return run;
      return {
        ...run,
        verdict: { kind: 'nat', action: v.action.ports ? { kind: 'dnat', ports: v.action.ports } : { kind: 'dnat' } },
      };
    },
    hasRules: (t, h) => real.hasRules(t, h),
    needsConntrack: () => real.needsConntrack(),
    restore: (text, opts) => real.restore(text, opts),
    save: (t) => real.save(t),
  };
};

/**
 * nftables whose nat-type chains the NAT core never runs: as if nf_nat_inet_fn knew only
 * iptables' nat table. An nft `redirect`, `dnat`, `snat` or `masquerade` does nothing, while the
 * rest of the document (filter and route chains, conntrack on demand) works as modelled.
 */
class NftNatChainsIgnored extends NfTables {
  override chainsAt(family: Family, hook: Hook): HookChains | undefined {
    const at = super.chainsAt(family, hook);
    return at && { chains: at.chains, nat: [] };
  }
}
export const nftNatChainsIgnored = (): NfTables => new NftNatChainsIgnored();
