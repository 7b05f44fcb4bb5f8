/**
 * The differential property: for generated cases (generator.ts), the simulated kernel and a
 * real one agree on every attempt's outcome, accepting socket, original destination, source
 * seen and local address (compare.ts), except for the documented known divergences.
 *
 * World-agnostic: the real kernel comes in as `CaseRunner` lanes (e2e/netns/lab-runner.ts's
 * KernelLab in practice). Each lane runs its own fast-check assertion with its own seed
 * (`seed + lane`), so lanes work in parallel and each shrinks its own counterexample.
 */
import fc from 'fast-check';
import { LabError, type Lab } from '../../sim/lab/lab-file.js';
import { runLab, type AttemptResult, type LabResults } from '../../sim/lab/run-lab.js';
import type { SimKernelOptions } from '../../sim/kernel/kernel.js';
import { compareListeners, compareResults, type Difference } from './compare.js';
import { caseArb, renderCase, PORT_STRIDE, type CaseSpec } from './generator.js';
import { explainKnown } from './known-divergences.js';
import { labToYaml } from './lab-yaml.js';

/** A world that runs a case lab over the fixed topology. */
interface CaseRunner {
  run(lab: Lab): Promise<LabResults>;
}

type SimOptions = Pick<SimKernelOptions, 'netfilterFactory' | 'nftablesFactory'>;

/** Run a lab in the simulator, optionally with a replaced netfilter model (positive controls). */
export function runSim(lab: Lab, opts: SimOptions = {}): AttemptResult[] {
  return [...runSimLab(lab, opts).results];
}

function runSimLab(lab: Lab, opts: SimOptions): LabResults {
  return runLab(lab, 'case', {
    trace: false,
    ...(opts.netfilterFactory ? { netfilterFactory: opts.netfilterFactory } : {}),
    ...(opts.nftablesFactory ? { nftablesFactory: opts.nftablesFactory } : {}),
  });
}

interface CaseVerdict {
  readonly lab: Lab;
  readonly sim: AttemptResult[] | undefined;
  readonly kernel: AttemptResult[] | undefined;
  /** Differences not explained by a known divergence. */
  readonly differences: Difference[];
  /** Differences a known divergence explains, with its name. */
  readonly known: (Difference & { readonly divergence: string })[];
  readonly simError: string | undefined;
  readonly kernelError: string | undefined;
}

export async function checkLab(lab: Lab, kernel: CaseRunner, sim: SimOptions = {}): Promise<CaseVerdict> {
  let simRun: LabResults | undefined;
  let simError: string | undefined;
  try {
    simRun = runSimLab(lab, sim);
  } catch (e) {
    if (!(e instanceof LabError)) throw e;
    simError = e.message;
  }
  let kernelRun: LabResults | undefined;
  let kernelError: string | undefined;
  try {
    kernelRun = await kernel.run(lab);
  } catch (e) {
    kernelError = (e as Error).message;
  }
  const simResults = simRun && [...simRun.results];
  const kernelResults = kernelRun && [...kernelRun.results];
  const differences: Difference[] = [];
  const known: (Difference & { divergence: string })[] = [];
  if (simRun && kernelRun && simResults && kernelResults) {
    const udp = new Set(lab.attempts.filter((a) => a.proto === 'udp').map((a) => a.name));
    differences.push(...compareListeners(simRun.listeners, kernelRun.listeners));
    for (const d of compareResults(simResults, kernelResults, udp)) {
      const divergence = explainKnown(lab, d, simResults, kernelResults);
      if (divergence) known.push({ ...d, divergence });
      else differences.push(d);
    }
  } else if (simResults || kernelResults) {
    differences.push({
      attempt: '(setup)',
      field: 'outcome',
      sim: simError ?? 'accepted',
      kernel: kernelError ?? 'accepted',
    });
  }
  return { lab, sim: simResults, kernel: kernelResults, differences, known, simError, kernelError };
}

interface DifferentialOptions {
  readonly runs: number;
  readonly seed: number;
  readonly lanes: readonly CaseRunner[];
  readonly sim?: SimOptions;
  /** Generate cases with nftables documents (caseArb({ nftables: true })); default iptables only. */
  readonly nftables?: boolean;
  /** Called after every case (progress, statistics). */
  readonly onCase?: (v: CaseVerdict, lane: number) => void;
  /** Stop shrinking after this many steps (each step is a kernel run). */
  readonly maxShrinks?: number;
}

