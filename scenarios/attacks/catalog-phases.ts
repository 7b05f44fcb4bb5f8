/**
 * The attack-catalog phases that need more than connections on the healthy topology: each one
 * stages a catalog entry's situation through the World, runs its attempts and judges them with
 * the same properties as every other phase. A phase runs for the threats whose catalog entry
 * names it (catalog.ts `runBy.phase`), so the matrix pays for it only where the table expects
 * something of it.
 *
 * - mesh-v6-off (ipv6-without-v6-rules): a second world, dual-stack with a v4-only mesh
 *   (WorldOptions.meshV6 false); the IPv6 attempts there.
 * - cni-api-error (api-error-at-add): the CNI plugin on the victim's node cannot reach the API;
 *   an ambient pod created meanwhile must not start (fail closed), and starts enrolled once the
 *   API is back (convergence).
 * - reboot (reboot-stuck): the victim's node reboots — its pods' sandboxes come back before the
 *   node agent runs again; right after, no ambient pod may run uncaptured (fail closed), traffic
 *   to the victim is judged, and once settled every pod is enrolled again (convergence).
 * - hostile-annotations: ambient pods with hostile rule-shaping annotations; they must end up
 *   captured with defaults (the values refused), their traffic in and out captured.
 * - rogue-zds: a process of the threat's uid on the victim's node speaks ZDS to the agent; it must
 *   be rejected (peer uid), and the real proxy keeps serving every pod.
 * - forged-identity: root on the victim's node (what its proxy holds: its token, the mesh root
 *   certificate; tokens for its node's pods) passes itself off as `friend`, a pod of the other
 *   node, with each credential the World can present (World.forgedHbone): the CA must refuse,
 *   the destination proxy must refuse a self-signed certificate, and no delivery may be
 *   authorized as friend (identity, authorization). The control — the identity of a pod of its
 *   own node, issued and delivered — shows the path works, so the refusals are real; a control
 *   that fails is a liveness violation, never a quiet "holds".
 * - inserted-accept (net-admin-insert): the attacker (NET_ADMIN) inserts ACCEPTs ahead of the
 *   capture in its own netns (World.appExec iptables-insert) and a table of its own that leaves
 *   TCP untracked (nft-insert notrack-tcp), and stops; after a settle (the
 *   agent's repair passes) its traffic out is judged. Still uncaptured then is an outbound bypass
 *   and a convergence failure: the tampering outlived the repair loop. Where the World can hold a
 *   connection, the attacker also opens one to the sink while its ACCEPT applies and sends on it
 *   after the settle: a connection that went past the proxy and still carries data then is an
 *   outbound bypass too (the repair left the escaped flow: conntrack keeps it un-NATed). The
 *   agents' `drift repaired` reports (World.driftRepairs) are logged with their window bound.
 * - pending-destination (plaintext-to-pending): an ambient pod on the victim's node, run as the
 *   threat's app, takes its own 15006 while the node proxy is stopped (World.appExec listen), so
 *   the restarted proxy cannot serve it and the agent leaves it `pending`; after a settle a mesh
 *   peer on the other node connects to it. A delivery to the squatter through the peer's node
 *   proxy is plaintext the peer's proxy chose for a pod selected for the mesh that no proxy
 *   serves: judged by inbound capture and authorization as any delivery, and as a fail-closed
 *   failure (the source proxy must not downgrade, it must fail closed until the pod is served).
 *   The pod is deleted afterwards.
 * - squat-before-enrollment (port-squat-before-enrollment, -root): a pod outside the mesh on the
 *   victim's node, run as the threat's app, listens on its own 15006 (World.appExec listen) and is
 *   then labelled into the mesh: the agent writes its rules, the proxy cannot bind 15006, the pod
 *   stays `pending`. After a settle a client outside the mesh connects to it: a delivery to the
 *   squatter is inbound no proxy took (inbound capture, authorization). The pod is deleted
 *   afterwards.
 * - live-enrollment (live-enrollment): a pod outside the mesh on the victim's node holds two TCP
 *   connections (World.holdConnection: in from the client, out to the sink; both to the apps
 *   directly), then is labelled into the mesh; after a settle each sends once more. Still
 *   delivered is a connection that outlived enrollment uncaptured: an inbound- or
 *   outbound-capture violation. The kernel resets them (their next segment is picked up mid-stream
 *   and redirected, as upstream does), and strict also ends what its rules do not capture. A World
 *   without holdConnection, or connections that did not reach the apps, skip the phase (reported).
 *   The pod is deleted afterwards.
 */
