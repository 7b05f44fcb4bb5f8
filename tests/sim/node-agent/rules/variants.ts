/**
 * The rule variants that get golden files: in-pod {v4, v6} x {default, ingress, virtual
 * interfaces, ingress + virtual interfaces, DNS off} x profile, and host probe {v4, v6} x profile,
 * plus strict with IPv6 off (the v6 block). Shared by the golden test and the behaviour tests.
 */
import { interfaceName } from '../../../../impl/api/annotations.js';
import { port } from '../../../../impl/api/ports.js';
import type { IpFamily, RedirectionPlan } from '../../../../impl/host/netns-rules.js';
import { buildHostProbeRules, renderHostProbePlan } from '../../../../impl/node-agent/host-probe-rules.js';
import type { Profile } from '../../../../impl/api/profile.js';
import {
  buildInpodPlan,
  type InpodCommonOptions,
  type InpodOptions,
} from '../../../../impl/node-agent/rule-builder.js';

/** The proxy's uid in the sim labs (tests/sim/kernel/inpod-fixture.ts uses 1337). */
const PROXY_UID = 1337;
const PROBE_PORTS = [port(8080)];
export const KUBELET_UID = 0;

export function inpodOptions(profile: Profile, common: Partial<InpodCommonOptions> = {}): InpodOptions {
  const c: InpodCommonOptions = { ipv6: true, dnsCapture: true, ingressMode: false, virtualInterfaces: [], ...common };
  return profile === 'strict' ? { ...c, profile, proxyUid: PROXY_UID, probePorts: PROBE_PORTS } : { ...c, profile };
}

interface Variant {
  /** Golden file stem, e.g. `strict/inpod-default`. */
  readonly name: string;
  readonly plan: RedirectionPlan;
}

export const INPOD_VARIANTS: Record<string, Partial<InpodCommonOptions>> = {
  default: {},
  ingress: { ingressMode: true },
  'virtual-interfaces': { virtualInterfaces: [interfaceName('tun0'), interfaceName('wg0')] },
  'ingress-and-virtual-interfaces': {
    ingressMode: true,
    virtualInterfaces: [interfaceName('tun0'), interfaceName('wg0')],
  },
  'dns-off': { dnsCapture: false },
  'ipv6-off': { ipv6: false },
};

export function variants(): Variant[] {
  const out: Variant[] = [];
  for (const profile of ['upstream', 'strict'] as const) {
    for (const [name, common] of Object.entries(INPOD_VARIANTS))
      out.push({ name: `${profile}/inpod-${name}`, plan: buildInpodPlan(inpodOptions(profile, common)) });
    const host =
      profile === 'strict'
        ? buildHostProbeRules({ profile, ipv6: true, kubeletUid: KUBELET_UID })
        : buildHostProbeRules({ profile, ipv6: true });
    out.push({ name: `${profile}/hostprobe`, plan: renderHostProbePlan(host) });
  }
  return out;
}

export const FAMILIES: readonly IpFamily[] = ['ipv4', 'ipv6'];
