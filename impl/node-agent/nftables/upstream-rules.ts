/**
 * The `upstream` profile's nftables rules, as istio-cni's nftables backend writes them
 * (istio/istio cni/pkg/nftables/nftables.go: AppendInpodRules, CreateHostRulesForHealthChecks):
 * three inet tables in the pod's netns — istio-ambient-nat (inbound REDIRECT to 15006, outbound
 * to 15001, DNS to 15053, the probe SNAT address exempt), istio-ambient-mangle (the proxy mark
 * saved to and restored from the connmark) and istio-ambient-raw (DNS conntrack zones, only with
 * DNS capture) — and one in the node's netns (the kubelet's probes SNATed to the probe address,
 * matched by the kubelet's uid with `meta skuid`, nftables having no `--socket-exists`).
 * Rules are appended in upstream's order and written with its exact words (spacing included),
 * so the rendered text equals its golden files (fixtures/upstream-golden-nft/).
 */
import { isIpAddress } from '../../api/ip/address.js';
import { INBOUND_HBONE_PORT } from '../../api/ports.js';
import type { NftChain, NftDocument, NftRule, NftTable } from './nft-document.js';

const NAT = 'istio-ambient-nat';
const MANGLE = 'istio-ambient-mangle';
const RAW = 'istio-ambient-raw';
const PRE = 'istio-prerouting';
const OUT = 'istio-output';
/** upstream InpodMark / InpodMask / InpodTProxyMark / InpodTProxyMask */
const MARK = '0x539';
const MASK = '0xfff';
const TPROXY_MARK = '0x111';
const TPROXY_MASK = '0xfff';
const OUTBOUND = 15001;
const INBOUND_PLAINTEXT = 15006;
const DNS = 15053;
/** upstream host_sets.go: the sets' comment */
export const UPSTREAM_PROBE_SET_COMMENT = 'UUID of the pods that are part of ambient mesh';
/** upstream config.ProbeIPSet, with -v4 / -v6 */
const NFT_PROBE_SET = 'istio-inpod-probes';

interface UpstreamInpodOptions {
  /** v6 rules as well (upstream EnableIPv6). */
  readonly ipv6: boolean;
  /** DNS capture for this pod (the node setting, or the pod's override). */
  readonly dns: boolean;
  /** Inbound not captured (upstream IngressMode: `ambient.istio.io/bypass-inbound-capture`). */
  readonly ingressMode: boolean;
  /** Interfaces whose inbound TCP is treated as outbound (`istio.io/reroute-virtual-interfaces`). */
  readonly virtualInterfaces: readonly string[];
  readonly probeSnat: { readonly ipv4: string; readonly ipv6: string };
}

const chainsOf = (
  base: { type: 'nat' | 'filter'; priority: number },
  outputType: 'nat' | 'route' | 'filter',
): NftChain[] => [
  { name: 'prerouting', base: { type: base.type, hook: 'prerouting', priority: base.priority } },
  { name: 'output', base: { type: outputType, hook: 'output', priority: base.priority } },
  { name: PRE },
  { name: OUT },
];

/** The words that differ between the families' versions of one rule. */
interface Family {
  readonly saddr: string;
  readonly daddr: string;
  readonly loopback: string;
}
const V4: Family = { saddr: 'ip saddr', daddr: 'ip daddr', loopback: '127.0.0.1/32' };
const V6: Family = { saddr: 'ip6 saddr', daddr: 'ip6 daddr', loopback: '::1/128' };

/** Rules collected per table in the order they are appended, as upstream's rule builder does. */
/** The probe SNAT addresses go into rule text: each must be one address of its family. */
function checkProbeSnat(p: { readonly ipv4: string; readonly ipv6: string }): void {
  if (!isIpAddress(p.ipv4) || p.ipv4.includes(':'))
    throw new Error(`probe SNAT ${JSON.stringify(p.ipv4)}: not an IPv4 address`);
  if (!isIpAddress(p.ipv6) || !p.ipv6.includes(':'))
    throw new Error(`probe SNAT ${JSON.stringify(p.ipv6)}: not an IPv6 address`);
}

class Builder {
  readonly rules: Record<string, NftRule[]> = { [NAT]: [], [MANGLE]: [], [RAW]: [] };
  constructor(private readonly ipv6: boolean) {}
  /** Words joined by one space, as knftables.Concat (a word's own trailing space is kept). */
  add(table: string, chain: string, ...words: string[]): void {
    this.rules[table]!.push({ chain, text: words.join(' ') });
  }
  addV6(table: string, chain: string, ...words: string[]): void {
    if (this.ipv6) this.add(table, chain, ...words);
  }
}

