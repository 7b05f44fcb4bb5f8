/**
 * The nftables part of a generated differential case (generator.ts, `caseArb({ nftables: true })`):
 * per namespace an `nft -f` document, alone (the namespace's iptables rules dropped) or beside
 * the namespace's iptables rules, in tables of family ip, ip6 and inet.
 *
 * Base chains of type filter/nat/route at every hook the model supports, with named and numeric
 * priorities — ties with iptables' tables (raw -300, mangle -150, the NAT core at -100/100,
 * filter 0, security 50) and chains before conntrack (< -200) included; regular chains reached by
 * jump/goto that may return; the matches and statements the node agent writes (fixtures/golden/
 * and fixtures/upstream-golden-nft/): meta l4proto/mark/skuid/iifname/oifname, ip/ip6 addresses
 * with prefixes and anonymous/named sets, tcp/udp/th ports (also !=, ranges, sets), tcp flags,
 * ct state/mark/zone, mark and ct mark set with & |, ct zone set, notrack, accept/drop/reject,
 * redirect, dnat, snat, masquerade, tproxy, counter, log.
 *
 * Every document is meant to be valid nft: each statement only where nft and the kernel take it
 * (NAT in nat chains at its hooks, tproxy at prerouting with a transport match, reject not at
 * prerouting/postrouting, route chains at output, nat chains above -200, named priorities only
 * where nft defines them). Where the model and Linux still disagree on validity, the case shows
 * it as a setup difference (differential.ts).
 *
 * Templates carry placeholders rendered per table: `{L3}` (ip / ip6), `{A:slot}` an address,
 * `{N:slot}` a prefix, `{D:slot:port}` a NAT target with port, `{P:slot}` a port, `{SELF}` the
 * node's own address. An `ip` table renders IPv4, `ip6` IPv6, `inet` the case's family.
 */
import fc from 'fast-check';
import type { Family } from '../../impl/api/ip/address.js';
import { ADDR, type Node } from './topology.js';

type NftTableFamily = 'ip' | 'ip6' | 'inet';
type NftHook = 'prerouting' | 'input' | 'forward' | 'output' | 'postrouting';
type ChainType = 'filter' | 'nat' | 'route';
type Proto = 'tcp' | 'udp' | undefined;

interface BaseChainSpec {
  readonly type: ChainType;
  readonly hook: NftHook;
  /** As written after `priority`: a number, a name, or `NAME + N` / `NAME - N`. */
  readonly priority: string;
  readonly policy: 'accept' | 'drop';
  readonly rules: readonly string[];
  /** Regular chains only this base chain reaches (so their statements suit its type and hook). */
  readonly regular: readonly (readonly string[])[];
}

/** Which table family, relative to the case: the case's own (ip/ip6), inet, or the other one. */
type FamilyChoice = 'same' | 'inet' | 'other';

interface TableSpec {
  readonly family: FamilyChoice;
  readonly chains: readonly BaseChainSpec[];
}

interface NftNodeSpec {
  /** `alone`: the namespace has no iptables rules; `mixed`: nft beside them. */
  readonly mode: 'alone' | 'mixed';
  /** Block form (`table F T { ... }`, what nft lists) or command form (`add table`, as knftables writes). */
  readonly form: 'block' | 'commands';
  readonly tables: readonly TableSpec[];
}

export type NftCaseSpec = Readonly<Record<Node, NftNodeSpec | undefined>>;

// ---------------------------------------------------------------- priorities

/** Priorities per (type, hook), as nft takes them (dstnat only at prerouting, srcnat only at postrouting). */
function prioritiesFor(type: ChainType, hook: NftHook): readonly string[] {
  if (type === 'nat') {
    switch (hook) {
      case 'prerouting':
        return ['dstnat', 'dstnat', '-100', 'dstnat - 50', '-150', '-50', '0', 'filter + 10'];
      case 'output':
        return ['-100', '-100', '-150', '-50', '0', '100'];
      case 'postrouting':
        return ['srcnat', 'srcnat', '100', 'srcnat + 10', '50', '150'];
      case 'input':
        return ['100', '100', '50', '150', 'filter'];
      default:
        throw new Error(`no nat chain at ${hook} (the kernel refuses nat chains at forward)`);
    }
  }
  if (type === 'route') return ['mangle', 'mangle', '-150', 'mangle + 1', '-160', '-140', 'filter', 'raw'];
  const common = [
    'raw',
    'raw - 10',
    '-250',
    'mangle',
    'mangle',
    '-150',
    'mangle - 10',
    'mangle + 10',
    '-100',
    'filter',
    'filter',
    '0',
    'filter + 5',
    '10',
    'security',
    '100',
  ];
  if (hook === 'prerouting') return [...common, 'dstnat', 'dstnat + 1'];
  if (hook === 'postrouting') return [...common, 'srcnat', 'srcnat - 1'];
  return common;
}

