/**
 * Workload discovery: Pods → workloads the proxy can look up by IP and by uid (ztunnel's
 * `Workload` of its workload xDS, derived here from the Kubernetes API instead of istiod).
 *
 *   new WorkloadIndex({ trustDomain })
 *   upsertPod(pod), deletePod(pod), replaceAll(pods), markSynced()
 *   byIp(ip): Workload | undefined     — the workload that owns a pod IP
 *   byUid(uid): Workload | undefined
 *   all(): Workload[]; synced; generation; onChange(listener)
 *
 * A Workload satisfies the datapath's ProxyWorkload (proxy-deps.ts), so the index is its
 * WorkloadLookup. Rules:
 * - identity spiffe://<trustDomain>/ns/<ns>/sa/<sa>; sa = spec.serviceAccountName, else the
 *   deprecated spec.serviceAccount, else "default";
 * - enrolled (HBONE-capable) ⇔ annotation ambient.istio.io/redirection is exactly "enabled"
 *   ("pending" and anything else: not enrolled — traffic to it is plain passthrough under
 *   upstream, as istiod gives such a pod tunnel protocol NONE);
 * - pending ⇔ that annotation is exactly "pending": the node agent selected the pod (its pod or
 *   namespace label says ambient) but no node proxy has acknowledged it; strict's outbound
 *   refuses to send it plaintext (outbound.ts);
 * - terminal pods (phase Succeeded or Failed) are removed: their IP may already be reused;
 * - hostNetwork pods are indexed by uid only: their IPs are the node's, not theirs, so an IP
 *   lookup must never resolve to them (ztunnel's network_mode HOST_NETWORK);
 * - IP reuse: when two live pods claim one IP (the old one's delete not yet seen), byIp returns
 *   the most recent claimant; when it goes, the earlier claimant is visible again.
 * IPs are stored canonically (IPv4-mapped read as IPv4, then formatIp), so "::ffff:10.0.0.1" finds 10.0.0.1.
 */
import { REDIRECTION_STATUS } from '../api/annotations.js';
import { podIps } from '../api/pod-ips.js';
import type { PodUid } from '../api/ids.js';
import type { KubeObjectOf } from '../host/kube.js';
import type { PeerIdentity } from '../api/identity.js';
import { spiffeId } from '../api/identity.js';
import { formatIp, tryParseIpUnmapped } from '../api/ip/address.js';
import { SyncedStore } from './synced-store.js';
import { workloadNameOf } from './workload-name.js';

export type Pod = KubeObjectOf<'Pod'>;

interface Workload {
  readonly uid: string;
  readonly name: string;
  /** The controller it is reported under in telemetry (workload-name.ts): a Deployment's name, not the pod's. */
  readonly workloadName: string;
  readonly namespace: string;
  readonly serviceAccount: string;
  readonly labels: Readonly<Record<string, string>>;
  /** spec.nodeName; undefined while unscheduled. */
  readonly node: string | undefined;
  /** Pod IPs (canonical text); the node's IPs for a hostNetwork pod. */
  readonly ips: readonly string[];
  readonly hostNetwork: boolean;
  readonly enrolled: boolean;
  /** ambient.istio.io/redirection is exactly "pending" (proxy-deps.ts ProxyWorkload.pending). */
  readonly pending: boolean;
  readonly identity: PeerIdentity;
  /** spiffe://… of `identity`. */
  readonly spiffe: string;
}

interface WorkloadIndexOptions {
  readonly trustDomain: string;
}

function canonical(ip: string): string | undefined {
  const p = tryParseIpUnmapped(ip);
  return p ? formatIp(p) : undefined;
}

function isTerminal(pod: Pod): boolean {
  const phase = pod.status?.phase;
  return phase === 'Succeeded' || phase === 'Failed';
}

