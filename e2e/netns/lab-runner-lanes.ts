/**
 * Kernel lanes for the differential property (scenarios/fidelity/differential.ts): each lane is
 * one KernelLab built on the fixed topology, replaying case after case.
 */
import type { Lab } from '../../sim/lab/lab-file.js';
import type { LabResults } from '../../sim/lab/run-lab.js';
import { KernelLab, type KernelLabOptions } from './lab-runner.js';
import { newRunPrefix } from './netns-run.js';

class KernelLane {
  private constructor(readonly lab: KernelLab) {}

  static async create(topology: Lab, opts: KernelLabOptions = {}): Promise<KernelLane> {
    return new KernelLane(await KernelLab.create(topology, opts));
  }

  async run(lab: Lab): Promise<LabResults> {
    const listeners = await this.lab.configure(lab);
    return { listeners, results: await this.lab.runAttempts(lab.attempts) };
  }
}

/** Build `n` lanes (each with its own namespaces) and dispose all of them whatever `fn` does. */
export async function withKernelLanes<T>(
  n: number,
  topology: Lab,
  fn: (lanes: KernelLane[]) => Promise<T>,
  opts: KernelLabOptions = {},
): Promise<T> {
  const lanes: KernelLane[] = [];
  const dispose = async (): Promise<string[]> => {
    const errors: string[] = [];
    for (const l of lanes) await l.lab.dispose().catch((e: unknown) => errors.push(String(e)));
    return errors;
  };
  let result: T;
  try {
    for (let i = 0; i < n; i++)
      lanes.push(
        await KernelLane.create(topology, { ...opts, prefix: opts.prefix ? `${opts.prefix}${i}-` : newRunPrefix() }),
      );
    result = await fn(lanes);
  } catch (e) {
    await dispose();
    throw e;
  }
  const errors = await dispose();
  if (errors.length > 0) throw new Error(`disposing kernel lanes failed: ${errors.join('; ')}`);
  return result;
}
