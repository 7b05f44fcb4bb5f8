/**
 * The security matrix: for each profile × threat, build the standard topology in a fresh world,
 * run the threat's attacker actions healthy, with the proxy down and with the agent down, judge
 * every attempt and the settled state with the properties, and compare each property's verdict
 * with the expected table. A cell mismatches in either direction.
 *
 *   const m = await runMatrix({ factory: simWorldFactory, profiles: ['upstream', 'strict'] });
 *   m.cells.filter((c) => c.status !== 'as-expected')
 */
import type { Backend } from '../../impl/api/backend.js';
import type { Profile, World, WorldOptions } from '../world.js';
import { checkConnection, checkState } from '../properties/index.js';
import {
  PROPERTY_NAMES,
  violation,
  type MeshSettings,
  type PropertyName,
  type Violation,
} from '../properties/types.js';
import { THREATS, type ThreatId, type ThreatModel } from '../threats/threats.js';
import { expectedCell, type ExpectedCell } from '../expected/table.js';
import {
  attackerActions,
  carveOutActions,
  flushActions,
  HIJACK_PORTS,
  hijackActions,
  ipv6Actions,
  livenessActions,
  type AttackerAction,
} from './actions.js';
import { ATTACKER, buildTopology, MESH_NS, type TopologyState } from './topology.js';
import { runCatalogPhases, runMeshV6Off, type CatalogPhase, type PhaseSink } from './catalog-phases.js';

export interface WorldMaker {
  create(options: WorldOptions): Promise<World>;
}

export interface MatrixOptions {
  readonly factory: WorldMaker;
  readonly profiles?: readonly Profile[];
  readonly threats?: readonly ThreatId[];
  readonly seed?: number;
  readonly ipv6?: boolean;
  /** The agent's rules backend (default iptables). */
  readonly backend?: Backend;
  /** Called after each profile × threat run (progress bars). */
  readonly onProgress?: (done: number, total: number, label: string) => void;
}

export interface FoundViolation {
  readonly violation: Violation;
  readonly action?: string;
  readonly phase: Phase;
}

/**
 * Where a violation was found. `app-flush`: right after the in-pod attacker flushed its own
 * pod's rules (World.appExec iptables-flush), before the agent's next repair pass.
 * `port-hijack`: after the attacker bound the proxy ports in its own netns while its node proxy
 * was stopped, and the proxy came back. The catalog phases (catalog-phases.ts) are named for
 * what they stage: `mesh-v6-off`, `cni-api-error`, `reboot`, `hostile-annotations`, `rogue-zds`,
 * `inserted-accept`, `pending-destination`.
 */
export type Phase = 'healthy' | 'proxy-down' | 'agent-down' | 'settled' | 'app-flush' | 'port-hijack' | CatalogPhase;

export type CellStatus = 'as-expected' | 'unexpected-bypass' | 'missed-bypass' | 'not-evaluated';

export interface MatrixCell {
  readonly property: PropertyName;
  readonly threat: ThreatId;
  readonly profile: Profile;
  readonly expected: ExpectedCell;
  readonly observed: 'holds' | 'bypass';
  readonly status: CellStatus;
  /** Up to a few counterexamples (first per action). */
  readonly violations: readonly FoundViolation[];
  /** Why a cell was not evaluated (a World capability the attack needs is missing). */
  readonly note?: string;
}

export interface MatrixResult {
  readonly cells: readonly MatrixCell[];
  readonly ok: boolean;
}

