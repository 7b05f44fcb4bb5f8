/**
 * Interleavings: a Race command issues two or three World operations concurrently — a pod
 * creation (CNI ADD, enrollment) racing a label change, an agent restart, a proxy restart or a
 * deletion — and lets fast-check's scheduler decide the order in which they are issued.
 *
 * The scheduling seam. A World's operations are promises that make progress on their own (the
 * sim drives its virtual clock from setImmediate turns inside each call; the real worlds do I/O),
 * so the scheduler cannot pause them half-way. What it controls is their *arrival*: each
 * operation is chained behind `scheduler.schedule(...)` (the recipe of the fast-check docs for
 * reordering requests), released one at a time with `waitNext(1)`. Between two releases the run
 * yields `gap` macrotask turns, drawn by fast-check with the command and shrinking to 0, during
 * which the operations already issued advance (in the sim: some timers fire, so a CNI ADD can be
 * half-way when the label change or restart lands). The release order is in the scheduler's
 * report and the gaps in the command, so seed + path replays the same interleaving.
 *
 * Operations that lose a race may fail (labelling a pod not created yet); that is recorded in
 * the step log, not treated as a property violation. Component operations update the model when
 * they complete; that is sound because every world runs the lifecycle operations of one
 * component in the order they were issued (scenarios/worlds/component-lifecycles.ts), as the
 * kubelet does for one pod, so completion order is issue order for them. After the race the model refreshes the
 * affected pods from the world's observation, since who won is the system's business.
 */
import { DATAPLANE_MODE } from '../../impl/api/labels.js';
import type { Component } from '../world.js';
import { podKey } from '../world.js';
import {
  HOSTILE_ANNOTATIONS,
  type ModeChoice,
  type ModelCommand,
  type PodShape,
  APP_PORTS,
  APP_UDP_PORT,
} from './commands.js';
import {
  componentKey,
  markRelabelled,
  pickNamespace,
  pickPod,
  podsInNamespace,
  selectedAtCreation,
  type ClusterModel,
} from './model.js';
import { record, type RunContext } from './run-context.js';

export type RaceOp =
  | { readonly kind: 'create'; readonly shape: PodShape }
  /** Label the pod this race creates (or, without one, an existing pod). */
  | { readonly kind: 'label-pod'; readonly podIndex: number; readonly mode: ModeChoice }
  | { readonly kind: 'label-ns'; readonly nsIndex: number; readonly mode: ModeChoice }
  | {
      readonly kind: 'component';
      readonly op: 'restart' | 'stop' | 'start';
      readonly component: Component;
      readonly nodeIndex: number;
    }
  | { readonly kind: 'delete'; readonly podIndex: number };

const turn = (): Promise<void> => new Promise((resolve) => setImmediate(resolve));

async function turns(n: number): Promise<void> {
  for (let i = 0; i < n; i++) await turn();
}

/** The pod a race creates, and when (a counter of operation starts and ends, not time). */
interface CreatedPod {
  ref?: { namespace: string; name: string };
  issuedAt?: number;
  clock: number;
}

interface Issued {
  readonly label: string;
  readonly thunk: () => Promise<void>;
  /** Model update when the operation succeeded. */
  readonly onSuccess: () => void;
}

export class Race implements ModelCommand {
  private resolved = '?';
  constructor(
    readonly ops: readonly RaceOp[],
    readonly gaps: readonly number[],
  ) {}
  check(m: Readonly<ClusterModel>): boolean {
    return m.namespaces.size > 0;
  }

