/**
 * Runs a lab (sim/lab/lab-file.ts) on the real kernel, inside private namespaces of this run,
 * and reports each attempt in the simulator's AttemptResult shape, so the two can be compared
 * field by field (scenarios/fidelity/compare.ts).
 *
 * `KernelLab` separates the topology (namespaces, devices, addresses, main-table routes — slow
 * to build) from what a case changes (iptables text, ipsets, policy rules, routes beyond the
 * topology, listeners, attempts — cheap to replace), so differential testing builds one
 * topology and replays many cases on it. `runLabOnKernel` is the one-shot form.
 *
 * Safety (docs/design.md, 'Real-kernel safety'): every change is made inside namespaces this run created (`ip -n`, or a
 * root probe running inside the namespace); nothing touches the root network namespace.
 */
import type { Lab, LabAttempt, LabNetns, LabRoute, LabRule } from '../../sim/lab/lab-file.js';
import type { AttemptResult, LabResults, ListenerResult } from '../../sim/lab/run-lab.js';
import { ipIn } from './ip.js';
import { NetnsRun } from './netns-run.js';
import { ProbeError, ProbePool, ROOT_ADMIN, type Probe } from './probe.js';
import type { AcceptEvent, ConnectOutcome, DatagramEvent, ProbeEvent } from './probe-protocol.js';
import { rethrowAfterCleanup } from '../cleanup.js';
import { NfTables, NftError } from '../../sim/kernel/nftables/nftables.js';

export interface KernelLabOptions {
  /** Run prefix (`al-...-`); default a fresh one. */
  readonly prefix?: string;
  /** A TCP connect with no answer within this time is a `timeout` (default 300 ms). */
  readonly connectTimeoutMs?: number;
  /** How long to wait for a listener to report an accepted connection or datagram (default 150 ms). */
  readonly deliveryWaitMs?: number;
}

const TABLE_BUILTINS: Readonly<Record<string, readonly string[]>> = {
  raw: ['PREROUTING', 'OUTPUT'],
  mangle: ['PREROUTING', 'INPUT', 'FORWARD', 'OUTPUT', 'POSTROUTING'],
  nat: ['PREROUTING', 'INPUT', 'OUTPUT', 'POSTROUTING'],
  filter: ['INPUT', 'FORWARD', 'OUTPUT'],
};

/**
 * The restore text that leaves a family's raw/mangle/nat/filter tables exactly as `text` says,
 * as in a fresh namespace: built-in chains the text does not declare get policy ACCEPT, and
 * tables it does not name are emptied.
 */
export function fullRestoreText(text: string | undefined): string {
  const out: string[] = [];
  const named = new Set<string>();
  for (const line of (text ?? '').split('\n')) {
    out.push(line);
    const m = /^\s*\*\s*([a-z]+)\s*$/.exec(line);
    if (m && m[1]) named.add(m[1]);
  }
  // Insert missing built-in declarations after each `*table` line.
  const result: string[] = [];
  let table: string | undefined;
  let declared = new Set<string>();
  const blockStart: number[] = [];
  for (const line of out) {
    const m = /^\s*\*\s*([a-z]+)\s*$/.exec(line);
    if (m) {
      table = m[1];
      declared = new Set();
      result.push(line);
      blockStart.push(result.length);
      continue;
    }
    const d = /^\s*:(\S+)/.exec(line);
    if (d && d[1]) declared.add(d[1]);
    if (/^\s*COMMIT\s*$/.test(line) && table) {
      const missing = (TABLE_BUILTINS[table] ?? []).filter((c) => !declared.has(c)).map((c) => `:${c} ACCEPT [0:0]`);
      result.splice(blockStart[blockStart.length - 1]!, 0, ...missing);
      table = undefined;
    }
    result.push(line);
  }
  for (const [t, chains] of Object.entries(TABLE_BUILTINS)) {
    if (named.has(t)) continue;
    result.push(`*${t}`, ...chains.map((c) => `:${c} ACCEPT [0:0]`), 'COMMIT');
  }
  return result.join('\n') + '\n';
}

