/**
 * The real-kernel world suite's World for one test, always closed, and checked for leftovers
 * afterwards: close() must leave no namespace of the run's prefix (removeLeftovers finds nothing
 * to remove), no process of the lab or its probes, and in the container world no container or
 * mount. On a failing body the leftovers are removed by prefix so the next test starts clean, and
 * the body's error is what surfaces. AMBIENT_LAB_KEEP_FAILED=DIR copies a failed test's run
 * directory there first.
 *
 * Which world: the suite (tests/netns/world/) runs in the `netns` project on the netns world, and
 * the files playwright.config.ts lists for the `containers` project run there on the container
 * world — the same World calls on nodes and components that are containers (e2e/containers/).
 */
import * as fs from 'node:fs';
import * as path from 'node:path';
import { expect, test } from '@playwright/test';
import { containersWorldFactory, removeContainerWorldLeftovers } from '../../../e2e/containers/world.js';
import { removeLeftovers } from '../../../e2e/netns/leftovers.js';
import { isOurs } from '../../../e2e/netns/world-lab.js';
import { netnsWorldFactory, REAL_WORLD_OPTIONS, type NetnsWorld } from '../../../e2e/netns/world.js';
import type { WorldOptions } from '../../../scenarios/world.js';
import { containersWorld, netnsLabWorld } from '../../worlds.js';

/** The world the running test's project puts under test. */
export function suiteWorld(): 'netns' | 'containers' {
  const project = test.info().project.name;
  if (project === 'netns' || project === 'containers') return project;
  throw new Error(
    `the real-kernel world suite runs in the netns or containers project, not ${JSON.stringify(project)}`,
  );
}

/**
 * Skip every test of the file, with the reason, when its project's world cannot run here (called
 * once at the top of a suite file; a project is known only inside a test, hence beforeEach).
 */
export function skipUnlessSuiteWorldAvailable(): void {
  test.beforeEach(() => {
    const a = suiteWorld() === 'containers' ? containersWorld() : netnsLabWorld();
    test.skip(!a.available, a.reason);
  });
}

export const MESH = { 'istio.io/dataplane-mode': 'ambient' } as const;

/**
 * `check` on one cell of the real-kernel world under test (outbound capture × app-nonroot ×
 * strict, histories only, one worker, JSON report), with `runs` histories: the CLI tests' budget.
 */
export function oneCellCheckArgs(world: 'netns' | 'containers', runs: number): string[] {
  return [
    'check',
    '--world',
    world,
    '--runs',
    String(runs),
    '--seed',
    '5',
    '--threats',
    'app-nonroot',
    '--profiles',
    'strict',
    '--properties',
    'outbound-capture',
    '--no-attacks',
    '--workers',
    '1',
    '--json',
  ];
}

export async function withNetnsWorld(opts: Partial<WorldOptions>, fn: (w: NetnsWorld) => Promise<void>): Promise<void> {
  const kind = suiteWorld();
  const factory = kind === 'containers' ? containersWorldFactory : netnsWorldFactory;
  const w = (await factory.create({ ...REAL_WORLD_OPTIONS, ...opts })) as NetnsWorld;
  const prefix = w.lab.state.prefix;
  const runDir = w.lab.state.runDir;
  let failed = true;
  try {
    await fn(w);
    failed = false;
  } finally {
    // AMBIENT_LAB_KEEP_FAILED=DIR keeps a failed test's run directory (component logs, state) for a post-mortem.
    const keep = process.env['AMBIENT_LAB_KEEP_FAILED'];
    if (failed && keep) {
      // A copy that fails is said on stderr and must not skip the clean-up below (it did once:
      // a socket in the run dir left a whole container world running).
      try {
        fs.cpSync(w.lab.state.runDir, path.join(keep, path.basename(w.lab.state.runDir)), {
          recursive: true,
          // sockets, and the node containers' mount points, cannot be copied
          filter: (src) => {
            const st = fs.lstatSync(src, { throwIfNoEntry: false });
            return st !== undefined && (st.isFile() || st.isDirectory() || st.isSymbolicLink());
          },
        });
      } catch (e) {
        console.error(`AMBIENT_LAB_KEEP_FAILED: copying ${w.lab.state.runDir} to ${keep} failed: ${String(e)}`);
      }
    }
    const probePids = await w.probePids();
    const labPids = [
      w.lab.state.api,
      w.lab.state.ca,
      ...Object.values(w.lab.state.components),
      ...Object.values(w.lab.state.pods).map((p) => p.app),
    ];
    try {
      await w.close();
    } finally {
      if (kind === 'containers') {
        const left = await removeContainerWorldLeftovers(prefix, runDir);
        if (!failed)
          expect(left, 'containers, mounts and namespaces left behind by close()').toEqual({
            containers: [],
            mounts: [],
            namespaces: [],
          });
      } else {
        const left = await removeLeftovers(prefix, { killProcesses: true });
        if (!failed) expect(left.removed, 'namespaces left behind by close()').toEqual([]);
      }
      if (!failed) {
        expect(
          labPids.filter((p) => p !== undefined && isOurs(p)),
          'lab processes still running',
        ).toEqual([]);
        expect(probePids.filter(alive), 'probe processes still running').toEqual([]);
      }
    }
  }
}

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}
