/**
 * The generators: fast-check arbitraries for every command, shaped by the threat model (what
 * the attacker may do) and the world (how many nodes, whether it has IPv6). Weights favour
 * connections and settles, where properties are checked.
 */
import fc from 'fast-check';
import { ForgeIdentity } from './forge-identity.js';
import { INBOUND_HBONE_PORT, INBOUND_PLAINTEXT_PORT, OUTBOUND_PORT, DNS_PORT } from '../../impl/api/ports.js';
import { PROXY_MARK, RETURN_MARK } from '../../impl/api/marks.js';
import { AGENT_ADD_FAULTS, IDENTITY_CREDENTIALS, type AppCapability } from '../world.js';
import {
  APP_PORTS,
  APP_UDP_PORT,
  ApplyPolicy,
  ComponentCommand,
  Connect,
  CreateNamespace,
  CreatePod,
  CreatePodAgentFault,
  DeletePod,
  DeletePolicy,
  DropWatches,
  HOST_APP_PORT,
  HOSTILE_ANNOTATIONS,
  LabelNamespace,
  LabelPod,
  PolicyOverlap,
  RebootNode,
  Settle,
  type AttackShape,
  type DestinationShape,
  type ModeChoice,
  type ModelCommand,
  type OverlapRuleKind,
  type PodShape,
  type RuleShape,
  type SourceShape,
} from './commands.js';
import type { ThreatSpec } from './contracts.js';
import { Race, type RaceOp } from './race.js';

interface GeneratorContext {
  readonly threat: ThreatSpec;
  readonly nodes: number;
  readonly ipv6: boolean;
}

/** The namespaces histories may create (a small pool, so commands collide on purpose). */
const NAMESPACE_POOL = ['ambient-a', 'ambient-b', 'plain'] as const;

const mode: fc.Arbitrary<ModeChoice> = fc.constantFrom<ModeChoice>('ambient', null, 'none', 'Ambient');

/** Ports a connection targets: the apps', the proxy's own, and one nobody listens on. */
const PORTS = [
  ...APP_PORTS,
  APP_UDP_PORT,
  Number(OUTBOUND_PORT),
  Number(INBOUND_PLAINTEXT_PORT),
  Number(INBOUND_HBONE_PORT),
  Number(DNS_PORT),
  15020,
  7777,
];

function podShape(ctx: GeneratorContext): fc.Arbitrary<PodShape> {
  const caps = ctx.threat.caps.length === 0 ? fc.constant<AppCapability[]>([]) : fc.subarray([...ctx.threat.caps]);
  return fc.record({
    nsIndex: fc.nat(5),
    nodeIndex: fc.option(fc.nat(ctx.nodes - 1), { nil: undefined }),
    mode,
    hostile: fc.oneof(
      { weight: 3, arbitrary: fc.constant([]) },
      { weight: 1, arbitrary: fc.subarray(Object.keys(HOSTILE_ANNOTATIONS), { maxLength: 2 }) },
    ),
    uidIndex: fc.nat(ctx.threat.uids.length - 1),
    caps,
    hostNetwork: ctx.threat.hostAttacker ? fc.boolean() : fc.constant(false),
  });
}

function rule(): fc.Arbitrary<RuleShape> {
  return fc.oneof(
    fc.constant<RuleShape>({ kind: 'any' }),
    fc.record({ kind: fc.constant('namespace' as const), nsIndex: fc.nat(5) }),
    fc.record({ kind: fc.constant('principal' as const), nsIndex: fc.nat(5) }),
    fc.record({ kind: fc.constant('port' as const), port: fc.constantFrom(...APP_PORTS) }),
    fc.record({
      kind: fc.constant('ipBlock' as const),
      cidr: fc.constantFrom('10.244.0.0/16', '192.0.2.0/24', '203.0.113.0/24', 'fd00::/8'),
    }),
  );
}

