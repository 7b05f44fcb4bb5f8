/**
 * A one-node sim lab for the rule builder (same shape as tests/sim/kernel/inpod-fixture.ts, dual
 * stack, and with a plan applied the way the NetnsRules port does: routes and ip rules, then
 * iptables per family or the nftables document; the host probe rules by either backend):
 *
 *   pod-a (10.244.1.5, fd00:1::5; enrolled, the plan under test) --eth0/veth-a--\
 *                                                                                cni0 in node
 *   pod-b (10.244.1.6, fd00:1::6; plain)                          --eth0/veth-b--/   (10.244.1.1, fd00:1::1)
 *   vpn (10.244.9.2) --veth-- tun0 in pod-a (10.244.9.1): a "virtual interface" of pod-a
 *
 * pod-a runs the node proxy's listeners as uid 1337 with mark 0x539 (v4 and v6, v6only) and a
 * DNS socket on 15053; apps listen on 8080 and 9090 in both pods, pod-b runs a DNS server on 53.
 */
import type { RedirectionPlan } from '../../../../impl/host/netns-rules.js';
import {
  renderIpsetRestore,
  type HostProbeRules,
  renderHostProbePlan,
  probeSetMembers,
} from '../../../../impl/node-agent/host-probe-rules.js';
import { podUid } from '../../../../impl/api/ids.js';
import type { Backend } from '../../../../impl/api/backend.js';
import { renderNft } from '../../../../impl/node-agent/nftables/nft-document.js';
import { hostProbeNftDocuments, probeSetTable } from '../../../../impl/node-agent/nftables/profile-nft.js';
import { address } from '../../../../impl/node-agent/rule-ir.js';
import { SimKernel } from '../../../../sim/kernel/kernel.js';
import { credentials, type Credentials } from '../../../../sim/kernel/process.js';
import type { SimSocket } from '../../../../sim/kernel/socket.js';

export const APP = credentials(1000, 1000);
/** An app that kept the runtime's default CAP_NET_RAW (enough for SO_MARK on Linux >= 5.17). */
export const APP_NET_RAW = credentials(1000, 1000, ['NET_RAW']);
export const PROXY = credentials(1337, 1337, ['NET_ADMIN', 'NET_RAW']);
export const KUBELET = credentials(0, 0, ['NET_ADMIN', 'NET_RAW']);
/** A hostNetwork pod or other node daemon running as a non-root uid. */
export const HOST_DAEMON = credentials(2000, 2000);
export const PROXY_MARK = 0x539;

export const A4 = '10.244.1.5';
export const A6 = 'fd00:1::5';
export const B4 = '10.244.1.6';
export const B6 = 'fd00:1::6';

type Fam = 4 | 6;

export interface Lab {
  readonly k: SimKernel;
  readonly proxy: Record<'outbound' | 'inbound' | 'hbone' | 'dnsTcp', Record<Fam, SimSocket>> & {
    dns: Record<Fam, SimSocket>;
  };
  readonly appA: Record<8080 | 9090, Record<Fam, SimSocket>>;
  readonly appB: Record<8080 | 9090, Record<Fam, SimSocket>>;
  readonly dnsB: Record<Fam, SimSocket>;
  readonly dnsTcpB: Record<Fam, SimSocket>;
  /** A resolver inside pod-a on loopback port 53 (UDP and TCP), e.g. a local dnsmasq. */
  readonly localDnsA: Record<Fam, SimSocket>;
  readonly localDnsTcpA: Record<Fam, SimSocket>;
  readonly udpB: Record<Fam, SimSocket>;
  readonly udpA: Record<Fam, SimSocket>;
  readonly udp15053B: Record<Fam, SimSocket>;
}

