/**
 * Generated differential cases over the fixed topology (topology.ts): rulesets inside the
 * simulator's supported subset, biased toward what meshes install (REDIRECT/DNAT/SNAT/
 * MASQUERADE, marks and connmark, TPROXY with fwmark policy routing, owner matches, user chains
 * with jump/goto/RETURN, CT zones, conntrack states), plus listeners and attempts.
 *
 * A case is a `CaseSpec` with symbolic ports and addresses; `renderCase(spec, base)` turns it
 * into a lab with concrete ports `base..base+3`, so consecutive cases on one kernel never share
 * a conntrack tuple (the topology is reused and conntrack is not flushed between cases).
 */
import fc from 'fast-check';
import type { Family } from '../../impl/api/ip/address.js';
import type { Capability } from '../../sim/kernel/process.js';
import type { Lab, LabAttempt, LabNetns, LabSocket } from '../../sim/lab/lab-file.js';
import { ADDR, fixedTopology, NODES, type FamilyAddresses, type Node } from './topology.js';
import { nftablesCaseArb, renderNftDocument, usesTproxy, type NftCaseSpec } from './nftables-documents.js';

type PortSlot = 'app' | 'in' | 'out' | 'other';
const PORT_OFFSET: Readonly<Record<PortSlot, number>> = { app: 0, in: 1, out: 2, other: 3 };
/** Ports per case; bases cycle through 10000..(10000 + PORT_STRIDE * 5000). */
export const PORT_STRIDE = 4;

type AddrSlot = keyof Omit<FamilyAddresses, 'plen'> | 'self';

type Table = 'raw' | 'mangle' | 'nat' | 'filter';
interface RuleSpec {
  readonly table: Table;
  /** A built-in chain, or `U_<builtin>` (a user chain called only from that built-in chain). */
  readonly chain: string;
  /** The rule after `-A CHAIN`, with `{P:slot}` and `{A:slot}` placeholders. */
  readonly body: string;
}

interface Owner {
  readonly uid: number;
  readonly caps: readonly Capability[];
}
const APP: Owner = { uid: 1000, caps: [] };
const PROXY: Owner = { uid: 1337, caps: ['NET_ADMIN'] };
const ROOTISH: Owner = { uid: 0, caps: ['NET_ADMIN'] };

interface ListenerSpec {
  readonly name: string;
  readonly node: Node;
  readonly proto: 'tcp' | 'udp';
  readonly addr: AddrSlot;
  readonly port: PortSlot;
  readonly owner: Owner;
  readonly mark: number | undefined;
  readonly transparent: boolean;
  /**
   * A wildcard listener of an IPv4 case made as an IPv6 socket on :: without IPV6_V6ONLY (Linux's
   * default): it takes the IPv4 traffic and reports its peer and local address v4-mapped.
   */
  readonly dualStack?: boolean;
}

interface AttemptSpec {
  readonly node: Node;
  readonly proto: 'tcp' | 'udp';
  readonly addr: AddrSlot;
  readonly port: PortSlot;
  readonly owner: Owner;
  readonly mark: number | undefined;
  /** Bind to this (possibly foreign, then with IP_TRANSPARENT) source address first. */
  readonly source: AddrSlot | undefined;
}

export interface CaseSpec {
  readonly family: Family;
  readonly rules: Readonly<Record<Node, readonly RuleSpec[]>>;
  /** fwmark 0x111/0xfff → table 100 with a local default route, per node. */
  readonly tproxyRouting: Readonly<Record<Node, boolean>>;
  /**
   * Per node: a verdict-neutral conntrack rule turns tracking on there (withConntrackOn). Without
   * it, the node tracks only if its own rules need conntrack, as Linux (and the model) decide.
   */
  readonly conntrackOn: Readonly<Record<Node, boolean>>;
  readonly listeners: readonly ListenerSpec[];
  readonly attempts: readonly AttemptSpec[];
  /** nft documents per node (caseArb({ nftables: true })); absent in iptables-only cases. */
  readonly nftables?: NftCaseSpec;
}

const BUILTINS: Readonly<Record<Table, readonly string[]>> = {
  raw: ['PREROUTING', 'OUTPUT'],
  mangle: ['PREROUTING', 'INPUT', 'FORWARD', 'OUTPUT', 'POSTROUTING'],
  nat: ['PREROUTING', 'INPUT', 'OUTPUT', 'POSTROUTING'],
  filter: ['INPUT', 'FORWARD', 'OUTPUT'],
};

