/**
 * Every known difference between the simulated kernel and Linux, in one place. Each entry says
 * what differs and why, gives a lab that shows it, and the observable difference; a test
 * (tests/netns/fidelity/known-divergences.spec.ts) asserts each one still exists exactly as
 * documented, so a fixed divergence is noticed and removed from this list.
 *
 * `explainKnown` lets the differential property skip differences these entries explain. A
 * difference not explained here is a model bug.
 */
import { readFileSync } from 'node:fs';
import { parseLab, type Lab } from '../../sim/lab/lab-file.js';
import type { AttemptResult } from '../../sim/lab/run-lab.js';
import type { Difference } from './compare.js';

interface KnownDivergence {
  readonly name: string;
  /** What differs, and why. */
  readonly description: string;
  /** A lab that shows the divergence. */
  readonly lab: () => Lab;
  /** The differences the lab shows: attempt, field, sim value, kernel value. */
  readonly expected: readonly Difference[];
  /** Does this divergence explain difference `d` of a generated case? */
  readonly explains: (
    lab: Lab,
    d: Difference,
    sim: readonly AttemptResult[],
    kernel: readonly AttemptResult[],
  ) => boolean;
}

const REJECT_RST_FIXTURE = 'fixtures/fidelity/reject-rst-dropped-seed-20260103.yaml';

/**
 * Could IPv6 neighbour discovery be dropped by this lab's rules? A DROP/REJECT rule in a chain
 * that NS/NA messages traverse (they are untracked, so never nat) and not limited to TCP/UDP.
 * Deliberately syntactic and narrow: rules reached only through a user chain are not considered.
 */
function mayDropNeighbourDiscovery(lab: Lab): boolean {
  for (const n of lab.namespaces) {
    if (n.nftables !== undefined && nftMayDropNeighbourDiscovery(n.nftables)) return true;
    // Per table: its rules by chain, then the chains ND's hooks reach (built-ins and the user chains they jump or go to).
    const tables = new Map<string, { chain: string; line: string }[]>();
    let table = '';
    for (const raw of (n.ip6tables ?? '').split('\n')) {
      const line = raw.trim();
      if (line.startsWith('*')) table = line.slice(1);
      const m = /^-[AI] (\S+)/.exec(line);
      if (m && table !== 'nat') tables.set(table, [...(tables.get(table) ?? []), { chain: m[1]!, line }]);
    }
    for (const rules of tables.values()) {
      const reached = new Set(['INPUT', 'OUTPUT', 'PREROUTING', 'POSTROUTING']);
      for (let grew = true; grew;) {
        grew = false;
        for (const r of rules) {
          const target = /-[jg] (\S+)/.exec(r.line)?.[1];
          if (reached.has(r.chain) && target && rules.some((x) => x.chain === target) && !reached.has(target)) {
            reached.add(target);
            grew = true;
          }
        }
      }
      for (const r of rules) {
        if (!reached.has(r.chain) || !/-j (DROP|REJECT)\b/.test(r.line)) continue;
        const proto = /(!\s+)?-p\s+(\S+)/.exec(r.line);
        if (!proto || (!proto[1] && /^(ipv6-icmp|icmpv6|icmp6|58)$/.test(proto[2] ?? ''))) return true;
      }
    }
  }
  return false;
}

/**
 * The nftables side of mayDropNeighbourDiscovery: a `drop`/`reject` rule or a `policy drop` in a
 * non-nat chain of an ip6 or inet table, at a hook ND passes (not forward), not limited to TCP/UDP
 * (`th` and `!=` do not limit: `th dport` reads ICMPv6's checksum on Linux). Every regular chain of
 * such a table counts, reached or not. Reads both the block form and the command form.
 */
