/**
 * The in-pod rule builder: what goes into an enrolled pod's network namespace so that its TCP is
 * captured by the node proxy (upstream: istio/istio cni/pkg/iptables/), as typed IR per family plus the policy
 * routing for the return path, for the `upstream` or the `strict` profile (profiles.ts).
 *
 * Chains: ISTIO_PRERT / ISTIO_OUTPUT in raw, mangle and nat, hooked from PREROUTING / OUTPUT
 * (upstream's names, so the upstream profile matches its golden files); strict adds
 * ISTIO_INPUT / ISTIO_OUTPUT in filter.
 */
import type { InterfaceName, PodRedirectionAnnotations } from '../api/annotations.js';
import { PROXY_MARK, RETURN_MARK, RETURN_ROUTE_TABLE, type Mark } from '../api/marks.js';
import { DNS_PORT, INBOUND_HBONE_PORT, INBOUND_PLAINTEXT_PORT, OUTBOUND_PORT, port, type Port } from '../api/ports.js';
import type { IpFamily, LocalRoute, PolicyRule, RedirectionPlan } from '../host/netns-rules.js';
import type { Profile } from '../api/profile.js';
import type { StrictInputs } from './profiles.js';
import { renderRestore } from './render-iptables.js';
import {
  cidr,
  ownChain,
  ruleId,
  ruleset,
  type BuiltinChain,
  type Cidr,
  type Match,
  type OwnChain,
  type Rule,
  type Ruleset,
  type Table,
  type Target,
} from './rule-ir.js';

/** Upstream's default probe SNAT addresses (env HOST_PROBE_SNAT_IP / _IPV6 override them). */
export const DEFAULT_PROBE_SNAT: Readonly<Record<IpFamily, Cidr>> = {
  ipv4: cidr('169.254.7.127'),
  ipv6: cidr('fd16:9254:7127:1337:ffff:ffff:ffff:ffff'),
};

/** `ip rule` priority of the return-path fwmark rule (upstream). */
const RETURN_RULE_PRIORITY = 32764;
/** Conntrack zone that keeps the proxy's DNS flows apart from the app's (upstream). */
const DNS_CT_ZONE = 1;

export interface InpodCommonOptions {
  /** Capture IPv6 (upstream `ambient.ipv6`, default true). IPv4 rules are always built. */
  readonly ipv6: boolean;
  /** `/proc/sys/net/ipv6/conf/lo/disable_ipv6` is 1 in the pod: the v6 local route cannot exist. */
  readonly loIpv6Disabled?: boolean;
  /** DNS capture for this pod (global setting, overridden by the pod annotation). */
  readonly dnsCapture: boolean;
  /** Ingress mode (`ambient.istio.io/bypass-inbound-capture: "true"`). */
  readonly ingressMode: boolean;
  readonly virtualInterfaces: readonly InterfaceName[];
  /** Override of the probe SNAT addresses; must match the host-side plan. */
  readonly probeSnat?: Readonly<Record<IpFamily, Cidr>>;
}

export type InpodOptions =
  | (InpodCommonOptions & { readonly profile: 'upstream' })
  | (InpodCommonOptions & StrictInputs & { readonly profile: 'strict' });

/** The typed form of a pod's redirection; render with renderInpodPlan. */
export interface InpodRules {
  readonly profile: Profile;
  readonly iptables: { readonly ipv4: Ruleset; readonly ipv6?: Ruleset };
  readonly rules: readonly PolicyRule[];
  readonly routes: readonly LocalRoute[];
}

const PRERT = ownChain('ISTIO_PRERT');
const OUTPUT = ownChain('ISTIO_OUTPUT');
const INPUT = ownChain('ISTIO_INPUT');
const LOOPBACK: Record<IpFamily, Cidr> = { ipv4: cidr('127.0.0.1/32'), ipv6: cidr('::1/128') };
const ALL_BITS = 0xffffffff;

