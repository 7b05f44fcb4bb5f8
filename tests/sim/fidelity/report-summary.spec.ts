/** reportSummary (scenarios/fidelity/differential.ts): the one line the long runs print. */
import { test, expect } from '@playwright/test';
import { reportSummary } from '../../../scenarios/fidelity/differential.js';

test('seeds, known-divergence hits by name (most first) and cases both refused', () => {
  const base = { cases: 10, seeds: [7, 8], counterexamples: [], bothRejected: 1 };
  expect(reportSummary({ ...base, knownHits: 5, knownByName: { a: 1, b: 4 } })).toBe(
    'seeds 7, 8; 5 known-divergence hits (b 4, a 1); 1 cases rejected by both',
  );
  expect(reportSummary({ ...base, knownHits: 0, knownByName: {} })).toBe(
    'seeds 7, 8; 0 known-divergence hits; 1 cases rejected by both',
  );
});
