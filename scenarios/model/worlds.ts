/**
 * World factories `check` can run on, by name, and the positive-control wrapper (a sim world
 * whose agents apply a deliberately broken rule set — one plan mutant — to every pod).
 */
import type { Profile, WorldFactory, WorldOptions } from '../world.js';

export type CheckWorldName = 'sim' | 'netns';

export interface WorldChoice {
  readonly world: CheckWorldName;
  /** Packet traces on connect results (the sim records them only when asked; slower). */
  readonly trace?: boolean;
  /** Name of a plan mutant (scenarios/mutation) every agent applies: a positive control. */
  readonly mutant?: string;
}

export async function loadFactory(c: WorldChoice): Promise<WorldFactory> {
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