const tcp: Match = { kind: 'proto', proto: 'tcp' };
const udp: Match = { kind: 'proto', proto: 'udp' };
const l4 = (o: Omit<Extract<Match, { kind: 'l4' }>, 'kind'> = {}): Match => ({ kind: 'l4', ...o });
const markIs = (m: Mark, neg = false): Match => ({ kind: 'mark', mark: m, neg });
const ACCEPT: Target = { kind: 'ACCEPT' };
const RETURN: Target = { kind: 'RETURN' };
const DROP: Target = { kind: 'DROP' };
const redirect = (p: Port): Target => ({ kind: 'REDIRECT', toPort: p });
/** `--syn`: SYN set, RST, ACK and FIN clear — a connection's first segment. */
const SYN_ONLY = { mask: ['FIN', 'SYN', 'RST', 'ACK'], comp: ['SYN'] } as const;

/** Accumulates rules; `id` is `<table>/<chain short>/<name>`. */
class Rules {
  readonly list: Rule[] = [];
  add(
    table: Table,
    chain: BuiltinChain | OwnChain,
    name: string,
    matches: Match[],
    target: Target,
    security?: string,
  ): void {
    const short = chain === PRERT ? 'prert' : chain === OUTPUT ? 'out' : chain === INPUT ? 'in' : chain.toLowerCase();
    this.list.push({
      id: ruleId(`${table}/${short}/${name}`),
      table,
      chain,
      position: 'append',
      matches,
      target,
      ...(security !== undefined ? { security } : {}),
    });
  }
  hook(table: Table, builtin: BuiltinChain, chain: OwnChain): void {
    this.add(table, builtin, `hook-${chain.toLowerCase()}`, [], { kind: 'jump', chain });
  }
}

/** multiport takes at most 15 ports per rule. */
function chunks<T>(xs: readonly T[], n: number): T[][] {
  const out: T[][] = [];
  for (let i = 0; i < xs.length; i += n) out.push(xs.slice(i, i + n));
  return out;
}

function validateStrict(o: StrictInputs): void {
  if (!Number.isInteger(o.proxyUid) || o.proxyUid < 0 || o.proxyUid > 0xfffffffe) {
    throw new Error(`strict profile: proxyUid ${o.proxyUid} is not a valid uid (0..4294967294)`);
  }
  const seen = new Set<number>();
  for (const p of o.probePorts) {
    port(p); // throws on a non-port
    if (seen.has(p)) throw new Error(`strict profile: probe port ${p} is listed twice`);
    seen.add(p);
  }
}