// ---------------------------------------------------------------- rules

interface RuleCtx {
  readonly type: ChainType;
  readonly hook: NftHook;
  /** In a regular chain (so `return` makes sense there). */
  readonly regular: boolean;
  /** Regular chains this chain may jump or go to. */
  readonly callables: readonly string[];
}

const MARK_MATCHES = [
  'meta mark & 0xfff == 0x539',
  'meta mark & 0xfff != 0x539',
  'mark and 0xfff == 0x111',
  'meta mark 0x111',
  'meta mark & 0x1 == 0x1',
  'meta mark & 0xfff != 0x111',
];
const CT_MATCHES = [
  'ct state new',
  'ct state established,related',
  'ct state { established, related }',
  'ct state invalid,untracked',
  'ct state != established',
  'ct mark & 0xfff == 0x111',
  'ct mark & 0xfff != 0x111',
  'ct zone 1',
];
const ADDR_MATCHES = [
  '{L3} daddr {A:server}',
  '{L3} daddr != {A:loopback}',
  '{L3} daddr {A:vip}',
  '{L3} saddr {A:client}',
  '{L3} daddr {N:server}',
  '{L3} saddr != {N:client}',
  '{L3} daddr { {A:server}, {A:server2} }',
  '{L3} saddr != { {A:client}, {A:loopback} }',
  '{L3} daddr @svc',
  '{L3} daddr != @svc',
];

function matchesArb(ctx: RuleCtx, proto: Proto): fc.Arbitrary<string[]> {
  const parts: string[][] = [ADDR_MATCHES, MARK_MATCHES, CT_MATCHES];
  if (proto)
    parts.push(
      [
        `${proto} dport {P:app}`,
        `${proto} dport != {P:in}`,
        `${proto} dport {P:other}`,
        `${proto} sport {P:app}`,
        `${proto} dport { {P:app}, {P:other} }`,
        `${proto} dport {P:app}-{P:in}`,
        'th dport {P:in}',
      ],
      proto === 'tcp'
        ? [
            'tcp flags syn',
            'tcp flags & (fin | syn | rst | ack) == syn',
            'tcp flags & (fin | syn | rst | ack) != syn',
            'tcp flags == syn',
          ]
        : ['udp dport != {P:other}'],
    );
  else parts.push(['th dport {P:app}', 'th dport != {P:in}', 'meta l4proto { tcp, udp }', 'meta l4proto != udp']);
  if (ctx.hook === 'prerouting' || ctx.hook === 'input' || ctx.hook === 'forward')
    parts.push(['iifname "lo"', 'iifname != "lo"', 'iifname "eth0"', 'iifname "eth-c"', 'meta iifname "eth*"']);
  if (ctx.hook === 'output' || ctx.hook === 'postrouting' || ctx.hook === 'forward')
    parts.push(['oifname "lo"', 'oifname != "lo"', 'oifname "eth-s"', 'meta oifname "eth*"']);
  // Only where Linux reads a socket with a file for sure: at input a not yet accept()ed child has
  // none (a known divergence, sim/kernel/nftables/README.md), which would race with the probe.
  if (ctx.hook === 'output' || ctx.hook === 'postrouting')
    parts.push(['meta skuid 1337', 'meta skuid != 1337', 'skuid 1000', 'meta skuid 0']);
  return fc
    .subarray(
      parts.map((_, i) => i),
      { maxLength: 2 },
    )
    .chain((idx) => (idx.length === 0 ? fc.constant([]) : fc.tuple(...idx.map((i) => fc.constantFrom(...parts[i]!)))));
}

