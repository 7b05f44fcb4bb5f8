/**
 * Named behaviour probes over a lab with a plan applied: each opens one connection or sends one
 * datagram on a fresh lab and reports where it ended up, in words (`proxy outbound v4
 * dst=10.244.1.6:8080`, `app-b:8080 v4 from=10.244.1.5`, `timeout`...). The behaviour tests
 * assert the expected words per profile; the mutation test asserts that every mutant of a
 * security-relevant rule changes at least one of them.
 */
import type { Backend } from '../../../../impl/api/backend.js';
import type { RedirectionPlan } from '../../../../impl/host/netns-rules.js';
import type { HostProbeRules } from '../../../../impl/node-agent/host-probe-rules.js';
import { formatIp } from '../../../../impl/api/ip/address.js';
import type { ConnectResult, UdpResult } from '../../../../sim/kernel/kernel.js';
import { formatSockAddr } from '../../../../sim/kernel/socket.js';
import {
  A4,
  A6,
  APP,
  APP_NET_RAW,
  B4,
  B6,
  HOST_DAEMON,
  KUBELET,
  PROXY,
  PROXY_MARK,
  buildLab,
  type Lab,
} from './lab.js';

type Fam = 4 | 6;

function describeConnect(lab: Lab, r: ConnectResult): string {
  if (r.outcome !== 'established') return r.outcome;
  const l = r.listener!;
  const from = `from=${formatIp(r.server!.remote!.addr)}`;
  if (l.label.startsWith('proxy')) return `${l.label} dst=${formatSockAddr(lab.k.originalDst(r.server!))} ${from}`;
  return `${l.label} ${from}`;
}

function describeUdp(r: UdpResult): string {
  if (r.outcome !== 'delivered') return r.outcome === 'dropped' ? 'dropped' : r.outcome;
  return `${r.socket!.label} from=${formatIp(r.from!.addr)}`;
}

const addr = (f: Fam, v4: string, v6: string): string => (f === 4 ? v4 : v6);

function connect(
  lab: Lab,
  ns: string,
  who: typeof APP,
  f: Fam,
  dst: string,
  port: number,
  setup?: (s: ReturnType<Lab['k']['socket']>) => void,
): string {
  const s = lab.k.socket(ns, 'tcp', f, who, 'client');
  setup?.(s);
  return describeConnect(lab, lab.k.connect(s, dst, port));
}

function udp(lab: Lab, ns: string, who: typeof APP, f: Fam, dst: string, port: number, mark?: number): string {
  const s = lab.k.socket(ns, 'udp', f, who, 'udp client');
  if (mark !== undefined) lab.k.setsockopt(s, 'SO_MARK', mark);
  return describeUdp(lab.k.sendUdp(s, dst, port, 'q'));
}

/** Close the proxy's inbound listener, let the app bind 15006 in its place, connect in from pod-b. */
function squat15006(lab: Lab, f: Fam, who: typeof APP, transparent: boolean): string {
  lab.k.close(lab.proxy.inbound[f]);
  const s = lab.k.socket('pod-a', 'tcp', f, who, `app squatting 15006 v${f}`);
  if (transparent) lab.k.setsockopt(s, 'IP_TRANSPARENT', true);
  if (f === 6) lab.k.setsockopt(s, 'IPV6_V6ONLY', true);
  lab.k.bind(s, f === 4 ? '0.0.0.0' : '::', 15006);
  lab.k.listen(s);
  return connect(lab, 'pod-b', APP, f, addr(f, A4, A6), 8080);
}

/**
 * An inbound connection from pod-b whose conntrack entry in pod-a is gone when its next segment
 * arrives — as for a connection open before enrollment (the namespace tracked nothing until the
 * rules needed it) or after `conntrack -F`: the segment is picked up mid-stream as NEW.
 */
function inboundPickedUpMidStream(lab: Lab, f: Fam): string {
  const s = lab.k.socket('pod-b', 'tcp', f, APP, 'client');
  const first = describeConnect(lab, lab.k.connect(s, addr(f, A4, A6), 8080));
  lab.k.netns('pod-a').conntrack.flush();
  const r = lab.k.sendTcp(s, 'mid-stream');
  return `${first}; then ${r.delivered ? r.reason : r.reset ? 'reset' : r.reason}`;
}

type Probe = (lab: Lab) => string;

function perFamily(name: string, f: (lab: Lab, fam: Fam) => string): [string, Probe][] {
  return [4, 6].map((fam) => [`${name} v${fam}`, (lab: Lab) => f(lab, fam as Fam)]);
}

