/**
 * Generated nftables cases over the fixed topology (topology.ts), for the nftables part of the
 * differential property (nft-differential.ts): per namespace an `nft -f` document of random base
 * chains (hook, type, priority, policy) and a regular chain, with rules drawn from the model's
 * supported subset — payload, meta, ct and fib matches; accept, drop, reject, marks, ct mark,
 * jump/return, NAT by hook — sometimes beside a small iptables ruleset in the same namespace (so
 * priorities interleave), plus listeners and TCP/UDP attempts whose uid `meta skuid` can tell.
 * IPv4 only: the IPv6 differences of the iptables property (neighbour discovery) would add noise.
 */
import fc from 'fast-check';
import type { Lab, LabAttempt, LabNetns, LabSocket } from '../../sim/lab/lab-file.js';
import { NfTables } from '../../sim/kernel/nftables/nftables.js';
import { NftError } from '../../sim/kernel/nftables/errors.js';
import { ADDR, fixedTopology, NODES, type Node } from './topology.js';

type Hook = 'prerouting' | 'input' | 'forward' | 'output' | 'postrouting';
type PortSlot = 'app' | 'in' | 'out' | 'other';
const PORT_OFFSET: Readonly<Record<PortSlot, number>> = { app: 0, in: 1, out: 2, other: 3 };
type AddrSlot = 'client' | 'routerC' | 'routerS' | 'server' | 'server2' | 'vip' | 'loopback';

interface ChainSpec {
  readonly hook: Hook;
  readonly type: 'filter' | 'nat' | 'route';
  readonly priority: number;
  readonly policy: 'accept' | 'drop';
  /** Rule bodies with `{P:slot}` / `{A:slot}` / `{SELF}` placeholders. */
  readonly rules: readonly string[];
}

interface NftCaseSpec {
  readonly nft: Readonly<
    Partial<Record<Node, { readonly chains: readonly ChainSpec[]; readonly user: readonly string[] }>>
  >;
  readonly iptables: Readonly<Partial<Record<Node, string>>>;
  readonly attempts: readonly { node: Node; proto: 'tcp' | 'udp'; addr: AddrSlot; port: PortSlot; uid: number }[];
}

const port = fc.constantFrom<PortSlot>('app', 'in', 'out', 'other');
const addr = fc.constantFrom<AddrSlot>('client', 'routerC', 'routerS', 'server', 'server2', 'loopback');

const MATCHES: fc.Arbitrary<string> = fc.oneof(
  fc.constantFrom(
    'meta l4proto tcp',
    'meta l4proto udp',
    'meta mark & 0xff == 0x1',
    'meta mark != 0x0',
    'ct state new',
    'ct state established,related',
    'ct mark 0x1',
    'meta skuid 1000',
    'meta skuid != 1000',
    'meta skuid 0',
    'oifname != "lo"',
    'iifname "lo"',
    'fib daddr type local',
    'tcp flags syn',
    'ct direction reply',
  ),
  port.map((p) => `tcp dport {P:${p}}`),
  port.map((p) => `tcp dport != {P:${p}}`),
  port.map((p) => `udp dport {P:${p}}`),
  port.map((p) => `th dport {P:${p}}`),
  addr.map((a) => `ip daddr {A:${a}}`),
  addr.map((a) => `ip saddr != {A:${a}}`),
);

function statementArb(hook: Hook, type: ChainSpec['type'], user: boolean): fc.Arbitrary<string> {
  if (type === 'nat') {
    if (hook === 'prerouting' || hook === 'output')
      return fc.oneof(
        fc.tuple(port, port).map(([a, b]) => `tcp dport {P:${a}} redirect to :{P:${b}}`),
        fc.tuple(port, port).map(([a, b]) => `udp dport {P:${a}} redirect to :{P:${b}}`),
        fc.tuple(port, port).map(([a, b]) => `tcp dport {P:${a}} dnat ip to {A:server2}:{P:${b}}`),
        fc.constantFrom('accept', 'drop', 'counter'),
      );
    if (hook === 'postrouting')
      return fc.oneof(fc.constantFrom('masquerade', 'ip daddr {A:server} snat ip to {SELF}', 'accept', 'drop'));
    return fc.constantFrom('ip saddr {A:client} snat ip to {SELF}', 'accept', 'counter');
  }
  const verdicts = [
    'accept',
    'drop',
    'counter',
    'meta mark set 0x1',
    'ct mark set 0x1',
    'meta mark set ct mark',
    'continue',
  ];
  if (hook !== 'postrouting') verdicts.push('reject');
  if (!user) verdicts.push('jump U');
  else verdicts.push('return');
  return fc.constantFrom(...verdicts);
}

