/**
 * Threat models: what an attacker may do, as data, plus the attacker actions each allows
 * (`attackerActions`). The matrix runs every action a threat allows against the standard
 * topology (topology.ts) and judges each with the properties.
 *
 * Added capabilities are effective only for uid 0: Kubernetes sets no ambient capabilities, so a
 * non-root container process has none (kubernetes/kubernetes#56374; sim/node/container.ts). The
 * capability threats therefore run as root.
 *
 * The shape is a superset of scenarios/model/contracts.ts `ThreatSpec`, so the model-based
 * runner can draw from the same list.
 */
import type { AppCapability, UidSource } from '../world.js';

export type ThreatId =
  | 'app-nonroot'
  | 'app-root'
  | 'app-net-raw-5.15'
  | 'app-net-raw-6.1'
  | 'app-net-admin'
  | 'app-proxy-uid-net-raw'
  | 'host-process'
  | 'host-root'
  | 'other-node'
  | 'outside';

/** Where the attacker sits. */
export type Vantage = 'enrolled-pod' | 'same-node-host' | 'other-node' | 'outside';

export interface ThreatModel {
  readonly id: ThreatId;
  readonly title: string;
  readonly vantage: Vantage;
  /** uids the attacker runs as (app uid, or host process uid). */
  readonly uids: readonly number[];
  /** How an app attacker's uid is set (AppSpec.uidSource); absent: declared as runAsUser. */
  readonly uidSource?: UidSource;
  readonly caps: readonly AppCapability[];
  /** '5.15' (< 5.17: SO_MARK needs NET_ADMIN) or '6.1' (>= 5.17: NET_RAW is enough). */
  readonly kernelVersion: '5.15' | '6.1';
  /** Host processes (and hostNetwork pods) are attackers too. */
  readonly hostAttacker: boolean;
  readonly outsideAttacker: boolean;
  /** What the attacker can do, in words (README / report). */
  readonly may: string;
}

/** The uid the node proxy runs as in the strict profile (profiles.ts `proxyUid`, golden files). */
export const PROXY_UID = 1337;
/** The kubelet's uid (strict host-probe-kubelet-uid); root, as on real nodes. */
export const KUBELET_UID = 0;

const base = { hostAttacker: false, outsideAttacker: false } as const;

export const THREATS: readonly ThreatModel[] = [
  {
    ...base,
    id: 'app-nonroot',
    title: 'app, non-root, no capabilities',
    vantage: 'enrolled-pod',
    uids: [1000],
    caps: [],
    kernelVersion: '6.1',
    may: 'open TCP/UDP sockets of any port and family, bind any source the pod owns',
  },
  {
    ...base,
    id: 'app-root',
    title: 'app as uid 0, no capabilities',
    vantage: 'enrolled-pod',
    uids: [0],
    caps: [],
    kernelVersion: '6.1',
    may: 'as non-root, plus bind low ports and share SO_REUSEPORT groups with other uid-0 sockets in its netns',
  },
  {
    ...base,
    id: 'app-net-raw-5.15',
    title: 'app as root with NET_RAW, kernel 5.15',
    vantage: 'enrolled-pod',
    uids: [0],
    caps: ['NET_RAW'],
    kernelVersion: '5.15',
    may: 'AF_PACKET frames out of eth0; SO_MARK fails with EPERM (< 5.17)',
  },
  {
    ...base,
    id: 'app-net-raw-6.1',
    title: 'app as root with NET_RAW, kernel 6.1',
    vantage: 'enrolled-pod',
    uids: [0],
    caps: ['NET_RAW'],
    kernelVersion: '6.1',
    may: 'AF_PACKET frames; SO_MARK with any value (>= 5.17, kernel commit 079925cce1d0)',
  },
  {
    ...base,
    id: 'app-net-admin',
    title: 'app as root with NET_ADMIN',
    vantage: 'enrolled-pod',
    uids: [0],
    caps: ['NET_ADMIN'],
    kernelVersion: '6.1',
    may: 'SO_MARK, IP_TRANSPARENT, and rewrite or flush the netfilter rules of its own pod netns',
  },
  {
    ...base,
    id: 'app-proxy-uid-net-raw',
    title: "app running as the proxy uid (its image's USER, no runAsUser) with NET_RAW, kernel 6.1",
    vantage: 'enrolled-pod',
    uids: [PROXY_UID],
    // Declared as runAsUser, strict's agent refuses the pod (B1): the uid the agent cannot see is the threat.
    uidSource: 'image',
    caps: ['NET_RAW'],
    kernelVersion: '6.1',
    may: 'run as the uid the strict profile trusts (B1); the added NET_RAW is not effective for a non-root uid (Kubernetes sets no ambient capabilities, kubernetes/kubernetes#56374; the sim container model follows it), so it can neither mark nor open AF_PACKET',
  },
  {
    ...base,
    id: 'host-process',
    title: "non-root host process or hostNetwork pod on the victim's node",
    vantage: 'same-node-host',
    uids: [1000],
    caps: [],
    kernelVersion: '6.1',
    hostAttacker: true,
    may: 'TCP/UDP from the node netns to pods on that node',
  },
  {
    ...base,
    id: 'host-root',
    title: "root host process (kubelet uid) on the victim's node",
    vantage: 'same-node-host',
    uids: [KUBELET_UID],
    caps: [],
    kernelVersion: '6.1',
    hostAttacker: true,
    may: "TCP/UDP from the node netns as the kubelet's uid, to any port",
  },
  {
    ...base,
    id: 'other-node',
    title: 'unenrolled pod on another node',
    vantage: 'other-node',
    uids: [1000],
    caps: [],
    kernelVersion: '6.1',
    may: "TCP/UDP across nodes to the victim's pod IP",
  },
  {
    ...base,
    id: 'outside',
    title: 'client outside the cluster',
    vantage: 'outside',
    uids: [1000],
    caps: [],
    kernelVersion: '6.1',
    outsideAttacker: true,
    may: 'TCP/UDP to pod IPs routed through the node',
  },
];

export function threat(id: string): ThreatModel {
  const t = THREATS.find((x) => x.id === id);
  if (!t) throw new Error(`unknown threat model ${JSON.stringify(id)}; known: ${THREATS.map((x) => x.id).join(', ')}`);
  return t;
}

/** SO_MARK is permitted: NET_ADMIN, or NET_RAW on >= 5.17 (socket(7), kernel net/core/sock.c). */
export function canSetMark(t: Pick<ThreatModel, 'caps' | 'kernelVersion'>): boolean {
  return t.caps.includes('NET_ADMIN') || (t.caps.includes('NET_RAW') && t.kernelVersion !== '5.15');
}

/**
 * IP_TRANSPARENT is permitted: CAP_NET_RAW or CAP_NET_ADMIN, effective only for uid 0 (see the
 * module comment). A transparent listener on 15006 takes what strict's TPROXY captures (finding-l).
 */
export function canSetTransparent(t: Pick<ThreatModel, 'caps' | 'uids'>): boolean {
  return t.uids[0] === 0 && (t.caps.includes('NET_RAW') || t.caps.includes('NET_ADMIN'));
}
