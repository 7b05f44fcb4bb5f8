/**
 * The rendered plans in the simulated kernel (lab.ts topology; probes in observations.ts): what
 * each profile captures, what it lets through, and that each strict choice has the effect
 * profiles.ts claims — measured against the upstream profile on the same probe.
 */
import { test, expect } from '@playwright/test';
import { interfaceName } from '../../../../impl/api/annotations.js';
import { buildHostProbeRules, type HostProbeRules } from '../../../../impl/node-agent/host-probe-rules.js';
import type { Profile } from '../../../../impl/api/profile.js';
import { buildInpodPlan, type InpodCommonOptions } from '../../../../impl/node-agent/rule-builder.js';
import { observe } from './observations.js';
import { KUBELET_UID, inpodOptions } from './variants.js';

function host(profile: Profile): HostProbeRules {
  return profile === 'strict'
    ? buildHostProbeRules({ profile, ipv6: true, kubeletUid: KUBELET_UID })
    : buildHostProbeRules({ profile, ipv6: true });
}
function run(profile: Profile, common: Partial<InpodCommonOptions> = {}): Record<string, string> {
  return observe(buildInpodPlan(inpodOptions(profile, common)), host(profile));
}

const PROBE4 = '169.254.7.127';
const PROBE6 = 'fd16:9254:7127:1337:ffff:ffff:ffff:ffff';

/** Expected in both profiles with the default options. */
const COMMON: Record<string, string> = {
  'app outbound TCP v4': 'proxy outbound v4 dst=10.244.1.6:8080 from=10.244.1.5',
  'app outbound TCP v6': 'proxy outbound v6 dst=[fd00:1::6]:8080 from=fd00:1::5',
  'inbound TCP v4': 'proxy inbound v4 dst=10.244.1.5:8080 from=10.244.1.6',
  'inbound TCP v6': 'proxy inbound v6 dst=[fd00:1::5]:8080 from=fd00:1::6',
  'inbound HBONE v4': 'proxy hbone v4 dst=10.244.1.5:15008 from=10.244.1.6',
  'inbound HBONE v6': 'proxy hbone v6 dst=[fd00:1::5]:15008 from=fd00:1::6',
  'proxy outbound (mark + proxy uid) v4': 'app-b:8080 v4 from=10.244.1.5',
  'proxy outbound (mark + proxy uid) v6': 'app-b:8080 v6 from=fd00:1::5',
  'proxy to app, spoofed client source (return path) v4': 'app-a:8080 v4 from=10.244.1.6',
  'proxy to app, spoofed client source (return path) v6': 'app-a:8080 v6 from=fd00:1::6',
  'loopback v4': 'app-a:8080 v4 from=127.0.0.1',
  'loopback v6': 'app-a:8080 v6 from=::1',
  'own pod IP v4': 'app-a:8080 v4 from=10.244.1.5',
  'own pod IP v6': 'app-a:8080 v6 from=fd00:1::5',
  'app DNS UDP v4': 'proxy dns v4 from=10.244.1.5',
  'app DNS UDP v6': 'proxy dns v6 from=fd00:1::5',
  'app DNS TCP v4': 'proxy dns-tcp v4 dst=10.244.1.6:53 from=10.244.1.5',
  'app DNS TCP v6': 'proxy dns-tcp v6 dst=[fd00:1::6]:53 from=fd00:1::5',
  'kubelet probe, declared port 8080 v4': `app-a:8080 v4 from=${PROBE4}`,
  'kubelet probe, declared port 8080 v6': `app-a:8080 v6 from=${PROBE6}`,
  'proxy DNS query upstream and its reply v4':
    'query: dns server b v4 from=10.244.1.5; reply: proxy dns upstream from=10.244.1.6',
  'proxy DNS query upstream and its reply v6':
    'query: dns server b v6 from=fd00:1::5; reply: proxy dns upstream from=fd00:1::6',
  'TCP arriving on virtual interface tun0 v4': 'proxy inbound v4 dst=10.244.1.5:8080 from=10.244.9.2',
  'TCP arriving on virtual interface tun0 v6': 'proxy inbound v6 dst=[fd00:1::5]:8080 from=fd00:9::2',
  'app DNS UDP to a loopback resolver v4': 'local dns a v4 from=127.0.0.1',
  'app DNS UDP to a loopback resolver v6': 'local dns a v6 from=::1',
  'app DNS TCP to a loopback resolver v4': 'local dns-tcp a v4 from=127.0.0.1',
  'app DNS TCP to a loopback resolver v6': 'local dns-tcp a v6 from=::1',
  'proxy DNS TCP upstream v4': 'dns-tcp server b v4 from=10.244.1.5',
  'proxy DNS TCP upstream v6': 'dns-tcp server b v6 from=fd00:1::5',
  // inbound-tproxy's residual: NET_RAW (or NET_ADMIN) lets the app's squatter be transparent too.
  'inbound TCP, 15006 squatted by the app with NET_RAW and IP_TRANSPARENT v4': 'app squatting 15006 v4 from=10.244.1.6',
  'inbound TCP, 15006 squatted by the app with NET_RAW and IP_TRANSPARENT v6': 'app squatting 15006 v6 from=fd00:1::6',
  // Only connections to enrolled pods (the ipset) get the probe address.
  'kubelet to a pod that is not enrolled v4': 'app-b:8080 v4 from=10.244.1.1',
  'kubelet to a pod that is not enrolled v6': 'app-b:8080 v6 from=fd00:1::1',
  // Forwarded traffic has no local socket: not SNATed, captured like any inbound.
  'outside peer routed through the node v4': 'proxy inbound v4 dst=10.244.1.5:8080 from=192.0.2.2',
  'outside peer routed through the node v6': 'proxy inbound v6 dst=[fd00:1::5]:8080 from=fd00:2::2',
};