/** The rule's statement and verdict, as suits the chain (type, hook) and the protocol. */
function actionArb(ctx: RuleCtx, proto: Proto): fc.Arbitrary<string> {
  const a: string[] = ['accept', 'accept'];
  if (ctx.regular) a.push('return', 'return');
  for (const c of ctx.callables) a.push(`jump ${c}`, `jump ${c}`, `goto ${c}`);
  switch (ctx.type) {
    case 'filter':
      a.push(
        'drop',
        'drop',
        'counter',
        'counter accept',
        'log prefix "fid " level info',
        'meta mark set 0x539',
        'meta mark set meta mark & 0xfffff000 | 0x111',
        'mark set 0x111 accept',
        'ct mark set ct mark & 0xfffff000 | 0x111',
        'ct mark set meta mark',
        'meta mark set ct mark',
      );
      if (ctx.hook === 'prerouting' || ctx.hook === 'output') a.push('ct zone set 1', 'notrack', 'notrack accept');
      if (ctx.hook === 'input' || ctx.hook === 'forward' || ctx.hook === 'output') {
        a.push('reject');
        if (proto === 'tcp') a.push('reject with tcp reset');
      }
      if (ctx.hook === 'prerouting' && proto === 'tcp')
        a.push(
          'tproxy {L3} to :{P:in} meta mark set meta mark & 0xfffff000 | 0x111 accept',
          'tproxy {L3} to :{P:in} meta mark set 0x111',
          'tproxy {L3} to :{P:other}',
        );
      break;
    case 'route':
      a.push(
        'meta mark set 0x111',
        'meta mark set 0x539',
        'meta mark set meta mark & 0xfffff000 | 0x111 accept',
        'ct mark set ct mark & 0xfffff000 | 0x111',
        'drop',
      );
      break;
    case 'nat':
      if (ctx.hook === 'prerouting' || ctx.hook === 'output') {
        a.push('dnat {L3} to {A:server}', 'redirect');
        if (proto)
          a.push(
            'redirect to :{P:in}',
            'redirect to :{P:in}',
            'redirect to :{P:out}',
            'dnat {L3} to {D:server:app}',
            'dnat {L3} to {D:server2:in}',
          );
      }
      if (ctx.hook === 'postrouting') a.push('masquerade', 'masquerade', 'snat {L3} to {SELF}');
      if (ctx.hook === 'input') a.push('snat {L3} to {SELF}');
      break;
  }
  return fc.constantFrom(...a);
}

function ruleArb(ctx: RuleCtx): fc.Arbitrary<string> {
  return fc.tuple(fc.constantFrom<Proto>('tcp', 'tcp', 'udp', undefined), fc.boolean()).chain(([proto, l4]) =>
    fc.tuple(matchesArb(ctx, proto), actionArb(ctx, proto)).map(([ms, act]) => {
      // A port, a NAT port or tproxy needs a transport match first: `meta l4proto P` unless a
      // `tcp`/`udp` match already says it (th needs nothing of its own, it reads any transport).
      const said = ms.some((m) => m.startsWith(`${proto} `));
      const head = proto && (l4 || !said) ? [`meta l4proto ${proto}`] : [];
      return [...head, ...ms, act].join(' ');
    }),
  );
}

function regularArb(type: ChainType, hook: NftHook): fc.Arbitrary<string[]> {
  return fc.array(ruleArb({ type, hook, regular: true, callables: [] }), { minLength: 1, maxLength: 2 });
}

const TYPE_HOOKS: readonly (readonly [ChainType, NftHook])[] = [
  ['filter', 'prerouting'],
  ['filter', 'prerouting'],
  ['filter', 'input'],
  ['filter', 'input'],
  ['filter', 'forward'],
  ['filter', 'output'],
  ['filter', 'output'],
  ['filter', 'postrouting'],
  ['nat', 'prerouting'],
  ['nat', 'prerouting'],
  ['nat', 'output'],
  ['nat', 'output'],
  ['nat', 'postrouting'],
  ['nat', 'input'],
  ['route', 'output'],
];

function baseChainArb(): fc.Arbitrary<BaseChainSpec> {
  return fc.constantFrom(...TYPE_HOOKS).chain(([type, hook]) =>
    fc
      .record({
        priority: fc.constantFrom(...prioritiesFor(type, hook)),
        // nat chains keep policy accept: a nat policy drop would drop every connection's first packet
        policy: type === 'nat' ? fc.constant<'accept'>('accept') : fc.constantFrom<'accept' | 'drop'>(...POLICIES),
        regular: fc.boolean(),
      })
      .chain(({ priority, policy, regular }) => {
        const callables = regular ? ['REG'] : [];
        return fc
          .record({
            rules: fc.array(ruleArb({ type, hook, regular: false, callables }), { maxLength: 3 }),
            reg: regular ? regularArb(type, hook).map((r) => [r]) : fc.constant([]),
          })
          .map(({ rules, reg }) => ({ type, hook, priority, policy, rules, regular: reg }));
      }),
  );
}
const POLICIES = ['accept', 'accept', 'accept', 'accept', 'accept', 'drop'] as const;