/** Run every action and judge it; `phase` labels where it came from. */
async function runActions(
  world: World,
  state: TopologyState,
  actions: readonly AttackerAction[],
  phase: Phase,
  sink: FoundViolation[],
  quiescent = phase === 'healthy',
): Promise<void> {
  for (const a of actions) {
    const result = await world.connect(a.from, a.to, a.opts);
    const ctx = { ...(await state.context(world, quiescent)), from: a.from, to: a.to, opts: a.opts, result };
    for (const v of checkConnection(ctx)) sink.push({ violation: v, action: a.name, phase });
    // A documented carve-out must work where the cluster is healthy: judged as liveness.
    const healthy = Object.values(ctx.components).every((c) => c.agent === 'up' && c.proxy === 'up');
    const reached =
      a.to.kind !== 'pod' ||
      result.deliveries.some(
        (d) => a.to.kind === 'pod' && d.pod.name === a.to.pod.name && d.pod.namespace === a.to.pod.namespace,
      );
    if (
      a.expect &&
      phase === 'healthy' &&
      healthy &&
      (result.acceptedBy !== a.expect.acceptedBy || (a.expect.delivered === true && !reached))
    ) {
      const v = violation(
        'liveness',
        `${a.name}: first hop ${result.acceptedBy ?? 'none'} (${result.outcome})${a.expect.delivered && !reached ? ', not delivered' : ''}, want ${a.expect.acceptedBy}${a.expect.delivered ? ' and delivery' : ''} — ${a.expect.carveOut}`,
        {
          from: a.from,
          to: a.to,
          outcome: result.outcome,
          acceptedBy: result.acceptedBy,
          acceptedIn: result.acceptedIn,
        },
      );
      sink.push({ violation: v, action: a.name, phase });
    }
  }
}

/** Knobs of one threat run (the mutation runner skips the appExec phases: they flush every rule anyway). */
export interface ThreatRunOptions {
  readonly seed?: number;
  readonly ipv6?: boolean;
  /** The agent's rules backend (default iptables). */
  readonly backend?: Backend;
  /** Run the NET_ADMIN-flush and port-hijack phases when the world has appExec (default true). */
  readonly appExecPhases?: boolean;
  /** Run the attack-catalog phases of the threat (catalog-phases.ts; default true). */
  readonly catalogPhases?: boolean;
}

/** What one profile × threat run found, and whether the world could run the appExec attacks. */
export interface ThreatRun {
  readonly found: FoundViolation[];
  readonly appExec: boolean;
  /** appExec calls and their results, in words (reports). */
  readonly appExecLog: readonly string[];
  /** What the catalog phases staged and saw, in words (reports), including phases skipped. */
  readonly catalogLog: readonly string[];
}

export async function runThreat(
  factory: WorldMaker,
  profile: Profile,
  t: ThreatModel,
  o: ThreatRunOptions = {},
): Promise<FoundViolation[]> {
  return (await runThreatDetailed(factory, profile, t, o)).found;
}

/**
 * The in-pod attacker acts on its own netns (World.appExec), when the world can:
 * 1. NET_ADMIN flush: iptables-restore of empty tables and `nft flush ruleset` (whichever backend
 *    wrote the rules, one of them removes them); when the kernel lets it (NET_ADMIN),
 *    its traffic out and a peer's traffic in are judged at once — before the agent's next
 *    repair pass — and the settled state after it (the repair must have restored the rules:
 *    convergence). So the check measures "bypass until the next repair pass", not a lasting one.
 * 2. Port hijack: the node proxy stops, the app binds the proxy ports of its own netns (with
 *    SO_REUSEPORT when root, IP_TRANSPARENT when its capabilities allow), the proxy starts
 *    again; then a peer connects in and the app out.
 *    Runs last: the pod stays hijacked.
 */
/**
 * The app empties its netns's rules with both tools (iptables-restore of empty tables, `nft flush
 * ruleset`): true when either took. Each outcome goes to `log` when given.
 */
async function flushAll(world: World, log?: string[]): Promise<boolean> {
  if (!world.appExec) return false;
  let ok = false;
  for (const kind of ['iptables-flush', 'nft-flush'] as const) {
    const r = await world.appExec(ATTACKER, { kind });
    log?.push(`${kind}: ${r.ok ? 'ok' : (r.error ?? 'failed')}`);
    ok ||= r.ok;
  }
  return ok;
}