const PROBES: readonly [string, Probe][] = [
  ...perFamily('app outbound TCP', (lab, f) => connect(lab, 'pod-a', APP, f, addr(f, B4, B6), 8080)),
  ...perFamily('inbound TCP', (lab, f) => connect(lab, 'pod-b', APP, f, addr(f, A4, A6), 8080)),
  ...perFamily('inbound HBONE', (lab, f) => connect(lab, 'pod-b', APP, f, addr(f, A4, A6), 15008)),
  ...perFamily('proxy outbound (mark + proxy uid)', (lab, f) =>
    connect(lab, 'pod-a', PROXY, f, addr(f, B4, B6), 8080, (s) => lab.k.setsockopt(s, 'SO_MARK', PROXY_MARK)),
  ),
  ...perFamily('proxy to app, spoofed client source (return path)', (lab, f) =>
    connect(lab, 'pod-a', PROXY, f, addr(f, A4, A6), 8080, (s) => {
      lab.k.setsockopt(s, 'SO_MARK', PROXY_MARK);
      lab.k.setsockopt(s, 'IP_TRANSPARENT', true);
      lab.k.bind(s, addr(f, B4, B6), 0);
    }),
  ),
  ...perFamily('loopback', (lab, f) => connect(lab, 'pod-a', APP, f, addr(f, '127.0.0.1', '::1'), 8080)),
  ...perFamily('own pod IP', (lab, f) => connect(lab, 'pod-a', APP, f, addr(f, A4, A6), 8080)),
  ...perFamily('app DNS UDP', (lab, f) => udp(lab, 'pod-a', APP, f, addr(f, B4, B6), 53)),
  ...perFamily('app DNS TCP', (lab, f) => connect(lab, 'pod-a', APP, f, addr(f, B4, B6), 53)),
  ...perFamily('kubelet probe, declared port 8080', (lab, f) =>
    connect(lab, 'node', KUBELET, f, addr(f, A4, A6), 8080),
  ),
  ...perFamily('kubelet probe, undeclared port 9090', (lab, f) =>
    connect(lab, 'node', KUBELET, f, addr(f, A4, A6), 9090),
  ),
  ...perFamily('non-root host daemon to pod', (lab, f) => connect(lab, 'node', HOST_DAEMON, f, addr(f, A4, A6), 8080)),
  ...perFamily('app with NET_RAW spoofing the proxy mark, TCP', (lab, f) =>
    connect(lab, 'pod-a', APP_NET_RAW, f, addr(f, B4, B6), 8080, (s) => lab.k.setsockopt(s, 'SO_MARK', PROXY_MARK)),
  ),
  ...perFamily('app with NET_RAW spoofing the proxy mark, DNS UDP', (lab, f) =>
    udp(lab, 'pod-a', APP_NET_RAW, f, addr(f, B4, B6), 53, PROXY_MARK),
  ),
  ...perFamily('app UDP out (non-DNS)', (lab, f) => udp(lab, 'pod-a', APP, f, addr(f, B4, B6), 9999)),
  // The DNS listener's port on a remote address: the exemption for redirected DNS must not let it out.
  ...perFamily('app UDP out to remote port 15053', (lab, f) => udp(lab, 'pod-a', APP, f, addr(f, B4, B6), 15053)),
  ...perFamily('UDP in (non-DNS)', (lab, f) => udp(lab, 'pod-b', APP, f, addr(f, A4, A6), 9999)),
  ...perFamily('proxy DNS query upstream and its reply', (lab, f) => {
    const s = lab.k.socket('pod-a', 'udp', f, PROXY, 'proxy dns upstream');
    lab.k.setsockopt(s, 'SO_MARK', PROXY_MARK);
    const q = describeUdp(lab.k.sendUdp(s, addr(f, B4, B6), 53, 'q'));
    if (!q.startsWith('dns server b')) return `query: ${q}`;
    const reply = lab.k.sendUdp(
      lab.dnsB[f],
      s.local!.addr.family === f && formatIp(s.local!.addr) !== (f === 4 ? '0.0.0.0' : '::')
        ? s.local!.addr
        : addr(f, A4, A6),
      s.local!.port,
      'a',
    );
    return `query: ${q}; reply: ${describeUdp(reply)}`;
  }),
  ...perFamily('app TCP to the probe address', (lab, f) =>
    connect(lab, 'pod-a', APP, f, addr(f, '169.254.7.127', 'fd16:9254:7127:1337:ffff:ffff:ffff:ffff'), 8080),
  ),
  ...perFamily('TCP arriving on virtual interface tun0', (lab, f) =>
    connect(lab, 'vpn', APP, f, addr(f, A4, A6), 8080),
  ),
  ...perFamily('app DNS UDP to a loopback resolver', (lab, f) =>
    udp(lab, 'pod-a', APP, f, addr(f, '127.0.0.1', '::1'), 53),
  ),
  ...perFamily('app DNS TCP to a loopback resolver', (lab, f) =>
    connect(lab, 'pod-a', APP, f, addr(f, '127.0.0.1', '::1'), 53),
  ),
  ...perFamily('proxy DNS TCP upstream', (lab, f) =>
    connect(lab, 'pod-a', PROXY, f, addr(f, B4, B6), 53, (s) => lab.k.setsockopt(s, 'SO_MARK', PROXY_MARK)),
  ),
  ...perFamily('kubelet to a pod that is not enrolled', (lab, f) =>
    connect(lab, 'node', KUBELET, f, addr(f, B4, B6), 8080),
  ),
  ...perFamily('kubelet UDP to the enrolled pod', (lab, f) => udp(lab, 'node', KUBELET, f, addr(f, A4, A6), 9999)),
  // Port hijack (finding-l): the proxy's inbound listener is gone (a restart) and the app holds 15006.
  ...perFamily('inbound TCP, 15006 squatted by the app without capabilities', (lab, f) =>
    squat15006(lab, f, APP, false),
  ),
  ...perFamily('inbound TCP, 15006 squatted by the app with NET_RAW and IP_TRANSPARENT', (lab, f) =>
    squat15006(lab, f, APP_NET_RAW, true),
  ),
  ...perFamily('inbound TCP picked up mid-stream (conntrack entry gone)', inboundPickedUpMidStream),
  ...perFamily('outside peer routed through the node', (lab, f) => connect(lab, 'ext', APP, f, addr(f, A4, A6), 8080)),
];

export function observe(
  plan: RedirectionPlan,
  host: HostProbeRules | undefined,
  hostBackend: Backend = 'iptables',
): Record<string, string> {
  const out: Record<string, string> = {};
  for (const [name, probe] of PROBES) {
    const lab = buildLab(plan, host ? { host, hostBackend } : {});
    try {
      out[name] = probe(lab);
    } catch (e) {
      out[name] = `error: ${(e as Error).message}`;
    }
  }
  return out;
}
