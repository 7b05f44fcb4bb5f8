/**
 * Host-side probe SNAT, in the node netns (as upstream's hostprobe.golden): locally originated TCP to an
 * enrolled pod on this node is SNATed to the probe address, which the in-pod rules let through
 * uncaptured. The enrolled pods' IPs live in ipsets (one per family, pod UID as the comment) so
 * the rule text never changes when pods come and go.
 *
 * upstream: `-m owner --socket-exists` (any host socket); strict: the kubelet's uid.
 * The jump is inserted first in nat POSTROUTING so other CNIs' rules (masquerade) cannot pre-empt it.
 */
import type { PodUid } from '../api/ids.js';
import type { IpFamily, RedirectionPlan } from '../host/netns-rules.js';
import type { Profile } from '../api/profile.js';
import { renderRestore } from './render-iptables.js';
import { DEFAULT_PROBE_SNAT } from './rule-builder.js';
import {
  address,
  cidr,
  ipSetName,
  ownChain,
  ruleId,
  ruleset,
  type Cidr,
  type IpSetName,
  type Match,
  type Ruleset,
} from './rule-ir.js';

export const PROBE_SET: Readonly<Record<IpFamily, IpSetName>> = {
  ipv4: ipSetName('istio-inpod-probes-v4'),
  ipv6: ipSetName('istio-inpod-probes-v6'),
};

/** An ipset the host rules need, as data: `create NAME hash:ip family inet|inet6 comment`. */
interface IpSetSpec {
  readonly name: IpSetName;
  readonly type: 'hash:ip';
  readonly family: IpFamily;
}

/** One member: an enrolled pod's IP, commented with the pod UID (so cleanup can find it). */
interface IpSetMember {
  readonly set: IpSetName;
  readonly ip: Cidr;
  readonly podUid: PodUid;
}

type HostProbeOptions =
  | { readonly profile: 'upstream'; readonly ipv6: boolean; readonly probeSnat?: Readonly<Record<IpFamily, Cidr>> }
  | {
      readonly profile: 'strict';
      readonly ipv6: boolean;
      readonly probeSnat?: Readonly<Record<IpFamily, Cidr>>;
      readonly kubeletUid: number;
    };

export interface HostProbeRules {
  readonly profile: Profile;
  readonly iptables: { readonly ipv4: Ruleset; readonly ipv6?: Ruleset };
  readonly ipsets: readonly IpSetSpec[];
}

const POSTRT = ownChain('ISTIO_POSTRT');

function familyRules(family: IpFamily, o: HostProbeOptions): Ruleset {
  const snat = (o.probeSnat ?? DEFAULT_PROBE_SNAT)[family];
  if (snat.family !== family) throw new Error(`probe SNAT address ${snat.text} is not ${family}`);
  let owner: Match;
  if (o.profile === 'strict') {
    if (!Number.isInteger(o.kubeletUid) || o.kubeletUid < 0 || o.kubeletUid > 0xfffffffe)
      throw new Error(`strict host probe: kubeletUid ${o.kubeletUid} is not a valid uid`);
    owner = { kind: 'owner', uid: o.kubeletUid };
  } else {
    owner = { kind: 'owner', socketExists: true };
  }
  return ruleset(
    family,
    [{ table: 'nat', name: POSTRT }],
    [
      {
        id: ruleId('nat/postrouting/hook-istio_postrt'),
        table: 'nat',
        chain: 'POSTROUTING',
        position: 'insert-first',
        matches: [],
        target: { kind: 'jump', chain: POSTRT },
      },
      {
        id: ruleId('nat/postrt/probe-snat'),
        table: 'nat',
        chain: POSTRT,
        position: 'append',
        matches: [owner, { kind: 'proto', proto: 'tcp' }, { kind: 'set', set: PROBE_SET[family], dir: 'dst' }],
        target: { kind: 'SNAT', toSource: snat },
        security:
          o.profile === 'strict'
            ? 'only kubelet-owned host sockets get the probe address, and with it the in-pod probe carve-out'
            : 'every host socket gets the probe address, and with it the in-pod probe carve-out (upstream)',
      },
    ],
  );
}

export function buildHostProbeRules(o: HostProbeOptions): HostProbeRules {
  const ipv4 = familyRules('ipv4', o);
  const sets: IpSetSpec[] = [{ name: PROBE_SET.ipv4, type: 'hash:ip', family: 'ipv4' }];
  if (!o.ipv6) return { profile: o.profile, iptables: { ipv4 }, ipsets: sets };
  sets.push({ name: PROBE_SET.ipv6, type: 'hash:ip', family: 'ipv6' });
  return { profile: o.profile, iptables: { ipv4, ipv6: familyRules('ipv6', o) }, ipsets: sets };
}

/** The node-netns plan (iptables only: the host part has no ip rules or routes). */
export function renderHostProbePlan(
  ir: HostProbeRules,
  title = `ambient-lab host probe SNAT, profile ${ir.profile}`,
): RedirectionPlan {
  return {
    iptables: {
      ipv4: renderRestore(ir.iptables.ipv4, `${title}, ipv4`),
      ...(ir.iptables.ipv6 ? { ipv6: renderRestore(ir.iptables.ipv6, `${title}, ipv6`) } : {}),
    },
    rules: [],
    routes: [],
  };
}

/** The probe-set members for one pod: each IP goes to the set of its family. */
export function probeSetMembers(podUid: PodUid, ips: readonly string[]): IpSetMember[] {
  return ips.map((text) => {
    const ip = cidr(text);
    const full = ip.family === 'ipv4' ? 32 : 128;
    if (!ip.text.endsWith(`/${full}`))
      throw new Error(`pod ${podUid}: probe set member ${text} must be a single address, not a prefix`);
    return { set: PROBE_SET[ip.family], ip, podUid };
  });
}

/**
 * `ipset restore` text: create the sets (`-exist` keeps existing ones and their members) and
 * add the members. Pod UIDs are validated tokens (ids.ts), so the quoted comment is safe.
 */
export function renderIpsetRestore(sets: readonly IpSetSpec[], members: readonly IpSetMember[] = []): string {
  const lines = sets.map(
    (s) => `create ${s.name} ${s.type} family ${s.family === 'ipv4' ? 'inet' : 'inet6'} comment -exist`,
  );
  for (const m of members) {
    const spec = sets.find((s) => s.name === m.set);
    if (!spec) throw new Error(`ipset member ${address(m.ip)} names set ${m.set}, which is not in the plan`);
    if (spec.family !== m.ip.family)
      throw new Error(`ipset member ${address(m.ip)} is not ${spec.family} like set ${m.set}`);
    lines.push(`add ${m.set} ${address(m.ip)} comment "${m.podUid}" -exist`);
  }
  return `${lines.join('\n')}\n`;
}