async function runAppExecPhases(
  world: World,
  state: TopologyState,
  t: ThreatModel,
  sink: FoundViolation[],
  log: string[],
): Promise<void> {
  if (t.vantage !== 'enrolled-pod' || !world.appExec) return;
  const n0 = world.nodes[0]!;
  const flushed = await flushAll(world, log);
  if (flushed) {
    // The attacker flushes again right before each attempt: the agent's repair pass (every
    // REPAIR_INTERVAL of the world) would otherwise close the window between two attempts, and
    // nothing stops an app from flushing in a loop. Then with its node proxy down (fail closed:
    // the flush does not depend on the proxy).
    const actions = flushActions();
    for (const a of actions) {
      await flushAll(world);
      await runActions(world, state, [a], 'app-flush', sink);
    }
    await state.setComponent(world, 'proxy', n0, 'down');
    for (const a of actions) {
      await flushAll(world);
      await runActions(world, state, [a], 'app-flush', sink);
    }
    await state.setComponent(world, 'proxy', n0, 'up');
    // No further flush: the settled state must show the agent's repair (convergence).
    await world.settle();
    for (const v of checkState(await world.pods(), await state.context(world, true)))
      sink.push({ violation: v, phase: 'settled' });
  }
  await state.setComponent(world, 'proxy', n0, 'down');
  let bound = 0;
  for (const port of HIJACK_PORTS) {
    const reusePort = t.uids[0] === 0;
    const opts = reusePort ? ' SO_REUSEPORT' : '';
    // Transparent first: TPROXY (strict inbound-tproxy) hands packets only to a transparent
    // listener. The world's kernel decides whether the app may (NET_RAW or NET_ADMIN, effective);
    // on EPERM the app binds a plain listener, which REDIRECT still feeds.
    let r = await world.appExec(ATTACKER, { kind: 'listen', port, reusePort, transparent: true });
    log.push(`listen ${port}${opts} IP_TRANSPARENT: ${r.ok ? 'ok' : (r.error ?? 'failed')}`);
    if (!r.ok && r.error?.includes('EPERM')) {
      r = await world.appExec(ATTACKER, { kind: 'listen', port, reusePort });
      log.push(`listen ${port}${opts}: ${r.ok ? 'ok' : (r.error ?? 'failed')}`);
    }
    if (r.ok) bound++;
  }
  await state.setComponent(world, 'proxy', n0, 'up');
  await world.settle();
  if (bound > 0) await runActions(world, state, hijackActions(), 'port-hijack', sink);
}

export async function runThreatDetailed(
  factory: WorldMaker,
  profile: Profile,
  t: ThreatModel,
  o: ThreatRunOptions = {},
): Promise<ThreatRun> {
  const mesh: MeshSettings = { profile, dnsCapture: true, kubeletUid: 0 };
  const world = await factory.create({
    nodes: 2,
    profile,
    kernelVersion: t.kernelVersion,
    ipv6: o.ipv6 ?? false,
    dnsCapture: true,
    ...(o.backend === 'nftables' ? { rulesBackend: o.backend } : {}),
    seed: o.seed ?? 1,
  });
  const found: FoundViolation[] = [];
  const appExecLog: string[] = [];
  const catalogLog: string[] = [];
  const appExec = typeof world.appExec === 'function';
  const sink: PhaseSink = {
    run: async (w, st, actions, phase, quiescent) => {
      const before = found.length;
      await runActions(w, st, actions, phase, found, quiescent);
      return found.slice(before).map((f) => f.violation);
    },
    push: (v, phase, action) => {
      found.push({ violation: v, phase, ...(action !== undefined ? { action } : {}) });
    },
    log: (line) => {
      catalogLog.push(line);
    },
  };
  try {
    const state = await buildTopology(world, t, mesh);
    const n0 = world.nodes[0]!;
    const actions = attackerActions(t, world);
    const carveOuts = t.vantage === 'enrolled-pod' ? carveOutActions() : [];
    const v6 = world.options.ipv6 ? ipv6Actions(t) : [];
    await runActions(
      world,
      state,
      [...actions, ...carveOuts, ...v6, ...livenessActions(world.nodes)],
      'healthy',
      found,
    );
    await world.settle();
    for (const v of checkState(await world.pods(), await state.context(world, true)))
      found.push({ violation: v, phase: 'settled' });
    // Fail closed: the proxy of the victim's (and the in-pod attacker's) node down.
    await state.setComponent(world, 'proxy', n0, 'down');
    await runActions(world, state, actions, 'proxy-down', found);
    await state.setComponent(world, 'proxy', n0, 'up');
    await world.settle();
    // Fail closed: the agent down; a new ambient pod must not start unredirected.
    await state.setComponent(world, 'agent', n0, 'down');
    await state.createPod(world, {
      namespace: MESH_NS,
      name: 'late',
      node: n0,
      app: { uid: 1000, caps: [], tcpPorts: [8080] },
    });
    await runActions(world, state, actions, 'agent-down', found);
    for (const v of checkState(await world.pods(), await state.context(world, false)))
      found.push({ violation: v, phase: 'agent-down' });
    await state.setComponent(world, 'agent', n0, 'up');
    await world.settle();
    for (const v of checkState(await world.pods(), await state.context(world, true)))
      found.push({ violation: v, phase: 'settled' });
    if (o.catalogPhases ?? true) await runCatalogPhases(world, state, t, sink);
    if (o.appExecPhases ?? true) await runAppExecPhases(world, state, t, found, appExecLog);
  } finally {
    await world.close();
  }
  if (o.catalogPhases ?? true) await runMeshV6Off(factory, profile, t, o.seed ?? 1, mesh, sink);
  return { found, appExec, appExecLog, catalogLog };
}

