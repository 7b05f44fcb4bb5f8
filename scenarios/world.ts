/**
 * The World interface (docs/design.md, 'Worlds'): one cluster, whatever it is made of — the simulator, private
 * network namespaces on the real kernel, or kind. Scenarios, properties, threat models and the
 * attack catalog are written against this interface only, so the same checks run in every world.
 *
 * A world runs the reference implementation (CNI plugin chained after the primary, node agent,
 * node proxy) on every node, and offers what a test needs: make and change pods, namespaces and
 * policies; stop, start and restart components; reboot nodes; drop API watches; open connections
 * from pods, hosts and outside with an attacker's options; let the cluster settle; and observe
 * who accepted what, what the proxies logged, and what the mesh state is.
 */
import type { Backend } from '../impl/api/backend.js';
import type { Profile } from '../impl/api/profile.js';

export type WorldKind = 'sim' | 'netns' | 'containers' | 'kind';
/** The rule profile names (impl/api/profile.ts), re-exported for code written against the World. */
export type { Profile };
/** Capabilities the threat models grant an app (everything else is dropped). */
export type AppCapability = 'NET_ADMIN' | 'NET_RAW';

export interface WorldOptions {
  readonly nodes: number;
  readonly profile: Profile;
  /** Kernel version the permission checks follow ('5.15' < 5.17 <= '6.1'); the sim only. */
  readonly kernelVersion: string;
  /** Dual-stack pods (and, unless meshV6 says otherwise, IPv6 capture). */
  readonly ipv6: boolean;
  /**
   * The mesh handles IPv6 too: the agent installs v6 rules, the proxy serves v6 (default: `ipv6`).
   * `ipv6: true, meshV6: false` is a dual-stack cluster whose mesh installs only v4 rules
   * (upstream `ambient.ipv6: false`; docs/bypass-classes.md#b7). A world that cannot build that combination
   * rejects it in create() with an error that says 'unsupported'.
   */
  readonly meshV6?: boolean;
  readonly dnsCapture: boolean;
  /** The agent's rules backend (deploy/components/backend-nftables); absent: iptables, the default. */
  readonly rulesBackend?: Backend;
  /** Seed for everything random in the world (sim: the whole history replays from it). */
  readonly seed: number;
}

export interface PodRef {
  readonly namespace: string;
  readonly name: string;
}

export function podKey(p: PodRef): string {
  return `${p.namespace}/${p.name}`;
}

export type UidSource = 'runAsUser' | 'image';

/** The pod's application container, as a threat model describes it. */
export interface AppSpec {
  /** The uid the app runs as; 0 is root (still without capabilities unless listed). */
  readonly uid: number;
  /**
   * Where that uid comes from. 'runAsUser' (the default): the pod spec declares it, so the node
   * agent can see it. 'image': the container declares none and runs as its image's USER, which
   * nothing reading the pod spec can see (the strict agent refuses a pod that declares the proxy's
   * uid, impl/node-agent/proxy-uid-pods.ts; an image's USER is the residual only admission closes).
   */
  readonly uidSource?: UidSource;
  /** Capabilities added after dropping all. */
  readonly caps: readonly AppCapability[];
  /** TCP ports the app listens on (wildcard address, both families when the pod has v6). */
  readonly tcpPorts: readonly number[];
  /** UDP ports the app listens on. */
  readonly udpPorts?: readonly number[];
  /** Ports the kubelet probes (declared as tcpSocket readiness probes). */
  readonly probePorts?: readonly number[];
}

export interface PodSpec extends PodRef {
  /** Node name; the world chooses when absent. */
  readonly node?: string;
  readonly labels?: Readonly<Record<string, string>>;
  readonly annotations?: Readonly<Record<string, string>>;
  readonly serviceAccount?: string;
  readonly hostNetwork?: boolean;
  readonly app: AppSpec;
}

