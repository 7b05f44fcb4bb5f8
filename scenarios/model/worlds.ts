/**
 * World factories `check` can run on, by name, and the positive-control wrapper (a sim world
 * whose agents apply a deliberately broken rule set — one plan mutant — to every pod).
 */
import * as os from 'node:os';
import type { AppCapability, Profile, UidSource, WorldFactory, WorldOptions } from '../world.js';

export type CheckWorldName = 'sim' | 'netns' | 'containers' | 'kind';
export const CHECK_WORLDS: readonly CheckWorldName[] = ['sim', 'netns', 'containers', 'kind'];

/**
 * Where a real-kernel or cluster world's factory comes from: a module, named by URL so a worker
 * thread can load it too, and a zero-argument function it exports that returns the factory.
 * The caller at the top (the CLI, a test, a bench) names it (e2e/world-modules.ts); scenarios
 * know the worlds only by name and never import a world implementation.
 */
export interface WorldModule {
  readonly url: string;
  readonly export: string;
}

export interface WorldChoice {
  readonly world: CheckWorldName;
  /** Packet traces on connect results (the sim records them only when asked; slower). */
  readonly trace?: boolean;
  /** Name of a plan mutant (scenarios/mutation) every agent applies: a positive control. */
  readonly mutant?: string;
  /** The factory's module, for every world but the in-process sim. */
  readonly module?: WorldModule;
}

/** A factory a check run must dispose of at its end (the kind world's shared cluster). */
interface Disposable {
  dispose(): Promise<void>;
}
type LoadedFactory = WorldFactory & Partial<Disposable>;
let kindShared: LoadedFactory | undefined;

/**
 * Install the kind world's factory for this thread (one shared cluster, deleted by
 * disposeWorlds()); tests install their own (fakes on PATH).
 */
export function setKindFactory(f: (WorldFactory & Disposable) | undefined): void {
  kindShared = f;
}

/** End of a check run: delete what the worlds kept across histories (the kind cluster). */
export async function disposeWorlds(): Promise<void> {
  const f = kindShared;
  kindShared = undefined;
  await f?.dispose?.();
}

/** Worlds whose cells must run in this thread, one at a time (they share one cluster). */
export function runsInProcess(world: CheckWorldName): boolean {
  return world === 'kind';
}

/** Load the factory a WorldModule names; every failure says which module and what to do. */
async function importFactory(world: CheckWorldName, m: WorldModule | undefined): Promise<LoadedFactory> {
  if (m === undefined)
    throw new Error(
      `the ${world} world was chosen but no module for its factory was given (WorldChoice.module); the caller names it (e2e/world-modules.ts)`,
    );
  let mod: Record<string, unknown>;
  try {
    mod = (await import(m.url)) as Record<string, unknown>;
  } catch (e) {
    throw new Error(
      `the ${world} world is not available in this build (${m.url} failed to load: ${e instanceof Error ? e.message : String(e)}); run \`npm run build\` or use --world sim`,
      { cause: e },
    );
  }
  const make = mod[m.export];
  if (typeof make !== 'function')
    throw new Error(`${m.url} exports no function ${m.export}; the ${world} world is not ready — use --world sim`);
  const f = (make as () => LoadedFactory)();
  if (f.kind !== world)
    throw new Error(`${m.url} ${m.export}() made a ${f.kind} world factory where ${world} was asked`);
  return f;
}

