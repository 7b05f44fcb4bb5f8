/**
 * World factories `check` can run on, by name, and the positive-control wrapper (a sim world
 * whose agents apply a deliberately broken rule set — one plan mutant — to every pod).
 */
import * as os from 'node:os';
import type { AppCapability, Profile, WorldFactory, WorldOptions } from '../world.js';

export type CheckWorldName = 'sim' | 'netns' | 'kind';
export const CHECK_WORLDS: readonly CheckWorldName[] = ['sim', 'netns', 'kind'];

export interface WorldChoice {
  readonly world: CheckWorldName;
  /** Packet traces on connect results (the sim records them only when asked; slower). */
  readonly trace?: boolean;
  /** Name of a plan mutant (scenarios/mutation) every agent applies: a positive control. */
  readonly mutant?: string;
}

/** A factory a check run must dispose of at its end (the kind world's shared cluster). */
interface Disposable {
  dispose(): Promise<void>;
}
let kindShared: (WorldFactory & Disposable) | undefined;

/**
 * The kind world for a check run: one shared cluster (e2e/kind/shared-cluster.ts), brought up
 * by the first world and deleted by disposeWorlds(). Tests may install their own (fakes on PATH).
 */
export function setKindFactory(f: (WorldFactory & Disposable) | undefined): void {
  kindShared = f;
}

/** End of a check run: delete what the worlds kept across histories (the kind cluster). */
export async function disposeWorlds(): Promise<void> {
  const f = kindShared;
  kindShared = undefined;
  await f?.dispose();
}

/** Worlds whose cells must run in this thread, one at a time (they share one cluster). */
export function runsInProcess(world: CheckWorldName): boolean {
  return world === 'kind';
}

export async function loadFactory(c: WorldChoice): Promise<WorldFactory> {
  if (c.world === 'kind') {
    if (c.mutant !== undefined) throw new Error('--mutant runs on the sim world only (the kind world has no plan hook); drop --world kind');
    if (!kindShared) {
      let mod: typeof import('../../e2e/kind/shared-cluster.js');
      try {
        mod = await import('../../e2e/kind/shared-cluster.js');
      } catch (e) {
        throw new Error(`the kind world is not available in this build (e2e/kind/shared-cluster.js failed to load: ${e instanceof Error ? e.message : String(e)}); run \`npm run build\` or use --world sim`, { cause: e });
      }
      kindShared = new mod.SharedKindCluster();
    }
    const a = kindShared.available();
    if (!a.ok) throw new Error(`the kind world cannot run here: ${a.reason}`);
    return kindShared;
  }
  if (c.world === 'netns') {
    if (c.mutant !== undefined) throw new Error('--mutant runs on the sim world only (the netns world has no plan hook); drop --world netns');
    let mod: { netnsWorldFactory?: WorldFactory };
    try {
      mod = await import('../../e2e/netns/world.js') as { netnsWorldFactory?: WorldFactory };
    } catch (e) {
      throw new Error(`the netns world is not available in this build (e2e/netns/world.js failed to load: ${e instanceof Error ? e.message : String(e)}); run \`npm run build\` or use --world sim`, { cause: e });
    }
    const f = mod.netnsWorldFactory;
    if (!f) throw new Error('e2e/netns/world.js exports no netnsWorldFactory; the netns world is not ready — use --world sim');
    const a = f.available();
    if (!a.ok) throw new Error(`the netns world cannot run here: ${a.reason}`);
    return f;
  }
  const { createSimWorld } = await import('../worlds/sim-world.js');
  if (c.mutant === undefined) {
    return { kind: 'sim', available: () => ({ ok: true, reason: 'in-process' }), create: (o: WorldOptions) => createSimWorld(o, { trace: c.trace ?? false }) };
  }
  const { planMutants, applyPlanMutant } = await import('../mutation/plan-mutation.js');
  const { topologyInpodOptions } = await import('../mutation/run-mutation.js');
  const name = c.mutant;
  const mutantFor = (profile: Profile, ipv6: boolean): ReturnType<typeof planMutants>[number] => {
    const all = planMutants(topologyInpodOptions(profile, ipv6));
    const m = all.find((x) => x.name === name);
    if (!m) throw new Error(`unknown mutant ${JSON.stringify(name)} for profile ${profile}; known: ${all.map((x) => x.name).join('; ')}`);
    return m;
  };
  return {
    kind: 'sim',
    available: () => ({ ok: true, reason: 'in-process' }),
    create: (o: WorldOptions) => {
      const m = mutantFor(o.profile, o.ipv6);
      return createSimWorld(o, { trace: c.trace ?? false, mutatePlan: (plan) => applyPlanMutant(plan, m) });
    },
  };
}

