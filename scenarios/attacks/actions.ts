/**
 * The attacker actions a threat model allows against the standard topology, as World.connect
 * calls. Each action is named so a report can say which one found a bypass.
 */
import {
  IDENTITY_CREDENTIALS,
  type Acceptor,
  type ConnectOptions,
  type Destination,
  type IdentityCredential,
  type Source,
  type World,
} from '../world.js';
import { canSetMark, type ThreatModel } from '../threats/threats.js';
import {
  APP_PORT,
  ATTACKER,
  CLIENT,
  DNS_PORT,
  EARLY_SQUATTER,
  FRIEND,
  HOSTILE_PODS,
  HOSTPOD,
  PENDING_SQUATTER,
  PROBE_PORT,
  REMOTE,
  SINK,
  UDP_PORT,
  UDP_PROXY_DNS_PORT,
  VICTIM,
} from './topology.js';

export interface AttackerAction {
  readonly name: string;
  readonly from: Source;
  readonly to: Destination;
  readonly opts: ConnectOptions;
  /**
   * A documented carve-out this attempt must actually get (healthy, quiescent cluster only): the
   * first hop it must reach. Without it a rule that breaks the carve-out (kubelet probes, a pod
   * calling itself) would only make things fail, which no capture property notices.
   */
  readonly expect?: {
    readonly acceptedBy: Acceptor;
    readonly carveOut: string;
    /** The destination app must also get it. */ readonly delivered?: boolean;
  };
}

/** The upstream and strict proxy mark (impl/api/marks.ts PROXY_MARK). */
const PROXY_MARK_VALUE = 0x539;

const pod = (p: typeof VICTIM, port: number): Destination => ({ kind: 'pod', pod: p, port });

export function attackerActions(t: ThreatModel, world: Pick<World, 'nodes'>): AttackerAction[] {
  const n0 = world.nodes[0]!;
  const n1 = world.nodes[1] ?? n0;
  const out: AttackerAction[] = [];
  const targets = (from: Source, label: string): void => {
    out.push({ name: `${label} tcp → victim`, from, to: pod(VICTIM, APP_PORT), opts: {} });
    out.push({ name: `${label} tcp → victim probe port`, from, to: pod(VICTIM, PROBE_PORT), opts: {} });
    out.push({ name: `${label} udp → victim`, from, to: pod(VICTIM, UDP_PORT), opts: { proto: 'udp', payload: 'x' } });
    out.push({ name: `${label} tcp → remote`, from, to: pod(REMOTE, APP_PORT), opts: {} });
  };
  switch (t.vantage) {
    case 'enrolled-pod': {
      const from: Source = { kind: 'pod', pod: ATTACKER };
      targets(from, 'attacker');
      out.push({ name: 'attacker tcp → sink (outside mesh)', from, to: pod(SINK, APP_PORT), opts: {} });
      out.push({ name: 'attacker udp → sink', from, to: pod(SINK, UDP_PORT), opts: { proto: 'udp', payload: 'x' } });
      // Try the mark whatever the threat: without the permission it must fail with EPERM.
      out.push({ name: 'attacker tcp+mark → sink', from, to: pod(SINK, APP_PORT), opts: { mark: PROXY_MARK_VALUE } });
      out.push({
        name: 'attacker tcp+mark → victim',
        from,
        to: pod(VICTIM, APP_PORT),
        opts: { mark: PROXY_MARK_VALUE },
      });
      if (canSetMark(t))
        out.push({
          name: 'attacker udp+mark → sink',
          from,
          to: pod(SINK, UDP_PORT),
          opts: { proto: 'udp', mark: PROXY_MARK_VALUE, payload: 'x' },
        });
      if (t.caps.includes('NET_RAW')) {
        out.push({
          name: 'attacker raw udp → sink',
          from,
          to: pod(SINK, UDP_PORT),
          opts: { proto: 'udp', raw: true, payload: 'x' },
        });
        out.push({ name: 'attacker raw tcp → sink', from, to: pod(SINK, APP_PORT), opts: { raw: true } });
        out.push({
          name: 'attacker raw udp → victim',
          from,
          to: pod(VICTIM, UDP_PORT),
          opts: { proto: 'udp', raw: true, payload: 'x' },
        });
      }
      // Inbound to the attacker's own pod, from a mesh peer (shows what the attacker did to its own capture).
      out.push({
        name: 'friend tcp → attacker',
        from: { kind: 'pod', pod: FRIEND },
        to: pod(ATTACKER, APP_PORT),
        opts: {},
      });
      break;
    }
    case 'same-node-host':
      targets({ kind: 'host', node: n0, uid: t.uids[0]!, caps: t.caps }, `host(uid ${t.uids[0]})`);
      targets({ kind: 'pod', pod: HOSTPOD }, 'hostNetwork pod');
      break;
    case 'other-node':
      targets({ kind: 'pod', pod: CLIENT }, 'other-node pod');
      out.push({
        name: 'other-node host tcp → victim',
        from: { kind: 'host', node: n1, uid: 1000, caps: [] },
        to: pod(VICTIM, APP_PORT),
        opts: {},
      });
      break;
    case 'outside':
      targets({ kind: 'outside' }, 'outside');
      break;
  }
  return out;
}