function addPod(k: SimKernel, name: string, v4: string, v6: string, hostDev: string): void {
  k.addNetns(name);
  k.setLink(name, 'lo', true);
  k.addVeth(name, 'eth0', 'node', hostDev);
  k.setMaster('node', hostDev, 'cni0');
  k.addAddress(name, 'eth0', `${v4}/24`);
  k.addAddress(name, 'eth0', `${v6}/64`);
  k.setLink(name, 'eth0', true);
  k.setLink('node', hostDev, true);
  k.addRoute(name, { dst: 'default', family: 4, via: '10.244.1.1' });
  k.addRoute(name, { dst: 'default', family: 6, via: 'fd00:1::1' });
}

function sock(
  k: SimKernel,
  ns: string,
  proto: 'tcp' | 'udp',
  fam: Fam,
  port: number,
  who: Credentials,
  label: string,
  mark?: number,
): SimSocket {
  const s = k.socket(ns, proto, fam, who, label);
  if (mark !== undefined) k.setsockopt(s, 'SO_MARK', mark);
  // The proxy's sockets are transparent, as the node proxy opens them (strict's TPROXY needs it).
  if (who === PROXY) k.setsockopt(s, 'IP_TRANSPARENT', true);
  if (fam === 6) k.setsockopt(s, 'IPV6_V6ONLY', true);
  k.bind(s, fam === 4 ? '0.0.0.0' : '::', port);
  if (proto === 'tcp') k.listen(s);
  return s;
}

const both = (f: (fam: Fam) => SimSocket): Record<Fam, SimSocket> => ({ 4: f(4), 6: f(6) });

/** Apply a plan as the NetnsRules port does: routes, ip rules, then iptables per family. */
function applyPlan(k: SimKernel, ns: string, plan: RedirectionPlan): void {
  for (const r of plan.routes) k.addRoute(ns, { dst: r.dst, type: r.type, dev: r.dev, table: r.table });
  for (const r of plan.rules)
    k.addRule(ns, {
      family: r.family === 'ipv4' ? 4 : 6,
      priority: r.priority,
      fwmark: r.fwmark.value,
      mask: r.fwmark.mask,
      table: r.table,
    });
  if (plan.iptables.ipv4 !== undefined)
    k.iptablesRestore(ns, 4, plan.iptables.ipv4, { noflush: true, source: `${ns} plan v4` });
  if (plan.iptables.ipv6 !== undefined)
    k.iptablesRestore(ns, 6, plan.iptables.ipv6, { noflush: true, source: `${ns} plan v6` });
  if (plan.nftables !== undefined) k.netns(ns).nftables.apply(plan.nftables.text, { source: `${ns} plan nftables` });
}

/** The host probe rules as the nftables backend writes them: the sets, pod-a's addresses in them, the rules. */
function applyHostNft(k: SimKernel, host: HostProbeRules): void {
  const docs = hostProbeNftDocuments(host, { kubeletUid: KUBELET.uid });
  const nft = k.netns('node').nftables;
  nft.apply(renderNft(docs.sets), { source: 'node probe sets' });
  for (const m of probeSetMembers(podUid('pod-a-uid'), [A4, A6])) {
    if (!host.ipsets.some((x) => x.name === m.set)) continue;
    const t = probeSetTable(host.profile, m.ip.family);
    nft.addElements(t.family, t.name, m.set, [address(m.ip)]);
  }
  nft.apply(renderNft(docs.rules), { source: 'node probe rules' });
}