export async function loadFactory(c: WorldChoice): Promise<WorldFactory> {
  if (c.world !== 'sim' && c.mutant !== undefined) {
    throw new Error(
      `--mutant runs on the sim world only (the ${c.world} world has no plan hook); drop --world ${c.world}`,
    );
  }
  if (c.world === 'kind') {
    kindShared ??= await importFactory('kind', c.module);
    const a = kindShared.available();
    if (!a.ok) throw new Error(`the kind world cannot run here: ${a.reason}`);
    return kindShared;
  }
  if (c.world === 'netns' || c.world === 'containers') {
    const f = await importFactory(c.world, c.module);
    const a = f.available();
    if (!a.ok) throw new Error(`the ${c.world} world cannot run here: ${a.reason}`);
    return f;
  }
  const { createSimWorld } = await import('../worlds/sim-world.js');
  if (c.mutant === undefined) {
    return {
      kind: 'sim',
      available: () => ({ ok: true, reason: 'in-process' }),
      create: (o: WorldOptions) => createSimWorld(o, { trace: c.trace ?? false }),
    };
  }
  const { planMutants, applyPlanMutant } = await import('../mutation/plan-mutation.js');
  const { topologyInpodOptions } = await import('../mutation/run-mutation.js');
  const name = c.mutant;
  const mutantFor = (profile: Profile, ipv6: boolean): ReturnType<typeof planMutants>[number] => {
    const all = planMutants(topologyInpodOptions(profile, ipv6));
    const m = all.find((x) => x.name === name);
    if (!m)
      throw new Error(
        `unknown mutant ${JSON.stringify(name)} for profile ${profile}; known: ${all.map((x) => x.name).join('; ')}`,
      );
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
interface WorldLimits {
  /** Dual-stack clusters (WorldOptions.ipv6, meshV6). */
  readonly ipv6: boolean;
  /** Raw (AF_PACKET) sources (ConnectOptions.raw). */
  readonly raw: boolean;
  /** WorldOptions.kernelVersion: followed ('any'), or the host's kernel decides ('host'). */
  readonly kernel: 'any' | 'host';
  /** Can its pods run as a uid their spec does not declare (the image's USER, AppSpec.uidSource)? */
  readonly imageUser: boolean;
}

export function worldLimits(world: CheckWorldName): WorldLimits {
  // kind: dual-stack clusters (fixtures/kind/cluster-dual.yaml) and raw sources through the probe (e2e/kind/kind-world.ts).
  // kind runs one real pod-app image, whose USER is root: no image carries another uid.
  if (world === 'kind') return { ipv6: true, raw: true, kernel: 'host', imageUser: false };
  // The netns world's kernel is the machine's too: a threat of the other kernel era (e.g.
  // app-net-raw-5.15 on 6.x, where NET_RAW alone may set SO_MARK) cannot be staged there.
  if (world === 'netns') return { ipv6: true, raw: true, kernel: 'host', imageUser: true };
  // The container world is the netns world's harness with nodes and components in containers (e2e/containers).
  if (world === 'containers') return { ipv6: true, raw: true, kernel: 'host', imageUser: true };
  return { ipv6: true, raw: true, kernel: 'any', imageUser: true };
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
export function unstageableThreat(
  world: CheckWorldName,
  threat: {
    readonly id: string;
    readonly kernelVersion: string;
    readonly caps: readonly AppCapability[];
    readonly uidSource?: UidSource;
  },
  hostKernel: string = os.release(),
): string | undefined {
  const l = worldLimits(world);
  if (l.kernel === 'host' && kernelEra(threat.kernelVersion) !== kernelEra(hostKernel)) {
    return `kernelVersion: the threat assumes kernel ${threat.kernelVersion}, the ${world} world runs on the host's kernel ${hostKernel}`;
  }
  if (!l.raw && threat.caps.includes('NET_RAW')) {
    return `raw (AF_PACKET) sources: the threat grants NET_RAW, the ${world} world cannot send raw packets (its histories would draw raw attempts that only error)`;
  }
  if (!l.imageUser && threat.uidSource === 'image') {
    return `uid from the image: the threat's app runs as its image's USER (no runAsUser), the ${world} world has no image with that USER`;
  }
  return undefined;
}

/** What a whole run on this world leaves out, for the report (e.g. IPv6 on a single-stack cluster). */
export function worldGaps(world: CheckWorldName, settings: { readonly ipv6: boolean }, askedIpv6: boolean): string[] {
  const l = worldLimits(world);
  const out: string[] = [];
  if (!l.ipv6 && askedIpv6 && !settings.ipv6)
    out.push(`IPv6: not staged (the ${world} world is single-stack); histories and the attack catalog ran IPv4 only`);
  if (!l.ipv6)
    out.push(
      `meshV6 (a dual-stack cluster with a v4-only mesh): not staged; the catalog's mesh-v6-off phase is skipped`,
    );
  if (world === 'kind') {
    out.push(
      "meshV6 (a dual-stack cluster with a v4-only mesh): not staged (the agent and proxy follow the cluster's stack); the catalog's mesh-v6-off phase is skipped",
    );
    out.push(
      "cniApiFault: not staged (no hook into the plugin's API calls); the catalog's api-error-at-add phase is skipped",
    );
  }
  if (world !== 'sim') {
    // Search-power seams only the sim has so far: the histories skip these commands there.
    out.push(
      `agentAddFault (the node agent answering a CNI ADD with ok:false): not staged on ${world}; CreatePodAgentFault commands are skipped, so fail-closed is not judged for agent-refused ADDs`,
    );
    out.push(`nodeAddresses: not staged on ${world}; connections to node addresses are skipped`);
  }
  return out;
}