const builtinOf = (chain: string): string => chain.replace(/^U_/, '');
const MARKS = ['0x539/0xfff', '0x111/0xfff', '0x539', '0x1/0x1'];

function matchArb(chain: string, proto: 'tcp' | 'udp' | undefined): fc.Arbitrary<string> {
  const hook = builtinOf(chain);
  const parts: fc.Arbitrary<string>[] = [
    fc.constantFrom(
      '-d {A:server}',
      '! -d {A:loopback}',
      '-d {A:vip}',
      '-s {A:client}',
      '-d {A:server2}',
      '-s {A:server}',
    ),
    fc.constantFrom(
      ...MARKS.map((m) => `-m mark --mark ${m}`),
      ...MARKS.slice(0, 2).map((m) => `-m mark ! --mark ${m}`),
    ),
    fc.constantFrom('-m connmark --mark 0x111/0xfff', '-m connmark ! --mark 0x111/0xfff'),
    fc.constantFrom(
      '-m conntrack --ctstate NEW',
      '-m conntrack --ctstate RELATED,ESTABLISHED',
      '-m conntrack --ctstate DNAT',
      '-m state --state ESTABLISHED',
      '-m conntrack --ctstate INVALID,UNTRACKED',
    ),
    fc.constantFrom('-m addrtype --dst-type LOCAL', '-m addrtype ! --dst-type LOCAL'),
  ];
  if (proto)
    parts.push(
      fc.constantFrom('--dport {P:app}', '! --dport {P:in}', '--dport {P:other}', '--dport {P:in}', '--sport {P:app}'),
    );
  if (hook === 'PREROUTING' || hook === 'INPUT' || hook === 'FORWARD')
    parts.push(fc.constantFrom('-i lo', '! -i lo', '-i eth0', '-i eth-c'));
  if (hook === 'OUTPUT' || hook === 'POSTROUTING' || hook === 'FORWARD')
    parts.push(fc.constantFrom('-o lo', '! -o lo', '-o eth-s'));
  if ((hook === 'OUTPUT' || hook === 'POSTROUTING') && !chain.startsWith('U_'))
    parts.push(
      fc.constantFrom(
        '-m owner --uid-owner 1337',
        '-m owner ! --uid-owner 1337',
        '-m owner --uid-owner 1000',
        '-m owner --socket-exists',
      ),
    );
  return fc
    .subarray(
      parts.map((_, i) => i),
      { maxLength: 2 },
    )
    .chain((idx) =>
      idx.length === 0 ? fc.constant('') : fc.tuple(...idx.map((i) => parts[i]!)).map((xs) => xs.join(' ')),
    )
    .map((m) => {
      // --dport/--sport after -m matches still need `-p` first: put the proto in front.
      const p = proto ? `-p ${proto} ` : '';
      return (p + m).trim();
    });
}

function targetArb(
  table: Table,
  chain: string,
  proto: 'tcp' | 'udp' | undefined,
  userChains: boolean,
): fc.Arbitrary<string> {
  const hook = builtinOf(chain);
  const t: string[] = ['ACCEPT'];
  if (chain.startsWith('U_')) t.push('RETURN');
  else if (userChains) t.push('JUMP', 'GOTO');
  switch (table) {
    case 'raw':
      t.push('CT --zone 1', 'CT --notrack', 'DROP');
      break;
    case 'mangle':
      t.push(
        'MARK --set-xmark 0x539/0xfff',
        'MARK --set-xmark 0x111/0xfff',
        'CONNMARK --set-xmark 0x111/0xfff',
        'CONNMARK --save-mark --nfmask 0xfff --ctmask 0xfff',
        'CONNMARK --restore-mark --nfmask 0xffffffff --ctmask 0xffffffff',
        'DROP',
      );
      if (hook === 'PREROUTING' && proto === 'tcp' && !chain.startsWith('U_'))
        t.push(
          'TPROXY --on-port {P:in} --tproxy-mark 0x111/0xfff',
          'TPROXY --on-port {P:in} --tproxy-mark 0x111/0xfff',
          'TPROXY --on-port {P:other} --tproxy-mark 0x111/0xfff',
        );
      break;
    case 'nat':
      if ((hook === 'PREROUTING' || hook === 'OUTPUT') && proto)
        t.push(
          'REDIRECT --to-ports {P:in}',
          'REDIRECT --to-ports {P:out}',
          'REDIRECT --to-ports {P:in}',
          'DNAT --to-destination {D:server:app}',
          'DNAT --to-destination {D:server2:in}',
        );
      if (hook === 'PREROUTING' || hook === 'OUTPUT') t.push('DNAT --to-destination {A:server}');
      if (hook === 'POSTROUTING') t.push('MASQUERADE', 'MASQUERADE', 'SNAT --to-source {A:self}');
      if (hook === 'INPUT') t.push('SNAT --to-source {A:self}');
      t.push('RETURN');
      break;
    case 'filter':
      t.push('DROP', 'DROP', 'REJECT');
      if (proto === 'tcp') t.push('REJECT --reject-with tcp-reset');
      break;
  }
  return fc.constantFrom(...t).map((x) => (x === 'JUMP' ? `-j U_${hook}` : x === 'GOTO' ? `-g U_${hook}` : `-j ${x}`));
}

