/**
 * Mutation check of the rule builder: every single-step mutant of a security-relevant rule
 * (rule removed, or one of its matches dropped) must change at least one behaviour probe
 * (observations.ts). A surviving mutant means either the rule is not needed or the probes miss
 * what it protects; either way the flag or the probes are wrong. Known equivalent mutants are
 * listed with the reason they cannot be observed.
 */
import { test, expect } from '@playwright/test';
import { interfaceName } from '../../../../impl/api/annotations.js';
import {
  buildHostProbeRules,
  renderHostProbePlan,
  type HostProbeRules,
} from '../../../../impl/node-agent/host-probe-rules.js';
import type { Profile } from '../../../../impl/api/profile.js';
import { buildInpodRules, renderInpodPlan, type InpodRules } from '../../../../impl/node-agent/rule-builder.js';
import { mutants } from '../../../../impl/node-agent/rule-ir.js';
import { observe } from './observations.js';
import { FAMILIES, KUBELET_UID, inpodOptions } from './variants.js';

function host(profile: Profile): HostProbeRules {
  return profile === 'strict'
    ? buildHostProbeRules({ profile, ipv6: true, kubeletUid: KUBELET_UID })
    : buildHostProbeRules({ profile, ipv6: true });
}

/** Mutants that no probe can tell apart from the original, and why. */
const NAT_PRERT_NEVER_SEES_LOOPED =
  'nat PREROUTING only sees the first packet of a connection; looped-back packets (to 127.0.0.1/::1, or from the proxy via lo) already have a conntrack entry from OUTPUT, and such addresses/marks cannot arrive from the wire';
const EQUIVALENT: Record<string, string> = {};
for (const profile of ['upstream', 'strict']) {
  for (const family of ['ipv4', 'ipv6']) {
    EQUIVALENT[`${profile} ${family} weaken nat/prert/redirect-inbound match 0 (dst)`] = NAT_PRERT_NEVER_SEES_LOOPED;
    EQUIVALENT[`${profile} ${family} weaken nat/prert/redirect-inbound match 3 (mark)`] = NAT_PRERT_NEVER_SEES_LOOPED;
    EQUIVALENT[`${profile} ${family} weaken nat/out/loopback-own-ip match 0 (dst)`] =
      'traffic out lo to 127.0.0.1/::1 is never redirected anyway (redirect-outbound excludes it), so accepting it earlier changes nothing';
  }
  for (const family of ['ipv4', 'ipv6']) {
    EQUIVALENT[`strict ${family} weaken filter/out/dns-redirected match 2 (l4)`] =
      'UDP to 127.0.0.1/::1 on any port routes out lo and is returned by filter/out/loopback anyway; only DNS is redirected to loopback';
  }
  for (const family of ['ipv4', 'ipv6']) {
    for (const m of ['0 (dst)', '1 (in)', '4 (mark)'])
      EQUIVALENT[`strict ${family} weaken nat/prert/reset-midstream match ${m}`] = NAT_PRERT_NEVER_SEES_LOOPED;
    EQUIVALENT[`strict ${family} weaken mangle/prert/tproxy-inbound match 5 (ctstate)`] =
      'with `--syn` the rule takes only bare SYNs; one that starts no new entry is a retransmission or a TIME_WAIT reuse of a tuple, which TPROXY hands to the same socket (established lookup first) either way';
    EQUIVALENT[`strict ${family} weaken mangle/prert/tproxy-inbound match 0 (dst)`] =
      'packets to 127.0.0.1/::1 only arrive over lo, which the rule already leaves out (`! -i lo`)';
    EQUIVALENT[`strict ${family} weaken mangle/prert/tproxy-inbound match 4 (mark)`] =
      'the proxy mark only arrives on packets looped over lo (a veth scrubs skb->mark), which the rule already leaves out (`! -i lo`)';
  }
  EQUIVALENT[`strict host ${'ipv4'} weaken nat/postrt/probe-snat match 1 (proto)`] =
    'strict pods drop inbound non-TCP whatever its source, so SNATing it is unobservable';
  EQUIVALENT[`strict host ${'ipv6'} weaken nat/postrt/probe-snat match 1 (proto)`] =
    'strict pods drop inbound non-TCP whatever its source, so SNATing it is unobservable';
}

for (const profile of ['upstream', 'strict'] as const) {
  test(`${profile}: every mutant of a security-relevant in-pod or host rule changes observed behaviour`, () => {
    // Virtual interfaces on, so their rules are in the set too.
    const ir = buildInpodRules(inpodOptions(profile, { virtualInterfaces: [interfaceName('tun0')] }));
    const h = host(profile);
    const baseline = observe(renderInpodPlan(ir), h);
    const survivors: string[] = [];
    let count = 0;
    for (const family of FAMILIES) {
      const rs = ir.iptables[family];
      if (!rs) continue;
      for (const m of mutants(rs, { onlySecurityRelevant: true })) {
        const mutated: InpodRules = { ...ir, iptables: { ...ir.iptables, [family]: m.ruleset } };
        const key = `${family} ${m.name}`;
        count++;
        if (
          JSON.stringify(observe(renderInpodPlan(mutated), h)) === JSON.stringify(baseline) &&
          !EQUIVALENT[`${profile} ${key}`]
        )
          survivors.push(key);
      }
      const hrs = h.iptables[family];
      if (!hrs) continue;
      for (const m of mutants(hrs, { onlySecurityRelevant: true })) {
        const mutated: HostProbeRules = { ...h, iptables: { ...h.iptables, [family]: m.ruleset } };
        const key = `host ${family} ${m.name}`;
        count++;
        if (
          JSON.stringify(observe(renderInpodPlan(ir), mutated)) === JSON.stringify(baseline) &&
          !EQUIVALENT[`${profile} ${key}`]
        )
          survivors.push(key);
      }
    }
    expect(count).toBeGreaterThan(20);
    expect(survivors).toEqual([]);
    // The host plan must be renderable after mutation too (sanity of the mutation API).
    expect(renderHostProbePlan(h).iptables.ipv4).toContain('ISTIO_POSTRT');
  });
}
