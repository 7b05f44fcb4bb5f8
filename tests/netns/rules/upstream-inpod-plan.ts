/**
 * Fixture: the upstream istio-cni in-pod ruleset (istio/istio cni/pkg/iptables/testdata, default
 * profile with DNS capture, IPv4 and IPv6), written out as complete restore text (chain
 * declarations and COMMIT lines, which the upstream golden excerpt leaves out) plus the policy
 * route for the return path. Independent of the rule builder on purpose: the builder's output is checked
 * against the same kernel behaviour.
 */
import { readFileSync } from 'node:fs';
import * as path from 'node:path';
import { mark } from '../../../impl/api/marks.js';
import type { RedirectionPlan } from '../../../impl/host/netns-rules.js';
import { buildUpstreamInpodNft } from '../../../impl/node-agent/nftables/upstream-rules.js';

/**
 * The one copy of the upstream rulesets is fixtures/rules/ (iptables-save form, which declares the
 * built-in chains); a plan must not declare built-in chains (the NetnsRules contract), so those
 * declarations and the comment lines are dropped.
 */
function inpod(family: 'v4' | 'v6'): string {
  const text = readFileSync(
    path.resolve(import.meta.dirname, '..', '..', '..', 'fixtures', 'rules', `upstream-inpod-${family}.rules`),
    'utf8',
  );
  return text
    .split('\n')
    .filter((l) => !l.startsWith('#') && !/^:(PREROUTING|INPUT|FORWARD|OUTPUT|POSTROUTING) /.test(l))
    .join('\n');
}

const RETURN = mark(0x111, 0xfff);

export const UPSTREAM_INPOD_PLAN: RedirectionPlan = {
  iptables: {
    ipv4: inpod('v4'),
    ipv6: inpod('v6'),
  },
  rules: [
    { family: 'ipv4', priority: 32764, fwmark: RETURN, table: 100 },
    { family: 'ipv6', priority: 32764, fwmark: RETURN, table: 100 },
  ],
  routes: [
    { family: 'ipv4', type: 'local', dst: '0.0.0.0/0', dev: 'lo', table: 100 },
    { family: 'ipv6', type: 'local', dst: '::/0', dev: 'lo', table: 100 },
  ],
};

/** How iptables-save prints the outbound capture rule (normalised: `-m tcp` is not added here). */
export const SAVED_OUTBOUND_REDIRECT_V4 =
  '-A ISTIO_OUTPUT ! -d 127.0.0.1/32 -p tcp -m mark ! --mark 0x539/0xfff -j REDIRECT --to-ports 15001';

/** Our nftables document of the same configuration (upstream profile, DNS capture, IPv4 and IPv6). */
export const UPSTREAM_INPOD_NFT = buildUpstreamInpodNft({
  ipv6: true,
  dns: true,
  ingressMode: false,
  virtualInterfaces: [],
  probeSnat: { ipv4: '169.254.7.127', ipv6: 'fd16:9254:7127:1337:ffff:ffff:ffff:ffff' },
});
