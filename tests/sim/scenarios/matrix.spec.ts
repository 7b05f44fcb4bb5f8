/**
 * The security matrix on the sim world: every cell's observed verdict must match the expected
 * table (scenarios/expected/table.ts) in both directions, for both profiles and both rules backends.
 */
import { test, expect } from '@playwright/test';
import { simWorldFactory } from '../../../scenarios/worlds/sim-world.js';
import { runMatrix, runThreatDetailed, type MatrixCell } from '../../../scenarios/attacks/matrix.js';
import { validateExpectedTable } from '../../../scenarios/expected/table.js';
import { THREATS, threat } from '../../../scenarios/threats/threats.js';
import { ATTACKS } from '../../../scenarios/attacks/catalog.js';
import { matrixActionNames } from '../../../scenarios/attacks/actions.js';

test('the expected table is complete and every bypass names a class', () => {
  expect(validateExpectedTable()).toEqual([]);
});

test('every catalog entry run by the matrix names actions the matrix runs for its threat', () => {
  const missing: string[] = [];
  for (const a of ATTACKS) {
    if (a.runBy.kind !== 'matrix') continue;
    const names = matrixActionNames(threat(a.runBy.threat), ['node-0', 'node-1']);
    for (const n of a.runBy.actions) if (!n.startsWith('(') && !names.includes(n)) missing.push(`${a.id}: ${n}`);
  }
  expect(missing).toEqual([]);
});

function describe(c: MatrixCell): string {
  const ex = c.violations[0];
  return `${c.property} × ${c.threat} × ${c.profile}: expected ${c.expected.verdict}, observed ${c.observed}${ex ? ` — e.g. [${ex.phase}] ${ex.action ?? ''}: ${ex.violation.message}` : ''}${c.note ? ` (${c.note})` : ''}`;
}

for (const backend of ['iptables', 'nftables'] as const)
  for (const profile of ['upstream', 'strict'] as const) {
    for (const t of THREATS) {
      const column = backend === 'iptables' ? profile : `${profile}/${backend}`;
      test(`matrix ${column} × ${t.id}: observed verdicts match the expected table`, async () => {
        test.setTimeout(120_000);
        const m = await runMatrix({ factory: simWorldFactory, profiles: [profile], threats: [t.id], backend });
        const wrong = m.cells
          .filter((c) => c.status === 'unexpected-bypass' || c.status === 'missed-bypass')
          .map(describe);
        expect(wrong).toEqual([]);
        // The sim has World.appExec: the NET_ADMIN-flush and port-hijack cells are all evaluated.
        expect(m.cells.filter((c) => c.status === 'not-evaluated').map(describe)).toEqual([]);
      });
    }
  }

// finding-l by itself (the strict cells of the capability threats are bypasses for other reasons
// too): what the port-hijack phase finds, and how the attacker bound.
for (const [profile, id, found] of [
  ['upstream', 'app-nonroot', true],
  ['strict', 'app-nonroot', false],
  ['strict', 'app-net-raw-6.1', true],
] as const) {
  test(`port-hijack phase, ${profile} × ${id}: ${found ? 'inbound reaches the squatter' : "strict's TPROXY gives the plain squatter nothing"}`, async () => {
    const run = await runThreatDetailed(simWorldFactory, profile, threat(id), { catalogPhases: false });
    const hijack = run.found.filter((f) => f.phase === 'port-hijack');
    // NET_RAW (effective as root) allows IP_TRANSPARENT; without it the kernel says EPERM and
    // the app binds a plain listener.
    if (id === 'app-net-raw-6.1') expect(run.appExecLog).toContain('listen 15006 SO_REUSEPORT IP_TRANSPARENT: ok');
    else {
      expect(run.appExecLog.find((l) => l.startsWith('listen 15006 IP_TRANSPARENT: '))).toContain('EPERM');
      expect(run.appExecLog).toContain('listen 15006: ok');
    }
    if (found) {
      expect(hijack.map((f) => f.violation.property)).toContain('inbound-capture');
      expect(hijack.map((f) => f.violation.property)).toContain('authorization');
    } else expect(hijack).toEqual([]);
  });
}
