/**
 * One Playwright project per world (docs/design.md); tests are plain Node code, but for the
 * `browser` project, which loads the HTML reports in Debian's chromium.
 * sim always runs; netns needs root + the tools of e2e/netns/required-tools.ts (under CI as root, a
 * missing one fails the run); kind needs KIND=1 + Docker + kind; containers needs Docker.
 * An unavailable world's tests are skipped with the reason, printed here once.
 */
import { defineConfig } from '@playwright/test';
import { browserWorld, CHROMIUM, containersWorld, kindWorld, netnsWorld } from './tests/worlds.js';

/**
 * The files of the real-kernel world suite (tests/netns/world/) that run on the container world
 * too (tests/netns/world/fixture.ts picks the world by project); all of them pass there.
 * `npm run test:containers` (AMBIENT_LAB_CONTAINER_SUITE=all) runs them all, ≈ 20 min. The test
 * command keeps the containers project near 4 minutes (measured: its own tests 2.4 min, one
 * `check --world containers` cell 1.8 min; the catalog positive control would add 3.1 and
 * sim-parity 2.1), so it runs the one cell only. Not listed: launch and cli are about the netns
 * world's own lab and `up`.
 */
const CONTAINER_SUITE_ALL = process.env['AMBIENT_LAB_CONTAINER_SUITE'] === 'all';
const CONTAINER_WORLD_SUITE = CONTAINER_SUITE_ALL
  ? [
      'check-netns',
      'sim-parity',
      'check-interrupt',
      'proxy-uid',
      'reboot',
      'kubelet-retry',
      'node-addresses',
      'app-exec',
      'host-sources',
      'observations',
      'integrity',
      'mesh-identity',
    ]
  : ['check-netns'];

const netns = netnsWorld();
const kind = kindWorld();
const containers = containersWorld();
const browser = browserWorld();
if (!process.env['AMBIENT_LAB_WORLDS_PRINTED']) {
  process.env['AMBIENT_LAB_WORLDS_PRINTED'] = '1';
  console.log(`[worlds] sim: available`);
  console.log(`[worlds] netns: ${netns.available ? 'available' : `skipped: ${netns.reason}`}`);
  console.log(`[worlds] kind: ${kind.available ? 'available' : `skipped: ${kind.reason}`}`);
  console.log(`[worlds] containers: ${containers.available ? 'available' : `skipped: ${containers.reason}`}`);
  console.log(`[worlds] browser: ${browser.available ? 'available' : `skipped: ${browser.reason}`}`);
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
    // the HTML reports in a real browser: Debian's chromium, never a downloaded one
    {
      name: 'browser',
      testDir: './tests/browser',
      use: { browserName: 'chromium', launchOptions: { executablePath: CHROMIUM } },
    },
    { name: 'netns', testDir: './tests/netns', timeout: 180_000 },
    // the long runs, one test per slice or seed for `--shard` (tests/long/: the differential
    // runs and the soak); only with AMBIENT_LAB_LONG=1 (`npm run test:long`), never in `npm test`
    ...(process.env['AMBIENT_LAB_LONG'] === '1' ? [{ name: 'long', testDir: './tests/long' }] : []),
    { name: 'kind', testDir: './tests/kind', timeout: 900_000 },
    // a first image build (a debootstrap base) takes minutes; .ci/run builds them before the tests.
    // The world tests (tests/containers/world.spec.ts) run one after another (fullyParallel is off).
    {
      name: 'containers',
      testDir: './tests',
      // its own tests, and the real-kernel world suite's files that run on the container world too
      // (tests/netns/world/fixture.ts picks the world by project)
      testMatch: ['containers/**/*.spec.ts', ...CONTAINER_WORLD_SUITE.map((f) => `netns/world/${f}.spec.ts`)],
      ...(CONTAINER_SUITE_ALL ? {} : { grepInvert: /with the attack catalog/ }),
      timeout: 900_000,
    },
  ],
});