/** The capture ruleset of one family. */
function captureRuleset(family: IpFamily, o: InpodOptions): Ruleset {
  const strict = o.profile === 'strict';
  const lo = LOOPBACK[family];
  const probe = (o.probeSnat ?? DEFAULT_PROBE_SNAT)[family];
  if (probe.family !== family) throw new Error(`probe SNAT address ${probe.text} is not ${family}`);
  const r = new Rules();
  const chains: { table: Table; name: OwnChain }[] = [];
  // Strict: only the proxy uid's marked sockets are the proxy; upstream: the mark alone.
  const proxyOwned = (): Match[] =>
    o.profile === 'strict' ? [markIs(PROXY_MARK), { kind: 'owner', uid: o.proxyUid }] : [markIs(PROXY_MARK)];
  const notProxy = (): Match[] => (strict ? [] : [markIs(PROXY_MARK, true)]);

  // ---- mangle: return path for proxy-originated inbound connections; strict's inbound capture.
  chains.push({ table: 'mangle', name: PRERT }, { table: 'mangle', name: OUTPUT });
  r.hook('mangle', 'PREROUTING', PRERT);
  r.hook('mangle', 'OUTPUT', OUTPUT);
  r.add(
    'mangle',
    PRERT,
    'connmark-proxy-conn',
    [markIs(PROXY_MARK)],
    { kind: 'CONNMARK-set', mark: RETURN_MARK },
    "replies to the proxy's spoofed-source connections to the app must route back to the proxy via lo",
  );
  r.add(
    'mangle',
    OUTPUT,
    'restore-return-mark',
    [{ kind: 'connmark', mark: RETURN_MARK }],
    { kind: 'CONNMARK-restore', nfmask: ALL_BITS, ctmask: ALL_BITS },
    'gives app replies the fwmark that selects the table-100 return route',
  );

  if (!o.ingressMode && o.profile === 'strict') {
    // Strict captures inbound with TPROXY in mangle (inbound-tproxy, profiles.ts): mangle sees
    // every packet, so what nat never saw must be left out explicitly — the virtual interfaces'
    // outbound TCP (nat redirects it to 15001 below), looped-back packets (`! -i lo`: the app to
    // its own IP and the proxy's connections to the app, which nat PREROUTING never sees), and
    // all but a connection's first packet (`--ctstate NEW`: replies to the proxy's and the app's
    // connections; later packets find their socket by address). Only a bare SYN (`--syn`): a NEW
    // entry that starts with any other segment is a connection picked up mid-stream — open when
    // the rules arrived (a pod namespace tracks nothing until a rule needs conntrack) or whose
    // entry was lost — and TPROXY would find the app's own socket for it, drop the segment and
    // stall the connection; nat's `reset-midstream` below ends it instead, as upstream's REDIRECT does.
    for (const ifc of o.virtualInterfaces) {
      r.add('mangle', PRERT, `vif-${ifc}-return`, [{ kind: 'in', iface: ifc }, tcp], RETURN);
    }
    chunks(o.probePorts, 15).forEach((ports, i) => {
      r.add(
        'mangle',
        PRERT,
        `probe-accept${i === 0 ? '' : `-${i}`}`,
        [{ kind: 'src', cidr: probe }, tcp, { kind: 'multiport', dports: ports }],
        RETURN,
        'kubelet probes (SNATed on the node) reach the declared probe ports uncaptured; anything wider skips inbound policy',
      );
    });
    r.add(
      'mangle',
      PRERT,
      'tproxy-inbound',
      [
        { kind: 'dst', cidr: lo, neg: true },
        { kind: 'in', iface: 'lo', neg: true },
        tcp,
        l4({ dport: INBOUND_HBONE_PORT, negDport: true, tcpFlags: SYN_ONLY }),
        markIs(PROXY_MARK, true),
        { kind: 'ctstate', states: ['NEW'] },
      ],
      { kind: 'TPROXY', onPort: INBOUND_PLAINTEXT_PORT, onIp: family === 'ipv4' ? '0.0.0.0' : '::', mark: RETURN_MARK },
      'inbound TCP other than HBONE must be policed by the proxy inbound listener; TPROXY gives it only to a transparent socket, so an app squatting 15006 without NET_RAW/NET_ADMIN gets nothing',
    );
  }

  // ---- nat: the captures.
  chains.push({ table: 'nat', name: PRERT }, { table: 'nat', name: OUTPUT });
  r.hook('nat', 'PREROUTING', PRERT);
  r.hook('nat', 'OUTPUT', OUTPUT);
  for (const ifc of o.virtualInterfaces) {
    r.add(
      'nat',
      PRERT,
      `vif-${ifc}-redirect`,
      [{ kind: 'in', iface: ifc }, tcp],
      redirect(OUTBOUND_PORT),
      `TCP arriving on virtual interface ${ifc} is the pod's outbound traffic and must reach the outbound listener`,
    );
    r.add('nat', PRERT, `vif-${ifc}-return`, [{ kind: 'in', iface: ifc }, tcp], RETURN);
  }
  if (!o.ingressMode && o.profile === 'strict') {
    // nat sees only a connection's first packet, so this takes exactly the NEW entries that did
    // not start with a SYN (tproxy-inbound took those): REDIRECT sends the segment to 15006,
    // where no socket has its tuple, and the kernel answers RST — the picked-up connection ends.
    // Without it TPROXY's drop would stall it until TCP gives up (minutes), uncaptured either way.
    r.add(
      'nat',
      PRERT,
      'reset-midstream',
      [
        { kind: 'dst', cidr: lo, neg: true },
        { kind: 'in', iface: 'lo', neg: true },
        tcp,
        l4({ dport: INBOUND_HBONE_PORT, negDport: true, tcpFlags: SYN_ONLY, negTcpFlags: true }),
        markIs(PROXY_MARK, true),
      ],
      redirect(INBOUND_PLAINTEXT_PORT),
      'an inbound connection picked up mid-stream (open before enrollment) must end, not continue to the app uncaptured nor stall',
    );
  }
  if (!o.ingressMode && o.profile === 'upstream') {
    r.add(
      'nat',
      PRERT,
      'probe-accept',
      [{ kind: 'src', cidr: probe }, tcp, l4()],
      ACCEPT,
      'kubelet probes (SNATed on the node) reach the app uncaptured; any port (upstream)',
    );
    // The mark test keeps the proxy's own connections to the app (looped through lo, marks never
    // cross the wire) out of the inbound redirect.
    r.add(
      'nat',
      PRERT,
      'redirect-inbound',
      [
        { kind: 'dst', cidr: lo, neg: true },
        tcp,
        l4({ dport: INBOUND_HBONE_PORT, negDport: true }),
        markIs(PROXY_MARK, true),
      ],
      redirect(INBOUND_PLAINTEXT_PORT),
      'inbound TCP other than HBONE must be policed by the proxy inbound listener',
    );
  }
  if (strict) {
    r.add('nat', OUTPUT, 'proxy-exempt', proxyOwned(), ACCEPT);
  } else {
    r.add(
      'nat',
      OUTPUT,
      'probe-reply-accept',
      [{ kind: 'dst', cidr: probe }, tcp, l4()],
      ACCEPT,
      'app connections to the probe address are not captured (upstream)',
    );
  }
  if (o.dnsCapture) {
    r.add(
      'nat',
      OUTPUT,
      'dns-udp',
      [{ kind: 'out', iface: 'lo', neg: true }, udp, ...notProxy(), l4({ dport: port(53) })],
      redirect(DNS_PORT),
      'app DNS over UDP goes to the proxy DNS listener',
    );
    r.add(
      'nat',
      OUTPUT,
      'dns-tcp',
      [{ kind: 'dst', cidr: lo, neg: true }, tcp, l4({ dport: port(53) }), ...notProxy()],
      redirect(DNS_PORT),
      'app DNS over TCP goes to the proxy DNS listener',
    );
  }
  r.add('nat', OUTPUT, 'return-mark-accept', [tcp, markIs(RETURN_MARK)], ACCEPT);
  r.add(
    'nat',
    OUTPUT,
    'loopback-own-ip',
    [
      { kind: 'dst', cidr: lo, neg: true },
      { kind: 'out', iface: 'lo' },
    ],
    ACCEPT,
    "carve-out: traffic out lo to a non-loopback address (the pod's own IP) is not captured",
  );
  r.add(
    'nat',
    OUTPUT,
    'redirect-outbound',
    [{ kind: 'dst', cidr: lo, neg: true }, tcp, ...notProxy()],
    redirect(OUTBOUND_PORT),
    'outbound TCP from the app must reach the proxy outbound listener',
  );

  // ---- raw: conntrack zone for the proxy's DNS flows.
  if (o.dnsCapture) {
    chains.push({ table: 'raw', name: PRERT }, { table: 'raw', name: OUTPUT });
    r.hook('raw', 'PREROUTING', PRERT);
    r.hook('raw', 'OUTPUT', OUTPUT);
    r.add('raw', OUTPUT, 'dns-zone-out', [udp, markIs(PROXY_MARK), l4({ dport: port(53) })], {
      kind: 'CT-zone',
      zone: DNS_CT_ZONE,
    });
    r.add('raw', PRERT, 'dns-zone-in', [udp, markIs(PROXY_MARK, true), l4({ sport: port(53) })], {
      kind: 'CT-zone',
      zone: DNS_CT_ZONE,
    });
  }

  // ---- filter (strict): spoofed proxy marks and non-TCP fail closed.
  if (o.profile === 'strict') {
    const icmp: Match = { kind: 'proto', proto: family === 'ipv4' ? 'icmp' : 'ipv6-icmp' };
    chains.push({ table: 'filter', name: INPUT }, { table: 'filter', name: OUTPUT });
    r.hook('filter', 'INPUT', INPUT);
    r.hook('filter', 'OUTPUT', OUTPUT);
    // Not a security rule (removing it opens nothing): a RST is never captured — it cannot start a
    // conntrack entry, so nat never sees it — and every TCP segment passes this chain anyway; the
    // one thing it skips is the spoofed-mark drop below. IPv4 sends the RST answering a stray
    // segment from a fileless control socket with the answering listener's mark (tcp-reset.ts),
    // so a proxy listener's RST looks like a non-proxy socket with the proxy mark. Dropping it
    // turns a prompt reset into a stalled connection: an open connection picked up mid-stream by
    // live enrollment (as upstream, it must be reset), or one whose proxy restarted.
    r.add('filter', OUTPUT, 'rst', [tcp, l4({ tcpFlags: { mask: ['RST'], comp: ['RST'] } })], RETURN);
    r.add(
      'filter',
      OUTPUT,
      'drop-spoofed-proxy-mark',
      [markIs(PROXY_MARK), { kind: 'owner', socketExists: true, uid: o.proxyUid, negUid: true }],
      DROP,
      'a non-proxy socket carrying the proxy mark would skip capture; drop it',
    );
    r.add('filter', OUTPUT, 'proxy', proxyOwned(), RETURN);
    r.add('filter', OUTPUT, 'loopback', [{ kind: 'out', iface: 'lo' }], RETURN);
    r.add('filter', OUTPUT, 'tcp', [tcp], RETURN);
    r.add('filter', OUTPUT, 'icmp', [icmp], RETURN);
    if (o.dnsCapture) {
      // Not `-o lo`: every LOCAL_OUT table matches -o against the route chosen before the nat
      // OUTPUT REDIRECT (one nf_hook call), so redirected DNS still reads `-o eth0` here.
      r.add(
        'filter',
        OUTPUT,
        'dns-redirected',
        [udp, { kind: 'dst', cidr: lo }, l4({ dport: DNS_PORT })],
        RETURN,
        'app DNS redirected by nat OUTPUT to the proxy DNS listener on loopback',
      );
    } else {
      r.add('filter', OUTPUT, 'dns-uncaptured', [udp, l4({ dport: port(53) })], RETURN);
    }
    r.add(
      'filter',
      OUTPUT,
      'drop-uncaptured',
      [],
      DROP,
      'non-TCP traffic the proxy cannot carry must not leave uncaptured',
    );
    r.add('filter', INPUT, 'loopback', [{ kind: 'in', iface: 'lo' }], RETURN);
    r.add('filter', INPUT, 'tcp', [tcp], RETURN);
    r.add('filter', INPUT, 'icmp', [icmp], RETURN);
    r.add(
      'filter',
      INPUT,
      'replies',
      [{ kind: 'ctstate', states: ['ESTABLISHED', 'RELATED'] }],
      RETURN,
      'only replies to flows the output policy let out may enter as non-TCP',
    );
    r.add(
      'filter',
      INPUT,
      'drop-uncaptured',
      [],
      DROP,
      'non-TCP traffic the proxy cannot police must not reach the app',
    );
  }
  return ruleset(family, chains, r.list);
}