/** Where a connection starts. */
export type Source =
  /** The app container of a pod (with its uid and capabilities). */
  | { readonly kind: 'pod'; readonly pod: PodRef }
  /** A process in a node's host network namespace (kubelet-like when uid 0). */
  | { readonly kind: 'host'; readonly node: string; readonly uid: number; readonly caps: readonly AppCapability[] }
  /** A client outside the cluster (reaches pods through the node network, no mesh). */
  | { readonly kind: 'outside' };

/** Where a connection goes: a pod (its IP of the family) or an explicit address. */
export type Destination =
  | { readonly kind: 'pod'; readonly pod: PodRef; readonly port: number }
  | { readonly kind: 'ip'; readonly ip: string; readonly port: number };

export interface ConnectOptions {
  readonly family?: 4 | 6;
  readonly proto?: 'tcp' | 'udp';
  /** Try SO_MARK with this value first (fails with EPERM without the capability). */
  readonly mark?: number;
  /** Send one SYN / datagram with AF_PACKET out of the pod's eth0 instead of a socket (needs NET_RAW). */
  readonly raw?: boolean;
  /** Bind this source address first (IP_TRANSPARENT is requested when it is not local). */
  readonly sourceIp?: string;
  /** Payload for UDP. */
  readonly payload?: string;
}

/** Which socket took the connection at its first hop. */
export type Acceptor =
  | 'proxy-outbound' // the node proxy's 15001 in the source pod
  | 'proxy-inbound' // 15006 in the destination pod
  | 'proxy-hbone' // 15008 in the destination pod
  | 'proxy-dns' // 15053 in the source pod
  | 'app' // an application listener
  | 'other'; // anything else (e.g. a host socket)

/** One connection (or datagram) as observed, end to end. */
export interface ConnectResult {
  /** TCP: established / refused / timeout / unreachable; UDP and raw: delivered / not-delivered; error: a syscall failed. */
  readonly outcome: 'established' | 'refused' | 'timeout' | 'unreachable' | 'delivered' | 'not-delivered' | 'error';
  /** The failing syscall and errno for outcome 'error' (e.g. "setsockopt(SO_MARK): EPERM"). */
  readonly error?: string;
  /** First hop: which kind of socket accepted the client's connection (undefined if none). */
  readonly acceptedBy: Acceptor | undefined;
  /** The pod whose socket accepted at the first hop (for proxy sockets: the pod they serve). */
  readonly acceptedIn?: PodRef | { readonly node: string };
  /**
   * Application deliveries caused by this attempt: an app socket in some pod accepted a
   * connection (or datagram). `viaProxy` says whether a node proxy made that connection.
   */
  readonly deliveries: readonly Delivery[];
  /** Proxy connection-log records written during this attempt. */
  readonly proxyLog: readonly ProxyLogEntry[];
  /** Human-readable packet trace (sim) or probe transcript (real worlds), for reports. */
  readonly trace?: string;
}

export interface Delivery {
  readonly pod: PodRef;
  readonly port: number;
  /** Source address:port the app saw. */
  readonly peer: string;
  readonly viaProxy: boolean;
  /**
   * When viaProxy: the node whose proxy made the connection. A world that reports viaProxy must
   * report this: inbound capture accepts only the destination pod's own node proxy.
   */
  readonly proxyNode?: string;
  /**
   * When viaProxy: the pod the proxy was acting for — the pod whose netns its connecting socket
   * was in (the destination itself for an inbound leg; the source pod for an outbound leg that
   * went straight to the app). Undefined when the world cannot tell.
   */
  readonly proxyFor?: PodRef;
}

/** What the node proxies log, reduced to what properties read (see impl/ztunnel/connection-log.ts). */
export interface ProxyLogEntry {
  readonly node: string;
  readonly pod: PodRef | undefined;
  readonly event: 'accepted' | 'forwarded' | 'denied' | 'closed' | 'error';
  readonly direction: 'outbound' | 'inbound-plaintext' | 'inbound-hbone';
  readonly srcIdentity: string | undefined;
  readonly dstIdentity: string | undefined;
  readonly allowed: boolean | undefined;
  readonly reason: string;
}