function ruleArb(hook: Hook, type: ChainSpec['type'], user: boolean): fc.Arbitrary<string> {
  return fc
    .tuple(fc.array(MATCHES, { maxLength: 2 }), statementArb(hook, type, user))
    .map(([ms, st]) => [...ms, st].join(' '))
    .filter(
      (r) => !/(tcp|th) dport .*udp dport|udp dport .*(tcp|th) dport|meta l4proto (tcp|udp).*meta l4proto/.test(r),
    )
    .filter((r) => !(/udp dport/.test(r) && /meta l4proto tcp|tcp flags/.test(r)))
    .filter((r) => !(/tcp dport|tcp flags/.test(r) && /meta l4proto udp/.test(r)));
}

const chainArb: fc.Arbitrary<ChainSpec> = fc
  .record({
    hook: fc.constantFrom<Hook>('prerouting', 'input', 'forward', 'output', 'postrouting'),
    kind: fc.constantFrom('filter', 'filter', 'filter', 'nat', 'route'),
    priority: fc.constantFrom(-300, -160, -150, -140, -100, -50, 0, 10, 100),
    policy: fc.constantFrom<'accept' | 'drop'>('accept', 'accept', 'accept', 'drop'),
  })
  .chain(({ hook, kind, priority, policy }) => {
    const type: ChainSpec['type'] =
      kind === 'nat' && hook !== 'forward' ? 'nat' : kind === 'route' && hook === 'output' ? 'route' : 'filter';
    const prio = type === 'nat' && priority <= -200 ? -100 : priority;
    return fc
      .array(ruleArb(hook, type, false), { maxLength: 3 })
      .map((rules) => ({ hook, type, priority: prio, policy: type === 'nat' ? ('accept' as const) : policy, rules }));
  });

const IPTABLES_SNIPPETS = [
  '*mangle\n-A OUTPUT -p tcp -j MARK --set-xmark 0x1/0xffffffff\nCOMMIT\n',
  '*mangle\n-A PREROUTING -p tcp -j MARK --set-xmark 0x1/0xffffffff\nCOMMIT\n',
  '*filter\n-A OUTPUT -m mark --mark 0x1/0xff -p tcp -j DROP\nCOMMIT\n',
  '*nat\n-A OUTPUT -p tcp -m tcp --dport {P:in} -j REDIRECT --to-ports {P:app}\nCOMMIT\n',
  '*nat\n-A PREROUTING -p tcp -m tcp --dport {P:in} -j REDIRECT --to-ports {P:app}\nCOMMIT\n',
];

/**
 * Only cases whose documents the model takes (it refuses exactly what nft refuses, checked in
 * tests/netns/fidelity/nftables-parser.spec.ts): a refused case tests nothing at the packet level,
 * and a case that fails half-way on the kernel would leave state behind for the next one.
 */
function valid(spec: NftCaseSpec): boolean {
  for (const n of renderNftCase(spec, 10000).namespaces) {
    if (n.nftables === undefined) continue;
    try {
      new NfTables().apply(n.nftables, { source: n.name });
    } catch (e) {
      if (e instanceof NftError) return false;
      throw e;
    }
  }
  return true;
}

export function nftCaseArb(): fc.Arbitrary<NftCaseSpec> {
  return anyNftCaseArb().filter(valid);
}

