/**
 * The attack-catalog phases (scenarios/attacks/catalog-phases.ts) on the sim: every catalog entry
 * staged by a phase gets its expected verdict per profile — an expected bypass is found by that
 * phase, an expected "holds" leaves the phase without any violation — and the situations are
 * really staged (the pod waits while the CNI plugin cannot reach the API, the node reboots,
 * hostile annotations are refused and reach no rule text, the rogue ZDS client is rejected). A
 * positive control shows the rogue-zds phase would report an agent that accepted the client.
 */
import { test, expect } from '@playwright/test';
import { createSimWorld, simWorldFactory, type SimMeshWorld } from '../../../scenarios/worlds/sim-world.js';
import { runThreatDetailed, type ThreatRun } from '../../../scenarios/attacks/matrix.js';
import { ATTACKS } from '../../../scenarios/attacks/catalog.js';
import { CATALOG_PHASES, catalogPhasesFor } from '../../../scenarios/attacks/catalog-phases.js';
import { expectedCell } from '../../../scenarios/expected/table.js';
import { HOSTILE_PODS, MESH_NS } from '../../../scenarios/attacks/topology.js';
import { threat, type ThreatId } from '../../../scenarios/threats/threats.js';
import type { Profile, WorldOptions } from '../../../scenarios/world.js';

const runs = new Map<string, Promise<ThreatRun>>();
/** One run per threat × profile, shared by the tests below (the matrix without the appExec phases). */
function runOf(t: ThreatId, profile: Profile): Promise<ThreatRun> {
  const key = `${t}/${profile}`;
  if (!runs.has(key)) runs.set(key, runThreatDetailed(simWorldFactory, profile, threat(t), { appExecPhases: false }));
  return runs.get(key)!;
}

test('every catalog phase is staged by exactly the catalog entries that name it', () => {
  for (const phase of CATALOG_PHASES) {
    const entries = ATTACKS.filter((a) => a.runBy.kind === 'matrix' && a.runBy.phase === phase);
    expect(entries.length, phase).toBeGreaterThan(0);
    // One entry per threat a phase runs for (squat-before-enrollment: as uid 1000 and as root).
    const threats = entries.map((e) => (e.runBy.kind === 'matrix' ? e.runBy.threat : undefined));
    expect(new Set(threats).size, phase).toBe(entries.length);
    for (const e of entries) if (e.runBy.kind === 'matrix') expect(catalogPhasesFor(e.runBy.threat)).toContain(phase);
  }
  expect(catalogPhasesFor('outside')).toEqual([]);
  // Every entry of the catalog is run by the matrix now; none is left as not expressible.
  expect(ATTACKS.filter((a) => a.runBy.kind !== 'matrix').map((a) => a.id)).toEqual([]);
});

for (const entry of ATTACKS) {
  if (entry.runBy.kind !== 'matrix' || entry.runBy.phase === undefined) continue;
  const { phase, threat: t } = entry.runBy;
  for (const profile of ['upstream', 'strict'] as const) {
    const want = entry.expected[profile];
    test(`catalog ${entry.id} × ${profile}: ${want.verdict === 'bypass' ? `the ${phase} phase finds the ${want.property} bypass` : `nothing breaks in the ${phase} phase`}`, async () => {
      test.setTimeout(180_000);
      const run = await runOf(t, profile);
      const inPhase = run.found.filter((f) => f.phase === phase);
      if (want.verdict === 'bypass') {
        expect(inPhase.filter((f) => f.violation.property === want.property).length).toBeGreaterThan(0);
        // The table agrees: this threat × profile expects that property to be broken.
        expect(expectedCell(want.property!, t, profile).verdict).toBe('bypass');
      } else {
        expect(inPhase.map((f) => `${f.action ?? 'state'}: ${f.violation.property}: ${f.violation.message}`)).toEqual(
          [],
        );
      }
      // The phase ran (it was not skipped for a missing World capability).
      expect(run.catalogLog.filter((l) => l.includes('skipped'))).toEqual([]);
    });
  }
}

test('ipv6-without-v6-rules (upstream): every v6 attempt in the v4-only mesh is a finding, out and in', async () => {
  test.setTimeout(180_000);
  const run = await runOf('app-nonroot', 'upstream');
  const by = (a: string) =>
    run.found.filter((f) => f.phase === 'mesh-v6-off' && f.action === a).map((f) => f.violation.property);
  expect(by('v4-only mesh: attacker tcp6 → sink')).toContain('outbound-capture');
  expect(by('v4-only mesh: attacker udp6 → sink')).toContain('outbound-capture');
  expect(by('v4-only mesh: outside tcp6 → victim')).toEqual(
    expect.arrayContaining(['inbound-capture', 'authorization']),
  );
  expect(by('v4-only mesh: client tcp6 → victim')).toEqual(
    expect.arrayContaining(['inbound-capture', 'authorization']),
  );
});