function ruleArb(userChains: boolean): fc.Arbitrary<RuleSpec> {
  return fc.constantFrom<Table>('nat', 'nat', 'mangle', 'mangle', 'filter', 'raw').chain((table) =>
    fc.constantFrom(...BUILTINS[table]).chain((builtin) =>
      fc
        .tuple(fc.boolean(), fc.constantFrom<'tcp' | 'udp' | undefined>('tcp', 'tcp', 'udp', undefined))
        .chain(([inUser, proto]) => {
          const chain = userChains && inUser ? `U_${builtin}` : builtin;
          return fc.tuple(matchArb(chain, proto), targetArb(table, chain, proto, userChains)).map(([m, tgt]) => {
            const body = `${m} ${tgt}`.trim();
            return { table, chain, body };
          });
        }),
    ),
  );
}

/** Mesh motifs: the shapes istio-cni-like rulesets are made of. */
type Motif = { readonly node: Node; readonly rules: readonly RuleSpec[]; readonly tproxy?: boolean };

function motifArb(): fc.Arbitrary<Motif> {
  return fc.oneof<fc.Arbitrary<Motif>[]>(
    fc.constant({
      node: 'server' as Node,
      rules: [
        {
          table: 'nat' as Table,
          chain: 'PREROUTING',
          body: '-p tcp ! --dport {P:in} -m mark ! --mark 0x539/0xfff -j REDIRECT --to-ports {P:in}',
        },
      ],
    }),
    fc.constant({
      node: 'client' as Node,
      rules: [
        {
          table: 'nat' as Table,
          chain: 'OUTPUT',
          body: '-p tcp ! -d {A:loopback} -m mark ! --mark 0x539/0xfff -j REDIRECT --to-ports {P:out}',
        },
      ],
    }),
    fc.constant({
      node: 'client' as Node,
      rules: [
        {
          table: 'nat' as Table,
          chain: 'OUTPUT',
          body: '-p tcp -m owner ! --uid-owner 1337 ! -d {A:loopback} -j REDIRECT --to-ports {P:out}',
        },
      ],
    }),
    fc.constant({
      node: 'server' as Node,
      tproxy: true,
      rules: [
        {
          table: 'mangle' as Table,
          chain: 'PREROUTING',
          body: '-m mark --mark 0x539/0xfff -j CONNMARK --set-xmark 0x111/0xfff',
        },
        {
          table: 'mangle' as Table,
          chain: 'PREROUTING',
          body: '-p tcp -m conntrack --ctstate RELATED,ESTABLISHED -j ACCEPT',
        },
        {
          table: 'mangle' as Table,
          chain: 'PREROUTING',
          body: '-p tcp ! -d {A:loopback} -m mark ! --mark 0x539/0xfff -j TPROXY --on-port {P:in} --tproxy-mark 0x111/0xfff',
        },
        {
          table: 'mangle' as Table,
          chain: 'OUTPUT',
          body: '-m connmark --mark 0x111/0xfff -j CONNMARK --restore-mark --nfmask 0xffffffff --ctmask 0xffffffff',
        },
      ],
    }),
    fc.constantFrom<Node>('client', 'router').map((node) => ({
      node,
      rules: [
        {
          table: 'nat' as Table,
          chain: node === 'client' ? 'OUTPUT' : 'PREROUTING',
          body: '-p tcp -d {A:vip} -j DNAT --to-destination {D:server:app}',
        },
      ],
    })),
    fc.constant({
      node: 'router' as Node,
      rules: [{ table: 'nat' as Table, chain: 'POSTROUTING', body: '-o eth-s -j MASQUERADE' }],
    }),
    fc.constant({
      node: 'server' as Node,
      rules: [
        {
          table: 'filter' as Table,
          chain: 'INPUT',
          body: '-p tcp -m conntrack --ctstate NEW -m mark ! --mark 0x111/0xfff --dport {P:app} -j DROP',
        },
      ],
    }),
    fc.constantFrom<Node>('server', 'client').map((node) => ({
      node,
      rules: [
        { table: 'raw' as Table, chain: 'OUTPUT', body: '-p tcp -m mark --mark 0x539/0xfff -j CT --zone 1' },
        { table: 'raw' as Table, chain: 'PREROUTING', body: '-p tcp -d {A:server} -j CT --zone 1' },
      ],
    })),
  );
}

