/**
 * The mutation check of the rule builder, shared by both backends' tests (mutation.spec.ts,
 * nftables-equivalence.spec.ts): every single-step mutant of a security-relevant in-pod or host
 * rule, observed through a backend, and the mutants no behaviour probe (observations.ts) can tell
 * apart from the original, each with the reason (keyed `<profile> <family> <mutant>` and
 * `<profile> host <family> <mutant>`).
 */
import type { Profile } from '../../../../impl/api/profile.js';
import type { HostProbeRules } from '../../../../impl/node-agent/host-probe-rules.js';
import type { InpodRules } from '../../../../impl/node-agent/rule-builder.js';
import { mutants } from '../../../../impl/node-agent/rule-ir.js';
import { FAMILIES } from './variants.js';

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

/**
 * Mutants of `ir`'s and `host`'s security-relevant rules whose observations (`observeWith`, one
 * backend's plan of the mutated IR) equal the baseline's and are not listed as equivalent.
 */
export function survivingMutants(
  profile: Profile,
  ir: InpodRules,
  host: HostProbeRules,
  observeWith: (ir: InpodRules, host: HostProbeRules) => Record<string, string>,
): { readonly count: number; readonly survivors: readonly string[] } {
  const baseline = JSON.stringify(observeWith(ir, host));
  const survivors: string[] = [];
  let count = 0;
  const judge = (key: string, observed: Record<string, string>): void => {
    count++;
    if (JSON.stringify(observed) === baseline && !EQUIVALENT[`${profile} ${key}`]) survivors.push(key);
  };
  for (const family of FAMILIES) {
    const rs = ir.iptables[family];
    if (rs)
      for (const m of mutants(rs, { onlySecurityRelevant: true }))
        judge(`${family} ${m.name}`, observeWith({ ...ir, iptables: { ...ir.iptables, [family]: m.ruleset } }, host));
    const hrs = host.iptables[family];
    if (hrs)
      for (const m of mutants(hrs, { onlySecurityRelevant: true }))
        judge(
          `host ${family} ${m.name}`,
          observeWith(ir, { ...host, iptables: { ...host.iptables, [family]: m.ruleset } }),
        );
  }
  return { count, survivors };
}