function tableArb(): fc.Arbitrary<TableSpec> {
  return fc.record({
    family: fc.constantFrom<FamilyChoice>('same', 'same', 'inet', 'inet', 'other'),
    chains: fc.array(baseChainArb(), { minLength: 1, maxLength: 2 }),
  });
}

// ---------------------------------------------------------------- mesh motifs

/** The shapes upstream's and strict's nftables documents are made of (fixtures/golden/). */
const MOTIFS: readonly { readonly node: Node; readonly table: TableSpec }[] = [
  {
    node: 'server',
    table: {
      family: 'same',
      chains: [
        {
          type: 'nat',
          hook: 'prerouting',
          priority: '-100',
          policy: 'accept',
          rules: [
            '{L3} daddr != {A:loopback} iifname != "lo" meta l4proto tcp tcp dport != {P:in} meta mark & 0xfff != 0x539 redirect to :{P:in}',
          ],
          regular: [],
        },
      ],
    },
  },
  {
    node: 'client',
    table: {
      family: 'inet',
      chains: [
        {
          type: 'nat',
          hook: 'output',
          priority: '-100',
          policy: 'accept',
          rules: ['jump REG'],
          regular: [
            [
              'meta mark & 0xfff == 0x539 meta skuid 1337 accept',
              '{L3} daddr != {A:loopback} oifname "lo" accept',
              '{L3} daddr != {A:loopback} meta l4proto tcp redirect to :{P:out}',
            ],
          ],
        },
      ],
    },
  },
  {
    node: 'server',
    table: {
      family: 'same',
      chains: [
        {
          type: 'filter',
          hook: 'prerouting',
          priority: '-150',
          policy: 'accept',
          rules: [
            'meta mark & 0xfff == 0x539 ct mark set ct mark & 0xfffff000 | 0x111',
            '{L3} daddr != {A:loopback} iifname != "lo" meta l4proto tcp tcp dport != {P:in} tcp flags & (fin | syn | rst | ack) == syn meta mark & 0xfff != 0x539 ct state { new } tproxy to :{P:in} meta mark set meta mark & 0xfffff000 | 0x111 accept',
            '{L3} daddr != {A:loopback} iifname != "lo" meta l4proto tcp tcp dport != {P:in} tcp flags & (fin | syn | rst | ack) == syn meta mark & 0xfff != 0x539 ct state { new } drop',
          ],
          regular: [],
        },
        {
          type: 'route',
          hook: 'output',
          priority: '-150',
          policy: 'accept',
          rules: ['ct mark & 0xfff == 0x111 meta mark set ct mark'],
          regular: [],
        },
      ],
    },
  },
  {
    node: 'router',
    table: {
      family: 'same',
      chains: [
        {
          type: 'nat',
          hook: 'prerouting',
          priority: 'dstnat',
          policy: 'accept',
          rules: ['{L3} daddr {A:vip} meta l4proto tcp dnat to {D:server:app}'],
          regular: [],
        },
        {
          type: 'nat',
          hook: 'postrouting',
          priority: 'srcnat',
          policy: 'accept',
          rules: ['oifname "eth-s" masquerade'],
          regular: [],
        },
      ],
    },
  },
  {
    node: 'client',
    table: {
      family: 'same',
      chains: [
        {
          type: 'filter',
          hook: 'output',
          priority: '-300',
          policy: 'accept',
          rules: ['meta l4proto tcp meta mark & 0xfff == 0x539 ct zone set 1', 'tcp dport {P:other} notrack'],
          regular: [],
        },
        {
          type: 'filter',
          hook: 'output',
          priority: '0',
          policy: 'accept',
          rules: [
            'meta l4proto tcp tcp flags & (rst) == rst return',
            'meta mark & 0xfff == 0x539 meta skuid != 1337 drop',
            'oifname "lo" return',
          ],
          regular: [],
        },
      ],
    },
  },
  {
    node: 'server',
    table: {
      family: 'inet',
      chains: [
        {
          type: 'filter',
          hook: 'input',
          priority: 'filter',
          policy: 'accept',
          rules: ['meta l4proto tcp ct state new meta mark & 0xfff != 0x111 tcp dport {P:app} drop'],
          regular: [],
        },
      ],
    },
  },
];