/** Strict with IPv6 off (or without IPv6 on lo): no v6 traffic at all but loopback. */
function ipv6BlockRuleset(): Ruleset {
  const r = new Rules();
  r.hook('filter', 'INPUT', INPUT);
  r.hook('filter', 'OUTPUT', OUTPUT);
  r.add('filter', INPUT, 'loopback', [{ kind: 'in', iface: 'lo' }], RETURN);
  r.add('filter', INPUT, 'drop-all', [], DROP, 'IPv6 is not captured in this pod, so it must not flow at all');
  r.add('filter', OUTPUT, 'loopback', [{ kind: 'out', iface: 'lo' }], RETURN);
  r.add('filter', OUTPUT, 'drop-all', [], DROP, 'IPv6 is not captured in this pod, so it must not flow at all');
  return ruleset(
    'ipv6',
    [
      { table: 'filter', name: INPUT },
      { table: 'filter', name: OUTPUT },
    ],
    r.list,
  );
}

function returnRule(family: IpFamily): PolicyRule {
  return { family, priority: RETURN_RULE_PRIORITY, fwmark: RETURN_MARK, table: RETURN_ROUTE_TABLE };
}

function returnRoute(family: IpFamily): LocalRoute {
  return { family, type: 'local', dst: family === 'ipv4' ? '0.0.0.0/0' : '::/0', dev: 'lo', table: RETURN_ROUTE_TABLE };
}