/** A pod's state as the world can observe it (for convergence and fail-closed checks). */
export interface PodObservation extends PodRef {
  readonly uid: string;
  readonly node: string;
  readonly labels: Readonly<Record<string, string>>;
  readonly phase: string;
  /** Containers are running (sandbox networking succeeded). */
  readonly started: boolean;
  readonly hostNetwork: boolean;
  readonly ips: readonly string[];
  /** ambient.istio.io/redirection as written on the pod. */
  readonly annotation: string | undefined;
  /** The pod's current network namespace holds the mesh's redirection rules. */
  readonly redirected: boolean;
  /** The node proxy serves the pod with its current namespace (listeners open). */
  readonly served: boolean;
}

export type Component = 'agent' | 'proxy';

/**
 * Something an app does to its OWN pod network namespace (World.appExec). The app runs it as
 * itself: its uid and effective capabilities, in the netns of its pod.
 * - `iptables-flush`: iptables-restore of empty nat/mangle/filter tables (v4, and v6 when the pod
 *   has v6) — removes the mesh's redirection. Needs NET_ADMIN in the pod's user namespace;
 *   without it the kernel answers EPERM and nothing changes.
 * - `listen`: a TCP listener of the app's on `port` (wildcard address, v4) — e.g. a proxy port
 *   (15001/15006/15008) before the proxy binds it. Fails with EADDRINUSE while someone holds the
 *   port; with `reusePort` it joins an SO_REUSEPORT group only of the same effective uid
 *   (otherwise EADDRINUSE, as the kernel does). With `transparent` it sets IP_TRANSPARENT first,
 *   which TPROXY requires of a listener it hands packets to; without CAP_NET_RAW or CAP_NET_ADMIN
 *   the kernel answers EPERM. (Low ports are not special: container runtimes set
 *   net.ipv4.ip_unprivileged_port_start=0 in pod netns.) The listener stays until the pod is
 *   deleted; what it accepts counts as a delivery to the app.
 * - `iptables-insert`: `iptables-restore --noflush` of one rule from a fixed list (INSERTED_RULES,
 *   never free text) at the top of a built-in chain, v4 and v6 when the pod has v6; needs
 *   NET_ADMIN as the flush. The rule stays until someone removes it.
 * - `nft-flush`: `nft flush ruleset` — every nftables table of the netns, the nftables backend's
 *   and (iptables-nft) iptables' own; needs NET_ADMIN.
 * - `nft-insert`: `nft -f` of one document from a fixed list (NFT_INSERTED_TABLES, never free
 *   text): a table of the app's own whose base chains run ahead of the mesh's; needs NET_ADMIN.
 */
export type AppAction =
  | { readonly kind: 'iptables-flush' }
  | { readonly kind: 'iptables-insert'; readonly rule: InsertedRule }
  | { readonly kind: 'nft-flush' }
  | { readonly kind: 'nft-insert'; readonly table: NftInsertedTable }
  | {
      readonly kind: 'listen';
      readonly port: number;
      readonly reusePort?: boolean;
      readonly transparent?: boolean;
    };

/**
 * The rules an app may insert (AppAction `iptables-insert`), as restore input:
 * - `nat-output-accept`: ACCEPT at the top of nat OUTPUT, ahead of the hook into ISTIO_OUTPUT, so
 *   outbound TCP skips the 15001 redirect;
 * - `filter-output-udp-accept`: UDP ACCEPT at the top of filter OUTPUT, ahead of strict's
 *   non-TCP drop.
 */
const INSERTED_RULES = {
  'nat-output-accept': '*nat\n-I OUTPUT 1 -j ACCEPT\nCOMMIT\n',
  'filter-output-udp-accept': '*filter\n-I OUTPUT 1 -p udp -j ACCEPT\nCOMMIT\n',
} as const;
type InsertedRule = keyof typeof INSERTED_RULES;
export const INSERTED_RULE_IDS = Object.keys(INSERTED_RULES) as InsertedRule[];