export function buildLab(
  plan: RedirectionPlan,
  opts: { host?: HostProbeRules; hostBackend?: Backend; kernelVersion?: string } = {},
): Lab {
  const k = new SimKernel({ kernelVersion: opts.kernelVersion ?? '6.1' });
  k.addNetns('node');
  k.setLink('node', 'lo', true);
  k.addBridge('node', 'cni0');
  k.addAddress('node', 'cni0', '10.244.1.1/24');
  k.addAddress('node', 'cni0', 'fd00:1::1/64');
  k.setLink('node', 'cni0', true);
  k.setForwarding('node', 4, true);
  k.setForwarding('node', 6, true);
  addPod(k, 'pod-a', A4, A6, 'veth-a');
  addPod(k, 'pod-b', B4, B6, 'veth-b');
  k.addNetns('vpn');
  k.setLink('vpn', 'lo', true);
  k.addVeth('pod-a', 'tun0', 'vpn', 'eth0');
  k.addAddress('pod-a', 'tun0', '10.244.9.1/24');
  k.addAddress('vpn', 'eth0', '10.244.9.2/24');
  k.addAddress('pod-a', 'tun0', 'fd00:9::1/64');
  k.addAddress('vpn', 'eth0', 'fd00:9::2/64');
  k.setLink('pod-a', 'tun0', true);
  k.setLink('vpn', 'eth0', true);
  k.addRoute('vpn', { dst: 'default', family: 4, via: '10.244.9.1' });
  k.addRoute('vpn', { dst: 'default', family: 6, via: 'fd00:9::1' });
  // An outside peer routed through the node (forwarded traffic has no local socket).
  k.addNetns('ext');
  k.setLink('ext', 'lo', true);
  k.addVeth('node', 'veth-ext', 'ext', 'eth0');
  k.addAddress('node', 'veth-ext', '192.0.2.1/24');
  k.addAddress('node', 'veth-ext', 'fd00:2::1/64');
  k.addAddress('ext', 'eth0', '192.0.2.2/24');
  k.addAddress('ext', 'eth0', 'fd00:2::2/64');
  k.setLink('node', 'veth-ext', true);
  k.setLink('ext', 'eth0', true);
  k.addRoute('ext', { dst: 'default', family: 4, via: '192.0.2.1' });
  k.addRoute('ext', { dst: 'default', family: 6, via: 'fd00:2::1' });

  applyPlan(k, 'pod-a', plan);
  if (opts.host && opts.hostBackend === 'nftables') applyHostNft(k, opts.host);
  else if (opts.host) {
    k.ipsetRestore('node', renderIpsetRestore(opts.host.ipsets, probeSetMembers(podUid('pod-a-uid'), [A4, A6])));
    applyPlan(k, 'node', renderHostProbePlan(opts.host));
  }
  const tcpL = (ns: string, port: number, who: Credentials, label: string, mark?: number): Record<Fam, SimSocket> =>
    both((f) => sock(k, ns, 'tcp', f, port, who, `${label} v${f}`, mark));
  const proxy = {
    outbound: tcpL('pod-a', 15001, PROXY, 'proxy outbound', PROXY_MARK),
    inbound: tcpL('pod-a', 15006, PROXY, 'proxy inbound', PROXY_MARK),
    hbone: tcpL('pod-a', 15008, PROXY, 'proxy hbone', PROXY_MARK),
    dns: both((f) => sock(k, 'pod-a', 'udp', f, 15053, PROXY, `proxy dns v${f}`, PROXY_MARK)),
    dnsTcp: tcpL('pod-a', 15053, PROXY, 'proxy dns-tcp', PROXY_MARK),
  };
  return {
    k,
    proxy,
    appA: { 8080: tcpL('pod-a', 8080, APP, 'app-a:8080'), 9090: tcpL('pod-a', 9090, APP, 'app-a:9090') },
    appB: { 8080: tcpL('pod-b', 8080, APP, 'app-b:8080'), 9090: tcpL('pod-b', 9090, APP, 'app-b:9090') },
    dnsB: both((f) => sock(k, 'pod-b', 'udp', f, 53, APP, `dns server b v${f}`)),
    dnsTcpB: tcpL('pod-b', 53, APP, 'dns-tcp server b'),
    localDnsA: both((f) => sock(k, 'pod-a', 'udp', f, 53, APP, `local dns a v${f}`)),
    localDnsTcpA: tcpL('pod-a', 53, APP, 'local dns-tcp a'),
    udpB: both((f) => sock(k, 'pod-b', 'udp', f, 9999, APP, `udp b v${f}`)),
    udpA: both((f) => sock(k, 'pod-a', 'udp', f, 9999, APP, `udp a v${f}`)),
    udp15053B: both((f) => sock(k, 'pod-b', 'udp', f, 15053, APP, `udp b:15053 v${f}`)),
  };
}
