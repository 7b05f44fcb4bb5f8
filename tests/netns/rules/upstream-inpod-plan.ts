/**
 * Fixture: the upstream istio-cni in-pod ruleset (reference/istio-cni.md §3.2-3.4, default
 * profile with DNS capture, IPv4 and IPv6), written out as complete restore text (chain
 * declarations and COMMIT lines, which the upstream golden excerpt leaves out) plus the policy
 * route for the return path. Hand-written here on purpose: the rule builder that renders plans
 * comes later and will be checked against the same kernel behaviour.
 */
import { mark } from '../../../impl/api/marks.js';
import type { RedirectionPlan } from '../../../impl/host/netns-rules.js';

function inpod(loopback: string, probeSnat: string): string {
  return `*mangle
:ISTIO_PRERT - [0:0]
:ISTIO_OUTPUT - [0:0]
-A PREROUTING -j ISTIO_PRERT
-A OUTPUT -j ISTIO_OUTPUT
-A ISTIO_PRERT -m mark --mark 0x539/0xfff -j CONNMARK --set-xmark 0x111/0xfff
-A ISTIO_OUTPUT -m connmark --mark 0x111/0xfff -j CONNMARK --restore-mark --nfmask 0xffffffff --ctmask 0xffffffff
COMMIT
*nat
:ISTIO_PRERT - [0:0]
:ISTIO_OUTPUT - [0:0]
-A OUTPUT -j ISTIO_OUTPUT
-A PREROUTING -j ISTIO_PRERT
-A ISTIO_PRERT -s ${probeSnat} -p tcp -m tcp -j ACCEPT
-A ISTIO_OUTPUT -d ${probeSnat} -p tcp -m tcp -j ACCEPT
-A ISTIO_PRERT ! -d ${loopback} -p tcp ! --dport 15008 -m mark ! --mark 0x539/0xfff -j REDIRECT --to-ports 15006
-A ISTIO_OUTPUT ! -o lo -p udp -m mark ! --mark 0x539/0xfff -m udp --dport 53 -j REDIRECT --to-port 15053
-A ISTIO_OUTPUT ! -d ${loopback} -p tcp --dport 53 -m mark ! --mark 0x539/0xfff -j REDIRECT --to-ports 15053
-A ISTIO_OUTPUT -p tcp -m mark --mark 0x111/0xfff -j ACCEPT
-A ISTIO_OUTPUT ! -d ${loopback} -o lo -j ACCEPT
-A ISTIO_OUTPUT ! -d ${loopback} -p tcp -m mark ! --mark 0x539/0xfff -j REDIRECT --to-ports 15001
COMMIT
*raw
:ISTIO_PRERT - [0:0]
:ISTIO_OUTPUT - [0:0]
-A PREROUTING -j ISTIO_PRERT
-A OUTPUT -j ISTIO_OUTPUT
-A ISTIO_OUTPUT -p udp -m mark --mark 0x539/0xfff -m udp --dport 53 -j CT --zone 1
-A ISTIO_PRERT -p udp -m mark ! --mark 0x539/0xfff -m udp --sport 53 -j CT --zone 1
COMMIT
`;
}

export const RETURN = mark(0x111, 0xfff);

export const UPSTREAM_INPOD_PLAN: RedirectionPlan = {
  iptables: {
    ipv4: inpod('127.0.0.1/32', '169.254.7.127'),
    ipv6: inpod('::1/128', 'fd16:9254:7127:1337:ffff:ffff:ffff:ffff'),
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
export const SAVED_OUTBOUND_REDIRECT_V4 = '-A ISTIO_OUTPUT ! -d 127.0.0.1/32 -p tcp -m mark ! --mark 0x539/0xfff -j REDIRECT --to-ports 15001';
