/**
 * The core/v1 Event body for an EventInput. Both Kube adapters (impl/linux over client-node,
 * sim/kube over the ApiStore) write it, so an Event reads the same in every world.
 */
import { KIND_INFO, apiVersionOf, type EventInput, type KubeObjectOf } from './kube.js';

export function eventObject(e: EventInput, namespace: string, time: string): KubeObjectOf<'Event'> {
  return {
    apiVersion: 'v1',
    kind: 'Event',
    metadata: { generateName: `${e.involvedObject.name}.`, namespace },
    involvedObject: { apiVersion: apiVersionOf(KIND_INFO[e.involvedObject.kind]), ...e.involvedObject },
    type: e.type,
    reason: e.reason,
    message: e.message,
    source: { component: e.component },
    firstTimestamp: time,
    lastTimestamp: time,
    count: 1,
  };
}