export function buildInpodRules(o: InpodOptions): InpodRules {
  if (o.profile === 'strict') validateStrict(o);
  const seen = new Set<string>();
  for (const i of o.virtualInterfaces) {
    if (seen.has(i)) throw new Error(`virtual interface ${i} is listed twice`);
    seen.add(i);
  }
  const ipv4 = captureRuleset('ipv4', o);
  const rules: PolicyRule[] = [returnRule('ipv4')];
  const routes: LocalRoute[] = [returnRoute('ipv4')];
  let ipv6: Ruleset | undefined;
  if (o.profile === 'upstream') {
    // Upstream: v6 rules and the v6 fwmark rule when IPv6 is on; the v6 local route only if lo has IPv6.
    if (o.ipv6) {
      ipv6 = captureRuleset('ipv6', o);
      rules.push(returnRule('ipv6'));
      if (!o.loIpv6Disabled) routes.push(returnRoute('ipv6'));
    }
  } else if (o.ipv6 && !o.loIpv6Disabled) {
    ipv6 = captureRuleset('ipv6', o);
    rules.push(returnRule('ipv6'));
    routes.push(returnRoute('ipv6'));
  } else {
    ipv6 = ipv6BlockRuleset();
  }
  return { profile: o.profile, iptables: ipv6 ? { ipv4, ipv6 } : { ipv4 }, rules, routes };
}

