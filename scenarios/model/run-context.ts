/**
 * The "real" side of the model-based run: the World under test, the property being checked,
 * and what the run observed (a step log and every connection attempt) for the counterexample.
 * Also the bridge from the model to the properties' ClusterContext.
 */
import type fc from 'fast-check';
import type { World } from '../world.js';
import { podKey, type PodObservation } from '../world.js';
import type { ClusterContext, ComponentStates, PodFacts } from '../properties/index.js';
import type { AttemptRecord, CheckableProperty, RunViolation } from './contracts.js';
import { isUp, type ModelView } from './model.js';

export interface StepRecord {
  readonly step: number;
  readonly command: string;
  /** What the command resolved and observed (targets, outcome, errors of racing operations). */
  readonly detail: string;
}

export interface RunContext {
  readonly world: World;
  readonly property: CheckableProperty;
  readonly dnsCapture: boolean;
  /** Orders the operations of race commands (see race.ts); drawn with the commands, so it replays. */
  readonly scheduler: fc.Scheduler;
  readonly steps: StepRecord[];
  readonly attempts: AttemptRecord[];
  violation?: RunViolation;
}

/** Thrown by a command when the property broke; fast-check shrinks on it. */
export class PropertyViolationError extends Error {
  constructor(readonly found: RunViolation) {
    super(`${found.violation.property} violated: ${found.violation.message}`);
    this.name = 'PropertyViolationError';
  }
}

export function record(ctx: RunContext, command: string, detail: string): void {
  ctx.steps.push({ step: ctx.steps.length + 1, command, detail });
}

/** The properties' view of the cluster: the observed pods plus what only the model knows. */
function clusterContext(ctx: RunContext, model: ModelView, pods: readonly PodObservation[]): ClusterContext {
  const namespaces: Record<string, Record<string, string>> = {};
  for (const [n, l] of model.namespaces) namespaces[n] = l;
  const specs: Record<string, PodFacts> = {};
  for (const [k, p] of model.pods) {
    specs[k] = {
      uid: p.app.uid,
      annotations: p.annotations,
      tcpPorts: p.app.tcpPorts,
      probePorts: p.app.probePorts ?? [],
      serviceAccount: 'default',
    };
  }
  const components: Record<string, ComponentStates[string]> = {};
  for (const n of model.nodes)
    components[n] = { agent: isUp(model, 'agent', n) ? 'up' : 'down', proxy: isUp(model, 'proxy', n) ? 'up' : 'down' };
  return {
    mesh: { profile: model.profile, dnsCapture: ctx.dnsCapture },
    pods,
    namespaces,
    specs,
    components,
    policies: [...model.policies.values()],
    quiescent: model.quiescent,
    createdWhileAgentDown: model.createdWhileAgentDown,
    addRefusedByAgent: model.addRefusedByAgent,
    relabelledSinceSettle: model.relabelled,
    policySetsSinceSettle: model.policySets,
  };
}

function fail(ctx: RunContext, found: RunViolation): never {
  ctx.violation = found;
  throw new PropertyViolationError(found);
}

/** Judge one attempt; `podsBefore` is the observation right before it (pending-enrollment carve-out). */
export async function checkAttempt(
  ctx: RunContext,
  model: ModelView,
  attempt: AttemptRecord,
  podsBefore?: readonly PodObservation[],
): Promise<void> {
  ctx.attempts.push(attempt);
  const prop = ctx.property.connection;
  if (!prop) return;
  const pods = await ctx.world.pods();
  const v = prop.check({ ...clusterContext(ctx, model, pods), ...attempt, ...(podsBefore ? { podsBefore } : {}) })[0];
  if (v) fail(ctx, { violation: v, attempt });
}

/** Judge the observed pods; `override` narrows what the property is told (e.g. one pod's fail-closed facts mid-history). */
export async function checkState(
  ctx: RunContext,
  model: ModelView,
  override: Partial<ClusterContext> = {},
): Promise<void> {
  const prop = ctx.property.state;
  if (!prop) return;
  const pods = await ctx.world.pods();
  const v = prop.check(pods, { ...clusterContext(ctx, model, pods), ...override })[0];
  if (v) fail(ctx, { violation: v });
}

export { podKey };