function routeArgs(r: LabRoute): string[] {
  const fam = r.family ?? (r.dst.includes(':') ? 6 : 4);
  const args = [`-${fam}`, 'route', 'add'];
  if (r.type !== 'unicast') args.push(r.type);
  args.push(r.dst);
  if (r.via) args.push('via', r.via);
  if (r.dev) args.push('dev', r.dev);
  if (r.table !== undefined) args.push('table', String(r.table));
  if (r.src) args.push('src', r.src);
  if (r.metric !== undefined) args.push('metric', String(r.metric));
  return args;
}

function ruleArgs(r: LabRule, verb: 'add' | 'del'): string[] {
  // Without a priority the kernel picks one at add, and del takes the first rule that matches the rest.
  const args = [`-${r.family}`, 'rule', verb, ...(r.priority !== undefined ? ['priority', String(r.priority)] : [])];
  if (r.fwmark) args.push('fwmark', `0x${r.fwmark.value.toString(16)}/0x${r.fwmark.mask.toString(16)}`);
  if (r.from) args.push('from', r.from);
  if (r.to) args.push('to', r.to);
  if (r.iif) args.push('iif', r.iif);
  if (r.oif) args.push('oif', r.oif);
  if (r.action === 'lookup') args.push('lookup', String(r.table ?? 'main'));
  else args.push(r.action);
  return args;
}

function realName(prefix: string, lab: string, i: number): string {
  const clean = lab.toLowerCase().replace(/[^a-z0-9-]/g, '-');
  return `${prefix}${i}${clean}`.slice(0, prefix.length + 12).replace(/-+$/, '') || `${prefix}${i}`;
}

/**
 * What one case added to a lab namespace, so the next case removes exactly that: routes, policy
 * rules, whether ipsets and iptables text were loaded, and the nft tables its `nftables:`
 * document made (`FAMILY NAME`, read from the simulator's model of the same document, so the
 * tables iptables-nft keeps for the iptables text are never touched).
 */
interface CaseState {
  routes: LabRoute[];
  rules: LabRule[];
  ipsets: boolean;
  iptables: { 4: boolean; 6: boolean };
  nftTables: string[];
}

const UNREACHABLE_CONNECT = new Set(['ENETUNREACH', 'EHOSTUNREACH', 'EACCES', 'EINVAL', 'EADDRNOTAVAIL']);

/** A lab topology built on the real kernel, on which cases (rules, sockets, attempts) are replayed. */
export class KernelLab {
  readonly pool = new ProbePool();
  /** Lab namespace name → real namespace name. */
  readonly names = new Map<string, string>();
  private readonly topologyRoutes = new Set<string>();
  private readonly topologyRules = new Set<string>();
  /** What the last case added, per lab namespace, so the next case can remove exactly that. */
  private added = new Map<string, CaseState>();
  private readonly connectTimeoutMs: number;
  private readonly deliveryWaitMs: number;

  private constructor(
    readonly run: NetnsRun,
    opts: KernelLabOptions,
  ) {
    this.connectTimeoutMs = opts.connectTimeoutMs ?? 300;
    this.deliveryWaitMs = opts.deliveryWaitMs ?? 150;
  }

  /** Build `topology`'s namespaces, devices, addresses, forwarding and routes; no rules or sockets. */
  static async create(topology: Lab, opts: KernelLabOptions = {}): Promise<KernelLab> {
    const k = new KernelLab(new NetnsRun(opts.prefix), opts);
    try {
      await k.build(topology);
    } catch (e) {
      return rethrowAfterCleanup(e, ['dispose the kernel lab', () => k.dispose()]);
    }
    return k;
  }

  real(labNs: string): string {
    const r = this.names.get(labNs);
    if (!r)
      throw new Error(
        `lab namespace ${JSON.stringify(labNs)} is not part of this kernel lab (have: ${[...this.names.keys()].join(', ')})`,
      );
    return r;
  }

  private root(labNs: string): Promise<Probe> {
    return this.pool.get(this.real(labNs), ROOT_ADMIN);
  }