function listenerArb(family: Family): fc.Arbitrary<ListenerSpec[]> {
  void family;
  return fc
    .record({
      app: fc.constantFrom<AddrSlot>('any', 'any', 'server'),
      inTransparent: fc.boolean(),
      inMark: fc.boolean(),
      out: fc.boolean(),
      udp: fc.boolean(),
      other: fc.boolean(),
      // drawn last, so the draws above are those of the cases before dual-stack listeners
      dual: fc.record({ app: fc.boolean(), udp: fc.boolean(), other: fc.boolean() }),
    })
    .map((o) => {
      const l: ListenerSpec[] = [
        {
          name: 'app',
          node: 'server',
          proto: 'tcp',
          addr: o.app,
          port: 'app',
          owner: APP,
          mark: undefined,
          transparent: false,
          dualStack: o.app === 'any' && o.dual.app,
        },
        {
          name: 'proxy-in',
          node: 'server',
          proto: 'tcp',
          addr: 'any',
          port: 'in',
          owner: PROXY,
          mark: o.inMark ? 0x539 : undefined,
          transparent: o.inTransparent,
        },
      ];
      if (o.out)
        l.push({
          name: 'proxy-out',
          node: 'client',
          proto: 'tcp',
          addr: 'any',
          port: 'out',
          owner: PROXY,
          mark: 0x539,
          transparent: false,
        });
      if (o.udp)
        l.push({
          name: 'udp-app',
          node: 'server',
          proto: 'udp',
          addr: 'any',
          port: 'app',
          owner: APP,
          mark: undefined,
          transparent: false,
          dualStack: o.dual.udp,
        });
      if (o.other)
        l.push({
          name: 'client-app',
          node: 'client',
          proto: 'tcp',
          addr: 'any',
          port: 'app',
          owner: APP,
          mark: undefined,
          transparent: false,
          dualStack: o.dual.other,
        });
      return l;
    });
}

const attemptArb: fc.Arbitrary<AttemptSpec> = fc.oneof(
  {
    weight: 5,
    arbitrary: fc.record({
      node: fc.constant<Node>('client'),
      proto: fc.constantFrom<'tcp' | 'udp'>('tcp', 'tcp', 'tcp', 'udp'),
      addr: fc.constantFrom<AddrSlot>('server', 'server', 'vip', 'server2', 'client', 'loopback'),
      port: fc.constantFrom<PortSlot>('app', 'app', 'in', 'other', 'out'),
      owner: fc.constantFrom(APP, APP, PROXY, ROOTISH),
      mark: fc.constantFrom<number | undefined>(undefined, undefined, 0x539, 0x111),
      source: fc.constant<AddrSlot | undefined>(undefined),
    }),
  },
  {
    weight: 2,
    arbitrary: fc.record({
      node: fc.constant<Node>('server'),
      proto: fc.constantFrom<'tcp' | 'udp'>('tcp', 'tcp', 'udp'),
      addr: fc.constantFrom<AddrSlot>('server', 'loopback', 'server2', 'client'),
      port: fc.constantFrom<PortSlot>('app', 'in'),
      owner: fc.constantFrom(APP, PROXY),
      mark: fc.constantFrom<number | undefined>(undefined, 0x539),
      source: fc.constantFrom<AddrSlot | undefined>(undefined, undefined, undefined, 'client'),
    }),
  },
);

/**
 * Generated cases. `nftables: true`: every case also has nft documents (nftables-documents.ts),
 * drawn after everything an iptables-only case draws, so the iptables part of a seed's case is
 * the iptables-only case of that seed (a namespace whose document stands alone drops its
 * iptables rules). Without it the generator is the iptables-only one, draw for draw, so old
 * seeds (FIDELITY_SEED, fixtures/fidelity/*-seed-N) replay as before.
 */