import {
  INSERTED_RULE_IDS,
  NFT_INSERTED_TABLE_IDS,
  type PodRef,
  type Profile,
  type World,
  type WorldOptions,
} from '../world.js';
import { checkConnection, checkState } from '../properties/index.js';
import { DATAPLANE_MODE } from '../../impl/api/labels.js';
import { violation, type Violation } from '../properties/types.js';
import type { ThreatId, ThreatModel } from '../threats/threats.js';
import { ATTACKS } from './catalog.js';
import {
  earlySquatterActions,
  forgedIdentityActions,
  hostileAnnotationActions,
  insertedAcceptActions,
  LIVE_ENROLLMENT_ACTIONS,
  livenessActions,
  meshV6OffActions,
  pendingDestinationActions,
  rebootActions,
  type AttackerAction,
} from './actions.js';
import {
  API_LATE,
  APP_PORT,
  ATTACKER,
  buildTopology,
  CLIENT,
  EARLY_SQUATTER,
  HOSTILE_PODS,
  LIVE_ENROLLEE,
  PENDING_SQUATTER,
  SINK,
  type TopologyState,
} from './topology.js';

export const CATALOG_PHASES = [
  'cni-api-error',
  'reboot',
  'hostile-annotations',
  'rogue-zds',
  'forged-identity',
  'inserted-accept',
  'pending-destination',
  'squat-before-enrollment',
  'live-enrollment',
  'mesh-v6-off',
] as const;
export type CatalogPhase = (typeof CATALOG_PHASES)[number];

/** The catalog phases to run for a threat: those of the catalog entries that name it. */
export function catalogPhasesFor(threat: ThreatId): CatalogPhase[] {
  return CATALOG_PHASES.filter((p) =>
    ATTACKS.some((a) => a.runBy.kind === 'matrix' && a.runBy.phase === p && a.runBy.threat === threat),
  );
}

/** What a phase reports into (the matrix's sink and log). */
export interface PhaseSink {
  /** Judge attempts with every connection property, labelled with the phase; returns what was found. */
  run(
    world: World,
    state: TopologyState,
    actions: readonly AttackerAction[],
    phase: CatalogPhase,
    quiescent: boolean,
  ): Promise<readonly Violation[]>;
  push(v: Violation, phase: CatalogPhase, action?: string): void;
  log(line: string): void;
}

async function judgeState(
  world: World,
  state: TopologyState,
  phase: CatalogPhase,
  sink: PhaseSink,
  quiescent: boolean,
  extraFailClosed: readonly string[] = [],
): Promise<void> {
  const ctx = await state.context(world, quiescent);
  const created = new Set([...(ctx.createdWhileAgentDown ?? []), ...extraFailClosed]);
  for (const v of checkState(await world.pods(), { ...ctx, createdWhileAgentDown: created })) sink.push(v, phase);
}

