/**
 * The nftables documents of each profile: what the nftables backend writes into a pod's netns and
 * into the node's. `upstream` is istio-cni's nftables backend word for word (upstream-rules.ts);
 * `strict` is the strict IR translated rule for rule (ruleset-to-nft.ts), so both backends of a
 * profile enforce the same ruleset. Every table either profile writes is named `istio-ambient-*`
 * (upstream's inet tables; strict's ip/ip6 tables), which is how the agent tells its own tables
 * from anybody else's.
 */
import type { IpFamily } from '../../host/netns-rules.js';
import type { HostProbeRules } from '../host-probe-rules.js';
import { PROBE_SET } from '../host-probe-rules.js';
import { DEFAULT_PROBE_SNAT, type InpodOptions, type InpodRules } from '../rule-builder.js';
import { address, type Cidr } from '../rule-ir.js';
import type { NftDocument, NftTable } from './nft-document.js';
import { rulesetTables } from './ruleset-to-nft.js';
import { buildUpstreamHostNft, buildUpstreamHostSetsNft, buildUpstreamInpodNft } from './upstream-rules.js';

/** Every table the agent writes is named with this prefix, in either profile. */
export const NFT_TABLE_PREFIX = 'istio-ambient';

function probeAddresses(p: Readonly<Record<IpFamily, Cidr>> | undefined): { ipv4: string; ipv6: string } {
  const s = p ?? DEFAULT_PROBE_SNAT;
  return { ipv4: address(s.ipv4), ipv6: address(s.ipv6) };
}

/** The rules of a translated IR (strict), both families. */
function irTables(ir: { readonly iptables: InpodRules['iptables'] }): NftTable[] {
  return [
    ...rulesetTables(ir.iptables.ipv4, NFT_TABLE_PREFIX),
    ...(ir.iptables.ipv6 ? rulesetTables(ir.iptables.ipv6, NFT_TABLE_PREFIX) : []),
  ];
}

/**
 * The pod's document. `ir` is the same options' IR (buildInpodRules): strict is its translation;
 * upstream is written from the options as istio-cni writes it.
 */
export function inpodNftDocument(o: InpodOptions, ir: InpodRules): NftDocument {
  if (o.profile !== ir.profile) throw new Error(`inpodNftDocument: options are ${o.profile}, the IR is ${ir.profile}`);
  if (o.profile === 'upstream')
    return buildUpstreamInpodNft({
      ipv6: o.ipv6,
      dns: o.dnsCapture,
      ingressMode: o.ingressMode,
      virtualInterfaces: o.virtualInterfaces,
      probeSnat: probeAddresses(o.probeSnat),
    });
  return { tables: irTables(ir) };
}

/** The node's probe documents: the sets first (their own transaction, never flushed), then the rules. */
export interface HostProbeNft {
  readonly sets: NftDocument;
  readonly rules: NftDocument;
}

/**
 * The node's documents. Upstream matches the kubelet by uid in nftables too (`meta skuid`, there
 * being no `--socket-exists`), so both profiles need the kubelet's uid here.
 */
export function hostProbeNftDocuments(
  ir: HostProbeRules,
  o: { readonly kubeletUid: number; readonly probeSnat?: Readonly<Record<IpFamily, Cidr>> },
): HostProbeNft {
  const ipv6 = ir.iptables.ipv6 !== undefined;
  if (ir.profile === 'upstream')
    return {
      sets: buildUpstreamHostSetsNft({ ipv6 }),
      rules: buildUpstreamHostNft({ ipv6, kubeletUid: o.kubeletUid, probeSnat: probeAddresses(o.probeSnat) }),
    };
  const comment = 'pods of this node in the ambient mesh';
  const sets: NftTable[] = ir.ipsets.map((s) => ({
    family: s.family === 'ipv4' ? 'ip' : 'ip6',
    name: `${NFT_TABLE_PREFIX}-nat`,
    sets: [{ name: PROBE_SET[s.family], type: s.family === 'ipv4' ? 'ipv4_addr' : 'ipv6_addr', comment }],
    chains: [],
    rules: [],
  }));
  return { sets: { tables: sets }, rules: { tables: irTables(ir) } };
}