/** Plain mesh traffic every run also checks (liveness, and that the policy lets the friend in). */
export function livenessActions(nodes: readonly string[] = []): AttackerAction[] {
  const n0 = nodes[0];
  return [
    ...(n0 !== undefined
      ? [
          {
            name: 'kubelet probe → victim probe port',
            from: { kind: 'host', node: n0, uid: 0, caps: [] } as Source,
            to: pod(VICTIM, PROBE_PORT),
            opts: {},
            expect: {
              acceptedBy: 'app' as const,
              carveOut:
                "kubelet probes reach the app directly (probe-accept; the victim's policy would deny them at the proxy)",
            },
          },
        ]
      : []),
    // The destination proxy's own leg to an app port that happens to be 53 must not be taken for DNS.
    {
      name: 'client tcp → remote dns port',
      from: { kind: 'pod', pod: CLIENT },
      to: pod(REMOTE, DNS_PORT),
      opts: {},
      expect: {
        acceptedBy: 'proxy-inbound',
        delivered: true,
        carveOut:
          "the proxy's marked leg to an app on port 53 is not DNS (the dns-tcp redirect exempts the proxy mark)",
      },
    },
    { name: 'friend tcp → victim (allowed)', from: { kind: 'pod', pod: FRIEND }, to: pod(VICTIM, APP_PORT), opts: {} },
    { name: 'friend tcp → remote', from: { kind: 'pod', pod: FRIEND }, to: pod(REMOTE, APP_PORT), opts: {} },
    {
      name: 'client tcp → sink (both outside the mesh)',
      from: { kind: 'pod', pod: CLIENT },
      to: pod(SINK, APP_PORT),
      opts: {},
    },
  ];
}

/** Proxy ports an app can take in its own netns when the proxy is not holding them (docs/bypass-classes.md#finding-l). */
export const HIJACK_PORTS: readonly number[] = [15001, 15006];

/** After the attacker flushed its own pod's rules: its traffic out, a mesh peer's traffic in. */
export function flushActions(): AttackerAction[] {
  const from: Source = { kind: 'pod', pod: ATTACKER };
  return [
    { name: 'flushed attacker tcp → sink', from, to: pod(SINK, APP_PORT), opts: {} },
    { name: 'flushed attacker tcp → victim', from, to: pod(VICTIM, APP_PORT), opts: {} },
    {
      name: 'friend tcp → flushed attacker',
      from: { kind: 'pod', pod: FRIEND },
      to: pod(ATTACKER, APP_PORT),
      opts: {},
    },
    // A peer outside the mesh sends plaintext: only the (flushed) inbound redirect sent it to 15006.
    {
      name: 'client tcp → flushed attacker',
      from: { kind: 'pod', pod: CLIENT },
      to: pod(ATTACKER, APP_PORT),
      opts: {},
    },
  ];
}

/** Catalog phase inserted-accept: after the attacker inserted ACCEPTs ahead of the capture and the cluster settled. */
export function insertedAcceptActions(): AttackerAction[] {
  const from: Source = { kind: 'pod', pod: ATTACKER };
  return [
    { name: 'after insert: attacker tcp → sink', from, to: pod(SINK, APP_PORT), opts: {} },
    {
      name: 'after insert: attacker udp → sink',
      from,
      to: pod(SINK, UDP_PORT),
      opts: { proto: 'udp', payload: 'x' },
    },
  ];
}

/**
 * After the attacker bound the proxy ports during a proxy stop: who accepts what comes in. (Its
 * own outbound then lands on its own 15001: the pod talks to itself, and its onward connections
 * are redirected to itself again, so nothing leaves uncaptured that way — not judged.)
 */
export function hijackActions(): AttackerAction[] {
  return [
    {
      name: 'friend tcp → hijacking attacker',
      from: { kind: 'pod', pod: FRIEND },
      to: pod(ATTACKER, APP_PORT),
      opts: {},
    },
    {
      name: 'client tcp → hijacking attacker',
      from: { kind: 'pod', pod: CLIENT },
      to: pod(ATTACKER, APP_PORT),
      opts: {},
    },
  ];
}