function anyNftCaseArb(): fc.Arbitrary<NftCaseSpec> {
  const nodeDoc = fc.record({
    chains: fc.array(chainArb, { minLength: 1, maxLength: 3 }),
    user: fc.array(ruleArb('output', 'filter', true), { maxLength: 2 }),
  });
  return fc.record({
    nft: fc.record({ client: nodeDoc, router: nodeDoc, server: nodeDoc }, { requiredKeys: [] }) as fc.Arbitrary<
      NftCaseSpec['nft']
    >,
    iptables: fc.record(
      {
        client: fc.constantFrom(...IPTABLES_SNIPPETS),
        router: fc.constantFrom(...IPTABLES_SNIPPETS),
        server: fc.constantFrom(...IPTABLES_SNIPPETS),
      },
      { requiredKeys: [] },
    ) as fc.Arbitrary<NftCaseSpec['iptables']>,
    attempts: fc.array(
      fc.record({
        node: fc.constantFrom<Node>(...NODES),
        proto: fc.constantFrom<'tcp' | 'udp'>('tcp', 'tcp', 'tcp', 'udp'),
        addr: fc.constantFrom<AddrSlot>('server', 'server', 'server2', 'client', 'routerS', 'vip', 'loopback'),
        port: fc.constantFrom<PortSlot>('app', 'app', 'in', 'other'),
        uid: fc.constantFrom(1000, 0, 1337),
      }),
      { minLength: 1, maxLength: 3 },
    ),
  });
}

const SELF: Readonly<Record<Node, string>> = {
  client: ADDR[4].client,
  router: ADDR[4].routerS,
  server: ADDR[4].server2,
};

function fill(text: string, node: Node, base: number): string {
  return text
    .replace(/\{P:(\w+)\}/g, (_, s: PortSlot) => String(base + PORT_OFFSET[s]))
    .replace(/\{A:(\w+)\}/g, (_, s: AddrSlot) => ADDR[4][s])
    .replaceAll('{SELF}', SELF[node]);
}

function nftDoc(node: Node, d: NonNullable<NftCaseSpec['nft'][Node]>, base: number): string {
  const lines = ['table inet gen {'];
  d.chains.forEach((c, i) => {
    lines.push(`  chain c${i} {`, `    type ${c.type} hook ${c.hook} priority ${c.priority}; policy ${c.policy};`);
    for (const r of c.rules) lines.push(`    ${fill(r, node, base)}`);
    lines.push('  }');
  });
  lines.push('  chain U {');
  for (const r of d.user) lines.push(`    ${fill(r, node, base)}`);
  lines.push('  }', '}');
  return `${lines.join('\n')}\n`;
}

export function renderNftCase(spec: NftCaseSpec, base: number): Lab {
  const topo = fixedTopology();
  const namespaces: LabNetns[] = topo.namespaces.map((n) => {
    const node = n.name as Node;
    const d = spec.nft[node];
    const ipt = spec.iptables[node];
    return {
      ...n,
      ...(ipt !== undefined ? { iptables: fill(ipt, node, base) } : {}),
      ...(d !== undefined ? { nftables: nftDoc(node, d, base) } : {}),
    };
  });
  const own = {
    caps: [] as const,
    gid: 0,
    mark: undefined,
    transparent: false,
    reuseport: false,
    expect: 'listening' as const,
  };
  const listener = (name: string, netns: Node, proto: 'tcp' | 'udp', p: PortSlot, uid: number): LabSocket => ({
    ...own,
    name,
    netns,
    proto,
    family: 4,
    address: '0.0.0.0',
    port: base + PORT_OFFSET[p],
    uid,
    gid: uid,
  });
  const sockets: LabSocket[] = [
    listener('server-app', 'server', 'tcp', 'app', 0),
    listener('server-in', 'server', 'tcp', 'in', 1337),
    listener('server-app-udp', 'server', 'udp', 'app', 0),
    listener('router-app', 'router', 'tcp', 'app', 0),
    listener('client-app', 'client', 'tcp', 'app', 1000),
  ];
  const attempts: LabAttempt[] = spec.attempts.map((a, i) => ({
    name: `a${i}-${a.node}-${a.proto}-${a.addr}-${a.port}`,
    netns: a.node,
    proto: a.proto,
    address: ADDR[4][a.addr],
    port: base + PORT_OFFSET[a.port],
    uid: a.uid,
    gid: a.uid,
    caps: [],
    mark: undefined,
    source: undefined,
    sourcePort: undefined,
    transparent: false,
    payload: 'hello',
    onSockoptError: 'fail',
    raw: undefined,
  }));
  return { ...topo, namespaces, sockets, attempts };
}