/** The restore text of an inserted rule; throws on a name outside INSERTED_RULES (callers may be untyped). */
export function insertedRuleText(rule: InsertedRule): string {
  if (!Object.hasOwn(INSERTED_RULES, rule))
    throw new Error(
      `appExec iptables-insert: unknown rule ${JSON.stringify(rule)}; use one of ${INSERTED_RULE_IDS.join(', ')}`,
    );
  return INSERTED_RULES[rule];
}

/**
 * The tables an app may add (AppAction `nft-insert`), as `nft -f` input:
 * - `notrack-tcp`: TCP untracked both ways (raw priority, ahead of conntrack), so no NAT chain
 *   (REDIRECT) and no `ct state new` TPROXY ever sees the pod's connections: capture skipped in
 *   and out, under either backend (iptables' nat table needs conntrack as much as nftables' does).
 */
const NFT_INSERTED_TABLES = {
  'notrack-tcp':
    'table inet app-tamper {\n' +
    '\tchain pre {\n\t\ttype filter hook prerouting priority -300; policy accept;\n\t\tmeta l4proto tcp notrack\n\t}\n' +
    '\tchain out {\n\t\ttype filter hook output priority -300; policy accept;\n\t\tmeta l4proto tcp notrack\n\t}\n' +
    '}\n',
} as const;
type NftInsertedTable = keyof typeof NFT_INSERTED_TABLES;
export const NFT_INSERTED_TABLE_IDS = Object.keys(NFT_INSERTED_TABLES) as NftInsertedTable[];

/** The nft text of an inserted table; throws on a name outside NFT_INSERTED_TABLES (callers may be untyped). */
export function insertedTableText(table: NftInsertedTable): string {
  if (!Object.hasOwn(NFT_INSERTED_TABLES, table))
    throw new Error(
      `appExec nft-insert: unknown table ${JSON.stringify(table)}; use one of ${NFT_INSERTED_TABLE_IDS.join(', ')}`,
    );
  return NFT_INSERTED_TABLES[table];
}

export interface AppExecResult {
  readonly ok: boolean;
  /** The failing call and errno, e.g. "iptables-restore: EPERM". */
  readonly error?: string;
}

/** A TCP connection the world keeps open (World.holdConnection) until close(). */
export interface HeldConnection {
  /** How the connect went (only 'established' connections can send). */
  readonly outcome: ConnectResult['outcome'];
  /** First hop, as ConnectResult.acceptedBy: 'app' = it went past the proxy. */
  readonly acceptedBy: Acceptor | undefined;
  /** Send one segment now: delivered when the peer socket took it; not, with why, when the connection is gone. */
  send(): Promise<{ readonly delivered: boolean; readonly detail: string }>;
  close(): Promise<void>;
}

/** One `drift repaired` report of a node agent (impl/node-agent/node-agent.ts reportDriftRepair). */
export interface DriftRepair {
  readonly node: string;
  /** `namespace/name`. */
  readonly pod: string;
  /** Upper bound of the bypass window; undefined when the agent never saw the plan intact. */
  readonly windowMs: number | undefined;
  /** Connections ended (strict); undefined when the profile ends none (upstream). */
  readonly flowsEnded: number | undefined;
  readonly foreign: string;
}

/** What a process that connected to the node agent's ZDS socket as if it were the proxy got. */
export interface ZdsClientAttempt {
  /** The agent took it as its node proxy (it said hello back and would stream pods to it). */
  readonly accepted: boolean;
  /** Pod Add requests (each with a pod netns handle) it received. */
  readonly workloads: number;
  /** What happened, in words (the agent's rejection reason, or what was received). */
  readonly detail: string;
}

/**
 * Why the node agent refuses an ADD under World.agentAddFault:
 * - `netns-missing`: the agent cannot see the new sandbox's network namespace (a netns created
 *   while the fault holds is invisible to its netns finder: "no network namespace found");
 * - `stale-pod`: the plugin and the agent disagree about the pod: the ADD names a pod uid the
 *   agent's cache does not hold ("the agent's view is stale").
 */
export type AgentAddFault = 'netns-missing' | 'stale-pod';
export const AGENT_ADD_FAULTS: readonly AgentAddFault[] = ['netns-missing', 'stale-pod'];

