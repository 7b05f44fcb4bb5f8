/**
 * The attack catalog: one named entry per known bypass class that applies
 * (docs/bypass-classes.md), with its expected verdict per profile and how it is run. Entries marked
 * `runBy: 'matrix'` are executed as the named attacker actions (actions.ts) of the listed threat
 * and judged by the matrix — those with a `phase` by the catalog phase that stages their situation
 * (catalog-phases.ts); a `runBy: 'not-expressible'` entry would say precisely what the World
 * lacks, so nothing is silently dropped (none at present).
 */
import type { Profile } from '../world.js';
import type { PropertyName } from '../properties/types.js';
import type { ThreatId } from '../threats/threats.js';
import type { BypassClass } from '../expected/table.js';
import type { CatalogPhase } from './catalog-phases.js';

interface AttackEntry {
  readonly id: string;
  readonly classes: readonly BypassClass[];
  readonly title: string;
  readonly setup: string;
  readonly attack: string;
  readonly observation: string;
  readonly expected: Readonly<
    Record<Profile, { readonly verdict: 'holds' | 'bypass'; readonly property?: PropertyName; readonly why: string }>
  >;
  readonly runBy:
    /** `phase`: the catalog phase (catalog-phases.ts) that stages it; absent = the standard phases. */
    | {
        readonly kind: 'matrix';
        readonly threat: ThreatId;
        readonly actions: readonly string[];
        readonly phase?: CatalogPhase;
      }
    | { readonly kind: 'not-expressible'; readonly reason: string };
}

/** Catalog phase squat-before-enrollment, one entry per threat it runs for (the app's uid differs). */
function squatBeforeEnrollment(id: string, threat: ThreatId, who: string, how: string): AttackEntry {
  return {
    id,
    classes: ['finding-l'],
    title: `app binds 15006 before its pod is enrolled (${who})`,
    setup: `a pod outside the mesh (early-squatter, plain namespace, on the victim's node), app ${who} without capabilities, listens on its own 15006 (${how})`,
    attack:
      'label the pod istio.io/dataplane-mode=ambient and settle (the agent writes its rules, the node proxy cannot bind 15006: the pod stays pending); then plaintext TCP in from the client outside the mesh',
    observation:
      "no proxy restart is needed: the port is taken before any proxy serves the pod. Upstream: nat REDIRECT hands the client's connection to the app's 15006 socket — no proxy inspects or authorizes it. Strict: TPROXY hands inbound only to a transparent socket, so the squatter gets nothing and inbound fails closed (the pod stays pending until the app lets go of the port)",
    expected: {
      upstream: {
        verdict: 'bypass',
        property: 'inbound-capture',
        why: 'nothing reserves the proxy ports in the pod netns, and nat REDIRECT feeds any socket on 15006',
      },
      strict: {
        verdict: 'holds',
        why: 'inbound-tproxy: TPROXY drops what would reach a non-transparent squatter, and the app has no capability to set IP_TRANSPARENT',
      },
    },
    runBy: { kind: 'matrix', threat, phase: 'squat-before-enrollment', actions: ['client tcp → early squatter'] },
  };
}