/** The in-world phases, on the standard topology (the caller runs mesh-v6-off in its own world). */
export async function runCatalogPhases(
  world: World,
  state: TopologyState,
  t: ThreatModel,
  sink: PhaseSink,
): Promise<void> {
  const phases = catalogPhasesFor(t.id);
  const n0 = world.nodes[0]!;
  for (const phase of phases) {
    switch (phase) {
      case 'cni-api-error': {
        if (!world.cniApiFault) {
          sink.log('cni-api-error: skipped (the World has no cniApiFault)');
          break;
        }
        await world.cniApiFault(n0, true);
        const obs = await state.createPod(
          world,
          { ...API_LATE, node: n0, labels: { app: 'api-late' }, app: { uid: 1000, caps: [], tcpPorts: [APP_PORT] } },
          { meshDown: true },
        );
        sink.log(
          `cni-api-error: ${API_LATE.namespace}/${API_LATE.name} created while the CNI plugin on ${n0} cannot reach the API: started ${obs.started}, redirected ${obs.redirected}`,
        );
        await judgeState(world, state, phase, sink, false);
        await world.cniApiFault(n0, false);
        await world.settle();
        const healed = (await world.pods()).find((p) => p.uid === obs.uid);
        sink.log(
          `cni-api-error: API restored: started ${healed?.started ?? false}, redirected ${healed?.redirected ?? false}, served ${healed?.served ?? false}`,
        );
        await judgeState(world, state, phase, sink, true);
        break;
      }
      case 'reboot': {
        const onNode = (await world.pods()).filter((p) => p.node === n0 && !p.hostNetwork).map((p) => p.uid);
        await world.rebootNode(n0);
        const after = (await world.pods()).filter((p) => onNode.includes(p.uid));
        sink.log(
          `reboot: right after rebooting ${n0}: ${after.filter((p) => p.started).length}/${after.length} pods running (${after.filter((p) => p.started && p.redirected).length} redirected), ${after.filter((p) => !p.started).length} waiting for their sandbox`,
        );
        // Not settled: the sandboxes came back around the agent's restart. Any selected pod of the
        // node running without redirection now is the reboot-stuck bypass (upstream #60882).
        await judgeState(world, state, phase, sink, false, onNode);
        await sink.run(world, state, rebootActions(), phase, false);
        await world.settle();
        const settled = (await world.pods()).filter((p) => onNode.includes(p.uid));
        sink.log(
          `reboot: settled: ${settled.filter((p) => p.started && p.redirected && p.served).length}/${settled.length} pods running, redirected and served`,
        );
        await judgeState(world, state, phase, sink, true);
        break;
      }
      case 'hostile-annotations': {
        for (const h of HOSTILE_PODS) {
          const obs = await state.createPod(world, {
            ...h.pod,
            node: n0,
            labels: { app: h.pod.name },
            annotations: h.annotations,
            app: {
              uid: t.uids[0] ?? 1000,
              ...(t.uidSource ? { uidSource: t.uidSource } : {}),
              caps: [...t.caps],
              tcpPorts: [APP_PORT],
            },
          });
          sink.log(
            `hostile-annotations: ${h.pod.name}: started ${obs.started}, redirected ${obs.redirected}, served ${obs.served}, annotation ${obs.annotation ?? '(none)'}`,
          );
        }
        await world.settle();
        await judgeState(world, state, phase, sink, true);
        await sink.run(world, state, hostileAnnotationActions(), phase, true);
        for (const h of HOSTILE_PODS) await state.deletePod(world, h.pod);
        await world.settle();
        break;
      }
      case 'rogue-zds': {
        if (!world.zdsClient) {
          sink.log('rogue-zds: skipped (the World has no zdsClient)');
          break;
        }
        const uid = t.uids[0] ?? 0;
        const r = await world.zdsClient(n0, uid);
        sink.log(`rogue-zds: ZDS hello as uid ${uid} on ${n0}: ${r.detail}`);
        if (r.accepted) {
          sink.push(
            violation(
              'inbound-capture',
              `a non-proxy process (uid ${uid}) on ${n0} was accepted on the node agent's ZDS socket as the node proxy: it receives pod netns handles (${r.workloads} so far) and can take over their data path (finding m)`,
              { attempt: r },
            ),
            phase,
            rogueZdsActionName(uid),
          );
        }
        await world.settle();
        // The real proxy must still serve every pod, and mesh traffic must still flow.
        await judgeState(world, state, phase, sink, true);
        await sink.run(
          world,
          state,
          livenessActions(world.nodes).filter((a) => a.expect === undefined),
          phase,
          true,
        );
        break;
      }
      case 'forged-identity': {
        if (!world.forgedHbone) {
          sink.log('forged-identity: skipped (the World has no forgedHbone)');
          break;
        }
        await world.settle();
        const can = world.forgeableCredentials ?? [];
        for (const a of forgedIdentityActions(world.nodes)) {
          if (!can.includes(a.credential)) {
            sink.log(`forged-identity: skipped (this World cannot present the ${a.credential}): ${a.name}`);
            continue;
          }
          const result = await world.forgedHbone(a.node, a.identity, a.credential, a.to);
          const reached = result.deliveries.some(
            (d) => a.to.kind === 'pod' && d.pod.name === a.to.pod.name && d.pod.namespace === a.to.pod.namespace,
          );
          sink.log(
            `forged-identity: ${a.name}: certificate ${result.certificate.kind} (${result.certificate.detail}); ${result.outcome}${result.error ? ` (${result.error})` : ''}, ${reached ? 'delivered' : 'not delivered'}`,
          );
          const from = { kind: 'host', node: a.node, uid: 0, caps: [] } as const;
          const ctx = { ...(await state.context(world, true)), from, to: a.to, opts: {}, result };
          for (const v of checkConnection(ctx)) sink.push(v, phase, a.name);
          if (a.control && !(result.certificate.kind === 'issued' && reached))
            sink.push(
              violation(
                'liveness',
                `${a.name}: certificate ${result.certificate.kind}, ${reached ? 'delivered' : 'not delivered'} (${result.outcome}${result.error ? `: ${result.error}` : ''}), want issued and delivered — ${a.control}`,
                { certificate: result.certificate, outcome: result.outcome, proxyLog: result.proxyLog },
              ),
              phase,
              a.name,
            );
        }
        await world.settle();
        break;
      }
      case 'inserted-accept': {
        if (!world.appExec) {
          sink.log('inserted-accept: skipped (the World has no appExec)');
          break;
        }
        let inserted = 0;
        for (const rule of INSERTED_RULE_IDS) {
          const r = await world.appExec(ATTACKER, { kind: 'iptables-insert', rule });
          sink.log(`inserted-accept: ${rule}: ${r.ok ? 'inserted' : (r.error ?? 'failed')}`);
          if (r.ok) inserted++;
        }
        // The nftables form of the same tampering: a table of the app's own ahead of the mesh's
        // (it works against either backend: iptables' nat needs conntrack as nftables' does).
        for (const table of NFT_INSERTED_TABLE_IDS) {
          const r = await world.appExec(ATTACKER, { kind: 'nft-insert', table });
          sink.log(`inserted-accept: nft ${table}: ${r.ok ? 'inserted' : (r.error ?? 'failed')}`);
          if (r.ok) inserted++;
        }
        if (inserted === 0) break; // refused (no NET_ADMIN): nothing changed
        // A long-lived connection opened while the ACCEPT applies (before any repair pass can run:
        // no simulated time passes in between in the sim; the real worlds may race a pass).
        const held = world.holdConnection
          ? await world.holdConnection({ kind: 'pod', pod: ATTACKER }, { kind: 'pod', pod: SINK, port: APP_PORT })
          : undefined;
        if (!held) sink.log('inserted-accept: held connection skipped (the World has no holdConnection)');
        else
          sink.log(
            `inserted-accept: held connection to the sink: ${held.outcome}, first hop ${held.acceptedBy ?? 'none'}`,
          );
        // The app stops here: whatever the repair loop does not undo by the settle stays.
        await world.settle();
        if (held) {
          const sent = await held.send();
          sink.log(
            `inserted-accept: held connection after the settle: ${sent.delivered ? 'delivered' : 'not delivered'} (${sent.detail})`,
          );
          if (held.acceptedBy === 'app' && sent.delivered) {
            const escaped = violation(
              'outbound-capture',
              `a connection the attacker opened past the proxy while its inserted ACCEPT applied still carries data after the settle: the repair left the escaped flow (${sent.detail})`,
              { acceptedBy: held.acceptedBy, detail: sent.detail },
            );
            sink.push(escaped, phase, 'held attacker tcp → sink');
            sink.push(
              violation('convergence', `the escaped flow outlived the repair loop: ${escaped.message}`, {
                cause: escaped,
              }),
              phase,
              'held attacker tcp → sink',
            );
          }
          await held.close();
        }
        if (world.driftRepairs) {
          const repairs = (await world.driftRepairs()).filter(
            (r) => r.pod === `${ATTACKER.namespace}/${ATTACKER.name}`,
          );
          for (const r of repairs)
            sink.log(
              `inserted-accept: drift repaired on ${r.node} for ${r.pod}: window ≤ ${r.windowMs ?? 'unknown'} ms, flows ended ${r.flowsEnded ?? 'none (profile ends none)'}; foreign: ${r.foreign}`,
            );
          if (repairs.length === 0) sink.log('inserted-accept: no drift repair reported for the attacker');
        }
        const found = await sink.run(world, state, insertedAcceptActions(), phase, true);
        for (const v of found.filter((x) => x.property === 'outbound-capture'))
          sink.push(
            violation(
              'convergence',
              `after a settle the attacker's inserted ACCEPT still applies (the repair loop left it): ${v.message}`,
              { cause: v },
            ),
            phase,
          );
        break;
      }
      case 'pending-destination': {
        if (!world.appExec) {
          sink.log('pending-destination: skipped (the World has no appExec)');
          break;
        }
        const name = `${PENDING_SQUATTER.namespace}/${PENDING_SQUATTER.name}`;
        await createThreatAppPod(world, state, t, PENDING_SQUATTER, n0);
        await world.settle();
        await state.setComponent(world, 'proxy', n0, 'down');
        const held = await world.appExec(PENDING_SQUATTER, { kind: 'listen', port: 15006, reusePort: t.uids[0] === 0 });
        await state.setComponent(world, 'proxy', n0, 'up');
        await world.settle();
        const obs = (await world.pods()).find(
          (p) => p.namespace === PENDING_SQUATTER.namespace && p.name === PENDING_SQUATTER.name,
        );
        sink.log(
          `pending-destination: ${name} listens on its 15006 while ${n0}'s proxy is stopped: ${held.ok ? 'ok' : (held.error ?? 'failed')}; after the restart and a settle: redirected ${obs?.redirected ?? false}, served ${obs?.served ?? false}, annotation ${obs?.annotation ?? '(none)'}`,
        );
        // Not staged (the listen failed, or the pod is not pending): said as a skip, so the report
        // lists it (check's "Attack-catalog phases this world could not stage"), never judged as holds.
        if (!held.ok || obs?.annotation !== 'pending')
          sink.log(
            `pending-destination: skipped (not staged: ${held.ok ? `${name} is not pending (annotation ${obs?.annotation ?? '(none)'})` : `${name} could not listen on 15006: ${held.error ?? 'failed'}`})`,
          );
        else {
          const found = await sink.run(world, state, pendingDestinationActions(), phase, true);
          for (const v of found.filter((x) => x.property === 'inbound-capture'))
            sink.push(
              violation(
                'fail-closed',
                `a mesh peer's node proxy sent plaintext to ${name}, selected for the mesh but served by no node proxy (pending): it must fail closed until the pod is served, not downgrade — ${v.message}`,
                { cause: v },
              ),
              phase,
              pendingDestinationActions()[0]!.name,
            );
        }
        await state.deletePod(world, PENDING_SQUATTER);
        await world.settle();
        break;
      }
      case 'squat-before-enrollment':
        await runSquatBeforeEnrollment(world, state, t, n0, sink);
        break;
      case 'live-enrollment':
        await runLiveEnrollment(world, state, n0, sink);
        break;
      case 'mesh-v6-off':
        break; // its own world: runMeshV6Off
    }
  }
}