interface Counterexample {
  readonly lane: number;
  readonly seed: number;
  readonly verdict: CaseVerdict;
  readonly spec: CaseSpec;
  readonly yaml: string;
}

interface DifferentialReport {
  readonly cases: number;
  readonly seeds: readonly number[];
  readonly counterexamples: readonly Counterexample[];
  readonly knownHits: number;
  /** The same hits per known divergence (name → differences it explained). */
  readonly knownByName: Readonly<Record<string, number>>;
  readonly bothRejected: number;
}

/**
 * A run's report in one line for people (the long runs print it): its seeds, the known-divergence
 * hits by name, most frequent first, and the cases both worlds refused.
 */
export function reportSummary(r: DifferentialReport): string {
  const known = Object.entries(r.knownByName)
    .sort((a, b) => b[1] - a[1])
    .map(([name, n]) => `${name} ${n}`);
  return `seeds ${r.seeds.join(', ')}; ${r.knownHits} known-divergence hits${known.length > 0 ? ` (${known.join(', ')})` : ''}; ${r.bothRejected} cases rejected by both`;
}

let portCursor = 0;
/** Next port base: cycles so no two cases within ~5000 share ports (conntrack is not flushed). */
export function nextPortBase(): number {
  portCursor = (portCursor + 1) % 5000;
  return 10000 + portCursor * PORT_STRIDE;
}

export async function runDifferential(opts: DifferentialOptions): Promise<DifferentialReport> {
  let cases = 0;
  let knownHits = 0;
  const knownByName: Record<string, number> = {};
  let bothRejected = 0;
  const counterexamples: Counterexample[] = [];
  const per = Math.ceil(opts.runs / opts.lanes.length);
  const seeds = opts.lanes.map((_, i) => (opts.seed + i) | 0);
  await Promise.all(
    opts.lanes.map(async (lane, i) => {
      let last: { verdict: CaseVerdict; spec: CaseSpec } | undefined;
      let shrinking = false;
      const result = await fc.check(
        fc.asyncProperty(caseArb({ nftables: opts.nftables === true }), async (spec) => {
          const lab = renderCase(spec, nextPortBase());
          const v = await checkLab(lab, lane, opts.sim);
          if (!shrinking) {
            cases++;
            knownHits += v.known.length;
            for (const k of v.known) knownByName[k.divergence] = (knownByName[k.divergence] ?? 0) + 1;
            if (v.simError && v.kernelError) bothRejected++;
            opts.onCase?.(v, i);
          }
          if (v.differences.length > 0) {
            shrinking = true;
            last = { verdict: v, spec };
            return false;
          }
          return true;
        }),
        { numRuns: per, seed: seeds[i]!, endOnFailure: false, ...(opts.maxShrinks !== undefined ? {} : {}) },
      );
      if (result.failed && last) {
        // fast-check's last failing run is the shrunk counterexample; re-check it for the report.
        const spec = result.counterexample?.[0] ?? last.spec;
        const verdict = await checkLab(renderCase(spec, nextPortBase()), lane, opts.sim);
        const v = verdict.differences.length > 0 ? verdict : last.verdict;
        counterexamples.push({
          lane: i,
          seed: seeds[i]!,
          verdict: v,
          spec,
          yaml: labToYaml(v.lab, describeCounterexample(v, seeds[i]!)),
        });
      }
    }),
  );
  return { cases, seeds, counterexamples, knownHits, knownByName, bothRejected };
}

function describeCounterexample(v: CaseVerdict, seed: number): string {
  const lines = [`Differential counterexample (fast-check seed ${seed}), shrunk.`, 'sim vs kernel:'];
  for (const d of v.differences)
    lines.push(`  ${d.attempt} ${d.field}: sim ${d.sim ?? '-'} / kernel ${d.kernel ?? '-'}`);
  if (v.simError) lines.push(`  sim error: ${v.simError.split('\n')[0]}`);
  if (v.kernelError) lines.push(`  kernel error: ${v.kernelError.split('\n')[0]}`);
  lines.push('Replay: ambient-lab trace THIS_FILE --kernel');
  return lines.join('\n');
}
