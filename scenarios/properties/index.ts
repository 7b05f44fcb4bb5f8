/**
 * The properties, stated once (docs/design.md, 'Properties'). Callers (the model-based commands, the
 * threat matrix, the attack catalog, the mutation runner) use `checkConnection` after every
 * `World.connect` and `checkState` after every `World.settle`.
 */
import type { PodObservation } from '../world.js';
import { authorization } from './authorization.js';
import { inboundCapture, outboundCapture } from './capture.js';
import { convergence } from './convergence.js';
import { failClosedConnection, failClosedState } from './fail-closed.js';
import { identity } from './identity.js';
import { liveness } from './liveness.js';
import type {
  ClusterContext,
  ConnectionContext,
  ConnectionProperty,
  PropertyName,
  StateProperty,
  Violation,
} from './types.js';

export * from './types.js';
export * from './carve-outs.js';
export { referenceSelects, selectionOf } from './enrollment-model.js';
export { referenceDecision } from './policy-oracle.js';
export { isCaptureSubject, identityOf } from './subjects.js';

export const CONNECTION_PROPERTIES: readonly ConnectionProperty[] = [
  outboundCapture,
  inboundCapture,
  authorization,
  identity,
  failClosedConnection,
  liveness,
];
export const STATE_PROPERTIES: readonly StateProperty[] = [convergence, failClosedState];

interface CheckOptions {
  /** Only these properties (default all). */
  readonly only?: readonly PropertyName[];
}

export function checkConnection(ctx: ConnectionContext, o: CheckOptions = {}): Violation[] {
  return CONNECTION_PROPERTIES.filter((p) => !o.only || o.only.includes(p.name)).flatMap((p) => p.check(ctx));
}

export function checkState(pods: readonly PodObservation[], ctx: ClusterContext, o: CheckOptions = {}): Violation[] {
  return STATE_PROPERTIES.filter((p) => !o.only || o.only.includes(p.name)).flatMap((p) => p.check(pods, ctx));
}