/** Where the profiles differ: [upstream, strict]. Each line is a strict choice's effect. */
const DIFF: Record<string, [string, string]> = {
  // A segment whose conntrack entry is gone is picked up as NEW. Upstream's REDIRECT sends it to
  // 15006 again, where the proxy's accepted socket has that tuple: the connection goes on. Strict's
  // TPROXY takes only bare SYNs; reset-midstream REDIRECTs the rest to 15006, where no socket has
  // the tuple (the TPROXY-accepted socket's local port is 8080), and the RST ends it — the price of
  // resetting, not stalling, connections open before enrollment (profiles.ts, inbound-tproxy).
  'inbound TCP picked up mid-stream (conntrack entry gone) v4': [
    'proxy inbound v4 dst=10.244.1.5:8080 from=10.244.1.6; then reached socket#34 "proxy inbound v4" tcp 10.244.1.5:15006 in pod-a',
    'proxy inbound v4 dst=10.244.1.5:8080 from=10.244.1.6; then reset',
  ],
  'inbound TCP picked up mid-stream (conntrack entry gone) v6': [
    'proxy inbound v6 dst=[fd00:1::5]:8080 from=fd00:1::6; then reached socket#34 "proxy inbound v6" tcp6 [fd00:1::5]:15006 in pod-a',
    'proxy inbound v6 dst=[fd00:1::5]:8080 from=fd00:1::6; then reset',
  ],
  // probe-ports: the carve-out is limited to declared probe ports.
  'kubelet probe, undeclared port 9090 v4': [
    `app-a:9090 v4 from=${PROBE4}`,
    `proxy inbound v4 dst=10.244.1.5:9090 from=${PROBE4}`,
  ],
  'kubelet probe, undeclared port 9090 v6': [
    `app-a:9090 v6 from=${PROBE6}`,
    `proxy inbound v6 dst=[fd00:1::5]:9090 from=${PROBE6}`,
  ],
  // host-probe-kubelet-uid: other host sockets are not SNATed to the probe address.
  'non-root host daemon to pod v4': [
    `app-a:8080 v4 from=${PROBE4}`,
    'proxy inbound v4 dst=10.244.1.5:8080 from=10.244.1.1',
  ],
  'non-root host daemon to pod v6': [
    `app-a:8080 v6 from=${PROBE6}`,
    'proxy inbound v6 dst=[fd00:1::5]:8080 from=fd00:1::1',
  ],
  // proxy-uid + drop-spoofed-mark: a spoofed proxy mark no longer bypasses capture.
  'app with NET_RAW spoofing the proxy mark, TCP v4': ['app-b:8080 v4 from=10.244.1.5', 'timeout'],
  'app with NET_RAW spoofing the proxy mark, TCP v6': ['app-b:8080 v6 from=fd00:1::5', 'timeout'],
  'app with NET_RAW spoofing the proxy mark, DNS UDP v4': ['dns server b v4 from=10.244.1.5', 'dropped'],
  'app with NET_RAW spoofing the proxy mark, DNS UDP v6': ['dns server b v6 from=fd00:1::5', 'dropped'],
  // non-tcp-fail-closed.
  'app UDP out (non-DNS) v4': ['udp b v4 from=10.244.1.5', 'dropped'],
  'app UDP out (non-DNS) v6': ['udp b v6 from=fd00:1::5', 'dropped'],
  'app UDP out to remote port 15053 v4': ['udp b:15053 v4 from=10.244.1.5', 'dropped'],
  'app UDP out to remote port 15053 v6': ['udp b:15053 v6 from=fd00:1::5', 'dropped'],
  'UDP in (non-DNS) v4': ['udp a v4 from=10.244.1.6', 'dropped'],
  'UDP in (non-DNS) v6': ['udp a v6 from=fd00:1::6', 'dropped'],
  // no-probe-destination-exemption.
  'app TCP to the probe address v4': ['timeout', 'proxy outbound v4 dst=169.254.7.127:8080 from=10.244.1.5'],
  'app TCP to the probe address v6': ['timeout', `proxy outbound v6 dst=[${PROBE6}]:8080 from=fd00:1::5`],
  // inbound-tproxy (finding-l): nat REDIRECT hands inbound to any socket on 15006; TPROXY only to a
  // transparent one, and drops it otherwise.
  'inbound TCP, 15006 squatted by the app without capabilities v4': [
    'app squatting 15006 v4 from=10.244.1.6',
    'timeout',
  ],
  'inbound TCP, 15006 squatted by the app without capabilities v6': [
    'app squatting 15006 v6 from=fd00:1::6',
    'timeout',
  ],
  'kubelet UDP to the enrolled pod v4': ['udp a v4 from=10.244.1.1', 'dropped'],
  'kubelet UDP to the enrolled pod v6': ['udp a v6 from=fd00:1::1', 'dropped'],
};