/**
 * Catalog phase pending-destination: a mesh peer (friend, on the other node) connects to a pod
 * pending enrollment whose 15006 its own app holds. Its node proxy either tunnels, refuses (strict:
 * no plaintext to a pending pod) or sends plaintext (upstream), which the squatter takes.
 */
export function pendingDestinationActions(): AttackerAction[] {
  return [
    {
      name: 'friend tcp → pending squatter',
      from: { kind: 'pod', pod: FRIEND },
      to: pod(PENDING_SQUATTER, APP_PORT),
      opts: {},
    },
  ];
}

/**
 * Catalog phase squat-before-enrollment: a client outside the mesh connects to the pod whose app
 * took 15006 before it was enrolled (nat REDIRECT hands it to that socket; TPROXY does not).
 */
export function earlySquatterActions(): AttackerAction[] {
  return [
    {
      name: 'client tcp → early squatter',
      from: { kind: 'pod', pod: CLIENT },
      to: pod(EARLY_SQUATTER, APP_PORT),
      opts: {},
    },
  ];
}

/**
 * Catalog phase live-enrollment: the connections held across the enrollment (World.holdConnection,
 * not AttackerActions: they are opened before and sent on after), named as the phase reports them.
 */
export const LIVE_ENROLLMENT_ACTIONS = {
  inbound: 'held client tcp → live enrollee',
  outbound: 'held live enrollee tcp → sink',
} as const;

/** One forged-identity attempt of root on a node (World.forgedHbone), named as reports name it. */
interface ForgedIdentityAction {
  readonly name: string;
  readonly node: string;
  readonly identity: string;
  readonly credential: IdentityCredential;
  readonly to: Destination;
  /** The control: this identity is the node's own, so the CA must issue it and the destination must get the bytes. */
  readonly control?: string;
}

const spiffe = (ns: string, sa: string): string => `spiffe://cluster.local/ns/${ns}/sa/${sa}`;

/**
 * Catalog phase forged-identity: root on the victim's node passes itself off as `friend` (a pod
 * of the other node, the only identity the victim's policy allows) with every credential it can
 * get, to the victim and across nodes to remote; and, as the control, asks for the identity of a
 * pod of its own node (which its proxy holds anyway) and uses it to reach remote — which shows
 * the CA, the token and the HBONE path all work, so the refusals are the CA's and the proxies'.
 */
export function forgedIdentityActions(nodes: readonly string[]): ForgedIdentityAction[] {
  const n0 = nodes[0]!;
  const friend = spiffe(FRIEND.namespace, 'friend');
  const out: ForgedIdentityAction[] = IDENTITY_CREDENTIALS.map((credential) => ({
    name: `host-root as friend (${credential}) → victim`,
    node: n0,
    identity: friend,
    credential,
    to: pod(VICTIM, APP_PORT),
  }));
  for (const credential of ['node-token', 'self-signed'] as const)
    out.push({
      name: `host-root as friend (${credential}) → remote`,
      node: n0,
      identity: friend,
      credential,
      to: pod(REMOTE, APP_PORT),
    });
  out.push({
    name: 'host-root as its node’s victim identity (node-token) → remote',
    node: n0,
    identity: spiffe(VICTIM.namespace, 'default'),
    credential: 'node-token',
    to: pod(REMOTE, APP_PORT),
    control:
      'root on a node holds what its proxy holds: the CA issues it the identity of a pod of its node, and remote (no policy) lets it in',
  });
  return out;
}

/** Every action name the matrix may run for a threat (catalog entries are checked against it). */
export function matrixActionNames(t: ThreatModel, nodes: readonly string[]): string[] {
  const inPod = t.vantage === 'enrolled-pod' ? [...carveOutActions(), ...flushActions(), ...hijackActions()] : [];
  const catalog = [
    ...meshV6OffActions(t),
    ...rebootActions(),
    ...hostileAnnotationActions(),
    ...pendingDestinationActions(),
    ...earlySquatterActions(),
    ...(t.vantage === 'enrolled-pod' ? insertedAcceptActions() : []),
    ...(t.id === 'host-root' ? forgedIdentityActions(nodes) : []),
  ];
  return [
    ...[...attackerActions(t, { nodes }), ...livenessActions(nodes), ...inPod, ...ipv6Actions(t), ...catalog].map(
      (a) => a.name,
    ),
    ...Object.values(LIVE_ENROLLMENT_ACTIONS),
  ];
}

