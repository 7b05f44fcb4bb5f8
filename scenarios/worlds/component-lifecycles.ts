/**
 * Lifecycle operations (stop, start, restart, reboot) on one component of one node run one after
 * another, in the order they were called — as the kubelet applies a pod's updates through one
 * worker per pod. Without this, a Race of `restart proxy || stop proxy` on one node interleaves
 * inside the world (the stop lands between the restart's start and its retirement of the old
 * process), and which operation "wins" is an accident of the world's timing: the model, which
 * applies the operations in the order they complete, and the world then disagree about whether
 * the component runs, and a property judged on the model's view reports a bypass that is not
 * there. Operations on different components or nodes still run concurrently: those are the
 * races the system itself must survive (an agent restart while the proxy restarts, a pod
 * created meanwhile).
 */
import type { Component } from '../world.js';

export class ComponentLifecycles {
  private readonly tails = new Map<string, Promise<void>>();

  /** Run `op` after every operation already queued on each of `components` of `node`. */
  run<T>(node: string, components: readonly Component[], op: () => Promise<T>): Promise<T> {
    const keys = components.map((c) => `${node}/${c}`);
    const before = Promise.all(keys.map((k) => this.tails.get(k)));
    const result = before.then(op);
    // The next operation waits for this one to end, whether it succeeded or failed: a failed
    // stop is reported to its caller, and must not wedge the queue for the rest of the history.
    const done = result.then(
      () => undefined,
      () => undefined,
    );
    for (const k of keys) this.tails.set(k, done);
    return result;
  }
}