export function caseArb(opts: { readonly nftables?: boolean } = {}): fc.Arbitrary<CaseSpec> {
  return opts.nftables
    ? iptablesCaseArb().chain((c) => nftablesCaseArb().map((n) => withNftables(c, n)))
    : iptablesCaseArb();
}

function withNftables(c: CaseSpec, nft: NftCaseSpec): CaseSpec {
  const rules = { ...c.rules };
  const tproxyRouting = { ...c.tproxyRouting };
  for (const node of NODES) {
    const n = nft[node];
    if (!n) continue;
    if (n.mode === 'alone') rules[node] = [];
    if (usesTproxy(n)) tproxyRouting[node] = true;
  }
  return { ...c, rules, tproxyRouting, nftables: nft };
}

function iptablesCaseArb(): fc.Arbitrary<CaseSpec> {
  return fc
    .record({
      family: fc.constantFrom<Family>(4, 4, 6),
      userChains: fc.boolean(),
      motifs: fc.array(motifArb(), { maxLength: 3 }),
      extra: fc.array(fc.tuple(fc.constantFrom<Node>('client', 'router', 'server', 'server'), fc.boolean()), {
        maxLength: 4,
      }),
      tproxy: fc.record({ client: fc.boolean(), router: fc.constant(false), server: fc.boolean() }),
      seeds: fc.array(ruleArb(true), { maxLength: 4 }),
      seedsFlat: fc.array(ruleArb(false), { maxLength: 4 }),
    })
    .chain((c) =>
      fc
        .record({
          listeners: listenerArb(c.family),
          attempts: fc.array(attemptArb, { minLength: 1, maxLength: 3 }),
          // Drawn last: each run's earlier draws (rules, listeners, attempts) stay what a seed gave before it existed.
          conntrackOn: fc.record({ client: fc.boolean(), router: fc.boolean(), server: fc.boolean() }),
        })
        .map(({ listeners, attempts, conntrackOn }) => {
          const rules: Record<Node, RuleSpec[]> = { client: [], router: [], server: [] };
          const tproxyRouting: Record<Node, boolean> = { ...c.tproxy };
          for (const m of c.motifs) {
            rules[m.node].push(...m.rules);
            if (m.tproxy) tproxyRouting[m.node] = true;
          }
          const pool = c.userChains ? c.seeds : c.seedsFlat;
          c.extra.forEach(([node], i) => {
            const r = pool[i];
            if (r) rules[node].push(r);
          });
          return {
            family: c.family,
            rules,
            tproxyRouting,
            conntrackOn,
            listeners,
            attempts,
          } satisfies CaseSpec;
        }),
    );
}

// ---------------------------------------------------------------- rendering

function addrOf(family: Family, node: Node, slot: AddrSlot): string {
  const a = ADDR[family];
  if (slot === 'self') return node === 'router' ? a.routerS : node === 'client' ? a.client : a.server;
  return a[slot];
}

function renderBody(body: string, family: Family, node: Node, base: number): string {
  return body
    .replace(/\{P:(\w+)\}/g, (_, s: PortSlot) => String(base + PORT_OFFSET[s]))
    .replace(/\{D:(\w+):(\w+)\}/g, (_, a: AddrSlot, p: PortSlot) => {
      const ip = addrOf(family, node, a);
      return family === 6 ? `[${ip}]:${base + PORT_OFFSET[p]}` : `${ip}:${base + PORT_OFFSET[p]}`;
    })
    .replace(/\{A:(\w+)\}/g, (_, s: AddrSlot) => addrOf(family, node, s));
}

/** iptables-restore text for one node: tables with rules, user chains declared and reachable. */
function renderRules(rules: readonly RuleSpec[], family: Family, node: Node, base: number): string | undefined {
  const out: string[] = [];
  for (const table of ['raw', 'mangle', 'nat', 'filter'] as const) {
    const mine = rules.filter((r) => r.table === table);
    if (mine.length === 0) continue;
    out.push(`*${table}`);
    const users = new Set<string>();
    for (const r of mine) {
      if (r.chain.startsWith('U_')) users.add(r.chain);
      const j = /-[jg] (U_\w+)/.exec(r.body);
      if (j && j[1]) users.add(j[1]);
    }
    for (const u of [...users].sort()) out.push(`:${u} - [0:0]`);
    for (const r of mine) out.push(`-A ${r.chain} ${renderBody(r.body, family, node, base)}`);
    // Hook user chains in, so they are reachable even when no rule jumps to them.
    for (const u of [...users].sort()) out.push(`-A ${builtinOf(u)} -j ${u}`);
    out.push('COMMIT');
  }
  return out.length > 0 ? out.join('\n') + '\n' : undefined;
}