// ---------------------------------------------------------------- the case's documents

/**
 * nftables for a case's namespaces: at least one namespace (`primary`) has a document; each other
 * has one or not. Motifs go to their namespace when it has a document.
 */
export function nftablesCaseArb(): fc.Arbitrary<NftCaseSpec> {
  const mode = fc.constantFrom<'none' | 'alone' | 'mixed'>('none', 'alone', 'mixed', 'mixed');
  return fc
    .record({
      primary: fc.constantFrom<Node>('client', 'router', 'server', 'server'),
      modes: fc.record({ client: mode, router: mode, server: mode }),
      primaryMode: fc.constantFrom<'alone' | 'mixed'>('alone', 'mixed'),
      forms: fc.record({
        client: fc.constantFrom<'block' | 'commands'>('block', 'block', 'commands'),
        router: fc.constantFrom<'block' | 'commands'>('block', 'block', 'commands'),
        server: fc.constantFrom<'block' | 'commands'>('block', 'block', 'commands'),
      }),
      motifs: fc.subarray([...MOTIFS.keys()], { maxLength: 2 }),
      tables: fc.record({
        client: fc.array(tableArb(), { maxLength: 2 }),
        router: fc.array(tableArb(), { maxLength: 2 }),
        server: fc.array(tableArb(), { maxLength: 2 }),
      }),
    })
    .map((d) => {
      const out: Partial<Record<Node, NftNodeSpec>> = {};
      for (const node of ['client', 'router', 'server'] as const) {
        const m = node === d.primary ? d.primaryMode : d.modes[node];
        if (m === 'none') continue;
        const tables = d.motifs
          .map((i) => MOTIFS[i]!)
          .filter((x) => x.node === node)
          .map((x) => x.table)
          .concat(d.tables[node]);
        // A namespace with a document has at least one table: an empty table (valid, no effect).
        out[node] = {
          mode: m,
          form: d.forms[node],
          tables: tables.length > 0 ? tables : [{ family: 'inet', chains: [] }],
        };
      }
      return { client: out.client, router: out.router, server: out.server };
    });
}

// ---------------------------------------------------------------- rendering

const PREFIX: Readonly<Record<Family, Readonly<Record<string, string>>>> = {
  4: { server: '10.244.2.0/24', client: '10.244.1.0/24', vip: '10.96.0.0/16', loopback: '127.0.0.0/8' },
  6: { server: 'fd00:2::/64', client: 'fd00:1::/64', vip: 'fd00:96::/64', loopback: '::1/128' },
};

function tableFamily(choice: FamilyChoice, caseFamily: Family): { name: NftTableFamily; addr: Family } {
  if (choice === 'inet') return { name: 'inet', addr: caseFamily };
  const fam: Family = choice === 'same' ? caseFamily : caseFamily === 4 ? 6 : 4;
  return { name: fam === 4 ? 'ip' : 'ip6', addr: fam };
}

function selfAddr(fam: Family, node: Node): string {
  const a = ADDR[fam];
  return node === 'router' ? a.routerS : node === 'client' ? a.client : a.server;
}

function renderRule(
  text: string,
  fam: Family,
  node: Node,
  base: number,
  ports: Readonly<Record<string, number>>,
): string {
  const a = ADDR[fam] as unknown as Readonly<Record<string, string>>;
  return text
    .replaceAll('{L3}', fam === 4 ? 'ip' : 'ip6')
    .replaceAll('{SELF}', selfAddr(fam, node))
    .replace(/\{P:(\w+)\}/g, (_, s: string) => String(base + ports[s]!))
    .replace(/\{D:(\w+):(\w+)\}/g, (_, s: string, p: string) =>
      fam === 6 ? `[${a[s]!}]:${base + ports[p]!}` : `${a[s]!}:${base + ports[p]!}`,
    )
    .replace(/\{N:(\w+)\}/g, (_, s: string) => PREFIX[fam][s]!)
    .replace(/\{A:(\w+)\}/g, (_, s: string) => a[s]!);
}

interface RenderedChain {
  readonly name: string;
  /** `type T hook H priority P; policy X;` for a base chain. */
  readonly head: string | undefined;
  readonly rules: readonly string[];
}