/** Every mutant name of a profile (for --help and error messages). */
export async function mutantNames(profile: Profile, ipv6: boolean): Promise<string[]> {
  const { planMutants } = await import('../mutation/plan-mutation.js');
  const { topologyInpodOptions } = await import('../mutation/run-mutation.js');
  return planMutants(topologyInpodOptions(profile, ipv6)).map((m) => m.name);
}

/** What a world can stage of the World interface and WorldOptions (the rest is reported, never silently passed). */
export interface WorldLimits {
  /** Dual-stack clusters (WorldOptions.ipv6, meshV6). */
  readonly ipv6: boolean;
  /** Raw (AF_PACKET) sources (ConnectOptions.raw). */
  readonly raw: boolean;
  /** WorldOptions.kernelVersion: followed ('any'), or the host's kernel decides ('host'). */
  readonly kernel: 'any' | 'host';
}

export function worldLimits(world: CheckWorldName): WorldLimits {
  // kind: dual-stack clusters (fixtures/kind/cluster-dual.yaml) and raw sources through the probe (e2e/kind/kind-world.ts).
  if (world === 'kind') return { ipv6: true, raw: true, kernel: 'host' };
  // The netns world's kernel is the machine's too: a threat of the other kernel era (e.g.
  // app-net-raw-5.15 on 6.x, where NET_RAW alone may set SO_MARK) cannot be staged there.
  if (world === 'netns') return { ipv6: true, raw: true, kernel: 'host' };
  return { ipv6: true, raw: true, kernel: 'any' };
}

/** Kernel permission semantics the model distinguishes: before 5.17 ('5.15') or from it ('6.1'). */
function kernelEra(version: string): 'pre-5.17' | '5.17+' | undefined {
  const m = /^(\d+)\.(\d+)/.exec(version);
  if (!m) return undefined;
  const major = Number(m[1]);
  const minor = Number(m[2]);
  return major > 5 || (major === 5 && minor >= 17) ? '5.17+' : 'pre-5.17';
}

/**
 * Why a world cannot stage a threat's cells (they are reported as not run, never as holding),
 * or undefined when it can. `hostKernel` is the release the world's kernel runs (os.release()).
 */
export function unstageableThreat(world: CheckWorldName, threat: { readonly id: string; readonly kernelVersion: string; readonly caps: readonly AppCapability[] },
  hostKernel: string = os.release()): string | undefined {
  const l = worldLimits(world);
  if (l.kernel === 'host' && kernelEra(threat.kernelVersion) !== kernelEra(hostKernel)) {
    return `kernelVersion: the threat assumes kernel ${threat.kernelVersion}, the ${world} world runs on the host's kernel ${hostKernel}`;
  }
  if (!l.raw && threat.caps.includes('NET_RAW')) {
    return `raw (AF_PACKET) sources: the threat grants NET_RAW, the ${world} world cannot send raw packets (its histories would draw raw attempts that only error)`;
  }
  return undefined;
}

/** What a whole run on this world leaves out, for the report (e.g. IPv6 on a single-stack cluster). */
export function worldGaps(world: CheckWorldName, settings: { readonly ipv6: boolean }, askedIpv6: boolean): string[] {
  const l = worldLimits(world);
  const out: string[] = [];
  if (!l.ipv6 && askedIpv6 && !settings.ipv6) out.push(`IPv6: not staged (the ${world} world is single-stack); histories and the attack catalog ran IPv4 only`);
  if (!l.ipv6) out.push(`meshV6 (a dual-stack cluster with a v4-only mesh): not staged; the catalog's mesh-v6-off phase is skipped`);
  if (world === 'kind') {
    out.push('meshV6 (a dual-stack cluster with a v4-only mesh): not staged (the agent and proxy follow the cluster\'s stack); the catalog\'s mesh-v6-off phase is skipped');
    out.push('cniApiFault: not staged (no hook into the plugin\'s API calls); the catalog\'s api-error-at-add phase is skipped');
  }
  if (world !== 'sim') {
    // Search-power seams only the sim has so far: the histories skip these commands there.
    out.push(`agentAddFault (the node agent answering a CNI ADD with ok:false): not staged on ${world}; CreatePodAgentFault commands are skipped, so fail-closed is not judged for agent-refused ADDs`);
    out.push(`nodeAddresses: not staged on ${world}; connections to node addresses are skipped`);
  }
  return out;
}