export function buildUpstreamInpodNft(o: UpstreamInpodOptions): NftDocument {
  for (const i of o.virtualInterfaces)
    if (!/^[A-Za-z0-9_.-]{1,15}$/.test(i))
      throw new Error(`virtual interface ${JSON.stringify(i)}: not an interface name`);
  checkProbeSnat(o.probeSnat);
  const b = new Builder(o.ipv6);
  /** A rule for IPv4 and, with IPv6, the same for IPv6 (upstream's AppendRule + AppendV6RuleIfSupported). */
  const both = (table: string, chain: string, words: (f: Family) => string[]): void => {
    b.add(table, chain, ...words(V4));
    b.addV6(table, chain, ...words(V6));
  };
  const snat = (f: Family): string => (f === V4 ? o.probeSnat.ipv4 : o.probeSnat.ipv6);
  const notMarked = ['mark and', MASK, '!=', MARK, 'counter'];
  b.add(MANGLE, 'prerouting', 'jump', PRE);
  b.add(MANGLE, 'output', 'jump', OUT);
  b.add(NAT, 'output', 'jump', OUT);
  if (o.dns) {
    b.add(RAW, 'prerouting', 'jump', PRE);
    b.add(RAW, 'output', 'jump', OUT);
  }
  b.add(NAT, 'prerouting', 'jump', PRE);
  for (const i of o.virtualInterfaces) {
    b.add(NAT, PRE, 'iifname', i, 'meta l4proto tcp', 'counter', 'redirect to', `:${OUTBOUND}`);
    b.add(NAT, PRE, 'iifname', i, 'meta l4proto tcp', 'counter', 'return');
  }
  b.add(MANGLE, PRE, 'meta mark & 0xfff ==', MARK, 'counter', 'ct mark set ct mark & 0xfffff000 | ', TPROXY_MARK);
  if (!o.ingressMode) both(NAT, PRE, (f) => ['meta l4proto tcp', f.saddr, snat(f), 'counter', 'accept']);
  both(NAT, OUT, (f) => ['meta l4proto tcp', f.daddr, snat(f), 'counter', 'accept']);
  if (!o.ingressMode)
    // upstream's words: "mark and 0xfff " (a trailing space) for IPv4, "mark and 0xfff" for IPv6
    both(NAT, PRE, (f) => [
      f.daddr,
      '!=',
      f.loopback,
      'tcp dport',
      '!=',
      String(INBOUND_HBONE_PORT),
      f === V4 ? 'mark and 0xfff ' : 'mark and 0xfff',
      '!=',
      MARK,
      'counter',
      'redirect to',
      `:${INBOUND_PLAINTEXT}`,
    ]);
  b.add(MANGLE, OUT, 'ct mark and', TPROXY_MASK, '==', TPROXY_MARK, 'counter', 'meta mark set ct mark');
  if (o.dns) {
    b.add(
      NAT,
      OUT,
      'oifname',
      '!=',
      'lo',
      'mark and',
      MASK,
      '!=',
      MARK,
      'udp dport',
      '53',
      'counter',
      'redirect to',
      `:${DNS}`,
    );
    both(NAT, OUT, (f) => [f.daddr, '!=', f.loopback, 'tcp dport', '53', ...notMarked, 'redirect to', `:${DNS}`]);
    b.add(RAW, OUT, 'udp dport', '53', 'meta mark and', MASK, '==', MARK, 'counter', 'ct zone set', '1');
    b.add(RAW, PRE, 'udp sport', '53', 'meta mark and', MASK, '!=', MARK, 'counter', 'ct zone set', '1');
  }
  b.add(NAT, OUT, 'meta l4proto tcp', 'mark and', TPROXY_MASK, '==', TPROXY_MARK, 'counter', 'accept');
  both(NAT, OUT, (f) => ['oifname', 'lo', f.daddr, '!=', f.loopback, 'counter', 'accept']);
  both(NAT, OUT, (f) => ['meta l4proto tcp', f.daddr, '!=', f.loopback, ...notMarked, 'redirect to', `:${OUTBOUND}`]);
  const tables: NftTable[] = [
    { family: 'inet', name: NAT, chains: chainsOf({ type: 'nat', priority: -100 }, 'nat'), rules: b.rules[NAT]! },
    {
      family: 'inet',
      name: MANGLE,
      chains: chainsOf({ type: 'filter', priority: -150 }, 'route'),
      rules: b.rules[MANGLE]!,
    },
    { family: 'inet', name: RAW, chains: chainsOf({ type: 'filter', priority: -300 }, 'filter'), rules: b.rules[RAW]! },
  ];
  return { tables };
}

interface UpstreamHostOptions {
  readonly ipv6: boolean;
  /** The kubelet's uid on the node (upstream reads it from /proc). */
  readonly kubeletUid: number;
  readonly probeSnat: { readonly ipv4: string; readonly ipv6: string };
}

/**
 * The node's probe sets, as upstream's HostNftSetManager makes them (host_sets.go), in their own
 * transaction before the rules that name them; the agent adds and deletes members (pod IPs).
 */
export function buildUpstreamHostSetsNft(o: { readonly ipv6: boolean }): NftDocument {
  const comment = UPSTREAM_PROBE_SET_COMMENT;
  return {
    tables: [
      {
        family: 'inet',
        name: NAT,
        sets: [
          { name: `${NFT_PROBE_SET}-v4`, type: 'ipv4_addr', comment },
          ...(o.ipv6 ? [{ name: `${NFT_PROBE_SET}-v6`, type: 'ipv6_addr' as const, comment }] : []),
        ],
        chains: [],
        rules: [],
      },
    ],
  };
}

/** The node's table: the kubelet's TCP to a probe-set member is SNATed to the probe address. */
export function buildUpstreamHostNft(o: UpstreamHostOptions): NftDocument {
  if (!Number.isInteger(o.kubeletUid) || o.kubeletUid < 0) throw new Error(`kubelet uid ${o.kubeletUid}: not a uid`);
  checkProbeSnat(o.probeSnat);
  const rules: NftRule[] = [
    {
      chain: 'postrouting',
      text: `meta l4proto tcp skuid ${o.kubeletUid} ip daddr @${NFT_PROBE_SET}-v4 counter snat to ${o.probeSnat.ipv4}`,
    },
    ...(o.ipv6
      ? [
          {
            chain: 'postrouting',
            text: `meta l4proto tcp skuid ${o.kubeletUid} ip6 daddr @${NFT_PROBE_SET}-v6 counter snat to ${o.probeSnat.ipv6}`,
          },
        ]
      : []),
  ];
  return {
    tables: [
      {
        family: 'inet',
        name: NAT,
        chains: [{ name: 'postrouting', base: { type: 'nat', hook: 'postrouting', priority: 100 } }],
        rules,
      },
    ],
  };
}
