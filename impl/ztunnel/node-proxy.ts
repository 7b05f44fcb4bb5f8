/**
 * The node proxy: one PodProxy per pod the node agent hands over through ZDS. It is the ZDS
 * client's handler (as upstream ztunnel's workload manager): an Add for a known uid with the same netns identity is a
 * no-op, with a different one replaces the old proxy; Del stops a pod at once; the end of a
 * snapshot stops the pods it did not name. A failed start is thrown, so the Add is nacked.
 *
 * Construction needs only ports and interfaces; a world runs it as
 *   const proxy = new NodeProxy({ sockets, hbone, authorizer, workloads, clock, log, trustDomain });
 *   const zds = new ZdsClient({ transport, address, clock, random, log, handler: proxy });
 *   zds.start();  ...  await zds.stop(); await proxy.shutdown();
 * (Ztunnel in ztunnel.ts does exactly that.)
 */
import type { PodUid } from '../api/ids.js';
import { spiffeId } from '../api/identity.js';
import { PROXY_MARK, type MarkValue } from '../api/marks.js';
import type { Profile } from '../api/profile.js';
import type { WorkloadInfo } from '../api/zds/messages.js';
import type { Clock } from '../host/clock.js';
import type { HboneTransport } from '../host/hbone.js';
import type { Logger } from '../host/log.js';
import type { IpFamily, Sockets } from '../host/sockets.js';
import type { ZdsNetnsHandle } from '../host/zds-transport.js';
import type { Authorizer } from './authz/authorizer.js';
import type { DnsProxyOptions } from './dns/dns-config.js';
import { MemoryDnsLog } from './dns/dns-log.js';
import { firstOf, podIpNames } from './dns/name-source.js';
import type { ProxyDeps } from './pod-context.js';
import { PodProxy, type DrainMode } from './pod-proxy.js';
import {
  CountingMetrics,
  MemoryConnectionLog,
  type ProxyConnectionLog,
  type ProxyMetrics,
  type WorkloadLookup,
} from './proxy-deps.js';
import type { ZdsWorkloadHandler } from './zds-client.js';

/** What the node proxy tells the holder of its workload certificates (SPIFFE IDs). */
interface IdentityCertificates {
  prefetch(identity: string): void;
  forget(identity: string): void;
}

export interface NodeProxyOptions {
  readonly sockets: Sockets;
  readonly hbone: HboneTransport;
  readonly authorizer: Authorizer;
  readonly workloads: WorkloadLookup;
  readonly clock: Clock;
  readonly log: Logger;
  /** SPIFFE trust domain of this mesh (default 'cluster.local'). */
  readonly trustDomain?: string;
  /** The deployment's profile, as the node agent's (default 'upstream'); see ProxyDeps.profile. */
  readonly profile?: Profile;
  readonly connectionLog?: ProxyConnectionLog;
  readonly metrics?: ProxyMetrics;
  /** Default PROXY_MARK (0x539). */
  readonly mark?: MarkValue;
  /** Default true (upstream best effort; our adapters always have CAP_NET_ADMIN). */
  readonly transparent?: boolean;
  /** Default true (upstream INPOD_PORT_REUSE). */
  readonly reusePort?: boolean;
  /** Listener families; default [4]. With 6, a v6-only '::' set is opened as well. */
  readonly families?: readonly IpFamily[];
  /** Default 10 000 ms. */
  readonly connectTimeoutMs?: number;
  /** Graceful shutdown deadline for live connections (upstream default 5 s). */
  readonly drainMs?: number;
  /** Serve DNS on 15053 in every pod (dns/pod-dns-server.ts); absent = no DNS listener. Needs Sockets.bindUdp. */
  readonly dns?: DnsProxyOptions;
  /**
   * The certificates of the identities this node's pods have (upstream ztunnel's cert fetcher):
   * fetched as a pod is served, so its first HBONE connection finds one, and forgotten when the
   * last pod with that identity goes. Absent: certificates are the HBONE transport's business.
   */
  readonly identities?: IdentityCertificates;
}

export class NodeProxy implements ZdsWorkloadHandler {
  readonly deps: ProxyDeps;
  readonly connectionLog: ProxyConnectionLog;
  readonly metrics: ProxyMetrics;
  private readonly pods = new Map<PodUid, PodProxy>();
  private readonly starting = new Set<PodUid>();
  private readonly unsubscribe: () => void;
  private shutDown = false;
  private readonly log: Logger;

