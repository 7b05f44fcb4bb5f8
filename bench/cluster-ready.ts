/**
 * A 2-node cluster to Ready, container world vs netns world, side by side in one run (issue 17):
 * from the factory's create() to the first settle() that finds every node's agent and proxy
 * serving — the API, the node topology, both components per node, plus one ambient pod per node
 * enrolled and served, so "Ready" includes a CNI ADD through the whole chain. Each world is built
 * `rounds` times alternately (so a load change on this shared machine hits both alike) and the
 * median is reported, with the ratio containers / netns. The container world's images must be
 * built already (`npm run images`): image builds are a one-off cost reported in ci/README.md, not
 * part of a cluster start. Wall-clock time is measured here only; tests never assert on it.
 *
 *   npm run bench:ready [-- --rounds 3]      (root; Docker for the container world)
 */
import { performance } from 'node:perf_hooks';
import { netnsWorldFactory, REAL_WORLD_OPTIONS } from '../e2e/netns/world.js';
import { containersWorldFactory } from '../e2e/containers/world.js';
import type { World, WorldFactory } from '../scenarios/world.js';

const AMBIENT = { 'istio.io/dataplane-mode': 'ambient' } as const;

async function toReady(factory: WorldFactory): Promise<number> {
  const t0 = performance.now();
  const w: World = await factory.create(REAL_WORLD_OPTIONS);
  try {
    await w.createNamespace('bench', AMBIENT);
    for (const node of w.nodes)
      await w.createPod({
        namespace: 'bench',
        name: `p-${node}`,
        node,
        app: { uid: 1000, caps: [], tcpPorts: [8080] },
      });
    await w.settle();
    const pods = await w.pods();
    const ready = pods.filter((p) => p.namespace === 'bench' && p.started && p.redirected && p.served);
    if (ready.length !== w.nodes.length)
      throw new Error(
        `bench: ${factory.kind}: ${ready.length} of ${w.nodes.length} pods running, redirected and served after settle`,
      );
    return (performance.now() - t0) / 1000;
  } finally {
    await w.close();
  }
}

function median(xs: readonly number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  const m = Math.floor(s.length / 2);
  return s.length % 2 === 1 ? s[m]! : (s[m - 1]! + s[m]!) / 2;
}

function roundsFlag(argv: readonly string[]): number {
  const i = argv.indexOf('--rounds');
  if (i < 0) return 3;
  const v = Number(argv[i + 1]);
  if (!Number.isInteger(v) || v < 1) {
    console.error(`bench:ready: --rounds ${JSON.stringify(argv[i + 1] ?? '')}: expected an integer >= 1`);
    process.exit(2);
  }
  return v;
}

async function main(): Promise<void> {
  const rounds = roundsFlag(process.argv.slice(2));
  for (const f of [netnsWorldFactory, containersWorldFactory]) {
    const a = f.available();
    if (!a.ok) throw new Error(`bench:ready: the ${f.kind} world cannot run here: ${a.reason}`);
  }
  const times: Record<'netns' | 'containers', number[]> = { netns: [], containers: [] };
  for (let r = 0; r < rounds; r++) {
    times.netns.push(await toReady(netnsWorldFactory));
    times.containers.push(await toReady(containersWorldFactory));
    console.log(
      `round ${r + 1}: netns ${times.netns[r]!.toFixed(1)} s, containers ${times.containers[r]!.toFixed(1)} s`,
    );
  }
  const n = median(times.netns);
  const c = median(times.containers);
  console.log(`2-node cluster to Ready (median of ${rounds}): netns ${n.toFixed(1)} s, containers ${c.toFixed(1)} s`);
  console.log(`containers / netns: x${(c / n).toFixed(2)}`);
}

main().catch((e: unknown) => {
  console.error(e instanceof Error ? e.message : e);
  process.exitCode = 1;
});
