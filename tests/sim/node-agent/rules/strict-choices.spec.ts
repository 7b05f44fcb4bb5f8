/**
 * The strict profile's choices (impl/node-agent/profiles.ts STRICT_CHOICES) and the bypass
 * classes (docs/bypass-classes.md) name each other: every choice is cited where a class says how
 * strict closes it, and every choice a class cites exists, with its reason and its cost.
 */
import { test, expect } from '@playwright/test';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { STRICT_CHOICES } from '../../../../impl/node-agent/profiles.js';

const doc = fs.readFileSync(
  path.resolve(import.meta.dirname, '..', '..', '..', '..', 'docs', 'bypass-classes.md'),
  'utf8',
);

test('every strict choice has a summary, a reason and a cost, and the bypass classes cite it', () => {
  expect(new Set(STRICT_CHOICES.map((c) => c.id)).size).toBe(STRICT_CHOICES.length);
  for (const c of STRICT_CHOICES) {
    expect(c.summary.length, c.id).toBeGreaterThan(20);
    expect(c.rationale.length, c.id).toBeGreaterThan(20);
    expect(c.cost.length, c.id).toBeGreaterThan(3);
    expect(doc, `docs/bypass-classes.md never cites the strict choice ${c.id}`).toContain(`\`${c.id}\``);
  }
});

test('every choice a bypass class says strict holds by is a real strict choice', () => {
  const known = new Set(STRICT_CHOICES.map((c) => c.id));
  const cited = [...doc.matchAll(/strict holds by\s+((?:`[a-z0-9-]+`(?:,?\s+(?:and\s+)?)?)+)/g)].flatMap((m) =>
    [...m[1]!.matchAll(/`([a-z0-9-]+)`/g)].map((x) => x[1]!),
  );
  expect(cited.length).toBeGreaterThan(0);
  for (const id of cited) expect(known.has(id), `docs/bypass-classes.md cites unknown strict choice ${id}`).toBe(true);
});