/**
 * How root on a compromised node tries to hold an identity it does not (World.forgedHbone). It
 * has what the node's proxy has — the proxy's projected token and the mesh root certificate,
 * never the CA's key — and what the kubelet's credentials give: tokens for the pods of its node.
 * - `node-token`: the node proxy's own token, asking the CA for the identity;
 * - `wrong-audience`: a token of the node proxy's pod minted for the API server's audience, not
 *   the CA's;
 * - `expired-token`: a token of another node's proxy that has expired (taken long ago);
 * - `replayed-token`: a token of another node's proxy, bound to a proxy pod since replaced;
 * - `self-signed`: no CA at all: a certificate for the identity from a root of its own.
 */
export type IdentityCredential = 'node-token' | 'wrong-audience' | 'expired-token' | 'replayed-token' | 'self-signed';
export const IDENTITY_CREDENTIALS: readonly IdentityCredential[] = [
  'node-token',
  'wrong-audience',
  'expired-token',
  'replayed-token',
  'self-signed',
];

/** A forged-identity attempt: the certificate step, then (with a certificate) the HBONE connection. */
export interface ForgedHboneResult extends ConnectResult {
  readonly certificate: {
    /**
     * issued: the CA signed it; refused: the CA said no (no connection follows); self-signed: no
     * CA asked; not-asked: the destination had no address (as connect(), an 'error' outcome).
     */
    readonly kind: 'issued' | 'refused' | 'self-signed' | 'not-asked';
    /** The CA's answer, or how the certificate was made. */
    readonly detail: string;
  };
}

/** A forgedHbone attempt that opened no connection: the CA refused, or the destination had no address. */
export function forgedWithoutConnection(
  error: string,
  certificate: ForgedHboneResult['certificate'],
): ForgedHboneResult {
  return { outcome: 'error', error, acceptedBy: undefined, deliveries: [], proxyLog: [], certificate };
}

/** A namespaced AuthorizationPolicy as YAML/JSON object (security.istio.io/v1). */
export type PolicyObject = Readonly<Record<string, unknown>>;

export interface World {
  readonly kind: WorldKind;
  readonly options: WorldOptions;
  readonly nodes: readonly string[];

  createNamespace(name: string, labels?: Readonly<Record<string, string>>): Promise<void>;
  /** Merge-patch namespace labels (null removes a label). */
  labelNamespace(name: string, labels: Readonly<Record<string, string | null>>): Promise<void>;
  /** Create a pod; resolves once it is Running or has clearly failed to start (settled). */
  createPod(spec: PodSpec): Promise<PodObservation>;
  labelPod(pod: PodRef, labels: Readonly<Record<string, string | null>>): Promise<void>;
  deletePod(pod: PodRef): Promise<void>;
  /** Create or replace an AuthorizationPolicy (by namespace/name). */
  applyPolicy(policy: PolicyObject): Promise<void>;
  deletePolicy(namespace: string, name: string): Promise<void>;

  stop(component: Component, node: string): Promise<void>;
  start(component: Component, node: string): Promise<void>;
  restart(component: Component, node: string): Promise<void>;
  rebootNode(node: string): Promise<void>;
  /** Drop every open API watch (informers must recover). */
  dropWatches(): Promise<void>;

  connect(from: Source, to: Destination, opts?: ConnectOptions): Promise<ConnectResult>;
  /**
   * Run an action as the pod's app container, in its own netns, with its own uid and
   * capabilities (see AppAction). Optional: a world without it cannot run the NET_ADMIN-flush
   * and port-hijack attacks, and the matrix reports those cells as not evaluated.
   */
  appExec?(pod: PodRef, action: AppAction): Promise<AppExecResult>;