/** Render the IR to the plan the NetnsRules port applies. */
export function renderInpodPlan(
  ir: InpodRules,
  title = `ambient-lab in-pod redirection, profile ${ir.profile}`,
): RedirectionPlan {
  return {
    iptables: {
      ipv4: renderRestore(ir.iptables.ipv4, `${title}, ipv4`),
      ...(ir.iptables.ipv6 ? { ipv6: renderRestore(ir.iptables.ipv6, `${title}, ipv6`) } : {}),
    },
    rules: ir.rules,
    routes: ir.routes,
  };
}

export function buildInpodPlan(o: InpodOptions): RedirectionPlan {
  return renderInpodPlan(buildInpodRules(o));
}

/** Node-wide settings that, with a pod's annotations, decide its options. */
interface InpodGlobals {
  readonly ipv6: boolean;
  readonly dnsCapture: boolean;
  readonly probeSnat?: Readonly<Record<IpFamily, Cidr>>;
}

/** Combine validated pod annotations with the node settings (the pod's DNS annotation wins). */
export function inpodCommonOptions(
  pod: PodRedirectionAnnotations,
  g: InpodGlobals,
  loIpv6Disabled = false,
): InpodCommonOptions {
  return {
    ipv6: g.ipv6,
    loIpv6Disabled,
    dnsCapture: pod.dnsCapture ?? g.dnsCapture,
    ingressMode: pod.bypassInboundCapture,
    virtualInterfaces: pod.virtualInterfaces,
    ...(g.probeSnat ? { probeSnat: g.probeSnat } : {}),
  };
}
