/**
 * Field-by-field comparison of what the simulator and the real kernel said about the same lab
 * attempts. What user space cannot observe is normalised away, once, here:
 * - UDP: `no-socket` and `dropped` both read as `not-delivered` (no ICMP is read back);
 *   the receiver's local address is not compared (it needs IP_PKTINFO).
 * - Ports the kernel picks (ephemeral source ports, also after MASQUERADE) are random:
 *   `sourceSeen` compares addresses only.
 * - `reason` and `trace` are prose and are never compared.
 */
import type { AttemptResult, ListenerResult } from '../../sim/lab/run-lab.js';

export type ComparedField = 'outcome' | 'acceptedBy' | 'originalDst' | 'sourceSeen' | 'localSeen';

export interface Difference {
  /** The attempt; for field `bind`, the lab socket. */
  readonly attempt: string;
  /** `bind`: a listener's outcome (listening, or the errno of its setup). */
  readonly field: ComparedField | 'bind';
  readonly sim: string | undefined;
  readonly kernel: string | undefined;
}

const UDP_NOT_DELIVERED = new Set(['no-socket', 'dropped', 'not-delivered']);

function hostOf(endpoint: string | undefined): string | undefined {
  if (endpoint === undefined) return undefined;
  const m = /^\[(.*)\]:\d+$/.exec(endpoint) ?? /^(.*):\d+$/.exec(endpoint);
  return m ? m[1] : endpoint;
}

/** The observable view of one result; `udp` selects the UDP normalisations. */
export function observable(r: AttemptResult, udp: boolean): Record<ComparedField, string | undefined> {
  const lost = udp && UDP_NOT_DELIVERED.has(r.outcome);
  return {
    outcome: lost ? 'not-delivered' : r.outcome,
    acceptedBy: r.acceptedBy,
    originalDst: udp ? undefined : r.originalDst,
    // The model names where an undelivered datagram was headed; nobody saw it there.
    sourceSeen: lost ? undefined : hostOf(r.sourceSeen),
    localSeen: udp ? undefined : r.localSeen,
  };
}

/** Every difference, attempt by attempt and field by field; `udpAttempts` names the UDP ones. */
export function compareResults(
  sim: readonly AttemptResult[],
  kernel: readonly AttemptResult[],
  udpAttempts: ReadonlySet<string> = new Set(),
): Difference[] {
  const out: Difference[] = [];
  const byName = new Map(kernel.map((k) => [k.name, k]));
  for (const s of sim) {
    const k = byName.get(s.name);
    if (!k) {
      out.push({ attempt: s.name, field: 'outcome', sim: s.outcome, kernel: '(not run)' });
      continue;
    }
    const udp = udpAttempts.has(s.name);
    const a = observable(s, udp);
    const b = observable(k, udp);
    for (const f of Object.keys(a) as ComparedField[]) {
      if (a[f] !== b[f]) out.push({ attempt: s.name, field: f, sim: a[f], kernel: b[f] });
    }
  }
  return out;
}

/** Listeners whose outcome differs (a socket only one side has counts as `(not run)` on the other). */
export function compareListeners(sim: readonly ListenerResult[], kernel: readonly ListenerResult[]): Difference[] {
  const byName = new Map(kernel.map((k) => [k.name, k]));
  return sim
    .filter((s) => byName.get(s.name)?.outcome !== s.outcome)
    .map((s) => ({
      attempt: s.name,
      field: 'bind' as const,
      sim: s.outcome,
      kernel: byName.get(s.name)?.outcome ?? '(not run)',
    }));
}

export function formatDifferences(
  diffs: readonly Difference[],
  sim: readonly AttemptResult[],
  kernel: readonly AttemptResult[],
): string {
  if (diffs.length === 0) return 'no differences between the simulation and the real kernel';
  const lines: string[] = [`${diffs.length} difference(s) between the simulation and the real kernel:`];
  for (const d of diffs.filter((x) => x.field === 'bind'))
    lines.push(`== socket ${d.attempt}`, `   bind         sim: ${d.sim ?? '-'}    kernel: ${d.kernel ?? '-'}`);
  const names = [...new Set(diffs.filter((d) => d.field !== 'bind').map((d) => d.attempt))];
  for (const n of names) {
    lines.push(`== ${n}`);
    for (const d of diffs.filter((x) => x.attempt === n && x.field !== 'bind')) {
      lines.push(`   ${d.field.padEnd(12)} sim: ${d.sim ?? '-'}    kernel: ${d.kernel ?? '-'}`);
    }
    const s = sim.find((r) => r.name === n);
    const k = kernel.find((r) => r.name === n);
    if (s) lines.push(`   sim why:     ${s.reason}`);
    if (k) lines.push(`   kernel why:  ${k.reason}`);
  }
  return lines.join('\n');
}