  /**
   * Fault injection: while `failing`, every Kubernetes API call of the CNI plugin on `node` fails
   * (the API server is unreachable from the plugin). Optional: the matrix skips the
   * api-error-at-add attack in a world without it.
   */
  cniApiFault?(node: string, failing: boolean): Promise<void>;
  /**
   * Fault injection: while `fault` is set, the node agent on `node` answers the CNI ADD of every
   * sandbox created meanwhile with ok:false, before it applies any rule (see AgentAddFault);
   * `undefined` clears it. The agent itself is not changed: the fault is in what it can see.
   * Optional: the model skips its agent-fault pod creations in a world without it.
   */
  agentAddFault?(node: string, fault: AgentAddFault | undefined): Promise<void>;
  /**
   * The nodes' own addresses (host network namespace), by node name, v4 first. Optional: the
   * model draws no connections to node addresses in a world without it.
   */
  nodeAddresses?(): Promise<Readonly<Record<string, readonly string[]>>>;
  /**
   * A process on `node` running as `uid` connects to the node agent's ZDS socket and says hello
   * as if it were the node proxy; after a moment it leaves. Optional: the matrix skips the
   * rogue-zds-client attack in a world without it.
   */
  zdsClient?(node: string, uid: number): Promise<ZdsClientAttempt>;

  /**
   * Root on `node` gets a certificate for `identity` with `credential` (see IdentityCredential),
   * then — unless the CA refused — opens an HBONE connection with it from the node's host
   * network namespace to the destination's node proxy (the pod's port 15008), CONNECTs to the
   * destination and sends a little. The result is judged as a connection from
   * `{ kind: 'host', node, uid: 0 }`. A CA that cannot be reached, or answers anything but a
   * refusal or a certificate, is an error (thrown), never a refusal. Optional: the catalog's
   * forged-identity phase is skipped in a world without it.
   */
  forgedHbone?(
    node: string,
    identity: string,
    credential: IdentityCredential,
    to: Destination,
  ): Promise<ForgedHboneResult>;
  /** The credentials forgedHbone can present here (a real world cannot wait out a token's 10-minute minimum life). */
  readonly forgeableCredentials?: readonly IdentityCredential[];

  /**
   * Optional: open a TCP connection as connect() would, and keep it open (an app's long-lived
   * connection) until its close(). Worlds without it skip the checks that need one.
   */
  holdConnection?(from: Source, to: Destination): Promise<HeldConnection>;
  /** Optional: every node agent's `drift repaired` reports so far, in order. */
  driftRepairs?(): Promise<readonly DriftRepair[]>;

  /** Let the cluster run until quiet (sim: virtual time; real worlds: bounded wall time). */
  settle(): Promise<void>;
  pods(): Promise<readonly PodObservation[]>;
  /** Dispose of everything the world created (real worlds: namespaces, processes, clusters). */
  close(): Promise<void>;
}

export interface WorldFactory {
  readonly kind: WorldKind;
  /** Can this world run here? The reason is printed when it cannot. */
  available(): { readonly ok: boolean; readonly reason: string };
  create(options: WorldOptions): Promise<World>;
  /**
   * After an interrupted run (check stopped by a signal, its worker threads terminated in the
   * middle of histories): remove everything the worlds this process created left behind —
   * namespaces and the processes in them, containers, mounts, run directories — and say what was
   * removed. Only what this process made: its run prefixes carry its pid. Absent for worlds that
   * leave nothing outside the process (sim).
   */
  reapInterrupted?(): Promise<readonly string[]>;
}

/**
 * The node proxy's own pod, as the proxy DaemonSet (deploy/base/proxy.yaml) makes one on every
 * node, and its projected token (audience and lifetime): the mesh CA checks a proxy's token
 * against that pod. The worlds that run the CA create it and leave it out of pods() (a mesh
 * component, not a workload); the real worlds read these values from the manifests, and a test
 * holds this copy to them (tests/sim/deployment/launch.spec.ts).
 */
export const PROXY_POD = {
  namespace: 'ambient-lab-system',
  serviceAccount: 'ambient-lab-proxy',
  tokenAudience: 'istio-ca',
  tokenSeconds: 43200,
} as const;

/** The label the worlds put on the mesh's own pods (value `ambient-lab`). */
export const LAB_COMPONENT_LABEL = 'app.kubernetes.io/part-of';

export function proxyPodName(node: string): string {
  return `ambient-lab-proxy-${node}`;
}
