/**
 * The modules that make the real worlds' factories, as `check` loads them (scenarios/model/
 * worlds.ts `WorldModule`). The top of the program (the CLI, tests, benches) passes these in, so
 * the scenarios layer never imports a world implementation; a URL rather than an object because
 * check's worker threads load the factory themselves.
 */
import type { CheckWorldName, WorldChoice, WorldModule } from '../scenarios/model/worlds.js';

export const WORLD_MODULES: Readonly<Record<Exclude<CheckWorldName, 'sim'>, WorldModule>> = {
  netns: { url: new URL('./netns/world.js', import.meta.url).href, export: 'createNetnsWorldFactory' },
  containers: {
    url: new URL('./containers/world.js', import.meta.url).href,
    export: 'createContainersWorldFactory',
  },
  kind: { url: new URL('./kind/shared-cluster.js', import.meta.url).href, export: 'createSharedKindCluster' },
};

/** A WorldChoice for `world` with its factory's module filled in. */
export function worldChoice(world: CheckWorldName, rest: Omit<WorldChoice, 'world' | 'module'> = {}): WorldChoice {
  return world === 'sim' ? { world, ...rest } : { world, module: WORLD_MODULES[world], ...rest };
}
