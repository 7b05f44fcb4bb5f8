/**
 * The differential property for nftables: generated nft cases (nft-generator.ts) give the same
 * results in the simulator and on a real kernel lane, apart from the known divergences — the
 * same comparison as the iptables property (differential.ts, checkLab), with its own generator.
 * A failing case is shrunk by fast-check and returned as a replayable lab file.
 */
import fc from 'fast-check';
import type { Lab } from '../../sim/lab/lab-file.js';
import type { LabResults } from '../../sim/lab/run-lab.js';
import { checkLab, nextPortBase } from './differential.js';
import { labToYaml } from './lab-yaml.js';
import { nftCaseArb, renderNftCase } from './nft-generator.js';

interface NftDifferentialReport {
  readonly cases: number;
  readonly knownHits: number;
  /** Cases whose documents both worlds refused (a generated document nft does not take). */
  readonly bothRejected: number;
  /** The shrunk counterexample as a lab file with its differences in the header, if any. */
  readonly counterexample: string | undefined;
}

export async function runNftDifferential(opts: {
  readonly runs: number;
  readonly seed: number;
  readonly lane: { run(lab: Lab): Promise<LabResults> };
  /** Positive controls: what the simulator is given instead of the case (a deliberately wrong view). */
  readonly simView?: (lab: Lab) => Lab;
}): Promise<NftDifferentialReport> {
  const view = opts.simView;
  /** The kernel always runs the case itself; the simulator runs `simView(case)` when given. */
  const check = (lab: Lab): ReturnType<typeof checkLab> => {
    if (!view) return checkLab(lab, opts.lane);
    // the verdict names the case itself, so a counterexample replays what the kernel ran
    return checkLab(view(lab), { run: () => opts.lane.run(lab) }).then((v) => ({ ...v, lab }));
  };
  let cases = 0;
  let knownHits = 0;
  let bothRejected = 0;
  let shrinking = false;
  let last: Awaited<ReturnType<typeof checkLab>> | undefined;
  const result = await fc.check(
    fc.asyncProperty(nftCaseArb(), async (spec) => {
      const v = await check(renderNftCase(spec, nextPortBase()));
      if (!shrinking) {
        cases++;
        knownHits += v.known.length;
        if (v.simError && v.kernelError) bothRejected++;
      }
      if (v.differences.length === 0) return true;
      shrinking = true;
      last = v;
      return false;
    }),
    { numRuns: opts.runs, seed: opts.seed, endOnFailure: false },
  );
  let counterexample: string | undefined;
  if (result.failed && last) {
    const spec = result.counterexample?.[0];
    const again = spec ? await check(renderNftCase(spec, nextPortBase())) : last;
    const v = again.differences.length > 0 ? again : last;
    const head = [
      `nftables differential counterexample (fast-check seed ${opts.seed}), shrunk.`,
      ...v.differences.map((d) => `  ${d.attempt} ${d.field}: sim ${d.sim ?? '-'} / kernel ${d.kernel ?? '-'}`),
      ...(v.simError ? [`  sim error: ${v.simError.split('\n')[0]}`] : []),
      ...(v.kernelError ? [`  kernel error: ${v.kernelError.split('\n').slice(0, 3).join(' | ')}`] : []),
      'Replay: ambient-lab trace THIS_FILE --kernel',
    ].join('\n');
    counterexample = labToYaml(v.lab, head);
  }
  return { cases, knownHits, bothRejected, counterexample };
}