export const ATTACKS: readonly AttackEntry[] = [
  {
    id: 'mark-spoofing',
    classes: ['B4', 'finding-j'],
    title: 'SO_MARK 0x539 on app sockets (NET_RAW, kernel >= 5.17)',
    setup: 'root app with NET_RAW in an enrolled pod, kernel 6.1',
    attack: 'TCP and UDP with mark 0x539 to a pod outside the mesh and to the victim',
    observation: 'first hop is the sink app, not 15001',
    expected: {
      upstream: {
        verdict: 'bypass',
        property: 'outbound-capture',
        why: 'the mark alone exempts from the 15001/15053 redirects',
      },
      strict: { verdict: 'holds', why: 'proxy-uid + drop-spoofed-mark: the marked packet is dropped' },
    },
    runBy: {
      kind: 'matrix',
      threat: 'app-net-raw-6.1',
      actions: ['attacker tcp+mark → sink', 'attacker udp+mark → sink', 'attacker tcp+mark → victim'],
    },
  },
  {
    id: 'mark-spoofing-old-kernel',
    classes: ['B4'],
    title: 'SO_MARK with NET_RAW on kernel 5.15',
    setup: 'root app with NET_RAW, kernel 5.15',
    attack: 'TCP with mark 0x539',
    observation: 'setsockopt(SO_MARK) fails with EPERM',
    expected: {
      upstream: {
        verdict: 'holds',
        why: 'NET_RAW is not enough for SO_MARK before 5.17 (the UDP bypass of this threat is B8, separate)',
      },
      strict: { verdict: 'holds', why: 'as upstream' },
    },
    runBy: { kind: 'matrix', threat: 'app-net-raw-5.15', actions: ['attacker tcp+mark → sink'] },
  },
  {
    id: 'af-packet',
    classes: ['B4'],
    title: 'AF_PACKET frames out of eth0',
    setup: 'root app with NET_RAW',
    attack: 'raw UDP datagram / TCP SYN to the sink and the victim',
    observation: 'the sink app receives the datagram; the victim redirects/drops',
    expected: {
      upstream: { verdict: 'bypass', property: 'outbound-capture', why: 'AF_PACKET skips the pod netns netfilter' },
      strict: {
        verdict: 'bypass',
        property: 'outbound-capture',
        why: 'residual: no in-pod rule can see AF_PACKET; the destination side still polices (strict victim holds)',
      },
    },
    runBy: {
      kind: 'matrix',
      threat: 'app-net-raw-6.1',
      actions: ['attacker raw udp → sink', 'attacker raw tcp → sink', 'attacker raw udp → victim'],
    },
  },
  {
    id: 'net-admin-flush',
    classes: ['B3'],
    title: 'NET_ADMIN flushes the pod netns rules',
    setup: 'root app with NET_ADMIN (threats without it get EPERM and nothing changes)',
    attack:
      'World.appExec iptables-flush (iptables-restore of empty tables) in its own pod netns, repeated right before each attempt; then TCP out to the sink and the victim, plaintext TCP in from a pod outside the mesh, a mesh peer in over HBONE; the same again with its node proxy down',
    observation:
      "outbound first hop is the sink app / the victim's 15006, not the attacker's 15001; inbound plaintext reaches the app directly (HBONE from a mesh peer still goes through 15008). After the flushing stops, the settled state shows the agent's repair pass restored the rules (convergence holds). So the check measures \"bypass for as long as the app keeps flushing, bounded per flush by the next repair pass\" — the repair shortens, never prevents it",
    expected: {
      upstream: {
        verdict: 'bypass',
        property: 'outbound-capture',
        why: 'rules live in the pod netns the app administers (B3)',
      },
      strict: {
        verdict: 'bypass',
        property: 'outbound-capture',
        why: 'residual (B3): no in-pod rule survives its own netns admin; only admission policy (no NET_ADMIN) prevents it; the repair loop bounds each window',
      },
    },
    runBy: {
      kind: 'matrix',
      threat: 'app-net-admin',
      actions: [
        'flushed attacker tcp → sink',
        'flushed attacker tcp → victim',
        'client tcp → flushed attacker',
        'friend tcp → flushed attacker',
      ],
    },
  },
  {
    id: 'net-admin-insert',
    classes: ['B3', 'B14'],
    title: 'NET_ADMIN inserts ACCEPTs ahead of the capture, once',
    setup: 'root app with NET_ADMIN (threats without it get EPERM and nothing changes)',
    attack:
      'World.appExec iptables-insert in its own pod netns, once: ACCEPT at the top of nat OUTPUT (ahead of the hook into ISTIO_OUTPUT) and UDP ACCEPT at the top of filter OUTPUT; every rule of the plan stays in place. Then, after a settle (the agent had its repair passes), TCP and UDP out to the sink',
    observation:
      "upstream: the first hop is still the sink app, not 15001 — its repair only compares the plan's own chains and hooks, so the inserted rule stays for good (a convergence failure too). strict: the repair pass sees rules in the plan's tables that the plan does not hold and restores those tables whole; TCP goes to 15001 again and UDP is dropped",
    expected: {
      upstream: {
        verdict: 'bypass',
        property: 'convergence',
        why: 'inserted rules outside the own chains are never repaired (B14; upstream istio-cni does the same)',
      },
      strict: {
        verdict: 'holds',
        why: "exclusive-tables: any foreign rule, chain or policy in the plan's tables is drift, repaired by one full restore per family (the window until the next repair pass is B3's residual)",
      },
    },
    runBy: {
      kind: 'matrix',
      threat: 'app-net-admin',
      phase: 'inserted-accept',
      actions: ['after insert: attacker tcp → sink', 'after insert: attacker udp → sink'],
    },
  },
  {
    id: 'non-tcp',
    classes: ['B8', 'finding-j'],
    title: 'UDP in and out of an enrolled pod',
    setup: 'any app',
    attack: 'UDP to the sink (out) and to the victim (in)',
    observation: 'delivered to the app without the proxy',
    expected: {
      upstream: { verdict: 'bypass', property: 'outbound-capture', why: 'only TCP and DNS are redirected' },
      strict: { verdict: 'holds', why: 'non-tcp-fail-closed drops them' },
    },
    runBy: { kind: 'matrix', threat: 'app-nonroot', actions: ['attacker udp → sink', 'attacker udp → victim'] },
  },
  {
    id: 'probe-carve-out-host-process',
    classes: ['B12', 'finding-k'],
    title: 'a non-root host process or hostNetwork pod uses the probe SNAT',
    setup: 'host process uid 1000 / hostNetwork pod on the victim node',
    attack: 'TCP to the victim app port and probe port',
    observation: 'app accepts from 169.254.7.127 without the proxy',
    expected: {
      upstream: { verdict: 'bypass', property: 'inbound-capture', why: '--socket-exists SNAT + accept on any port' },
      strict: { verdict: 'holds', why: 'kubelet-uid SNAT + declared probe ports only' },
    },
    runBy: {
      kind: 'matrix',
      threat: 'host-process',
      actions: ['host(uid 1000) tcp → victim', 'hostNetwork pod tcp → victim'],
    },
  },
  {
    id: 'ipv6-without-v6-rules',
    classes: ['B7', 'finding-h'],
    title: 'IPv6 traffic when the mesh does not capture v6',
    setup:
      'a dual-stack cluster whose mesh installs only v4 rules (WorldOptions ipv6 true, meshV6 false: upstream `ambient.ipv6: false`); a fresh world with the standard topology',
    attack:
      'TCP and UDP over v6 from the attacker pod to the sink; TCP over v6 into the victim from outside and from a pod outside the mesh, UDP over v6 into the victim',
    observation:
      'upstream: the v6 packets meet no rule — the sink app and the victim app accept them directly. strict: the ipv6-always block ruleset drops them (the attempt fails)',
    expected: {
      upstream: {
        verdict: 'bypass',
        property: 'outbound-capture',
        why: 'with v6 capture off no v6 rule is installed, so v6 leaves and enters the pod uncaptured (finding-h, B7)',
      },
      strict: {
        verdict: 'holds',
        why: 'ipv6-always: with v6 capture off the agent installs a v6 block ruleset in dual-stack pods',
      },
    },
    runBy: {
      kind: 'matrix',
      threat: 'app-nonroot',
      phase: 'mesh-v6-off',
      actions: [
        'v4-only mesh: attacker tcp6 → sink',
        'v4-only mesh: attacker udp6 → sink',
        'v4-only mesh: outside tcp6 → victim',
        'v4-only mesh: client tcp6 → victim',
        'v4-only mesh: client udp6 → victim',
      ],
    },
  },
  {
    id: 'port-hijack-restart',
    classes: ['finding-l'],
    title: 'app binds 15001/15006 in its own netns while its node proxy is stopped',
    setup:
      'non-root app without capabilities (app-nonroot); root with SO_REUSEPORT (app-root and the root capability threats), with IP_TRANSPARENT where NET_RAW or NET_ADMIN allows it',
    attack:
      'stop the node proxy, World.appExec listen 15001 and 15006 (reusePort when root; transparent first, plain on EPERM), start the proxy, settle; then plaintext TCP in from a pod outside the mesh and a mesh peer over HBONE',
    observation:
      "the restarted proxy gets EADDRINUSE (the sim proxy runs as uid 1337, so a root app's reuseport socket keeps it out too). Upstream: inbound to the pod lands on the app's 15006 socket (nat REDIRECT takes any socket): no proxy inspects or authorizes it. Strict: TPROXY hands inbound only to a transparent socket, so the capability-less squatter gets nothing and inbound fails closed; app-net-raw-* and app-net-admin bind it transparent and still take it (their strict cells). The app's own outbound then lands on its own 15001 — it talks to itself, nothing leaves, not judged. A hijack while the proxy is UP fails with EADDRINUSE (tests/sim/worlds/app-exec.spec.ts); a hijack before enrollment is port-squat-before-enrollment. The mesh peer's leg (friend) is made by the peer's own node proxy: under upstream it is plaintext (the pod is pending) and lands on the hijacked 15006 — inbound-capture flags it as the wrong proxy (only the destination's own node proxy counts), authorization as unauthorized (finding-p, catalog plaintext-to-pending); under strict the peer's proxy refuses it (no-plaintext-to-pending)",
    expected: {
      upstream: {
        verdict: 'bypass',
        property: 'inbound-capture',
        why: 'nothing reserves the proxy ports in the pod netns (upstream PR #49078 open), and nat REDIRECT feeds any socket on 15006',
      },
      strict: {
        verdict: 'holds',
        why: 'inbound-tproxy: TPROXY drops what would reach a non-transparent squatter; an app without NET_RAW/NET_ADMIN cannot set IP_TRANSPARENT (residual with them: the app-net-raw-* and app-net-admin cells)',
      },
    },
    runBy: {
      kind: 'matrix',
      threat: 'app-nonroot',
      actions: ['client tcp → hijacking attacker', 'friend tcp → hijacking attacker'],
    },
  },
  squatBeforeEnrollment('port-squat-before-enrollment', 'app-nonroot', 'as uid 1000', 'World.appExec listen'),
  squatBeforeEnrollment(
    'port-squat-before-enrollment-root',
    'app-root',
    'as root',
    'World.appExec listen with SO_REUSEPORT, as a root app would to share the port',
  ),
  {
    id: 'plaintext-to-pending',
    classes: ['finding-p', 'finding-l'],
    title: 'a mesh peer sends plaintext to a pod pending enrollment',
    setup:
      "an ambient pod (pending-squatter) on the victim's node, app as the threat's uid without capabilities; while the node proxy is stopped its app listens on its own 15006 (World.appExec listen), so the restarted proxy cannot serve it: its rules stay, the agent's ZDS add is nacked and the pod stays annotated ambient.istio.io/redirection: pending",
    attack: 'after a settle, the mesh peer friend (other node) opens TCP to the pod',
    observation:
      "upstream: friend's node proxy sees a workload that is not `enabled` and sends plaintext to its address (istiod's tunnel protocol NONE; ztunnel's build_request) — the pod's inbound redirect hands it to the app's own 15006: no identity, no authorization, DENY policies skipped. strict: friend's node proxy refuses the connection (connection log: pending enrollment, metric destination-pending-enrollment); nothing reaches the pod. A plaintext client outside the mesh still lands on the squatter in both profiles (port-hijack-restart)",
    expected: {
      upstream: {
        verdict: 'bypass',
        property: 'fail-closed',
        why: "the source proxy downgrades to plaintext for a pod selected for the mesh that no proxy serves (finding-p), and the pending pod's 15006 is the app's (finding-l)",
      },
      strict: {
        verdict: 'holds',
        why: 'no-plaintext-to-pending: the source proxy fails closed until the destination is served',
      },
    },
    runBy: {
      kind: 'matrix',
      threat: 'app-nonroot',
      phase: 'pending-destination',
      actions: ['friend tcp → pending squatter'],
    },
  },
  {
    id: 'live-enrollment',
    classes: ['finding-q'],
    title: 'a pod is labelled into the mesh while it has connections open',
    setup:
      "a pod outside the mesh (live-enrollee, plain namespace, on the victim's node) holds a TCP connection in from the client and one out to the sink (World.holdConnection), both straight to the apps",
    attack: 'label the pod istio.io/dataplane-mode=ambient, settle, then send once more on each connection',
    observation:
      "both profiles: the connections are reset — the pod's netns tracked nothing before the rules needed conntrack, so each connection's next segment is picked up mid-stream as NEW and redirected to a proxy listener that answers RST (upstream: istio/istio#48876, by design); strict's TPROXY takes only bare SYNs and its reset-midstream rule does the same inbound, and its agent also ends every connection its rules do not capture right after the first apply. Not staged here: a connection the netns already tracked, or one whose segment passed in iptables-restore's table-by-table commit window, goes on uncaptured under upstream (tests/netns/rules/live-enroll.spec.ts); strict ends those too (tests/sim/node-agent/agent/escaped-flows.spec.ts)",
    expected: {
      upstream: {
        verdict: 'holds',
        why: 'the kernel resets a connection picked up mid-stream by the new rules (upstream lets enrollment reset open connections)',
      },
      strict: {
        verdict: 'holds',
        why: 'reset-midstream and the agent ending uncaptured connections after its first apply',
      },
    },
    runBy: {
      kind: 'matrix',
      threat: 'app-nonroot',
      phase: 'live-enrollment',
      actions: ['held client tcp → live enrollee', 'held live enrollee tcp → sink'],
    },
  },
  {
    id: 'start-before-rules',
    classes: ['B5', 'finding-a'],
    title: 'an ambient pod starts before the mesh on its node is ready',
    setup: 'agent stopped on node-0',
    attack: 'create an ambient pod there',
    observation: 'pod running without redirection',
    expected: {
      upstream: {
        verdict: 'holds',
        why: 'our CNI plugin is chained and fails the ADD without the agent (fail closed); the upstream race needs the plugin not installed at all',
      },
      strict: { verdict: 'holds', why: 'as upstream' },
    },
    runBy: { kind: 'matrix', threat: 'app-nonroot', actions: ['(agent-down phase: pod mesh/late)'] },
  },
  {
    id: 'reboot-stuck',
    classes: ['finding-b', 'B14'],
    title: 'node reboot leaves ambient pods running without rules',
    setup: 'the standard topology, healthy',
    attack:
      "World.rebootNode on the victim's node: every process dies; the kubelet re-creates the sandboxes (new netns) while the node agent is not running yet, then agent and proxy start again",
    observation:
      'right after the reboot (not settled) no selected pod of the node runs without redirection (fail-closed: its sandbox ADD fails until the agent is back), traffic to the victim is captured or fails; once settled every pod is redirected, served and truthfully annotated (convergence)',
    expected: {
      upstream: {
        verdict: 'holds',
        property: 'convergence',
        why: 'our plugin is chained and fails the ADD while the agent is down, and the agent re-enrolls on the new sandbox ADD and repairs by netns (upstream issue #60882 is the bypass)',
      },
      strict: { verdict: 'holds', why: 'as upstream' },
    },
    runBy: {
      kind: 'matrix',
      threat: 'app-nonroot',
      phase: 'reboot',
      actions: [
        'after reboot: client tcp → victim',
        'after reboot: outside tcp → victim',
        'after reboot: friend tcp → victim',
      ],
    },
  },
  {
    id: 'api-error-at-add',
    classes: ['finding-c'],
    title: 'the CNI plugin cannot reach the API during ADD',
    setup: "World.cniApiFault: every API call of the CNI plugin on the victim's node fails",
    attack: 'create an ambient pod there; then restore the API',
    observation:
      'while the API is unreachable the pod does not start (the plugin retries, then fails the ADD; the kubelet retries the sandbox); once the API is back it starts redirected and served',
    expected: {
      upstream: {
        verdict: 'holds',
        property: 'fail-closed',
        why: "our CNI plugin has one behaviour in both profiles: bounded retries, then fail the ADD (as upstream with enableAmbientDetectionRetry; upstream's default treats the error as not ambient — finding c — which the profiles do not reproduce: they select rule sets, not plugin behaviour)",
      },
      strict: { verdict: 'holds', why: 'as upstream' },
    },
    runBy: {
      kind: 'matrix',
      threat: 'app-nonroot',
      phase: 'cni-api-error',
      actions: ['(cni-api-error phase: pod mesh/api-late)'],
    },
  },
  {
    id: 'hostile-annotations',
    classes: ['finding-n', 'B2'],
    title: 'hostile values in the rule-shaping annotations',
    setup:
      'ambient pods (the threat\'s app) whose annotations carry rule text (newlines, -j ACCEPT, *filter), a 200 kB value, exclusion annotations with bad ports the mesh does not honour (excludeInboundPorts "8080,-1,99999", excludeOutboundIPRanges 0.0.0.0/0), and a forged ambient.istio.io/redirection: enabled',
    attack: 'create the pods; then TCP out of each to the sink and plaintext TCP into each from a pod outside the mesh',
    observation:
      "strict: an invalid value is refused at the sandbox ADD (AnnotationError; the pod does not start, a Warning Event says why) — for a pod already running the agent captures it with defaults instead; upstream: a value upstream cannot parse is ignored as upstream does (the pod starts captured; hostile-huge keeps its valid eth0 as a virtual interface), a Warning Event names it; under both, nothing reaches rule text (tests/sim/scenarios/catalog-phases.spec.ts reads iptables-save of every netns); the exclusion annotations change nothing (captured both ways); the forged status does not skip enrollment (redirected, served, traffic through the pod's node proxy)",
    expected: {
      upstream: {
        verdict: 'holds',
        why: 'annotations are read as upstream reads them and every interface name is validated before rule building; exclusion annotations are not honoured by the ambient rules',
      },
      strict: { verdict: 'holds', why: 'as upstream' },
    },
    runBy: {
      kind: 'matrix',
      threat: 'app-nonroot',
      phase: 'hostile-annotations',
      actions: [
        'hostile-inject tcp → sink',
        'client tcp → hostile-inject',
        'hostile-huge tcp → sink',
        'client tcp → hostile-huge',
        'hostile-exclude tcp → sink',
        'client tcp → hostile-exclude',
        'hostile-status tcp → sink',
        'client tcp → hostile-status',
      ],
    },
  },
  {
    id: 'rogue-zds-client',
    classes: ['finding-m'],
    title: "a non-proxy process connects to the agent's ZDS socket",
    setup: "root on the victim's node (host-root), not the proxy uid",
    attack: 'World.zdsClient: connect to the ZDS socket and say hello as the proxy would',
    observation:
      'the agent rejects it by peer uid before sending anything (no pod netns handle leaves); the real proxy keeps serving every pod and mesh traffic flows. Being accepted would be reported as an inbound-capture violation',
    expected: {
      upstream: {
        verdict: 'holds',
        why: 'our agent checks the peer credentials (allowedProxyUids) — upstream accepts any client (finding m); the profiles select rule sets, the check is in both',
      },
      strict: { verdict: 'holds', why: 'as upstream' },
    },
    runBy: {
      kind: 'matrix',
      threat: 'host-root',
      phase: 'rogue-zds',
      actions: ['(rogue-zds phase: ZDS hello as uid 0)'],
    },
  },
  {
    id: 'forged-identity',
    classes: ['B15'],
    title: 'a compromised node passes itself off as a pod of another node',
    setup:
      "root on the victim's node (host-root): it reads what the node proxy holds — its projected token and the mesh root certificate, not the CA key — and can mint tokens for its node's pods",
    attack:
      "World.forgedHbone as `friend` (a pod of the other node; the victim's policy allows only friend): ask the CA with the node proxy's token, a wrong-audience token, another node's expired token and another node's replayed token; present a self-signed certificate; HBONE to the victim and across nodes to remote. Control: the identity of a pod of its own node, issued and delivered",
    observation:
      "the CA refuses every request for friend (node authorization: no pod of mesh/friend on the caller's node; the token's audience, expiry and bound pod are TokenReview's), the destination proxy refuses the self-signed certificate in the handshake, and nothing reaches an app as friend. Being let in as friend is an identity violation (and an authorization one at the victim)",
    expected: {
      upstream: {
        verdict: 'holds',
        why: "the CA authorizes a node proxy only for the identities of its node's pods, as istiod's node authorizer does; the CA is the same in both profiles",
      },
      strict: { verdict: 'holds', why: 'as upstream' },
    },
    runBy: {
      kind: 'matrix',
      threat: 'host-root',
      phase: 'forged-identity',
      actions: [
        'host-root as friend (node-token) → victim',
        'host-root as friend (wrong-audience) → victim',
        'host-root as friend (expired-token) → victim',
        'host-root as friend (replayed-token) → victim',
        'host-root as friend (self-signed) → victim',
        'host-root as friend (node-token) → remote',
        'host-root as friend (self-signed) → remote',
        'host-root as its node’s victim identity (node-token) → remote',
      ],
    },
  },
];