/** The workload a pod stands for, or undefined when it has no uid/name/namespace yet. */
function workloadOf(pod: Pod, trustDomain: string): Workload | undefined {
  const uid = pod.metadata?.uid;
  const name = pod.metadata?.name;
  const namespace = pod.metadata?.namespace;
  if (!uid || !name || !namespace) return undefined;
  const serviceAccount = pod.spec?.serviceAccountName || pod.spec?.serviceAccount || 'default';
  const ips = [
    ...new Set(
      podIps(pod)
        .map(canonical)
        .filter((x): x is string => x !== undefined),
    ),
  ];
  const identity: PeerIdentity = { trustDomain, namespace, serviceAccount };
  return {
    uid,
    name,
    workloadName: workloadNameOf(pod),
    namespace,
    serviceAccount,
    labels: { ...(pod.metadata?.labels ?? {}) },
    node: pod.spec?.nodeName || undefined,
    ips,
    hostNetwork: pod.spec?.hostNetwork === true,
    enrolled: pod.metadata?.annotations?.[REDIRECTION_STATUS] === 'enabled',
    pending: pod.metadata?.annotations?.[REDIRECTION_STATUS] === 'pending',
    identity,
    spiffe: spiffeId(identity),
  };
}

export class WorkloadIndex extends SyncedStore {
  readonly trustDomain: string;
  private readonly byUidMap = new Map<string, Workload>();
  /** ip → claimant uids, oldest first. */
  private readonly byIpMap = new Map<string, string[]>();

  constructor(opts: WorkloadIndexOptions) {
    super();
    if (!/^[A-Za-z0-9][A-Za-z0-9.-]*$/.test(opts.trustDomain)) {
      throw new Error(
        `invalid trust domain ${JSON.stringify(opts.trustDomain)}: expected a DNS-like name such as "cluster.local"`,
      );
    }
    this.trustDomain = opts.trustDomain;
  }

  byUid(uid: PodUid | string): Workload | undefined {
    return this.byUidMap.get(uid);
  }

  byIp(ip: string): Workload | undefined {
    const c = canonical(ip);
    const uids = c === undefined ? undefined : this.byIpMap.get(c);
    const last = uids?.[uids.length - 1];
    return last === undefined ? undefined : this.byUidMap.get(last);
  }

  all(): Workload[] {
    return [...this.byUidMap.values()];
  }

  upsertPod(pod: Pod): void {
    if (this.put(pod)) this.changed();
  }

  deletePod(pod: Pod): void {
    const uid = pod.metadata?.uid;
    if (uid && this.drop(uid)) this.changed();
  }

  replaceAll(pods: readonly Pod[]): void {
    for (const uid of [...this.byUidMap.keys()]) this.drop(uid);
    for (const p of pods) this.put(p);
    this.changed();
  }

  /** True when the index changed. */
  private put(pod: Pod): boolean {
    const uid = pod.metadata?.uid;
    if (!uid) return false;
    const w = isTerminal(pod) ? undefined : workloadOf(pod, this.trustDomain);
    const old = this.byUidMap.get(uid);
    if (!w) return this.drop(uid);
    // Most pod updates (conditions, container statuses) change nothing a lookup returns.
    if (old && JSON.stringify(old) === JSON.stringify(w)) return false;
    const before = old && !old.hostNetwork ? old.ips : [];
    const after = w.hostNetwork ? [] : w.ips;
    // IPs the pod no longer has lose its claim; kept IPs keep their place; new ones go last.
    if (old) this.unindexIps({ ...old, ips: before.filter((ip) => !after.includes(ip)) });
    this.byUidMap.set(uid, w);
    for (const ip of after) {
      if (before.includes(ip)) continue;
      const list = this.byIpMap.get(ip) ?? [];
      list.push(uid);
      this.byIpMap.set(ip, list);
    }
    return true;
  }

  private unindexIps(w: Workload): void {
    for (const ip of w.ips) {
      const list = this.byIpMap.get(ip);
      if (!list) continue;
      const i = list.indexOf(w.uid);
      if (i >= 0) list.splice(i, 1);
      if (list.length === 0) this.byIpMap.delete(ip);
    }
  }

  private drop(uid: string): boolean {
    const old = this.byUidMap.get(uid);
    if (!old) return false;
    this.unindexIps(old);
    this.byUidMap.delete(uid);
    return true;
  }
}