  private async exec(labNs: string, argv: readonly string[], input?: string): Promise<string> {
    const p = await this.root(labNs);
    const v = (await p.request({ op: 'exec', argv, input })) as { stdout: string };
    return v.stdout;
  }

  private async sysctl(labNs: string, key: string, value: string, optional = false): Promise<void> {
    const p = await this.root(labNs);
    try {
      await p.request({ op: 'sysctl', key, value });
    } catch (e) {
      if (!optional) throw e;
    }
  }

  private async build(lab: Lab): Promise<void> {
    for (const [i, n] of lab.namespaces.entries()) {
      const short = realName(this.run.prefix, n.name, i).slice(this.run.prefix.length);
      this.names.set(n.name, await this.run.create(short));
    }
    // Settings a fresh simulated namespace has: no rp_filter, no DAD delay, unprivileged low ports.
    await Promise.all(
      lab.namespaces.map(async (n) => {
        for (const [k, v] of [
          ['net/ipv4/conf/all/rp_filter', '0'],
          ['net/ipv4/conf/default/rp_filter', '0'],
          ['net/ipv6/conf/all/accept_dad', '0'],
          ['net/ipv6/conf/default/accept_dad', '0'],
          ['net/ipv4/ip_unprivileged_port_start', '0'],
          ['net/ipv4/ip_local_port_range', '40000 60999'],
          ['net/ipv4/ip_forward', n.forwarding[4] ? '1' : '0'],
          ['net/ipv6/conf/all/forwarding', n.forwarding[6] ? '1' : '0'],
        ] as const)
          await this.sysctl(n.name, k, v);
        // Simulated bridges do not call iptables (no br_netfilter); only present if the module is loaded.
        await this.sysctl(n.name, 'net/bridge/bridge-nf-call-iptables', '0', true);
        await this.sysctl(n.name, 'net/bridge/bridge-nf-call-ip6tables', '0', true);
      }),
    );
    for (const n of lab.namespaces) {
      for (const l of n.links) await ipIn(this.real(n.name), ['link', 'add', l.name, 'type', 'bridge']);
    }
    for (const v of lab.veths) {
      await ipIn(this.real(v.a.netns), [
        'link',
        'add',
        v.a.name,
        'type',
        'veth',
        'peer',
        'name',
        v.b.name,
        'netns',
        this.real(v.b.netns),
      ]);
    }
    const addr = async (ns: string, dev: string, cidr: string): Promise<void> => {
      await ipIn(this.real(ns), ['addr', 'add', cidr, 'dev', dev, ...(cidr.includes(':') ? ['nodad'] : [])]);
    };
    for (const n of lab.namespaces) {
      for (const l of n.links) {
        for (const a of l.addresses) await addr(n.name, l.name, a);
        if (l.up) await ipIn(this.real(n.name), ['link', 'set', l.name, 'up']);
      }
    }
    for (const v of lab.veths) {
      for (const end of [v.a, v.b]) {
        if (end.master) await ipIn(this.real(end.netns), ['link', 'set', end.name, 'master', end.master]);
        for (const a of end.addresses) await addr(end.netns, end.name, a);
        await this.sysctl(end.netns, `net/ipv4/conf/${end.name}/rp_filter`, '0');
        await ipIn(this.real(end.netns), ['link', 'set', end.name, 'up']);
      }
    }
    await this.waitLinksReady(lab);
    for (const n of lab.namespaces) {
      for (const r of n.routes) {
        await ipIn(this.real(n.name), routeArgs(r));
        this.topologyRoutes.add(`${n.name}|${JSON.stringify(r)}`);
      }
      for (const r of n.rules) {
        await ipIn(this.real(n.name), ruleArgs(r, 'add'));
        this.topologyRules.add(`${n.name}|${JSON.stringify(r)}`);
      }
    }
  }

