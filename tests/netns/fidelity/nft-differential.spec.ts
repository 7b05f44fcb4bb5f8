/**
 * The differential property for nftables on the real kernel: generated nft documents (with
 * iptables beside them in some namespaces) over the fixed topology give the same attempt results
 * in the simulator as on Linux. A counterexample is printed as a lab file to replay.
 */
import { test, expect } from '@playwright/test';
import { netnsLabWorld } from '../../worlds.js';
import { withKernelLanes } from '../../../e2e/netns/lab-runner-lanes.js';
import { fixedTopology } from '../../../scenarios/fidelity/topology.js';
import { runNftDifferential } from '../../../scenarios/fidelity/nft-differential.js';
import { nftCaseArb, renderNftCase } from '../../../scenarios/fidelity/nft-generator.js';
import { namespacesWithPrefix } from './fixture.js';
import fc from 'fast-check';
import { NfTables } from '../../../sim/kernel/nftables/nftables.js';

const world = netnsLabWorld();
test.skip(!world.available, world.reason);

const SEED = Number(process.env['NFT_FIDELITY_SEED'] ?? 20261206);
const RUNS = Number(process.env['NFT_FIDELITY_RUNS'] ?? 200);

test('generated cases are documents the model takes (the generator keeps only those)', () => {
  const specs = fc.sample(nftCaseArb(), { numRuns: 200, seed: SEED });
  for (const spec of specs) {
    const lab = renderNftCase(spec, 10000);
    for (const n of lab.namespaces) if (n.nftables) new NfTables().apply(n.nftables, { source: n.name });
  }
  // and they are not trivial: most cases have nft rules in some namespace
  const withRules = specs.filter((s) =>
    Object.values(s.nft).some((d) => d && d.chains.some((c) => c.rules.length > 0)),
  );
  expect(withRules.length).toBeGreaterThan(specs.length / 2);
});

test('the simulated kernel agrees with Linux on generated nftables cases (fixed seed)', async () => {
  test.setTimeout(900_000);
  const prefix = `al-nfd${process.pid.toString(36)}-`;
  const report = await withKernelLanes(
    1,
    fixedTopology(),
    (lanes) => runNftDifferential({ runs: RUNS, seed: SEED, lane: lanes[0]! }),
    { prefix },
  );
  console.log(
    `[nft-fidelity] ${report.cases} cases, seed ${SEED}, ${report.knownHits} known-divergence hits, ${report.bothRejected} rejected by both`,
  );
  expect(report.counterexample).toBeUndefined();
  expect(report.cases).toBeGreaterThanOrEqual(RUNS);
  expect(await namespacesWithPrefix(prefix)).toEqual([]);
});

test('positive control: the property finds a counterexample when the simulator is not given the nftables documents', async () => {
  test.setTimeout(600_000);
  const report = await withKernelLanes(1, fixedTopology(), (lanes) =>
    runNftDifferential({
      runs: 100,
      seed: SEED,
      lane: lanes[0]!,
      simView: (lab) => ({ ...lab, namespaces: lab.namespaces.map((n) => ({ ...n, nftables: undefined })) }),
    }),
  );
  expect(report.counterexample).toMatch(/nftables: \|/);
});
