/**
 * The differential property with nftables (generator.ts, caseArb({ nftables: true })): every case
 * has nft documents — alone or beside iptables in a namespace, ip/ip6/inet tables, base chains of
 * every type at every hook and many priorities — and the simulated kernel agrees with Linux on
 * each, apart from the documented known divergences. Beside the iptables-only run
 * (differential.spec.ts), with its own seed; the long run is `npm run fidelity -- --nftables`.
 */
import { test, expect } from '@playwright/test';
import { netnsLabWorld } from '../../worlds.js';
import { withKernelLanes } from '../../../e2e/netns/lab-runner-lanes.js';
import { checkLab, runDifferential } from '../../../scenarios/fidelity/differential.js';
import { fixedTopology } from '../../../scenarios/fidelity/topology.js';
import { formatDifferences } from '../../../scenarios/fidelity/compare.js';
import { nftNatChainsIgnored } from '../../../scenarios/fidelity/wrong-models.js';
import { namespacesWithPrefix, alive } from './fixture.js';

const world = netnsLabWorld();
test.skip(!world.available, world.reason);

const SEED = Number(process.env['FIDELITY_NFT_SEED'] ?? 20261206);
const RUNS = Number(process.env['FIDELITY_NFT_RUNS'] ?? 1000);
const LANES = 4;

test('the simulated kernel agrees with Linux on >= 1000 generated nftables cases (fixed seed)', async () => {
  test.setTimeout(900_000);
  console.log(
    `[fidelity-nft] ${RUNS} cases, seed ${SEED} (lanes ${LANES}: seeds ${SEED}..${SEED + LANES - 1}); replay: FIDELITY_NFT_SEED=${SEED}`,
  );
  const prefix = `al-fnf${process.pid.toString(36)}-`;
  let pids: number[] = [];
  let withNft = 0;
  const report = await withKernelLanes(
    LANES,
    fixedTopology(),
    async (lanes) => {
      const r = await runDifferential({
        runs: RUNS,
        seed: SEED,
        lanes,
        nftables: true,
        onCase: (v) => {
          if (v.lab.namespaces.some((n) => n.nftables !== undefined)) withNft++;
        },
      });
      pids = (await Promise.all(lanes.map((l) => l.lab.pids()))).flat();
      return r;
    },
    { prefix },
  );
  console.log(
    `[fidelity-nft] ${report.cases} cases, ${report.knownHits} known-divergence hits ${JSON.stringify(report.knownByName)}, ${report.bothRejected} rejected by both`,
  );
  const shown = report.counterexamples.map(
    (c) =>
      `seed ${c.seed}:\n${formatDifferences(c.verdict.differences, c.verdict.sim ?? [], c.verdict.kernel ?? [])}\n${c.yaml}`,
  );
  expect(shown).toEqual([]);
  expect(report.cases).toBeGreaterThanOrEqual(RUNS);
  // every case carries nftables, and every generated document is valid nft (none refused by both worlds)
  expect(withNft).toBe(report.cases);
  expect(report.bothRejected).toBe(0);
  expect(await namespacesWithPrefix(prefix)).toEqual([]);
  expect(pids.length).toBeGreaterThan(0);
  expect(pids.filter(alive)).toEqual([]);
});

test('positive control: the property finds a counterexample against an nftables model whose NAT core never runs nft nat chains', async () => {
  test.setTimeout(300_000);
  const report = await withKernelLanes(1, fixedTopology(), (lanes) =>
    runDifferential({ runs: 300, seed: SEED, lanes, nftables: true, sim: { nftablesFactory: nftNatChainsIgnored } }),
  );
  expect(report.counterexamples.length).toBe(1);
  const c = report.counterexamples[0]!;
  expect(c.verdict.differences.length).toBeGreaterThan(0);
  // The shrunk case still has an nft nat chain, and the real model agrees with Linux on it: the
  // difference is the ignored nat chain, nothing else.
  expect(c.yaml).toMatch(/type nat hook/);
  const honest = await withKernelLanes(1, fixedTopology(), ([lane]) => checkLab(c.verdict.lab, lane!));
  expect(honest.differences).toEqual([]);
});