/**
 * Catalog phase mesh-v6-off (ipv6-without-v6-rules): the IPv6 attempts in a dual-stack cluster
 * whose mesh installs only v4 rules (WorldOptions.meshV6 false), plus a mesh peer over v6.
 */
export function meshV6OffActions(t: ThreatModel): AttackerAction[] {
  // A datagram in needs no reply: it shows the inbound v6 rule alone (a TCP handshake also needs the way out).
  const peer: AttackerAction[] = [
    {
      name: 'client tcp6 → victim',
      from: { kind: 'pod', pod: CLIENT },
      to: pod(VICTIM, APP_PORT),
      opts: { family: 6 },
    },
    {
      name: 'client udp6 → victim',
      from: { kind: 'pod', pod: CLIENT },
      to: pod(VICTIM, UDP_PORT),
      opts: { family: 6, proto: 'udp', payload: 'x' },
    },
  ];
  return [...ipv6Actions(t), ...peer].map((a) => ({ ...a, name: `v4-only mesh: ${a.name}` }));
}

/** Catalog phase reboot (reboot-stuck): right after the victim's node rebooted, before the cluster settles. */
export function rebootActions(): AttackerAction[] {
  return [
    {
      name: 'after reboot: client tcp → victim',
      from: { kind: 'pod', pod: CLIENT },
      to: pod(VICTIM, APP_PORT),
      opts: {},
    },
    { name: 'after reboot: outside tcp → victim', from: { kind: 'outside' }, to: pod(VICTIM, APP_PORT), opts: {} },
    {
      name: 'after reboot: friend tcp → victim',
      from: { kind: 'pod', pod: FRIEND },
      to: pod(VICTIM, APP_PORT),
      opts: {},
    },
  ];
}

/** Catalog phase hostile-annotations: each hostile pod's traffic out, and plaintext in from outside the mesh. */
export function hostileAnnotationActions(): AttackerAction[] {
  return HOSTILE_PODS.flatMap(({ pod: p }) => [
    { name: `${p.name} tcp → sink`, from: { kind: 'pod', pod: p } as Source, to: pod(SINK, APP_PORT), opts: {} },
    { name: `client tcp → ${p.name}`, from: { kind: 'pod', pod: CLIENT } as Source, to: pod(p, APP_PORT), opts: {} },
  ]);
}

/**
 * The in-pod carve-outs and DNS, from the attacker's pod (healthy phase only): DNS to a server
 * outside the mesh must not leave uncaptured; a pod calling its own IP or loopback reaches its
 * own app directly (carve-outs.ts), so rules that over-capture are noticed too.
 */
export function carveOutActions(): AttackerAction[] {
  const from: Source = { kind: 'pod', pod: ATTACKER };
  const self = 'a pod calling itself reaches its own app directly (carve-outs own-pod-ip / loopback)';
  return [
    { name: 'attacker dns udp → sink', from, to: pod(SINK, DNS_PORT), opts: { proto: 'udp', payload: 'dns?' } },
    { name: 'attacker dns tcp → sink', from, to: pod(SINK, DNS_PORT), opts: {} },
    {
      name: 'attacker udp → sink:15053',
      from,
      to: pod(SINK, UDP_PROXY_DNS_PORT),
      opts: { proto: 'udp', payload: 'x' },
    },
    {
      name: 'attacker tcp → own pod ip',
      from,
      to: pod(ATTACKER, APP_PORT),
      opts: {},
      expect: { acceptedBy: 'app', carveOut: self },
    },
    {
      name: 'attacker tcp → loopback',
      from,
      to: { kind: 'ip', ip: '127.0.0.1', port: APP_PORT },
      opts: {},
      expect: { acceptedBy: 'app', carveOut: self },
    },
  ];
}

/** IPv6 attempts (worlds with dual-stack pods only): out of the attacker's pod, and in from outside. */
export function ipv6Actions(t: ThreatModel): AttackerAction[] {
  const out: AttackerAction[] = [
    { name: 'outside tcp6 → victim', from: { kind: 'outside' }, to: pod(VICTIM, APP_PORT), opts: { family: 6 } },
  ];
  if (t.vantage === 'enrolled-pod') {
    const from: Source = { kind: 'pod', pod: ATTACKER };
    out.push({ name: 'attacker tcp6 → sink', from, to: pod(SINK, APP_PORT), opts: { family: 6 } });
    out.push({
      name: 'attacker udp6 → sink',
      from,
      to: pod(SINK, UDP_PORT),
      opts: { family: 6, proto: 'udp', payload: 'x' },
    });
  }
  return out;
}
