import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { test, expect } from '@playwright/test';
import { netnsLabWorld } from '../../worlds.js';
import { parseLab } from '../../../sim/lab/lab-file.js';
import { checkLab } from '../../../scenarios/fidelity/differential.js';
import { withKernelLanes } from '../../../e2e/netns/lab-runner-lanes.js';
import { fixedTopology } from '../../../scenarios/fidelity/topology.js';

const world = netnsLabWorld();
test.skip(!world.available, world.reason);

const DIR = 'fixtures/fidelity';
const files = readdirSync(DIR)
  .filter((f) => f.endsWith('.yaml'))
  .sort();

test('saved differential counterexamples: no difference beyond the documented known divergences', async () => {
  expect(files.length).toBeGreaterThan(0);
  await withKernelLanes(1, fixedTopology(), async ([lane]) => {
    for (const f of files) {
      const lab = parseLab(readFileSync(join(DIR, f), 'utf8'), f);
      const v = await checkLab(lab, lane!);
      expect({ file: f, differences: v.differences }).toEqual({ file: f, differences: [] });
    }
  });
});