for (const [i, profile] of (['upstream', 'strict'] as const).entries()) {
  test(`${profile} profile, default options: every probe lands where expected`, () => {
    const expected: Record<string, string> = { ...COMMON };
    for (const [k, v] of Object.entries(DIFF)) expected[k] = v[i]!;
    expect(run(profile)).toEqual(expected);
  });

  test(`${profile} profile, ingress mode: inbound reaches the app directly; outbound, HBONE and the return path unchanged`, () => {
    const o = run(profile, { ingressMode: true });
    expect(o['inbound TCP v4']).toBe('app-a:8080 v4 from=10.244.1.6');
    expect(o['inbound TCP v6']).toBe('app-a:8080 v6 from=fd00:1::6');
    expect(o['kubelet probe, undeclared port 9090 v4']).toBe(`app-a:9090 v4 from=${PROBE4}`);
    for (const k of [
      'app outbound TCP v4',
      'app outbound TCP v6',
      'inbound HBONE v4',
      'inbound HBONE v6',
      'proxy to app, spoofed client source (return path) v4',
      'proxy to app, spoofed client source (return path) v6',
      'app DNS UDP v4',
    ]) {
      expect(o[k], k).toBe(COMMON[k]);
    }
  });

  test(`${profile} profile, virtual interfaces: TCP arriving on tun0 goes to the outbound listener, eth0 inbound is unchanged`, () => {
    const o = run(profile, { virtualInterfaces: [interfaceName('tun0')] });
    expect(o['TCP arriving on virtual interface tun0 v4']).toBe(
      'proxy outbound v4 dst=10.244.1.5:8080 from=10.244.9.2',
    );
    expect(o['TCP arriving on virtual interface tun0 v6']).toBe(
      'proxy outbound v6 dst=[fd00:1::5]:8080 from=fd00:9::2',
    );
    expect(o['inbound TCP v4']).toBe(COMMON['inbound TCP v4']);
    expect(o['app outbound TCP v4']).toBe(COMMON['app outbound TCP v4']);
  });

  test(`${profile} profile, DNS capture off: DNS is not redirected to 15053`, () => {
    const o = run(profile, { dnsCapture: false });
    expect(o['app DNS UDP v4']).toBe('dns server b v4 from=10.244.1.5');
    expect(o['app DNS UDP v6']).toBe('dns server b v6 from=fd00:1::5');
    // TCP/53 is ordinary outbound TCP then.
    expect(o['app DNS TCP v4']).toBe('proxy outbound v4 dst=10.244.1.6:53 from=10.244.1.5');
    expect(o['proxy DNS query upstream and its reply v4']).toBe(COMMON['proxy DNS query upstream and its reply v4']);
    // strict still drops other UDP.
    expect(o['app UDP out (non-DNS) v4']).toBe(profile === 'strict' ? 'dropped' : 'udp b v4 from=10.244.1.5');
  });
}

test('IPv6 off: upstream leaves v6 uncaptured (bypass); strict blocks v6 and still captures v4', () => {
  const up = run('upstream', { ipv6: false });
  expect(up['app outbound TCP v6']).toBe('app-b:8080 v6 from=fd00:1::5');
  expect(up['inbound TCP v6']).toBe('app-a:8080 v6 from=fd00:1::6');
  const st = run('strict', { ipv6: false });
  expect(st['app outbound TCP v6']).toBe('timeout');
  expect(st['inbound TCP v6']).toBe('timeout');
  expect(st['loopback v6']).toBe('app-a:8080 v6 from=::1');
  expect(st['app outbound TCP v4']).toBe(COMMON['app outbound TCP v4']);
  expect(st['inbound TCP v4']).toBe(COMMON['inbound TCP v4']);
});

test('strict without declared probe ports: no probe carve-out at all', () => {
  const plan = buildInpodPlan({ ...inpodOptions('strict'), probePorts: [] } as ReturnType<typeof inpodOptions>);
  expect(plan.iptables.ipv4).not.toContain('169.254.7.127');
  const o = observe(plan, host('strict'));
  expect(o['kubelet probe, declared port 8080 v4']).toBe(`proxy inbound v4 dst=10.244.1.5:8080 from=${PROBE4}`);
});
