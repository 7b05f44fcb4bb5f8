/**
 * The nftables documents of each profile: what the nftables backend writes into a pod's netns and
 * into the node's. `upstream` is istio-cni's nftables backend word for word (upstream-rules.ts);
 * `strict` is the strict IR translated rule for rule (ruleset-to-nft.ts), so both backends of a
 * profile enforce the same ruleset. Every table either profile writes is named `istio-ambient-*`
 * (upstream's inet tables; strict's ip/ip6 tables), which is how the agent tells its own tables
 * from anybody else's.
 */
import type { NftTableRef } from '../../api/nft-tables.js';
import type { Profile } from '../../api/profile.js';
import type { IpFamily, RedirectionPlan } from '../../host/netns-rules.js';
import type { HostProbeRules } from '../host-probe-rules.js';
import { DEFAULT_PROBE_SNAT, type InpodOptions, type InpodRules } from '../rule-builder.js';
import { address, type Cidr } from '../rule-ir.js';
import { documentTables, renderNft, type NftDocument, type NftTable } from './nft-document.js';
import { rulesetTables } from './ruleset-to-nft.js';
import { buildUpstreamHostNft, buildUpstreamInpodNft, UPSTREAM_PROBE_SET_COMMENT } from './upstream-rules.js';

import { OWN_TABLE_PREFIX as NFT_TABLE_PREFIX } from '../../api/nft-tables.js';

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
interface HostProbeNft {
  readonly sets: NftDocument;
  readonly rules: NftDocument;
}

/**
 * The table holding a probe set on the node: upstream's inet table for both families; strict's
 * ip / ip6 table (nftables sets are table-scoped, so each lives beside the rule that names it).
 */
export function probeSetTable(profile: Profile, family: IpFamily): NftTableRef {
  const name = `${NFT_TABLE_PREFIX}-nat`;
  if (profile === 'upstream') return { family: 'inet', name };
  return { family: family === 'ipv4' ? 'ip' : 'ip6', name };
}

/** The document that declares one probe set (idempotent: `add` keeps an existing set and its members). */
export function probeSetDocument(
  profile: Profile,
  set: { readonly name: string; readonly family: IpFamily },
): NftDocument {
  const table = probeSetTable(profile, set.family);
  return {
    tables: [
      {
        ...table,
        sets: [
          {
            name: set.name,
            type: set.family === 'ipv4' ? 'ipv4_addr' : 'ipv6_addr',
            comment: profile === 'upstream' ? UPSTREAM_PROBE_SET_COMMENT : 'pods of this node in the ambient mesh',
          },
        ],
        chains: [],
        rules: [],
      },
    ],
  };
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
  // One table per family and name: upstream's two sets share its inet table.
  const tables: NftTable[] = [];
  for (const t of ir.ipsets.flatMap((s) => probeSetDocument(ir.profile, s).tables)) {
    const i = tables.findIndex((x) => x.family === t.family && x.name === t.name);
    if (i < 0) tables.push(t);
    else tables[i] = { ...tables[i]!, sets: [...(tables[i]!.sets ?? []), ...(t.sets ?? [])] };
  }
  const sets: NftDocument = { tables };
  if (ir.profile === 'upstream')
    return {
      sets,
      rules: buildUpstreamHostNft({ ipv6, kubeletUid: o.kubeletUid, probeSnat: probeAddresses(o.probeSnat) }),
    };
  return { sets, rules: { tables: irTables(ir) } };
}

/** A document as the nftables part of a plan. */
function nftPlan(doc: NftDocument): NonNullable<RedirectionPlan['nftables']> {
  return { text: renderNft(doc), tables: documentTables(doc) };
}

/** The pod's plan for the nftables backend: the document, and the same ip rules and routes. */
export function inpodNftPlan(o: InpodOptions, ir: InpodRules): RedirectionPlan {
  return { iptables: {}, nftables: nftPlan(inpodNftDocument(o, ir)), rules: ir.rules, routes: ir.routes };
}

/** The node's plan for the nftables backend (its sets are declared by HostIpSets.ensure first). */
export function hostProbeNftPlan(
  ir: HostProbeRules,
  o: { readonly kubeletUid: number; readonly probeSnat?: Readonly<Record<IpFamily, Cidr>> },
): RedirectionPlan {
  return { iptables: {}, nftables: nftPlan(hostProbeNftDocuments(ir, o).rules), rules: [], routes: [] };
}