/**
 * Only the mesh-v6-off catalog phase of a threat (its own world): what the mutation runner uses
 * to observe the v6 rules of a v4-only mesh (strict's block ruleset).
 */
export async function meshV6OffFindings(
  factory: WorldMaker,
  profile: Profile,
  t: ThreatModel,
  seed = 1,
): Promise<FoundViolation[]> {
  const found: FoundViolation[] = [];
  const sink: PhaseSink = {
    run: async (w, st, actions, phase, quiescent) => {
      const before = found.length;
      await runActions(w, st, actions, phase, found, quiescent);
      return found.slice(before).map((f) => f.violation);
    },
    push: (v, phase, action) => {
      found.push({ violation: v, phase, ...(action !== undefined ? { action } : {}) });
    },
    log: () => undefined,
  };
  await runMeshV6Off(factory, profile, t, seed, { profile, dnsCapture: true, kubeletUid: 0 }, sink);
  return found;
}

/** Does the world offer what the expected bypass needs? */
function capabilityNote(cell: ExpectedCell, world: { appExec?: unknown } | undefined): string | undefined {
  if (cell.verdict === 'bypass' && cell.requires === 'appExec' && typeof world?.appExec !== 'function') {
    return 'the World has no appExec: the NET_ADMIN flush and the port hijack cannot be performed';
  }
  return undefined;
}

export function judgeCell(
  property: PropertyName,
  threat: ThreatId,
  profile: Profile,
  found: readonly FoundViolation[],
  worldProbe?: { appExec?: unknown },
  backend: Backend = 'iptables',
): MatrixCell {
  const expected = expectedCell(property, threat, profile, backend);
  const violations = found.filter((f) => f.violation.property === property);
  const observed = violations.length > 0 ? 'bypass' : 'holds';
  let status: CellStatus =
    observed === expected.verdict ? 'as-expected' : observed === 'bypass' ? 'unexpected-bypass' : 'missed-bypass';
  const note = status === 'missed-bypass' ? capabilityNote(expected, worldProbe) : undefined;
  if (note) status = 'not-evaluated';
  const firstPerAction = new Map<string, FoundViolation>();
  for (const v of violations)
    if (!firstPerAction.has(`${v.phase}:${v.action}`)) firstPerAction.set(`${v.phase}:${v.action}`, v);
  return {
    property,
    threat,
    profile,
    expected,
    observed,
    status,
    violations: [...firstPerAction.values()].slice(0, 8),
    ...(note ? { note } : {}),
  };
}

export async function runMatrix(o: MatrixOptions): Promise<MatrixResult> {
  const profiles = o.profiles ?? ['upstream', 'strict'];
  const threats = o.threats ? THREATS.filter((t) => o.threats!.includes(t.id)) : THREATS;
  const cells: MatrixCell[] = [];
  const total = profiles.length * threats.length;
  let done = 0;
  for (const profile of profiles) {
    for (const t of threats) {
      const run = await runThreatDetailed(o.factory, profile, t, {
        ...(o.seed !== undefined ? { seed: o.seed } : {}),
        ...(o.ipv6 !== undefined ? { ipv6: o.ipv6 } : {}),
        ...(o.backend !== undefined ? { backend: o.backend } : {}),
      });
      const probe = run.appExec ? { appExec: true } : {};
      for (const p of PROPERTY_NAMES) cells.push(judgeCell(p, t.id, profile, run.found, probe, o.backend));
      o.onProgress?.(++done, total, `${profile} × ${t.id}`);
    }
  }
  return { cells, ok: cells.every((c) => c.status === 'as-expected' || c.status === 'not-evaluated') };
}