/** A pod on `node` whose app runs as the threat's app (its uid, uid source and capabilities), serving APP_PORT. */
async function createThreatAppPod(
  world: World,
  state: TopologyState,
  t: ThreatModel,
  pod: PodRef,
  node: string,
): Promise<void> {
  await state.createPod(world, {
    ...pod,
    node,
    labels: { app: pod.name },
    app: {
      uid: t.uids[0] ?? 1000,
      ...(t.uidSource ? { uidSource: t.uidSource } : {}),
      caps: [...t.caps],
      tcpPorts: [APP_PORT],
    },
  });
}

async function runSquatBeforeEnrollment(
  world: World,
  state: TopologyState,
  t: ThreatModel,
  node: string,
  sink: PhaseSink,
): Promise<void> {
  const phase = 'squat-before-enrollment';
  if (!world.appExec) {
    sink.log(`${phase}: skipped (the World has no appExec)`);
    return;
  }
  const name = `${EARLY_SQUATTER.namespace}/${EARLY_SQUATTER.name}`;
  await createThreatAppPod(world, state, t, EARLY_SQUATTER, node);
  await world.settle();
  try {
    // Before any proxy serves the pod: nothing holds 15006 in its netns yet, so no restart is needed.
    const held = await world.appExec(EARLY_SQUATTER, { kind: 'listen', port: 15006, reusePort: t.uids[0] === 0 });
    await world.labelPod(EARLY_SQUATTER, { [DATAPLANE_MODE]: 'ambient' });
    await world.settle();
    const obs = (await world.pods()).find(
      (p) => p.namespace === EARLY_SQUATTER.namespace && p.name === EARLY_SQUATTER.name,
    );
    sink.log(
      `${phase}: ${name} listens on its 15006 before enrollment: ${held.ok ? 'ok' : (held.error ?? 'failed')}; labelled ambient, after a settle: redirected ${obs?.redirected ?? false}, served ${obs?.served ?? false}, annotation ${obs?.annotation ?? '(none)'}`,
    );
    // Not staged (the listen failed, or a proxy serves the pod after all): a skip, never judged as holds.
    if (!held.ok || obs?.redirected !== true || obs.served)
      sink.log(
        `${phase}: skipped (not staged: ${held.ok ? `${name} is not redirected-and-unserved (redirected ${obs?.redirected ?? false}, served ${obs?.served ?? false})` : `${name} could not listen on 15006: ${held.error ?? 'failed'}`})`,
      );
    else await sink.run(world, state, earlySquatterActions(), phase, true);
  } finally {
    await state.deletePod(world, EARLY_SQUATTER);
    await world.settle();
  }
}