test('the staged situations happened: the pod waited for the API, the node rebooted and recovered, the rogue client was turned away', async () => {
  test.setTimeout(180_000);
  const log = (await runOf('app-nonroot', 'strict')).catalogLog.join('\n');
  expect(log).toContain(
    'cni-api-error: mesh/api-late created while the CNI plugin on node-0 cannot reach the API: started false',
  );
  expect(log).toContain('cni-api-error: API restored: started true, redirected true, served true');
  expect(log).toMatch(/reboot: right after rebooting node-0: /);
  const settled = /reboot: settled: (\d+)\/(\d+) pods running, redirected and served/.exec(log);
  expect(settled).not.toBeNull();
  expect(Number(settled![2])).toBeGreaterThan(0);
  expect(settled![1]).toBe(settled![2]);
  const rogue = (await runOf('host-root', 'strict')).catalogLog.join('\n');
  expect(rogue).toMatch(/rogue-zds: ZDS hello as uid 0 on node-0: not accepted/);
});

test('rogue-zds positive control: an agent that also trusts uid 0 accepts the rogue client, and the phase reports it', async () => {
  test.setTimeout(180_000);
  const lax = { create: (o: WorldOptions) => createSimWorld(o, { agentConfig: { allowedProxyUids: [1337, 0] } }) };
  const run = await runThreatDetailed(lax, 'strict', threat('host-root'), { appExecPhases: false });
  const found = run.found.filter((f) => f.phase === 'rogue-zds' && f.violation.property === 'inbound-capture');
  expect(found.map((f) => f.violation.message)).toEqual([
    expect.stringContaining("was accepted on the node agent's ZDS socket as the node proxy"),
  ]);
  // strict × host-root expects inbound capture to hold, so the matrix would report it as unexpected.
  expect(expectedCell('inbound-capture', 'host-root', 'strict').verdict).toBe('holds');
});

for (const profile of ['strict', 'upstream'] as const) {
  const how =
    profile === 'strict'
      ? 'invalid values are refused at ADD'
      : 'values upstream cannot parse are ignored (the pods start captured)';
  test(`hostile annotations (${profile}): ${how}, unread ones change nothing, a forged status skips nothing, and no value reaches any rule text`, async () => {
    const w: SimMeshWorld = await createSimWorld({
      nodes: 2,
      profile,
      kernelVersion: '6.1',
      ipv6: true,
      dnsCapture: true,
      seed: 4,
    });
    try {
      await w.createNamespace(MESH_NS, { 'istio.io/dataplane-mode': 'ambient' });
      const obs = new Map<string, Awaited<ReturnType<SimMeshWorld['createPod']>>>();
      for (const h of HOSTILE_PODS)
        obs.set(
          h.pod.name,
          await w.createPod({
            ...h.pod,
            node: 'node-0',
            annotations: h.annotations,
            app: { uid: 1000, caps: [], tcpPorts: [8080] },
          }),
        );
      const refused = profile === 'strict' ? ['hostile-inject', 'hostile-huge'] : [];
      for (const name of refused) expect(obs.get(name)!.started, name).toBe(false);
      for (const name of HOSTILE_PODS.map((h) => h.pod.name).filter((n) => !refused.includes(n))) {
        expect(obs.get(name), name).toMatchObject({
          started: true,
          redirected: true,
          served: true,
          annotation: 'enabled',
        });
      }
      // The refusal or the ignored value names the annotation (a Warning the operator can read).
      expect(w.log.entries.some((e) => JSON.stringify(e).includes('istio.io/reroute-virtual-interfaces'))).toBe(true);
      // No netns on any node holds text from a hostile value.
      const dumps: string[] = [];
      for (const n of w.sim.nodes) {
        dumps.push(w.sim.kernel.iptablesSave(n.hostNetns, 4), w.sim.kernel.iptablesSave(n.hostNetns, 6));
        for (const r of n.disk.sandboxes.values())
          if (r.netns && w.sim.kernel.hasNetns(r.netns))
            dumps.push(w.sim.kernel.iptablesSave(r.netns, 4), w.sim.kernel.iptablesSave(r.netns, 6));
      }
      const text = dumps.join('\n');
      expect(text).toContain('--to-ports 15001'); // the dumps are real rule text
      for (const needle of [
        '-I ISTIO_OUTPUT 1',
        'true -j ACCEPT',
        'xxxxxxxxxx',
        '-F\n',
        '99999',
        '0x1f90',
        '0.0.0.0/0 -j RETURN',
      ])
        expect(text, needle).not.toContain(needle);
      // Upstream keeps the valid name of hostile-huge's list ("eth0,xxx…"), as upstream does.
      expect(text.includes('-A ISTIO_PRERT -i eth0 -p tcp -j REDIRECT --to-ports 15001')).toBe(profile === 'upstream');
    } finally {
      await w.close();
    }
  });
}

