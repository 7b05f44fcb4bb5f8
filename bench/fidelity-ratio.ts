/**
 * `npm run bench:fidelity [-- --cases N --seed S --warmup W]`: the same generated differential
 * cases timed in the simulator and on the real kernel (root; one lane, fixed topology built
 * beforehand and not counted), and the ratio kernel time / sim time per case. Goal: >= 100x.
 *
 * The sim is warmed up on W *other* generated cases first (seed S+1), as it is in a long run:
 * timing 100 cases from cold mostly measures the JIT compiling the simulator. The warm-up cases
 * differ from the timed ones, so the timed cases' rulesets are parsed afresh (restore-cache.ts
 * only helps with texts the run has seen before, as in a long run). On a shared machine the sim's
 * wall time also counts time spent waiting for a CPU, so the sim's CPU time is reported too.
 */
import fc from 'fast-check';
import { performance } from 'node:perf_hooks';
import { caseArb, renderCase } from '../scenarios/fidelity/generator.js';
import { runSim, nextPortBase } from '../scenarios/fidelity/differential.js';
import { fixedTopology } from '../scenarios/fidelity/topology.js';
import { withKernelLanes } from '../e2e/netns/lab-runner-lanes.js';

function arg(name: string, dflt: number): number {
  const i = process.argv.indexOf(`--${name}`);
  return i < 0 ? dflt : Number(process.argv[i + 1]);
}

async function main(): Promise<void> {
  if (process.getuid?.() !== 0) throw new Error('bench:fidelity needs root (real network namespaces): run it as root');
  const n = arg('cases', 100);
  const seed = arg('seed', 4242);
  const warmup = arg('warmup', 300);
  const labs = fc.sample(caseArb(), { numRuns: n, seed }).map((s) => renderCase(s, nextPortBase()));
  for (const s of fc.sample(caseArb(), { numRuns: warmup, seed: seed + 1 })) runSim(renderCase(s, nextPortBase()));
  const c0 = process.cpuUsage();
  const t0 = performance.now();
  for (const lab of labs) runSim(lab);
  const simMs = performance.now() - t0;
  const cpu = process.cpuUsage(c0);
  const simCpuMs = (cpu.user + cpu.system) / 1000;
  const kernelMs = await withKernelLanes(1, fixedTopology(), async ([lane]) => {
    const t1 = performance.now();
    for (const lab of labs) await lane!.run(lab);
    return performance.now() - t1;
  });
  console.log(`fidelity bench: ${n} cases (seed ${seed}), ${labs.reduce((a, l) => a + l.attempts.length, 0)} attempts`);
  console.log(
    `  sim:    ${simMs.toFixed(1)} ms total, ${(simMs / n).toFixed(3)} ms/case (CPU ${(simCpuMs / n).toFixed(3)} ms/case; warmed up on ${warmup} other cases)`,
  );
  console.log(`  kernel: ${kernelMs.toFixed(0)} ms total, ${(kernelMs / n).toFixed(1)} ms/case`);
  console.log(
    `  ratio (kernel/sim): ${(kernelMs / simMs).toFixed(0)}x wall; ${(kernelMs / simCpuMs).toFixed(0)}x against the sim's CPU time`,
  );
}

main().catch((e: unknown) => {
  console.error(`bench:fidelity: ${e instanceof Error ? e.message : String(e)}`);
  process.exitCode = 1;
});