async function runLiveEnrollment(world: World, state: TopologyState, node: string, sink: PhaseSink): Promise<void> {
  const phase = 'live-enrollment';
  if (!world.holdConnection) {
    sink.log(`${phase}: skipped (the World has no holdConnection)`);
    return;
  }
  const name = `${LIVE_ENROLLEE.namespace}/${LIVE_ENROLLEE.name}`;
  await state.createPod(world, {
    ...LIVE_ENROLLEE,
    node,
    labels: { app: LIVE_ENROLLEE.name },
    app: { uid: 1000, caps: [], tcpPorts: [APP_PORT] },
  });
  await world.settle();
  const held = [
    {
      action: LIVE_ENROLLMENT_ACTIONS.inbound,
      property: 'inbound-capture' as const,
      conn: await world.holdConnection(
        { kind: 'pod', pod: CLIENT },
        { kind: 'pod', pod: LIVE_ENROLLEE, port: APP_PORT },
      ),
    },
    {
      action: LIVE_ENROLLMENT_ACTIONS.outbound,
      property: 'outbound-capture' as const,
      conn: await world.holdConnection({ kind: 'pod', pod: LIVE_ENROLLEE }, { kind: 'pod', pod: SINK, port: APP_PORT }),
    },
  ];
  try {
    for (const h of held)
      sink.log(`${phase}: ${h.action} before enrollment: ${h.conn.outcome}, first hop ${h.conn.acceptedBy ?? 'none'}`);
    const unstaged = held.filter((h) => h.conn.outcome !== 'established' || h.conn.acceptedBy !== 'app');
    if (unstaged.length > 0) {
      // Not staged: said as a skip (listed by check), never judged as holds.
      sink.log(
        `${phase}: skipped (not staged: ${unstaged.map((h) => `${h.action} was ${h.conn.outcome} with first hop ${h.conn.acceptedBy ?? 'none'}, not established to the app`).join('; ')})`,
      );
      return;
    }
    await world.labelPod(LIVE_ENROLLEE, { [DATAPLANE_MODE]: 'ambient' });
    await world.settle();
    const obs = (await world.pods()).find(
      (p) => p.namespace === LIVE_ENROLLEE.namespace && p.name === LIVE_ENROLLEE.name,
    );
    sink.log(
      `${phase}: ${name} labelled ambient, after a settle: redirected ${obs?.redirected ?? false}, served ${obs?.served ?? false}`,
    );
    for (const h of held) {
      const sent = await h.conn.send();
      sink.log(
        `${phase}: ${h.action} after enrollment: ${sent.delivered ? 'delivered' : 'not delivered'} (${sent.detail})`,
      );
      if (sent.delivered)
        sink.push(
          violation(
            h.property,
            `a connection open when ${name} was enrolled still carries data past its node proxy after the settle (${sent.detail}): enrollment must end it, not let it go on uncaptured`,
            { action: h.action, detail: sent.detail },
          ),
          phase,
          h.action,
        );
    }
  } finally {
    for (const h of held) await h.conn.close();
    await state.deletePod(world, LIVE_ENROLLEE);
    await world.settle();
  }
}

