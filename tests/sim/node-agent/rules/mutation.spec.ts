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
import { buildInpodRules, renderInpodPlan } from '../../../../impl/node-agent/rule-builder.js';
import { survivingMutants } from './mutant-survivors.js';
import { observe } from './observations.js';
import { KUBELET_UID, inpodOptions } from './variants.js';

function host(profile: Profile): HostProbeRules {
  return profile === 'strict'
    ? buildHostProbeRules({ profile, ipv6: true, kubeletUid: KUBELET_UID })
    : buildHostProbeRules({ profile, ipv6: true });
}

for (const profile of ['upstream', 'strict'] as const) {
  test(`${profile}: every mutant of a security-relevant in-pod or host rule changes observed behaviour`, () => {
    // Virtual interfaces on, so their rules are in the set too.
    const ir = buildInpodRules(inpodOptions(profile, { virtualInterfaces: [interfaceName('tun0')] }));
    const h = host(profile);
    const { count, survivors } = survivingMutants(profile, ir, h, (i, host) => observe(renderInpodPlan(i), host));
    expect(count).toBeGreaterThan(20);
    expect(survivors).toEqual([]);
    // The host plan must be renderable after mutation too (sanity of the mutation API).
    expect(renderHostProbePlan(h).iptables.ipv4).toContain('ISTIO_POSTRT');
  });
}