for (const profile of ['upstream', 'strict'] as const) {
  const strict = profile === 'strict';
  test(`catalog net-admin-insert × ${profile}: the connection held through the inserted ACCEPT ${strict ? 'is ended by the repair, whose window the log reports' : 'still carries data (upstream ends nothing)'}`, async () => {
    test.setTimeout(180_000);
    const run = await runOf('app-net-admin', profile);
    const lines = run.catalogLog.filter((l) => l.startsWith('inserted-accept: '));
    expect(lines).toContain('inserted-accept: held connection to the sink: established, first hop app');
    const after = lines.find((l) => l.startsWith('inserted-accept: held connection after the settle: '));
    expect(after, lines.join('\n')).toMatch(strict ? /: not delivered \(the connection was ended/ : /: delivered /);
    const repaired = lines.filter((l) => l.startsWith('inserted-accept: drift repaired on '));
    if (strict) {
      expect(repaired, lines.join('\n')).toHaveLength(1);
      expect(repaired[0]).toMatch(
        /for mesh\/attacker: window ≤ \d+ ms, flows ended 1; foreign: ipv4 nat: built-in chain OUTPUT holds/,
      );
    } else {
      expect(repaired).toEqual([]);
      const held = run.found.filter((f) => f.phase === 'inserted-accept' && f.action === 'held attacker tcp → sink');
      expect(held.map((f) => f.violation.property).sort()).toEqual(['convergence', 'outbound-capture']);
    }
  });
}

for (const profile of ['upstream', 'strict'] as const) {
  test(`catalog live-enrollment × ${profile}: both connections held across the enrollment are ended (reset), none carries data after it`, async () => {
    test.setTimeout(180_000);
    const run = await runOf('app-nonroot', profile);
    const lines = run.catalogLog.filter((l) => l.startsWith('live-enrollment: '));
    expect(lines, lines.join('\n')).toEqual(
      expect.arrayContaining([
        'live-enrollment: held client tcp → live enrollee before enrollment: established, first hop app',
        'live-enrollment: held live enrollee tcp → sink before enrollment: established, first hop app',
        'live-enrollment: plain/live-enrollee labelled ambient, after a settle: redirected true, served true',
      ]),
    );
    for (const action of ['held client tcp → live enrollee', 'held live enrollee tcp → sink'])
      expect(lines.find((l) => l.startsWith(`live-enrollment: ${action} after enrollment: `))).toMatch(
        /: not delivered/,
      );
    expect(run.found.filter((f) => f.phase === 'live-enrollment')).toEqual([]);
  });
}

test('live-enrollment positive control: redirects that take only SYNs (the declined upstream fix) let both held connections go on uncaptured, and the phase reports them', async () => {
  test.setTimeout(180_000);
  // Upstream's capture rules with `--syn`: a connection picked up mid-stream is not redirected.
  const SYN = '--tcp-flags FIN,SYN,RST,ACK SYN';
  const synOnly = (text: string): string =>
    text
      .replace(/^(-A ISTIO_PRERT .*-p tcp -m tcp)( .*-j REDIRECT --to-ports 15006)$/gm, `$1 ${SYN}$2`)
      .replace(/^(-A ISTIO_OUTPUT .*-p tcp)( -m mark .*-j REDIRECT --to-ports 15001)$/gm, `$1 -m tcp ${SYN}$2`);
  const lax = {
    create: (o: WorldOptions) =>
      createSimWorld(o, {
        mutatePlan: (plan) => ({
          ...plan,
          iptables: {
            ...(plan.iptables.ipv4 !== undefined ? { ipv4: synOnly(plan.iptables.ipv4) } : {}),
            ...(plan.iptables.ipv6 !== undefined ? { ipv6: synOnly(plan.iptables.ipv6) } : {}),
          },
        }),
      }),
  };
  const run = await runThreatDetailed(lax, 'upstream', threat('app-nonroot'), { appExecPhases: false });
  const found = run.found.filter((f) => f.phase === 'live-enrollment');
  expect(found.map((f) => [f.action, f.violation.property]).sort()).toEqual([
    ['held client tcp → live enrollee', 'inbound-capture'],
    ['held live enrollee tcp → sink', 'outbound-capture'],
  ]);
  // The phase's own entry expects both profiles to hold.
  expect(ATTACKS.find((a) => a.id === 'live-enrollment')?.expected.upstream.verdict).toBe('holds');
});
