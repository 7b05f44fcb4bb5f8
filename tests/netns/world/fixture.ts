/**
 * A netns World for one test, always closed, and checked for leftovers afterwards: close() must
 * leave no namespace of the run's prefix (removeLeftovers finds nothing to remove) and no
 * process of the lab or its probes. On a failing body the leftovers are removed by prefix so the
 * next test starts clean, and the body's error is what surfaces. AMBIENT_LAB_KEEP_FAILED=DIR
 * copies a failed test's run directory there first.
 */
import * as fs from 'node:fs';
import * as path from 'node:path';
import { expect } from '@playwright/test';
import { removeLeftovers } from '../../../e2e/netns/leftovers.js';
import { isOurs } from '../../../e2e/netns/world-lab.js';
import { netnsWorldFactory, REAL_WORLD_OPTIONS, type NetnsWorld } from '../../../e2e/netns/world.js';
import type { WorldOptions } from '../../../scenarios/world.js';

export const MESH = { 'istio.io/dataplane-mode': 'ambient' } as const;

export async function withNetnsWorld(opts: Partial<WorldOptions>, fn: (w: NetnsWorld) => Promise<void>): Promise<void> {
  const w = (await netnsWorldFactory.create({ ...REAL_WORLD_OPTIONS, ...opts })) as NetnsWorld;
  const prefix = w.lab.state.prefix;
  let failed = true;
  try {
    await fn(w);
    failed = false;
  } finally {
    // AMBIENT_LAB_KEEP_FAILED=DIR keeps a failed test's run directory (component logs, state) for a post-mortem.
    const keep = process.env['AMBIENT_LAB_KEEP_FAILED'];
    if (failed && keep)
      fs.cpSync(w.lab.state.runDir, path.join(keep, path.basename(w.lab.state.runDir)), { recursive: true });
    const probePids = await w.probePids();
    const labPids = [
      w.lab.state.api,
      ...Object.values(w.lab.state.components),
      ...Object.values(w.lab.state.pods).map((p) => p.app),
    ];
    try {
      await w.close();
    } finally {
      const left = await removeLeftovers(prefix, { killProcesses: true });
      if (!failed) {
        expect(left.removed, 'namespaces left behind by close()').toEqual([]);
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
