/**
 * The risk table in fixtures/golden/README.md against the expected table: every class that a
 * BYPASS cell names has a row; the row's upstream and strict columns say BYPASS exactly when some
 * cell of that profile names the class; a strict BYPASS row says why it cannot be closed and what
 * would close it. So a strict cell that starts or stops holding cannot leave the table's words
 * behind.
 */
import * as fs from 'node:fs';
import { test, expect } from '@playwright/test';
import { expectedCell } from '../../../scenarios/expected/table.js';
import { PROPERTY_NAMES } from '../../../scenarios/properties/types.js';
import { THREATS } from '../../../scenarios/threats/threats.js';
import type { Profile } from '../../../scenarios/world.js';

interface RiskRow {
  readonly upstream: string;
  readonly strict: string;
  readonly what: string;
}

function riskRows(text: string): Map<string, RiskRow> {
  const start = text.indexOf('| class | upstream | strict |');
  if (start < 0) throw new Error('fixtures/golden/README.md: no risk table (a header "| class | upstream | strict |")');
  const rows = new Map<string, RiskRow>();
  for (const line of text.slice(start).split('\n').slice(2)) {
    if (!line.startsWith('|')) break;
    const cells = line
      .split('|')
      .slice(1, -1)
      .map((c) => c.trim());
    if (cells.length !== 4) throw new Error(`risk table: row without 4 columns: ${line}`);
    const id = /^([A-Za-z0-9-]+):/.exec(cells[0]!)?.[1];
    if (!id) throw new Error(`risk table: row without "<class>: <title>": ${line}`);
    rows.set(id, { upstream: cells[1]!, strict: cells[2]!, what: cells[3]! });
  }
  return rows;
}

function bypassClasses(profile: Profile): Set<string> {
  const out = new Set<string>();
  for (const p of PROPERTY_NAMES)
    for (const t of THREATS) {
      const c = expectedCell(p, t.id, profile);
      if (c.verdict !== 'holds') for (const k of c.classes) out.add(k);
    }
  return out;
}

const rows = riskRows(fs.readFileSync('fixtures/golden/README.md', 'utf8'));

test('the risk table has a row for every class a BYPASS cell names, and its verdicts are the expected table’s', () => {
  const up = bypassClasses('upstream');
  const st = bypassClasses('strict');
  for (const k of new Set([...up, ...st])) {
    const r = rows.get(k);
    expect(r, `risk table row for ${k}`).toBeDefined();
    expect(r!.upstream.startsWith('BYPASS'), `${k}: upstream column "${r!.upstream}"`).toBe(up.has(k));
    expect(r!.strict.startsWith('BYPASS'), `${k}: strict column "${r!.strict}"`).toBe(st.has(k));
  }
  // and no row for a class no cell names (a stale row would claim a bypass nobody checks)
  for (const k of rows.keys()) expect(up.has(k) || st.has(k), `risk table row ${k} matches no BYPASS cell`).toBe(true);
});

test('every strict BYPASS row says why it cannot be closed and what would close it', () => {
  const st = bypassClasses('strict');
  expect(st.size, 'strict has residual bypasses to explain').toBeGreaterThan(0);
  for (const k of st) {
    const what = rows.get(k)?.what ?? '';
    expect(what, `${k}: why strict cannot close it`).toMatch(/cannot be closed/i);
    expect(what, `${k}: what would close it`).toMatch(/closed by/i);
  }
});