function source(ctx: GeneratorContext): fc.Arbitrary<SourceShape> {
  // Sources follow the threat's vantage: the cell judges what that attacker can do.
  switch (ctx.threat.vantage) {
    case 'enrolled-pod':
    case 'other-node':
      return fc.record({ kind: fc.constant('pod' as const), index: fc.nat(20) });
    case 'same-node-host':
      return fc.record({
        kind: fc.constant('host' as const),
        nodeIndex: fc.nat(ctx.nodes - 1),
        uidIndex: fc.nat(ctx.threat.uids.length - 1),
      });
    case 'outside':
      return fc.constant<SourceShape>({ kind: 'outside' });
  }
}

function destination(ctx: GeneratorContext): fc.Arbitrary<DestinationShape> {
  const port = fc.constantFrom(...PORTS);
  return fc.oneof(
    { weight: 6, arbitrary: fc.record({ kind: fc.constant('pod' as const), index: fc.nat(20), port }) },
    {
      weight: 2,
      arbitrary: fc.record({ kind: fc.constant('pod-ip' as const), index: fc.nat(20), ipIndex: fc.nat(1), port }),
    },
    {
      weight: 1,
      arbitrary: fc.record({
        kind: fc.constant('ip' as const),
        ip: fc.constantFrom('203.0.113.10', '192.0.2.10', '10.96.0.10'),
        port,
      }),
    },
    // The nodes' own addresses: host sockets and hostNetwork apps (HOST_APP_PORT), or the proxy and app ports nobody serves there.
    {
      weight: 1,
      arbitrary: fc.record({
        kind: fc.constant('node' as const),
        nodeIndex: fc.nat(ctx.nodes - 1),
        ipIndex: fc.nat(1),
        port: fc.constantFrom(HOST_APP_PORT, HOST_APP_PORT, ...PORTS),
      }),
    },
  );
}

const OVERLAP_RULES: readonly OverlapRuleKind[] = ['any', 'port', 'principal', 'namespace'];

/** An ALLOW and a DENY on one target whose rules share their parameters, so one connection can match both. */
function overlap(ctx: GeneratorContext): fc.Arbitrary<PolicyOverlap> {
  return fc
    .record({
      podIndex: fc.nat(20),
      selector: fc.boolean(),
      allow: fc.constantFrom(...OVERLAP_RULES),
      deny: fc.constantFrom(...OVERLAP_RULES),
      denyFirst: fc.boolean(),
      port: fc.constantFrom(...APP_PORTS),
      srcNsIndex: fc.nat(5),
      from: source(ctx),
    })
    .map((s) => new PolicyOverlap(s));
}

function attack(ctx: GeneratorContext): fc.Arbitrary<AttackShape> {
  const rare = <T>(a: fc.Arbitrary<T>): fc.Arbitrary<T | undefined> =>
    fc.oneof({ weight: 3, arbitrary: fc.constant(undefined) }, { weight: 1, arbitrary: a });
  return fc.record({
    family: ctx.ipv6 ? fc.constantFrom<4 | 6 | undefined>(undefined, undefined, 6) : fc.constant(undefined),
    proto: fc.constantFrom<'tcp' | 'udp'>('tcp', 'tcp', 'tcp', 'udp'),
    // Marks are drawn whatever the caps: without NET_ADMIN the kernel must refuse SO_MARK.
    mark: rare(fc.constantFrom(PROXY_MARK.value, RETURN_MARK.value, 0x1)),
    raw: ctx.threat.caps.includes('NET_RAW') ? fc.boolean() : fc.constant(false),
    spoofIndex: ctx.threat.caps.includes('NET_ADMIN') ? rare(fc.nat(20)) : fc.constant(undefined),
  });
}

function raceOp(ctx: GeneratorContext): fc.Arbitrary<RaceOp> {
  return fc.oneof(
    fc.record({ kind: fc.constant('label-pod' as const), podIndex: fc.nat(20), mode }),
    fc.record({ kind: fc.constant('label-ns' as const), nsIndex: fc.nat(5), mode }),
    fc.record({
      kind: fc.constant('component' as const),
      op: fc.constantFrom<'restart' | 'stop' | 'start'>('restart', 'stop', 'start'),
      component: fc.constantFrom<'agent' | 'proxy'>('agent', 'proxy'),
      nodeIndex: fc.nat(ctx.nodes - 1),
    }),
    fc.record({ kind: fc.constant('delete' as const), podIndex: fc.nat(20) }),
  );
}

