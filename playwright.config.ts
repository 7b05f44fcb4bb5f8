/**
 * One Playwright project per world (docs/design.md). No browser is used: tests are plain Node code.
 * sim always runs; netns needs root + the tools of e2e/netns/required-tools.ts (under CI as root, a
 * missing one fails the run); kind needs KIND=1 + Docker + kind; containers needs Docker.
 * An unavailable world's tests are skipped with the reason, printed here once.
 */
import { defineConfig } from '@playwright/test';
import { containersWorld, kindWorld, netnsWorld } from './tests/worlds.js';

const netns = netnsWorld();
const kind = kindWorld();
const containers = containersWorld();
if (!process.env['AMBIENT_LAB_WORLDS_PRINTED']) {
  process.env['AMBIENT_LAB_WORLDS_PRINTED'] = '1';
  console.log(`[worlds] sim: available`);
  console.log(`[worlds] netns: ${netns.available ? 'available' : `skipped: ${netns.reason}`}`);
  console.log(`[worlds] kind: ${kind.available ? 'available' : `skipped: ${kind.reason}`}`);
  console.log(`[worlds] containers: ${containers.available ? 'available' : `skipped: ${containers.reason}`}`);
}

export default defineConfig({
  testDir: './tests',
  fullyParallel: false,
  forbidOnly: !!process.env['CI'],
  retries: 0,
  workers: 2,
  timeout: 120_000,
  reporter: process.env['CI']
    ? [['line'], ['json', { outputFile: '.ci-report/results.json' }]]
    : [['list'], ['json', { outputFile: '.ci-report/results.json' }]],
  projects: [
    { name: 'sim', testDir: './tests/sim' },
    { name: 'netns', testDir: './tests/netns', timeout: 180_000 },
    { name: 'kind', testDir: './tests/kind', timeout: 900_000 },
    // a first image build (a debootstrap base) takes minutes; .ci/run builds them before the tests
    { name: 'containers', testDir: './tests/containers', timeout: 900_000 },
  ],
});
