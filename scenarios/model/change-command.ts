/**
 * The skeleton the model commands that change the cluster share: the model stops being
 * quiescent before the World is touched, the command names what it resolved to, and the outcome
 * goes into the run's step log. Commands that only observe or compose others (Settle, Connect,
 * CreatePodAgentFault, PolicyOverlap, Race) do not use it.
 */
import type fc from 'fast-check';
import type { ClusterModel } from './model.js';
import { record, type RunContext } from './run-context.js';

export type ModelCommand = fc.AsyncCommand<ClusterModel, RunContext, false>;

export abstract class ChangeCommand implements ModelCommand {
  /**
   * @param label the command's name in counterexamples ("CreatePod")
   * @param resolved what the command stands for: '?' until a run resolves the drawn indexes
   *   against the model, or its own arguments when they need no resolving
   */
  constructor(
    private readonly label: string,
    protected resolved = '?',
  ) {}

  abstract check(m: Readonly<ClusterModel>): boolean;

  /** Acts on the World and the model: the outcome to record, or undefined when the draw resolved to nothing. */
  protected abstract change(m: ClusterModel, r: RunContext): Promise<string | undefined>;

  async run(m: ClusterModel, r: RunContext): Promise<void> {
    m.quiescent = false;
    const outcome = await this.change(m, r);
    if (outcome !== undefined) record(r, this.toString(), outcome);
  }

  toString(): string {
    return `${this.label}(${this.resolved})`;
  }
}