/** Every command arbitrary, for fc.commands. */
export function commandArbitraries(ctx: GeneratorContext): Array<fc.Arbitrary<ModelCommand>> {
  const nodeIndex = fc.nat(ctx.nodes - 1);
  const weighted = (weight: number, a: fc.Arbitrary<ModelCommand>): Array<fc.Arbitrary<ModelCommand>> =>
    Array<fc.Arbitrary<ModelCommand>>(weight).fill(a);
  return [
    ...weighted(
      2,
      fc.tuple(fc.constantFrom(...NAMESPACE_POOL), mode).map(([n, md]) => new CreateNamespace(n, md)),
    ),
    fc.tuple(fc.nat(5), mode).map(([i, md]) => new LabelNamespace(i, md)),
    ...weighted(
      3,
      podShape(ctx).map((s) => new CreatePod(s)),
    ),
    fc.tuple(fc.nat(20), mode).map(([i, md]) => new LabelPod(i, md)),
    fc.nat(20).map((i) => new DeletePod(i)),
    fc
      .record({
        nsIndex: fc.nat(5),
        name: fc.constantFrom('allow', 'deny'),
        action: fc.constantFrom<'ALLOW' | 'DENY'>('ALLOW', 'DENY'),
        rule: rule(),
      })
      .map((s) => new ApplyPolicy(s)),
    fc.nat(5).map((i) => new DeletePolicy(i)),
    fc
      .tuple(
        fc.constantFrom<'stop' | 'start' | 'restart'>('stop', 'start', 'restart'),
        fc.constantFrom<'agent' | 'proxy'>('agent', 'proxy'),
        nodeIndex,
      )
      .map(([op, c, n]) => new ComponentCommand(op, c, n)),
    nodeIndex.map((n) => new RebootNode(n)),
    fc.constant(new DropWatches()),
    ...weighted(
      10,
      fc.tuple(source(ctx), destination(ctx), attack(ctx)).map(([s, d, a]) => new Connect(s, d, a)),
    ),
    // Situations random commands rarely line up (issue 16, "search power"): an ALLOW and a DENY
    // both matching one connection, and an agent that answers a CNI ADD with ok:false.
    ...weighted(2, overlap(ctx)),
    // Mostly ambient pods: for a pod outside the mesh the agent is never asked.
    fc
      .tuple(podShape(ctx), fc.constantFrom(...AGENT_ADD_FAULTS), fc.boolean())
      .map(([shape, f, ambient]) => new CreatePodAgentFault(ambient ? { ...shape, mode: 'ambient' } : shape, f)),
    ...weighted(2, fc.constant(new Settle())),
    // A creation racing one or two other operations (CNI ADD vs label change, restart mid-enrollment...).
    fc
      .tuple(
        podShape(ctx),
        fc.array(raceOp(ctx), { minLength: 1, maxLength: 2 }),
        fc.array(fc.nat(8), { minLength: 3, maxLength: 3 }),
      )
      .map(([shape, ops, gaps]) => new Race([{ kind: 'create', shape }, ...ops], gaps)),
    // A compromised node (root on a node: host-root) passing itself off as a namespace's account.
    // Last, and only for such threats: the other threats' histories are generated as before.
    ...(ctx.threat.hostAttacker && ctx.threat.uids.includes(0)
      ? weighted(
          2,
          fc
            .record({
              nodeIndex,
              nsIndex: fc.nat(5),
              credentialIndex: fc.nat(IDENTITY_CREDENTIALS.length - 1),
              toIndex: fc.nat(20),
              port: fc.constantFrom(...APP_PORTS),
            })
            .map((shape) => new ForgeIdentity(shape)),
        )
      : []),
  ];
}