interface RenderedTable {
  readonly family: NftTableFamily;
  readonly name: string;
  readonly set: string | undefined;
  readonly chains: readonly RenderedChain[];
}

function renderTable(
  t: TableSpec,
  index: number,
  caseFamily: Family,
  node: Node,
  base: number,
  ports: Readonly<Record<string, number>>,
): RenderedTable {
  const fam = tableFamily(t.family, caseFamily);
  const chains: RenderedChain[] = [];
  t.chains.forEach((c, i) => {
    const regNames = c.regular.map((_, j) => `r${i}_${j}`);
    const fix = (r: string): string =>
      renderRule(r, fam.addr, node, base, ports).replace(/\bREG\b/g, regNames[0] ?? 'REG');
    const rules = c.rules.map(fix);
    // A regular chain is always reached, so its statements are checked against this base chain.
    if (regNames.length > 0 && !rules.some((r) => / (jump|goto) r\d+_0$/.test(` ${r}`)))
      rules.push(`jump ${regNames[0]}`);
    chains.push({
      name: `b${i}`,
      head: `type ${c.type} hook ${c.hook} priority ${c.priority}; policy ${c.policy};`,
      rules,
    });
    c.regular.forEach((rs, j) => chains.push({ name: regNames[j]!, head: undefined, rules: rs.map(fix) }));
  });
  const usesSet = chains.some((c) => c.rules.some((r) => r.includes('@svc')));
  const set = usesSet
    ? `type ${fam.addr === 4 ? 'ipv4_addr' : 'ipv6_addr'}; flags interval; elements = { ${ADDR[fam.addr].server2}, ${PREFIX[fam.addr]['vip']!} }`
    : undefined;
  return { family: fam.name, name: `fid${index}`, set, chains };
}

function blockForm(t: RenderedTable): string {
  const lines = [`table ${t.family} ${t.name} {`];
  if (t.set) lines.push(`  set svc { ${t.set}; }`);
  for (const c of t.chains) {
    lines.push(`  chain ${c.name} {`);
    if (c.head) lines.push(`    ${c.head}`);
    for (const r of c.rules) lines.push(`    ${r}`);
    lines.push('  }');
  }
  lines.push('}');
  return lines.join('\n');
}

function commandForm(t: RenderedTable): string {
  const ft = `${t.family} ${t.name}`;
  const lines = [`add table ${ft}`];
  if (t.set) lines.push(`add set ${ft} svc { ${t.set.replaceAll(';', ' ;')} ; }`);
  // Chains first: in the command form nft resolves a jump target when the rule is added.
  for (const c of t.chains)
    lines.push(c.head ? `add chain ${ft} ${c.name} { ${c.head.replaceAll(';', ' ;')} }` : `add chain ${ft} ${c.name}`);
  for (const c of t.chains) for (const r of c.rules) lines.push(`add rule ${ft} ${c.name} ${r}`);
  return lines.join('\n');
}

/**
 * A verdict-neutral table that turns conntrack on for both families: a ct expression in a chain
 * no base chain reaches still takes conntrack (nf_ct_netns_get at rule load), the nft counterpart
 * of generator.ts's `withConntrackOn` for a namespace without iptables rules.
 */
const NFT_CONNTRACK_ON = 'table inet ct_on {\n  chain track {\n    ct state new\n  }\n}';

/** The `nft -f` document of one namespace; `conntrackOn` adds NFT_CONNTRACK_ON. */
export function renderNftDocument(
  spec: NftNodeSpec,
  caseFamily: Family,
  node: Node,
  base: number,
  ports: Readonly<Record<string, number>>,
  conntrackOn: boolean,
): string {
  const tables = spec.tables.map((t, i) => renderTable(t, i, caseFamily, node, base, ports));
  const parts = tables.map((t) => (spec.form === 'block' ? blockForm(t) : commandForm(t)));
  if (conntrackOn) parts.push(NFT_CONNTRACK_ON);
  return `${parts.join('\n')}\n`;
}

/** Does the namespace's document tproxy (so the case adds the fwmark route to a local table)? */
export function usesTproxy(spec: NftNodeSpec): boolean {
  return spec.tables.some((t) =>
    t.chains.some((c) => [...c.rules, ...c.regular.flat()].some((r) => r.includes('tproxy'))),
  );
}
