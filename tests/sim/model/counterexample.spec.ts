/**
 * Positive control of the model-based search: against a deliberately broken world (every agent
 * drops the outbound redirect rule) it finds a counterexample, shrinks it to a short history
 * ending in the violating connection, saves it, and the saved file replays to the same violation.
 * The same cell on the unbroken world holds.
 */
import { test, expect } from '@playwright/test';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import * as path from 'node:path';
import { runCell } from '../../../scenarios/model/run-cell.js';
import { defaultCatalog } from '../../../scenarios/model/catalog.js';
import { loadFactory } from '../../../scenarios/model/worlds.js';
import { loadCounterexample, saveCounterexample, toFile } from '../../../scenarios/model/counterexample.js';
import { replayCounterexample } from '../../../scenarios/model/replay.js';

const MUTANT = 'ipv4 remove nat/out/redirect-outbound';
const settings = { nodes: 2, ipv6: true, dnsCapture: false, maxCommands: 10 };

function cell() {
  const c = defaultCatalog();
  const property = c.properties.find((p) => p.name === 'outbound-capture');
  const threat = c.threats.find((t) => t.id === 'app-nonroot');
  if (!property || !threat) throw new Error('catalog lacks outbound-capture or app-nonroot');
  expect(c.expected('outbound-capture', 'app-nonroot', 'strict', 'iptables')?.verdict).toBe('holds');
  return { property, threat, profile: 'strict' as const };
}

test('a broken rule set yields a shrunk counterexample that is saved and replays to the same violation', async () => {
  const dir = mkdtempSync(path.join(tmpdir(), 'al-cx-'));
  try {
    const world = { world: 'sim' as const, mutant: MUTANT };
    const r = await runCell(cell(), {
      factory: await loadFactory(world),
      replayFactory: await loadFactory({ ...world, trace: true }),
      runs: 40,
      seed: 4242,
      ...settings,
    });
    expect(r.status).toBe('bypass');
    if (r.status !== 'bypass') return;
    const cx = r.counterexample;
    expect(cx.found.violation.property).toBe('outbound-capture');
    // Shrunk: the fixed prelude (6 commands) plus little more, ending in the violating connect.
    expect(cx.commands.length).toBeLessThanOrEqual(8);
    expect(cx.commands.at(-1)).toMatch(/^Connect\(ambient-a\//);
    expect(cx.found.attempt?.result.trace ?? '').toContain('OUTPUT');
    const file = toFile(
      { property: 'outbound-capture', threat: 'app-nonroot', profile: 'strict' },
      settings,
      cx,
      'x.json',
      MUTANT,
    );
    const saved = saveCounterexample(dir, file);
    const loaded = loadCounterexample(saved);
    expect(loaded.replayPath).toBe(cx.replayPath);
    expect(loaded.trace).toBe(cx.found.attempt?.result.trace);
    const again = await replayCounterexample(loaded);
    expect(again.observed).toBe(cx.found.violation.message);
    expect(again.same).toBe(true);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

test('the same cell holds on the unbroken world', async () => {
  const r = await runCell(cell(), { factory: await loadFactory({ world: 'sim' }), runs: 15, seed: 4242, ...settings });
  expect(r.status).toBe('holds');
  expect(r.runs).toBe(15);
});
