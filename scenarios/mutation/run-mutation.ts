/**
 * Mutation testing of the rule builder through the whole stack: for every single-step mutant of
 * a security-relevant in-pod rule, build a sim world whose agents apply the mutated plan, run
 * the threat actions and the properties, and call the mutant killed when some property reports
 * a violation the unmutated world does not. Survivors must be documented equivalents
 * (KNOWN_SURVIVORS) or they are gaps in the properties or the attacks.
 */
import type { Profile, World, WorldOptions } from '../world.js';
import type { RedirectionPlan } from '../../impl/host/netns-rules.js';
import type { InpodOptions } from '../../impl/node-agent/rule-builder.js';
import { port } from '../../impl/api/ports.js';
import { runThreat, type FoundViolation } from '../attacks/matrix.js';
import { PROBE_PORT } from '../attacks/topology.js';
import { PROXY_UID, threat, type ThreatId } from '../threats/threats.js';
import { applyPlanMutant, planMutants, type PlanMutant } from './plan-mutation.js';

export type MutatingWorldMaker = (options: WorldOptions, mutatePlan: (plan: RedirectionPlan, pod: { namespace: string; name: string }) => RedirectionPlan) => Promise<World>;

/** Threats whose actions together exercise every security rule (mark, raw, UDP, host, routed). */
export const MUTATION_THREATS: readonly ThreatId[] = ['app-net-raw-6.1', 'host-process', 'host-root', 'outside'];

/** The options the sim agents use for pods of the standard topology (victim: probe port 8081). */
export function topologyInpodOptions(profile: Profile, ipv6: boolean): InpodOptions {
  const common = { ipv6, dnsCapture: true, ingressMode: false, virtualInterfaces: [] } as const;
  return profile === 'strict' ? { ...common, profile, proxyUid: PROXY_UID, probePorts: [port(PROBE_PORT)] } : { ...common, profile };
}

/**
 * Mutants no observation through the World can tell from the original, with the reason
 * (tests/sim/node-agent/rules/mutation.spec.ts found the first ones on the kernel lab).
 */
const NAT_PRERT_NEVER_SEES_LOOPED = 'nat PREROUTING sees only the first packet of a connection; looped-back packets (to 127.0.0.1/::1, or from the proxy via lo) already have a conntrack entry from OUTPUT, and such addresses/marks cannot arrive from the wire';
export const KNOWN_SURVIVORS: Readonly<Record<string, string>> = {
  'weaken nat/prert/redirect-inbound match 0 (dst)': NAT_PRERT_NEVER_SEES_LOOPED,
  'weaken nat/prert/redirect-inbound match 3 (mark)': NAT_PRERT_NEVER_SEES_LOOPED,
  'weaken nat/out/loopback-own-ip match 0 (dst)': 'traffic out lo to 127.0.0.1/::1 is never redirected anyway (redirect-outbound excludes it), so accepting it earlier changes nothing',
};

export interface MutantOutcome {
  readonly mutant: string;
  readonly status: 'killed' | 'survived' | 'known-equivalent';
  /** The first new violation (killed) or the documented reason (equivalent). */
  readonly evidence: string;
}

export interface MutationReport {
  readonly profile: Profile;
  readonly outcomes: readonly MutantOutcome[];
  readonly survivors: readonly string[];
}

const key = (f: FoundViolation): string => `${f.phase}|${f.action ?? ''}|${f.violation.property}`;

async function violations(make: MutatingWorldMaker, profile: Profile, ipv6: boolean, mutant: PlanMutant | undefined): Promise<FoundViolation[]> {
  const factory = { create: (o: WorldOptions) => make(o, (plan) => (mutant ? applyPlanMutant(plan, mutant) : plan)) };
  const out: FoundViolation[] = [];
  for (const t of MUTATION_THREATS) out.push(...await runThreat(factory, profile, threat(t), { ipv6 }));
  return out;
}

export async function runMutation(make: MutatingWorldMaker, profile: Profile, o: { ipv6?: boolean; only?: (name: string) => boolean } = {}): Promise<MutationReport> {
  const ipv6 = o.ipv6 ?? false;
  const baseline = new Set((await violations(make, profile, ipv6, undefined)).map(key));
  const outcomes: MutantOutcome[] = [];
  for (const m of planMutants(topologyInpodOptions(profile, ipv6))) {
    if (o.only && !o.only(m.name)) continue;
    const fresh = (await violations(make, profile, ipv6, m)).filter((v) => !baseline.has(key(v)));
    const bare = m.name.replace(/^ipv[46] /, '');
    if (fresh.length > 0) {
      const f = fresh[0]!;
      outcomes.push({ mutant: m.name, status: 'killed', evidence: `${f.violation.property} [${f.phase}] ${f.action ?? ''}: ${f.violation.message}` });
    } else if (KNOWN_SURVIVORS[bare]) {
      outcomes.push({ mutant: m.name, status: 'known-equivalent', evidence: KNOWN_SURVIVORS[bare]! });
    } else {
      outcomes.push({ mutant: m.name, status: 'survived', evidence: 'no property noticed' });
    }
  }
  return { profile, outcomes, survivors: outcomes.filter((x) => x.status === 'survived').map((x) => x.mutant) };
}