  private issue(m: ClusterModel, r: RunContext, created: CreatedPod): Issued[] {
    const out: Issued[] = [];
    for (const op of this.ops) {
      switch (op.kind) {
        case 'create': {
          const ns = pickNamespace(m, op.shape.nsIndex);
          if (ns === undefined) break;
          const name = `p${m.nextPod++}`;
          created.ref = { namespace: ns, name };
          const labels: Record<string, string> = op.shape.mode === null ? {} : { [DATAPLANE_MODE]: op.shape.mode };
          const annotations: Record<string, string> = {};
          for (const h of op.shape.hostile) Object.assign(annotations, HOSTILE_ANNOTATIONS[h] ?? {});
          const uid = m.threat.uids[op.shape.uidIndex % m.threat.uids.length] ?? 1000;
          const caps = op.shape.caps.filter((c) => m.threat.caps.includes(c));
          const app = {
            uid,
            ...(m.threat.uidSource ? { uidSource: m.threat.uidSource } : {}),
            caps,
            tcpPorts: [...APP_PORTS],
            udpPorts: [APP_UDP_PORT],
          };
          const ref = { namespace: ns, name };
          out.push({
            label: `create ${ns}/${name} mode=${String(op.shape.mode)}`,
            thunk: async () => {
              created.issuedAt = ++created.clock;
              // Selected when issued and still when done: a namespace label racing the creation
              // leaves it open whether the CNI ADD saw the pod as ambient (see selectedAtCreation).
              const selectedAtIssue = selectedAtCreation(m, { ...ref, labels, annotations, hostNetwork: false });
              const obs = await r.world.createPod({ ...ref, labels, annotations, app });
              const selected =
                selectedAtIssue && selectedAtCreation(m, { ...ref, labels, annotations, hostNetwork: false });
              if (selected && m.down.has(componentKey('agent', obs.node))) m.createdWhileAgentDown.add(obs.uid);
              m.pods.set(podKey(ref), {
                ref,
                uid: obs.uid,
                node: obs.node,
                labels: { ...labels },
                annotations,
                app,
                hostNetwork: false,
                ips: obs.ips,
                started: obs.started,
              });
            },
            onSuccess: () => undefined,
          });
          break;
        }
        case 'label-pod': {
          const target = created.ref ?? pickPod(m, op.podIndex)?.ref;
          if (!target) break;
          out.push({
            label: `label ${podKey(target)} mode=${String(op.mode)}`,
            thunk: () => r.world.labelPod(target, { [DATAPLANE_MODE]: op.mode }),
            // Labels are refreshed from the world below; the write opens a pending-enrollment window.
            onSuccess: () => markRelabelled(m, [podKey(target)]),
          });
          break;
        }
        case 'label-ns': {
          const ns = pickNamespace(m, op.nsIndex);
          if (ns === undefined) break;
          let racing = false;
          out.push({
            label: `label ns ${ns} mode=${String(op.mode)}`,
            thunk: async () => {
              await r.world.labelNamespace(ns, { [DATAPLANE_MODE]: op.mode });
              // The race's own pod races this write only when its creation was issued before the
              // write completed; one created after it is enrolled (or not) at its CNI ADD.
              racing =
                created.issuedAt !== undefined && created.ref?.namespace === ns && created.issuedAt < ++created.clock;
            },
            onSuccess: () => {
              markRelabelled(m, [...podsInNamespace(m, ns), ...(racing && created.ref ? [podKey(created.ref)] : [])]);
              const l = m.namespaces.get(ns);
              if (!l) return;
              if (op.mode === null) delete l[DATAPLANE_MODE];
              else l[DATAPLANE_MODE] = op.mode;
            },
          });
          break;
        }
        case 'component': {
          const node = m.nodes[op.nodeIndex % m.nodes.length];
          if (node === undefined) break;
          const key = componentKey(op.component, node);
          const down = m.down.has(key);
          // Same preconditions as the sequential command, judged before the race starts.
          if ((op.op === 'start' && !down) || (op.op === 'stop' && down)) break;
          out.push({
            label: `${op.op} ${op.component} on ${node}`,
            thunk: () => r.world[op.op](op.component, node),
            onSuccess: () => {
              if (op.op === 'stop') m.down.add(key);
              else m.down.delete(key);
            },
          });
          break;
        }
        case 'delete': {
          const p = pickPod(m, op.podIndex);
          if (!p) break;
          out.push({
            label: `delete ${podKey(p.ref)}`,
            thunk: async () => {
              await r.world.deletePod(p.ref);
              m.pods.delete(podKey(p.ref));
            },
            onSuccess: () => undefined,
          });
          break;
        }
      }
    }
    return out;
  }

  async run(m: ClusterModel, r: RunContext): Promise<void> {
    m.quiescent = false;
    const created: CreatedPod = { clock: 0 };
    const issued = this.issue(m, r, created);
    this.resolved = issued.map((i) => i.label).join(' || ');
    const order: string[] = [];
    const outcomes: string[] = new Array<string>(issued.length).fill('pending');
    const running = issued.map((op, i) =>
      r.scheduler.schedule(Promise.resolve(op.label), op.label).then(async () => {
        order.push(op.label);
        try {
          await op.thunk();
          op.onSuccess();
          outcomes[i] = 'ok';
        } catch (e) {
          outcomes[i] = `failed: ${e instanceof Error ? e.message : String(e)}`;
        }
      }),
    );
    for (let i = 0; i < issued.length; i++) {
      await r.scheduler.waitNext(1);
      await turns(this.gaps[i] ?? 0);
    }
    await Promise.all(running);
    await this.refresh(m, r);
    record(
      r,
      this.toString(),
      `issued in order: ${order.join(' ; ')} — ${issued.map((op, i) => `${op.label}: ${outcomes[i]}`).join('; ')}`,
    );
  }

  /** Who won is the system's business: read the surviving pods' labels back from the world. */
  private async refresh(m: ClusterModel, r: RunContext): Promise<void> {
    const observed = new Map((await r.world.pods()).map((p) => [podKey(p), p]));
    for (const [key, p] of m.pods) {
      const o = observed.get(key);
      if (!o) {
        m.pods.delete(key);
        continue;
      }
      p.labels = { ...o.labels };
      p.started = o.started;
      p.ips = o.ips;
      p.node = o.node;
    }
  }

  toString(): string {
    return `Race(${this.resolved}; gaps=${this.gaps.join(',')})`;
  }
}