  constructor(private readonly opts: NodeProxyOptions) {
    this.connectionLog = opts.connectionLog ?? new MemoryConnectionLog();
    this.metrics = opts.metrics ?? new CountingMetrics();
    this.log = opts.log.child({ component: 'node-proxy' });
    this.deps = {
      sockets: opts.sockets,
      hbone: opts.hbone,
      authorizer: opts.authorizer,
      workloads: opts.workloads,
      clock: opts.clock,
      log: this.log,
      connectionLog: this.connectionLog,
      metrics: this.metrics,
      trustDomain: opts.trustDomain ?? 'cluster.local',
      profile: opts.profile ?? 'upstream',
      mark: opts.mark ?? PROXY_MARK.value,
      transparent: opts.transparent ?? true,
      reusePort: opts.reusePort ?? true,
      families: opts.families ?? [4],
      connectTimeoutMs: opts.connectTimeoutMs ?? 10_000,
      ...(opts.dns ? { dns: this.dnsConfig(opts.dns) } : {}),
    };
    this.unsubscribe = opts.authorizer.onChange(() => this.recheck());
  }

  private dnsConfig(d: DnsProxyOptions): NonNullable<ProxyDeps['dns']> {
    if (!this.opts.sockets.bindUdp)
      throw new Error(
        'node proxy: the DNS option needs UDP, but the Sockets adapter has no bindUdp; pass a UDP-capable adapter or drop the DNS option',
      );
    const own = podIpNames(this.opts.workloads, d.clusterDomain ?? 'cluster.local');
    return {
      upstream: d.upstream,
      names: d.names ? firstOf(own, d.names) : own,
      log: d.log ?? new MemoryDnsLog(),
      forwardTimeoutMs: d.forwardTimeoutMs ?? 5000,
    };
  }

  /** Pods with listeners open. */
  servedPods(): PodUid[] {
    return [...this.pods.keys()];
  }

  pod(uid: PodUid): PodProxy | undefined {
    return this.pods.get(uid);
  }

  /** Not shut down, and no pod is half-started. (The world combines it with ZdsClient.ready().) */
  ready(): boolean {
    return !this.shutDown && this.starting.size === 0;
  }

  async onAdd(uid: PodUid, info: WorkloadInfo, netns: ZdsNetnsHandle): Promise<void> {
    if (this.shutDown) throw new Error(`node proxy is shut down; cannot serve pod ${info.namespace}/${info.name}`);
    const old = this.pods.get(uid);
    if (old && old.handle.identity === netns.identity) {
      netns.close(); // same sandbox again: keep the running proxy and its handle
      return;
    }
    this.starting.add(uid);
    try {
      if (old) {
        this.log.info('pod netns changed: replacing its proxy', { uid, old: old.handle.identity, new: netns.identity });
        this.pods.delete(uid);
        await old.stop('immediate');
      }
      const p = new PodProxy(uid, info, netns, this.deps);
      await p.start();
      this.pods.set(uid, p);
      this.metrics.podsServed(this.pods.size);
      this.opts.identities?.prefetch(this.identityOf(info));
      if (old) this.forgetUnused(old.info);
    } finally {
      this.starting.delete(uid);
    }
  }

  async onKeep(uid: PodUid): Promise<void> {
    if (!this.pods.has(uid))
      this.log.warn('keep for a pod this proxy does not serve (it has no netns for it)', { uid });
  }

  async onDel(uid: PodUid): Promise<void> {
    const p = this.pods.get(uid);
    if (!p) return;
    this.pods.delete(uid);
    this.metrics.podsServed(this.pods.size);
    await p.stop('immediate');
    this.forgetUnused(p.info);
  }

  private identityOf(info: WorkloadInfo): string {
    return spiffeId({
      trustDomain: this.opts.trustDomain ?? 'cluster.local',
      namespace: info.namespace,
      serviceAccount: info.serviceAccount,
    });
  }

  /** Forget the certificate of `info`'s identity when no served pod has that identity any more. */
  private forgetUnused(info: WorkloadInfo): void {
    if (!this.opts.identities) return;
    const id = this.identityOf(info);
    if (![...this.pods.values()].some((q) => this.identityOf(q.info) === id)) this.opts.identities.forget(id);
  }

  async onSnapshotSent(named: ReadonlySet<PodUid>): Promise<void> {
    for (const uid of [...this.pods.keys()]) {
      if (!named.has(uid)) await this.onDel(uid);
    }
  }

  /** Re-check every pod's live inbound connections against the current policies. */
  recheck(): void {
    for (const p of this.pods.values()) p.recheck();
  }

  /** Close every pod's listeners; graceful keeps live connections up to `drainMs`. */
  async shutdown(mode: DrainMode = 'graceful', drainMs = this.opts.drainMs ?? 5000): Promise<void> {
    this.shutDown = true;
    this.unsubscribe();
    const pods = [...this.pods.values()];
    this.pods.clear();
    await Promise.all(pods.map((p) => p.stop(mode, drainMs)));
  }
}
