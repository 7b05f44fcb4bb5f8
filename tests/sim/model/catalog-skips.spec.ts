/**
 * A world without a capability a catalog phase needs (cniApiFault, zdsClient) skips the phase,
 * and the check's report says so: the cells of that threat × profile were judged without it.
 */
import { test, expect } from '@playwright/test';
import { runThreatDetailed } from '../../../scenarios/attacks/matrix.js';
import { threat } from '../../../scenarios/threats/threats.js';
import { createSimWorld } from '../../../scenarios/worlds/sim-world.js';
import { catalogSkips } from '../../../scenarios/model/tasks.js';
import { CHECK_REPORT_FORMAT, type CheckReport } from '../../../scenarios/model/check.js';
import { renderReport } from '../../../cli/commands/check.js';
import type { World, WorldOptions } from '../../../scenarios/world.js';

/** The sim world as a world without the optional catalog hooks (e.g. a kind cluster). */
const withoutHooks = {
  async create(o: WorldOptions): Promise<World> {
    const w = await createSimWorld(o);
    // The prototype keeps every method and field; the own properties hide the two hooks.
    return Object.assign(Object.create(w) as World, { cniApiFault: undefined, zdsClient: undefined });
  },
};

test('a world without zdsClient skips the rogue-zds phase, and the report lists the skip', async () => {
  const run = await runThreatDetailed(withoutHooks, 'strict', threat('host-root'), { seed: 3 });
  const skips = catalogSkips(run.catalogLog);
  expect(skips).toEqual(['rogue-zds: skipped (the World has no zdsClient)']);
  const full = await runThreatDetailed(
    { create: (o: WorldOptions) => createSimWorld(o) },
    'strict',
    threat('host-root'),
    { seed: 3 },
  );
  expect(catalogSkips(full.catalogLog)).toEqual([]);

  const report: CheckReport = {
    format: CHECK_REPORT_FORMAT,
    world: 'sim',
    seed: 3,
    budget: { runs: 0, runsPerCell: 0, maxCommands: 12, attacks: true },
    settings: { nodes: 2, ipv6: false, dnsCapture: false, maxCommands: 12 },
    cells: [],
    counterexamples: [],
    catalogSkipped: skips.map((l) => `host-root × strict: ${l}`),
    totals: {
      cells: 0,
      histories: 0,
      attackRuns: 1,
      seconds: 1,
      historiesPerSecond: 0,
      mismatches: 0,
      cpuSeconds: 1,
      worlds: { fresh: 0, reused: 0, rejected: 0, shrinking: 0 },
    },
    ok: true,
  };
  const text = renderReport(report);
  expect(text).toContain('Attack-catalog phases this world could not stage (1; their cells were judged without them):');
  expect(text).toContain('  host-root × strict: rogue-zds: skipped (the World has no zdsClient)');
  expect(renderReport({ ...report, catalogSkipped: [] })).not.toContain('could not stage');
});

test('a world that cannot present a credential (or has no forgedHbone) skips those forged-identity attempts, and says so', async () => {
  const limited = {
    async create(o: WorldOptions): Promise<World> {
      const w = await createSimWorld(o);
      return Object.assign(Object.create(w) as World, {
        forgeableCredentials: w.forgeableCredentials.filter((c) => c !== 'expired-token'),
      });
    },
  };
  const run = await runThreatDetailed(limited, 'strict', threat('host-root'), { seed: 3 });
  expect(catalogSkips(run.catalogLog)).toEqual([
    'forged-identity: skipped (this World cannot present the expired-token): host-root as friend (expired-token) → victim',
  ]);
  expect(run.found).toEqual([]);
  const none = {
    async create(o: WorldOptions): Promise<World> {
      const w = await createSimWorld(o);
      return Object.assign(Object.create(w) as World, { forgedHbone: undefined });
    },
  };
  const without = await runThreatDetailed(none, 'strict', threat('host-root'), { seed: 3 });
  expect(catalogSkips(without.catalogLog)).toEqual(['forged-identity: skipped (the World has no forgedHbone)']);
});