function rogueZdsActionName(uid: number): string {
  return `(rogue-zds phase: ZDS hello as uid ${uid})`;
}

interface WorldCreator {
  create(options: WorldOptions): Promise<World>;
}

/**
 * mesh-v6-off: a fresh dual-stack world whose mesh installs only v4 rules, the standard
 * topology, the IPv6 attempts. A world that cannot build it says 'unsupported': logged, skipped.
 */
export async function runMeshV6Off(
  factory: WorldCreator,
  profile: Profile,
  t: ThreatModel,
  seed: number,
  mesh: Parameters<typeof buildTopology>[2],
  sink: PhaseSink,
): Promise<void> {
  if (!catalogPhasesFor(t.id).includes('mesh-v6-off')) return;
  let world: World;
  try {
    world = await factory.create({
      nodes: 2,
      profile,
      kernelVersion: t.kernelVersion,
      ipv6: true,
      meshV6: false,
      dnsCapture: true,
      seed,
    });
  } catch (e) {
    const msg = e instanceof Error ? e.message : String(e);
    if (/unsupported/i.test(msg)) {
      sink.log(`mesh-v6-off: skipped (${msg})`);
      return;
    }
    throw e;
  }
  try {
    const state = await buildTopology(world, t, mesh);
    await sink.run(world, state, meshV6OffActions(t), 'mesh-v6-off', true);
  } finally {
    await world.close();
  }
}