  /**
   * Wait until every veth end is operationally up and no IPv6 address is tentative, so the first
   * attempt meets a topology as ready as the simulated one (which is ready at once).
   *
   * Why: the end of a veth that is set up second gets its carrier at once (veth_open), but
   * operstate UP — and with it addrconf's link-local address (addrconf_link_ready) — waits for
   * linkwatch. linkwatch takes an event at once only if it is "urgent"; for a freshly opened
   * veth that means its ifindex differs from its peer's (linkwatch_urgent_event), else it waits
   * for the global once-per-second slot (linkwatch_schedule_work). When both ends are the first
   * device of their namespace (index 2 and 2), that end has no link-local address for up to a
   * second, so ndisc_send_ns has no source and sends no neighbour solicitation: the first packet
   * routed out of it waits, and a connect timed out. This is what made the one-shot run of
   * fixtures/fidelity/tproxy-rst-seed-1.yaml (a fresh topology) differ from the long-lived lanes.
   */
  private async waitLinksReady(lab: Lab, timeoutMs = 5000): Promise<void> {
    const ends = lab.veths.flatMap((v) => [v.a, v.b]);
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      const pending: string[] = [];
      for (const n of lab.namespaces) {
        const mine = ends.filter((e) => e.netns === n.name).map((e) => e.name);
        if (mine.length === 0) continue;
        const links = JSON.parse(await ipIn(this.real(n.name), ['-j', 'link', 'show'])) as {
          ifname: string;
          operstate?: string;
        }[];
        for (const name of mine) {
          const l = links.find((x) => x.ifname === name);
          if (l?.operstate !== 'UP') pending.push(`${n.name}/${name} operstate ${l?.operstate ?? 'missing'}`);
        }
        const tentative = (await ipIn(this.real(n.name), ['-6', '-o', 'addr', 'show', 'tentative'])).trim();
        if (tentative) pending.push(`${n.name}: tentative IPv6 addresses: ${tentative.replace(/\s+/g, ' ')}`);
      }
      if (pending.length === 0) return;
      if (Date.now() > deadline) {
        throw new Error(
          `kernel lab ${this.run.prefix}: links not ready after ${timeoutMs} ms: ${pending.join('; ')} (check that the veth ends were set up and DAD is off)`,
        );
      }
      await new Promise((r) => setTimeout(r, 50));
    }
  }

  /**
   * Make the case's rules, routes, ipsets and listeners current: removes what the previous case
   * added, then applies `lab` (whose namespaces and devices must be the topology's).
   */
  async configure(lab: Lab): Promise<ListenerResult[]> {
    await this.pool.closeListeners();
    const next = new Map<string, CaseState>();
    const settled = await Promise.allSettled(
      lab.namespaces.map(async (n) => next.set(n.name, await this.configureNetns(n))),
    );
    const failed = settled.find((r): r is PromiseRejectedResult => r.status === 'rejected');
    if (failed) {
      // The namespaces that were configured hold this case's state now (their nft tables, say);
      // the failed one kept its previous state (nft -f is one transaction). Record both, so the
      // next case removes what is really there.
      for (const [name, state] of next) this.added.set(name, state);
      const reason: unknown = failed.reason;
      throw reason instanceof Error ? reason : new Error(`configuring the case failed: ${String(reason)}`);
    }
    // Namespaces the new lab does not mention keep nothing from the previous case.
    for (const [name, prev] of this.added) {
      if (!next.has(name)) {
        await this.configureNetns(
          {
            name,
            forwarding: { 4: false, 6: false },
            links: [],
            routes: [],
            rules: [],
            ipsets: undefined,
            iptables: undefined,
            ip6tables: undefined,
            iptablesLine: 0,
            ip6tablesLine: 0,
            nftables: undefined,
          },
          prev,
        );
      }
    }
    this.added = next;
    const listeners: ListenerResult[] = [];
    for (const s of lab.sockets) {
      const probe = await this.pool.get(this.real(s.netns), s);
      try {
        await probe.request({
          op: 'listen',
          name: s.name,
          proto: s.proto,
          family: s.family,
          address: s.address,
          port: s.port,
          mark: s.mark,
          transparent: s.transparent,
          reuseport: s.reuseport,
        });
        listeners.push({ name: s.name, outcome: 'listening', expected: s.expect, detail: '' });
      } catch (e) {
        // Expected to fail (`expect: ERRNO`): the kernel's errno, whichever it is, and the lab goes
        // on. A probe that failed for another reason (it died) is never an outcome.
        if (s.expect !== 'listening' && e instanceof ProbeError) {
          listeners.push({ name: s.name, outcome: e.code, expected: s.expect, detail: e.message });
          continue;
        }
        throw new Error(
          `socket ${s.name} in ${s.netns} (${s.proto} ${s.address}:${s.port}, uid ${s.uid}): ${(e as Error).message}`,
          { cause: e },
        );
      }
    }
    return listeners;
  }

  private async configureNetns(n: LabNetns, prevOverride?: CaseState): Promise<CaseState> {
    const prev = prevOverride ??
      this.added.get(n.name) ?? {
        routes: [],
        rules: [],
        ipsets: false,
        iptables: { 4: false, 6: false },
        nftTables: [],
      };
    const ns = this.real(n.name);
    const batch: string[] = [];
    for (const r of prev.rules) batch.push(ruleArgs(r, 'del').join(' '));
    const tables = new Set(prev.routes.map((r) => `${r.family ?? (r.dst.includes(':') ? 6 : 4)} ${r.table ?? 'main'}`));
    for (const t of tables) {
      const [fam, table] = t.split(' ');
      if (table === 'main' || table === 'local') {
        for (const r of prev.routes.filter(
          (x) => String(x.table ?? 'main') === table && `${x.family ?? (x.dst.includes(':') ? 6 : 4)}` === fam,
        ))
          batch.push(
            routeArgs(r)
              .join(' ')
              .replace(/ route add /, ' route del '),
          );
      } else batch.push(`-${fam} route flush table ${table}`);
    }
    const routes = n.routes.filter((r) => !this.topologyRoutes.has(`${n.name}|${JSON.stringify(r)}`));
    const rules = n.rules.filter((r) => !this.topologyRules.has(`${n.name}|${JSON.stringify(r)}`));
    for (const r of routes) batch.push(routeArgs(r).join(' '));
    for (const r of rules) batch.push(ruleArgs(r, 'add').join(' '));
    // `ip -batch` takes no per-line family option: one batch per family.
    for (const fam of ['-4', '-6']) {
      const lines = batch.filter((l) => l.startsWith(`${fam} `)).map((l) => l.slice(3));
      if (lines.length === 0) continue;
      try {
        await this.exec(n.name, ['ip', fam, '-batch', '-'], lines.join('\n') + '\n');
      } catch (e) {
        throw new Error(
          `routes/rules of ${n.name} (${ns}): ${(e as Error).message}\n  batch:\n    ${lines.join('\n    ')}`,
          { cause: e },
        );
      }
    }
    const ipsets = n.ipsets !== undefined;
    // Rules referring to a set must go before the set can be destroyed.
    const iptables = { 4: n.iptables !== undefined, 6: n.ip6tables !== undefined };
    for (const fam of [4, 6] as const) {
      const text = fam === 4 ? n.iptables : n.ip6tables;
      if (text === undefined && !prev.iptables[fam] && !(prev.ipsets || ipsets)) continue;
      if (prev.ipsets || ipsets)
        await this.exec(n.name, [fam === 4 ? 'iptables-restore' : 'ip6tables-restore'], fullRestoreText(undefined));
    }
    if (prev.ipsets) {
      await this.exec(n.name, ['ipset', 'flush']);
      await this.exec(n.name, ['ipset', 'destroy']);
    }
    if (ipsets) await this.exec(n.name, ['ipset', 'restore'], n.ipsets);
    for (const fam of [4, 6] as const) {
      const text = fam === 4 ? n.iptables : n.ip6tables;
      if (text === undefined && !prev.iptables[fam]) continue;
      try {
        await this.exec(n.name, [fam === 4 ? 'iptables-restore' : 'ip6tables-restore'], fullRestoreText(text));
      } catch (e) {
        throw new Error(`ip${fam === 6 ? '6' : ''}tables of ${n.name} (${ns}): ${(e as Error).message}`, { cause: e });
      }
    }
    // nftables: one `nft -f` transaction deletes the previous case's tables and applies this one's.
    // The tables it leaves come from the model's reading of the document; a document the model
    // refuses still goes to nft (Linux decides what is valid here, so the differential property
    // sees a model that refuses what nft takes), and its tables are then read back from the kernel.
    let nftTables = n.nftables === undefined ? [] : nftTablesOf(n.nftables);
    const others =
      nftTables === undefined
        ? (await this.nftTableList(n.name)).filter((t) => !prev.nftTables.includes(t))
        : undefined;
    if (prev.nftTables.length > 0 || n.nftables !== undefined) {
      // `add` before `delete`: a table an earlier case meant to make may be missing (that case
      // failed in another namespace, so its state was never recorded); adding it first makes the
      // delete succeed either way, in the same transaction (nft 1.0.6 has no `destroy`).
      const doc = [...prev.nftTables.map((t) => `add table ${t}\ndelete table ${t}`), n.nftables ?? ''].join('\n');
      try {
        await this.exec(n.name, ['nft', '-f', '-'], doc.endsWith('\n') ? doc : `${doc}\n`);
      } catch (e) {
        throw new Error(`nftables of ${n.name} (${ns}): ${(e as Error).message}`, { cause: e });
      }
    }
    if (others !== undefined) nftTables = (await this.nftTableList(n.name)).filter((t) => !others.includes(t));
    return { routes, rules, ipsets, iptables, nftTables: nftTables ?? [] };
  }

  /** Every nftables table of a lab namespace, as `FAMILY NAME` (iptables-nft's tables included). */
  private async nftTableList(labNs: string): Promise<string[]> {
    const out = await this.exec(labNs, ['nft', 'list', 'tables']);
    return out
      .split('\n')
      .map((l) => /^table (\S+) (\S+)$/.exec(l.trim()))
      .filter((m): m is RegExpExecArray => m !== null)
      .map((m) => `${m[1]} ${m[2]}`);
  }

  /** Play the attempts in order, one at a time (so every accept is attributable to one attempt). */
  async runAttempts(attempts: readonly LabAttempt[]): Promise<AttemptResult[]> {
    const out: AttemptResult[] = [];
    for (const a of attempts) out.push(await this.attempt(a));
    return out;
  }

  async attempt(a: LabAttempt): Promise<AttemptResult> {
    const base = {
      name: a.name,
      acceptedBy: undefined,
      originalDst: undefined,
      sourceSeen: undefined,
      localSeen: undefined,
      trace: [],
    };
    if (a.raw)
      return {
        ...base,
        outcome: 'error ENOTSUP',
        reason: 'raw (AF_PACKET) attempts are not implemented by the kernel lab runner',
      };
    const probe = await this.pool.get(this.real(a.netns), a);
    this.pool.events.drain();
    const tag = `${a.name}#${Math.random().toString(36).slice(2, 8)}`;
    const r = (await probe.request({
      op: 'connect',
      tag,
      proto: a.proto,
      address: a.address,
      port: a.port,
      mark: a.mark,
      transparent: a.transparent,
      source: a.source,
      sourcePort: a.sourcePort,
      timeoutMs: this.connectTimeoutMs,
      holdData: a.proto === 'tcp',
      onSockoptError: a.onSockoptError,
    })) as ConnectOutcome;
    const why = (o: ConnectOutcome): string => `${o.call ?? 'connect'}: ${o.code ?? ''} ${o.message ?? ''}`.trim();
    if (a.proto === 'tcp') {
      if (r.result === 'timeout')
        return { ...base, outcome: 'timeout', reason: `no answer within ${this.connectTimeoutMs} ms` };
      if (r.result === 'error') {
        if (r.call === 'connect' && r.code === 'ECONNREFUSED') return { ...base, outcome: 'refused', reason: why(r) };
        if (r.call === 'connect' && UNREACHABLE_CONNECT.has(r.code ?? ''))
          return { ...base, outcome: 'unreachable', reason: why(r) };
        if (r.call === 'connect' && r.code === 'ETIMEDOUT') return { ...base, outcome: 'timeout', reason: why(r) };
        // The final ACK was answered with a RST before connect() returned (sim/kernel/tcp-reset.ts).
        if (r.call === 'connect' && r.code === 'ECONNRESET') return { ...base, outcome: 'reset', reason: why(r) };
        return { ...base, outcome: `error ${r.code}`, reason: why(r) };
      }
      // The client holds its data until the accept has been reported (ConnectRequest.holdData).
      const acc = await this.pool.events.take(
        (e: ProbeEvent): e is AcceptEvent => e.ev === 'accept',
        this.deliveryWaitMs,
      );
      await probe.request({ op: 'release', tag });
      if (!acc)
        return {
          ...base,
          outcome: 'timeout',
          reason: `connect completed on the client, but no listener accepted within ${this.deliveryWaitMs} ms (the handshake's last ACK did not arrive)`,
        };
      return {
        ...base,
        outcome: 'established',
        acceptedBy: acc.listener,
        originalDst: acc.originalDst,
        sourceSeen: acc.peer,
        localSeen: acc.local,
        reason: `accepted by ${acc.listener}`,
      };
    }
    if (r.result === 'error') {
      if (r.call === 'send' && r.code === 'EPERM')
        return { ...base, outcome: 'dropped', reason: `${why(r)} (a netfilter DROP on the sender's output path)` };
      if (r.call === 'send' && r.code === 'ECONNREFUSED') return { ...base, outcome: 'no-socket', reason: why(r) };
      if (r.call === 'send' && UNREACHABLE_CONNECT.has(r.code ?? ''))
        return { ...base, outcome: 'unreachable', reason: why(r) };
      return { ...base, outcome: `error ${r.code}`, reason: why(r) };
    }
    const dg = await this.pool.events.take(
      (e: ProbeEvent): e is DatagramEvent => e.ev === 'datagram' && e.tag === tag,
      this.deliveryWaitMs,
    );
    if (!dg)
      return {
        ...base,
        outcome: 'not-delivered',
        reason: `no lab socket received the datagram within ${this.deliveryWaitMs} ms (no-socket and dropped look alike from user space)`,
      };
    return {
      ...base,
      outcome: 'delivered',
      acceptedBy: dg.listener,
      sourceSeen: dg.peer,
      reason: `received by ${dg.listener}`,
    };
  }

  /** Pids of the probe processes this lab started that are still running. */
  pids(): Promise<number[]> {
    return this.pool.pids();
  }

  /** Stop every probe, remove every namespace; safe to call twice. */
  async dispose(): Promise<void> {
    const errors: string[] = [];
    await this.pool.stopAll().catch((e: unknown) => errors.push(String(e)));
    await this.run.dispose().catch((e: unknown) => errors.push(String(e)));
    if (errors.length > 0) throw new Error(`kernel lab cleanup failed: ${errors.join('; ')}`);
  }
}

/** Run `lab` once on the real kernel (root only); everything is removed afterwards, also on failure. */
export async function runLabOnKernel(lab: Lab, opts: KernelLabOptions = {}): Promise<LabResults> {
  if (process.getuid?.() !== 0)
    throw new Error('running a lab on the real kernel needs root (network namespaces, iptables): run as root');
  const k = await KernelLab.create(lab, opts);
  let run: LabResults;
  try {
    const listeners = await k.configure(lab);
    run = { listeners, results: await k.runAttempts(lab.attempts) };
  } catch (e) {
    return rethrowAfterCleanup(e, ['dispose the kernel lab', () => k.dispose()]);
  }
  await k.dispose();
  return run;
}

export { ProbeError };

/**
 * The tables an `nft -f` document leaves, as `FAMILY NAME`, read from the simulator's model of the
 * same document; undefined when the model refuses the document (the caller asks the kernel).
 */
function nftTablesOf(doc: string): string[] | undefined {
  const model = new NfTables();
  try {
    model.apply(doc, { source: 'nftables' });
  } catch (e) {
    if (e instanceof NftError) return undefined;
    throw e;
  }
  return model.tables().map((t) => `${t.family} ${t.name}`);
}
