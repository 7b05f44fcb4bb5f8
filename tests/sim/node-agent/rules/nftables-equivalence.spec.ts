/**
 * The nftables backend does to traffic what the iptables backend does, in the simulator's kernel
 * model, over every behaviour probe of the rule lab (observations.ts: outbound, inbound, DNS, UDP,
 * marks, squatters, probes from the host, virtual interfaces, v4 and v6): for every in-pod variant,
 * both profiles, the pod's plan and the host's probe rules written by each backend.
 *
 * Strict's document is its IR translated (impl/node-agent/nftables/ruleset-to-nft.ts), so every
 * probe must agree. Upstream's is istio-cni's own nftables backend, which differs in one place:
 * the host probe rule matches the kubelet's uid (`meta skuid`) instead of any socket, so a
 * non-root host daemon is not SNATed to the probe address — the probes from that daemon are the
 * only ones allowed to differ, and they must.
 *
 * Mutation testing covers the translator: every single-step mutant of a security-relevant strict
 * rule, written through the nftables backend, must change a probe (the same equivalent-mutant list
 * as the iptables mutation test).
 */
import { test, expect } from '@playwright/test';
import { interfaceName } from '../../../../impl/api/annotations.js';
import { buildHostProbeRules, type HostProbeRules } from '../../../../impl/node-agent/host-probe-rules.js';
import { inpodNftPlan } from '../../../../impl/node-agent/nftables/profile-nft.js';
import { buildInpodRules, renderInpodPlan } from '../../../../impl/node-agent/rule-builder.js';
import type { Profile } from '../../../../impl/api/profile.js';
import { survivingMutants } from './mutant-survivors.js';
import { KUBELET } from './lab.js';
import { observe } from './observations.js';
import { INPOD_VARIANTS, inpodOptions } from './variants.js';

function host(profile: Profile): HostProbeRules {
  return profile === 'strict'
    ? buildHostProbeRules({ profile, ipv6: true, kubeletUid: KUBELET.uid })
    : buildHostProbeRules({ profile, ipv6: true });
}

/** Probes that differ between upstream's two backends, by design (see the header). */
const UPSTREAM_NFT_DIFFERS = /host daemon/;
/**
 * With IPv6 capture off upstream's iptables backend writes no v6 rule at all, while its nftables
 * tables are `inet`: the UDP DNS redirect (written once, without an address match) covers v6 too,
 * and any ct-using rule turns conntrack on for v6 (so the proxy can read SO_ORIGINAL_DST of a v6
 * HBONE connection). Both are upstream's nftables backend's own behaviour (its golden files), not
 * a translation of ours; neither lets traffic past the proxy.
 */
const UPSTREAM_NFT_V6_OFF: Readonly<Record<string, RegExp>> = {
  'app DNS UDP v6': /^proxy dns v6 /,
  'inbound HBONE v6': /^proxy hbone v6 /,
};

for (const profile of ['upstream', 'strict'] as const)
  for (const [variant, common] of Object.entries(INPOD_VARIANTS))
    test(`${profile} ${variant}: every probe answers the same through the nftables backend${profile === 'upstream' ? ' (but the host daemon’s, which upstream’s nftables host rule no longer SNATs)' : ''}`, () => {
      const o = inpodOptions(profile, common);
      const ir = buildInpodRules(o);
      const h = host(profile);
      const ipt = observe(renderInpodPlan(ir), h, 'iptables');
      const nft = observe(inpodNftPlan(o, ir), h, 'nftables');
      expect(Object.keys(nft).sort()).toEqual(Object.keys(ipt).sort());
      const differ = Object.keys(ipt).filter((k) => ipt[k] !== nft[k]);
      const v6off = profile === 'upstream' && variant === 'ipv6-off';
      const allowed =
        profile === 'upstream'
          ? differ.filter(
              (k) => UPSTREAM_NFT_DIFFERS.test(k) || (v6off && UPSTREAM_NFT_V6_OFF[k]?.test(nft[k] ?? '') === true),
            )
          : [];
      expect(
        differ.filter((k) => !allowed.includes(k)).map((k) => `${k}: iptables ${ipt[k]} / nftables ${nft[k]}`),
      ).toEqual([]);
      if (profile === 'upstream' && h.iptables.ipv4) {
        // the difference is real and in the expected direction: the daemon is captured, not carved out
        expect(allowed.length, JSON.stringify(differ)).toBeGreaterThan(0);
        for (const k of allowed.filter((x) => UPSTREAM_NFT_DIFFERS.test(x)))
          expect(nft[k], k).not.toMatch(/from=169\.254\.7\.127|from=fd16:/);
      }
    });

test('strict: every mutant of a security-relevant in-pod rule, written through the nftables backend, changes observed behaviour', () => {
  const o = inpodOptions('strict', { virtualInterfaces: [interfaceName('tun0')] });
  const ir = buildInpodRules(o);
  const h = host('strict');
  const { count, survivors } = survivingMutants('strict', ir, h, (i, host) =>
    observe(inpodNftPlan(o, i), host, 'nftables'),
  );
  expect(count).toBeGreaterThan(20);
  expect(survivors).toEqual([]);
});