function nftMayDropNeighbourDiscovery(doc: string): boolean {
  const limited = (line: string): boolean =>
    /\b(tcp|udp) (dport|sport|flags)\b|meta l4proto (tcp|udp|\{ tcp, udp \})\b/.test(line);
  // chain key -> its head (type/hook), from block heads and `add chain` lines
  const heads = new Map<string, string>();
  const rules: { table: string; chain: string; family: string; line: string }[] = [];
  let family = '';
  let table = '';
  let chain = '';
  for (const raw of doc.split('\n')) {
    const line = raw.trim();
    const t = /^table (\S+) (\S+) \{/.exec(line);
    if (t) [family, table, chain] = [t[1]!, t[2]!, ''];
    const c = /^chain (\S+) \{/.exec(line);
    if (c) chain = c[1]!;
    const ac = /^add chain (\S+) (\S+) (\S+)(.*)$/.exec(line);
    if (ac) heads.set(`${ac[1]} ${ac[2]} ${ac[3]}`, ac[4] ?? '');
    const ar = /^add rule (\S+) (\S+) (\S+) (.*)$/.exec(line);
    if (ar) rules.push({ family: ar[1]!, table: ar[2]!, chain: ar[3]!, line: ar[4]! });
    else if (!t && !c && chain !== '' && line !== '}' && !ac) {
      if (/^type /.test(line)) heads.set(`${family} ${table} ${chain}`, line);
      else rules.push({ family, table, chain, line });
    }
  }
  const v6 = (f: string): boolean => f === 'ip6' || f === 'inet';
  const ndHook = (head: string | undefined): boolean =>
    head === undefined || head === '' || (!/type nat/.test(head) && !/hook forward/.test(head));
  for (const [key, head] of heads) if (v6(key.split(' ')[0]!) && /policy drop/.test(head) && ndHook(head)) return true;
  return rules.some(
    (r) =>
      v6(r.family) &&
      ndHook(heads.get(`${r.family} ${r.table} ${r.chain}`)) &&
      /\b(drop|reject)\b/.test(r.line) &&
      !limited(r.line),
  );
}
const REJECT_ICMP_FIXTURE = 'fixtures/fidelity/reject-icmp-dropped-seed-11.yaml';
const REJECT_ACK_FIXTURE = 'fixtures/fidelity/reject-final-ack-seed-20261252.yaml';
const EPHEMERAL_FIXTURE = 'fixtures/fidelity/ephemeral-port-foreign-source-collision-seed-20261250.yaml';

export const KNOWN_DIVERGENCES: readonly KnownDivergence[] = [
  {
    name: 'no-icmp-for-unroutable-forward',
    description:
      'A forwarding namespace (ip_forward on) that has no route for a received packet answers with an ' +
      "ICMP destination-unreachable (ip_error); the TCP client's connect() then fails with " +
      'ENETUNREACH/EHOSTUNREACH: outcome `unreachable`. The model drops the packet silently (it has no ' +
      'ICMP errors, docs/lab-file.md), so the client sees `timeout`.',
    lab: () =>
      parseLab(
        `
version: 1
namespaces:
  - name: client
    routes: [{ dst: default, via: 10.244.1.1 }]
  - name: router
    forwarding: { ipv4: true }
veths:
  - a: { netns: client, name: eth0, addresses: [10.244.1.2/24] }
    b: { netns: router, name: eth-c, addresses: [10.244.1.1/24] }
attempts:
  - { name: to-nowhere, netns: client, address: 10.96.0.10, port: 18080, uid: 1000 }
`,
        'known-divergence no-icmp-for-unroutable-forward',
      ),
    expected: [{ attempt: 'to-nowhere', field: 'outcome', sim: 'timeout', kernel: 'unreachable' }],
    // Also when the handshake's final ACK is what the forwarding namespace cannot route (an ACK
    // that left untracked, so not NATed like its SYN: nftables differential, seed 20261253).
    explains: (lab, d, sim) => {
      if (d.field !== 'outcome' || d.sim !== 'timeout' || d.kernel !== 'unreachable') return false;
      const reason = sim.find((r) => r.name === d.attempt)?.reason ?? '';
      if (/no route for received packet/.test(reason)) return true;
      const at = /^final ACK did not reach the accepted socket \(dropped in (\S+)\)$/.exec(reason)?.[1];
      const ns = lab.namespaces.find((n) => n.name === at);
      return ns !== undefined && (ns.forwarding[4] || ns.forwarding[6]);
    },
  },
  {
    name: 'reject-of-final-ack-not-simulated',
    description:
      "The handshake's final ACK hit by a reject in the connecting namespace's own output path (nft " +
      '`reject` / iptables `REJECT` on non-SYN segments or ESTABLISHED, e.g. `tcp flags & (fin | syn | ' +
      'rst | ack) != syn reject`): the model drops the ACK silently, so the attempt times out. Linux ' +
      'sends the ICMP error (or RST) back to the connecting socket, and connect() fails with ' +
      "ECONNREFUSED: outcome `refused` (ECONNRESET, `reset`, after `reject with tcp reset`: seed 20261262). Modelling it needs the reject's packets on the output path, " +
      'as for the two reject divergences above. Found by the nftables differential property (seeds ' +
      '20261251 and 20261252, fixtures/fidelity/reject-final-ack-seed-20261252.yaml).',
    lab: () => parseLab(readFileSync(REJECT_ACK_FIXTURE, 'utf8'), REJECT_ACK_FIXTURE),
    expected: [{ attempt: 'a2-client-tcp-client-app', field: 'outcome', sim: 'timeout', kernel: 'refused' }],
    explains: (_lab, d, sim) =>
      d.field === 'outcome' &&
      d.sim === 'timeout' &&
      (d.kernel === 'refused' || d.kernel === 'reset') &&
      /^final ACK did not reach the accepted socket \(rejected in \S+\)$/.test(
        sim.find((r) => r.name === d.attempt)?.reason ?? '',
      ),
  },
  {
    name: 'reject-tcp-reset-rst-not-simulated',
    description:
      'A SYN hit by `REJECT --reject-with tcp-reset` (or nft `reject with tcp reset`): the model reports `refused` at once. Linux ' +
      "(nf_send_reset) sends a real RST, with the rejected packet's unconfirmed conntrack entry " +
      'attached as RELATED, through OUTPUT/POSTROUTING of the rejecting namespace and the path back ' +
      '(over lo, PREROUTING and INPUT again for a connection to itself), where rules can drop it — ' +
      'here the same `filter INPUT -s <own address> -j REJECT` drops the RST, so connect() times ' +
      'out. Modelling it needs an output path that carries an attached RELATED entry (no fresh ' +
      'lookup: the entry was never confirmed). Found by the differential property (seed 20260103).',
    lab: () => parseLab(readFileSync(REJECT_RST_FIXTURE, 'utf8'), REJECT_RST_FIXTURE),
    expected: [{ attempt: 'a0-server-tcp-server-app', field: 'outcome', sim: 'refused', kernel: 'timeout' }],
    explains: (_lab, d, sim) =>
      d.field === 'outcome' &&
      d.sim === 'refused' &&
      d.kernel === 'timeout' &&
      /^SYN rejected in \S+ \(tcp[- ]reset\)$/.test(sim.find((r) => r.name === d.attempt)?.reason ?? ''),
  },
  {
    name: 'reject-icmp-error-not-simulated',
    description:
      'A SYN hit by `REJECT` (or nft `reject`) with the default `icmp-port-unreachable` (`icmp6-port-unreachable`): the ' +
      'model reports `refused` at once. Linux (nf_send_unreach -> icmp_send) sends a real ICMP error, ' +
      'RELATED to the rejected connection, which leaves through OUTPUT/POSTROUTING of the rejecting ' +
      'namespace and travels back to the client, where rules can drop it; TCP turns it into ' +
      "ECONNREFUSED only if it arrives. Here the client's own `filter OUTPUT -j REJECT` rejects the SYN " +
      'and then drops the ICMP error too (REJECT never answers an ICMP error, it drops it), so ' +
      'connect() times out (checked by hand: with `-I OUTPUT -p icmp -j ACCEPT` it is refused). ' +
      'Modelling it needs ICMP error packets on the output path, as for the tcp-reset RST above. ' +
      'Found by the differential property (lane seed 11, FIDELITY_SEED=8 and 9).',
    lab: () => parseLab(readFileSync(REJECT_ICMP_FIXTURE, 'utf8'), REJECT_ICMP_FIXTURE),
    expected: [{ attempt: 'a0-client-tcp-server-app', field: 'outcome', sim: 'refused', kernel: 'timeout' }],
    explains: (_lab, d, sim) =>
      d.field === 'outcome' &&
      d.sim === 'refused' &&
      d.kernel === 'timeout' &&
      /^SYN rejected in \S+ \(icmp6?-port-unreachable\)$/.test(sim.find((r) => r.name === d.attempt)?.reason ?? ''),
  },
  {
    name: 'ephemeral-port-collision-with-foreign-source',
    description:
      "The model gives a namespace's connecting sockets ephemeral ports in order from 32768, Linux at " +
      "random. So when an earlier attempt bound (IP_TRANSPARENT) to another namespace's address " +
      'connects to the same destination, and that namespace then connects there itself, the model ' +
      "makes the same 4-tuple twice: the later connection meets the earlier one's conntrack entry " +
      "and its NAT (here a masquerade in the server's postrouting rewrote the looped first " +
      "connection, so the second is seen from the server's address). On Linux the ports differ and " +
      'the second connection is tracked on its own. Found by the nftables differential property ' +
      '(seed 20261250, after the zone-template fix). `explains` needs an earlier attempt from another ' +
      'namespace with a source address, to the same protocol, address and port.',
    lab: () => parseLab(readFileSync(EPHEMERAL_FIXTURE, 'utf8'), EPHEMERAL_FIXTURE),
    expected: [{ attempt: 'a1-client-tcp-server-app', field: 'sourceSeen', sim: 'fd00:2::2', kernel: 'fd00:1::2' }],
    explains: (lab, d) => {
      const i = lab.attempts.findIndex((a) => a.name === d.attempt);
      const a = lab.attempts[i];
      if (!a || a.source !== undefined) return false;
      return lab.attempts
        .slice(0, i)
        .some(
          (b) =>
            b.source !== undefined &&
            b.netns !== a.netns &&
            b.proto === a.proto &&
            b.address === a.address &&
            b.port === a.port,
        );
    },
  },
  {
    name: 'ipv6-neighbour-discovery-not-simulated',
    description:
      "IPv6 neighbour discovery (NS/NA, ICMPv6) goes through ip6tables: an NA answering a router's " +
      "solicitation is addressed to one of the router's own addresses, so a rule such as `filter INPUT " +
      '-m addrtype --dst-type LOCAL -j REJECT` there drops it, the router never resolves the next hop ' +
      'and forwarded packets are lost: connect() times out (checked on Linux 6.1: with `-I INPUT -p ' +
      'ipv6-icmp -j ACCEPT` first the same lab is refused). The model has no link layer resolution ' +
      '(no ND, no ARP), so the packet is forwarded. Found by the differential property (seed 20261203, ' +
      'fixtures/fidelity/v6-nd-rejected-seed-20261203.yaml). `explains` needs an IPv6 attempt that ' +
      'times out on Linux only, in a lab with a DROP/REJECT rule that ND traverses (ip6tables, or nft: a ' +
      'drop/reject rule or policy drop in a non-nat ip6/inet chain not at forward, not limited to TCP/UDP).',
    lab: () =>
      parseLab(
        `
version: 1
namespaces:
  - name: client
    routes: [{ dst: default, family: 6, via: "fd00:1::1" }]
  - name: router
    forwarding: { ipv6: true }
    ip6tables: |
      *filter
      -A INPUT -m addrtype --dst-type LOCAL -j REJECT
      COMMIT
  - name: server
    routes: [{ dst: default, family: 6, via: "fd00:2::1" }]
veths:
  - a: { netns: client, name: eth0, addresses: ["fd00:1::2/64"] }
    b: { netns: router, name: eth-c, addresses: ["fd00:1::1/64"] }
  - a: { netns: server, name: eth0, addresses: ["fd00:2::2/64"] }
    b: { netns: router, name: eth-s, addresses: ["fd00:2::1/64"] }
attempts:
  - { name: through-router, netns: client, address: "fd00:2::2", port: 18080, uid: 1000 }
`,
        'known-divergence ipv6-neighbour-discovery-not-simulated',
      ),
    expected: [{ attempt: 'through-router', field: 'outcome', sim: 'refused', kernel: 'timeout' }],
    explains: (lab, d, sim, kernel) => {
      const attempt = lab.attempts.find((a) => a.name === d.attempt);
      if (!attempt || !attempt.address.includes(':')) return false;
      if (kernel.find((r) => r.name === d.attempt)?.outcome !== 'timeout') return false;
      const simOutcome = sim.find((r) => r.name === d.attempt)?.outcome;
      if (simOutcome === undefined || simOutcome === 'timeout') return false;
      return mayDropNeighbourDiscovery(lab);
    },
  },
];

/** Is difference `d` of `lab` one of the known divergences? */
export function explainKnown(
  lab: Lab,
  d: Difference,
  sim: readonly AttemptResult[],
  kernel: readonly AttemptResult[],
): string | undefined {
  for (const k of KNOWN_DIVERGENCES) {
    if (k.explains(lab, d, sim, kernel)) return k.name;
  }
  return undefined;
}

/** A difference, with the known divergence that explains it (absent: unexplained). */
export type ClassifiedDifference = Difference & { readonly known?: string };

/**
 * Every difference of a lab run, each with the known divergence that explains it, if any; what
 * `trace --kernel` reports (it fails only on an unexplained one) and the differential property
 * counts as known hits.
 */
export function classifyDifferences(
  lab: Lab,
  diffs: readonly Difference[],
  sim: readonly AttemptResult[],
  kernel: readonly AttemptResult[],
): { readonly differences: readonly ClassifiedDifference[]; readonly unexplained: readonly Difference[] } {
  const differences = diffs.map((d): ClassifiedDifference => {
    const known = explainKnown(lab, d, sim, kernel);
    return known === undefined ? d : { ...d, known };
  });
  return { differences, unexplained: differences.filter((d) => d.known === undefined) };
}

/** The text `trace --kernel` prints for the differences explained by known divergences (empty when none). */
export function formatKnownDifferences(differences: readonly ClassifiedDifference[]): string {
  const known = differences.filter((d) => d.known !== undefined);
  if (known.length === 0) return '';
  return [
    `${known.length} difference(s) explained by known divergences of the model (docs/lab-file.md, "Known divergences"):`,
    ...known.map((d) => `   ${d.known}: ${d.attempt} ${d.field}: sim ${d.sim ?? '-'} / kernel ${d.kernel ?? '-'}`),
  ].join('\n');
}