/**
 * Turn conntrack on in a namespace without changing any verdict: an xt_conntrack match anywhere
 * makes Linux track the namespace's connections (nf_ct_netns_get); jumping into an empty user
 * chain returns at once. The model tracks only when the kernel would (Netfilter.needsConntrack); the
 * generator adds this to some namespaces (CaseSpec.conntrackOn), so cases meet both: a namespace
 * tracking everything, and one that tracks only what its own rules need (SO_ORIGINAL_DST ENOENT).
 */
export function withConntrackOn(text: string | undefined): string {
  const decl = ':CT_ON - [0:0]';
  const rule = '-A OUTPUT -m conntrack --ctstate NEW -j CT_ON';
  if (text === undefined || !/^\*filter$/m.test(text)) return `${text ?? ''}*filter\n${decl}\n${rule}\nCOMMIT\n`;
  return text.replace(/^\*filter$/m, `*filter\n${decl}\n${rule}`);
}

/** The lab a case stands for, with ports base..base+3. */
export function renderCase(spec: CaseSpec, base: number): Lab {
  const topo = fixedTopology();
  const fam = spec.family;
  const namespaces: LabNetns[] = topo.namespaces.map((n) => {
    const node = n.name as Node;
    const text = renderRules(spec.rules[node], fam, node, base);
    const tp = spec.tproxyRouting[node];
    const nft = spec.nftables?.[node];
    // Conntrack forced on: by an nft table where the namespace has nftables alone, else by iptables.
    const ctByNft = spec.conntrackOn[node] && nft?.mode === 'alone';
    const ctByIpt = spec.conntrackOn[node] && !ctByNft;
    return {
      ...n,
      routes: tp
        ? [
            ...n.routes,
            {
              dst: fam === 4 ? '0.0.0.0/0' : '::/0',
              family: fam,
              via: undefined,
              dev: 'lo',
              table: 100,
              type: 'local' as const,
              src: undefined,
              metric: undefined,
            },
          ]
        : n.routes,
      rules: tp
        ? [
            {
              family: fam,
              priority: 32764,
              fwmark: { value: 0x111, mask: 0xfff },
              from: undefined,
              to: undefined,
              iif: undefined,
              oif: undefined,
              table: 100,
              action: 'lookup' as const,
            },
          ]
        : [],
      // Tracking forced on (both families) in some namespaces; the others track only where their rules need it.
      iptables: ctByIpt ? withConntrackOn(fam === 4 ? text : undefined) : fam === 4 ? text : undefined,
      ip6tables: ctByIpt ? withConntrackOn(fam === 6 ? text : undefined) : fam === 6 ? text : undefined,
      ...(nft ? { nftables: renderNftDocument(nft, fam, node, base, PORT_OFFSET, ctByNft) } : {}),
    };
  });
  const sockets: LabSocket[] = spec.listeners.map((l) => ({
    name: l.name,
    netns: l.node,
    proto: l.proto,
    ...(fam === 4 && l.dualStack === true && l.addr === 'any'
      ? { family: 6 as const, address: '::' }
      : { family: fam, address: addrOf(fam, l.node, l.addr) }),
    port: base + PORT_OFFSET[l.port],
    uid: l.owner.uid,
    gid: l.owner.uid,
    caps: l.owner.caps,
    mark: l.mark,
    transparent: l.transparent,
    reuseport: false,
    expect: 'listening',
  }));
  const attempts: LabAttempt[] = spec.attempts.map((a, i) => ({
    name: `a${i}-${a.node}-${a.proto}-${a.addr}-${a.port}`,
    netns: a.node,
    proto: a.proto,
    address: addrOf(fam, a.node, a.addr),
    port: base + PORT_OFFSET[a.port],
    uid: a.owner.uid,
    gid: a.owner.uid,
    caps: a.owner.caps,
    mark: a.mark,
    source: a.source ? addrOf(fam, a.node, a.source) : undefined,
    sourcePort: undefined,
    transparent: a.source !== undefined && a.owner.caps.includes('NET_ADMIN'),
    payload: 'hello',
    raw: undefined,
    onSockoptError: 'fail',
  }));
  return { kernel: topo.kernel, namespaces, veths: topo.veths, sockets, attempts };
}

void NODES;
