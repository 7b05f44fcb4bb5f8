/**
 * The proxy for one pod: its listeners inside the pod's netns (15001 outbound, 15006 inbound
 * plaintext, 15008 inbound HBONE; all wildcard, SO_MARK, SO_REUSEPORT, IP_TRANSPARENT as
 * configured) and its live connections.
 *
 * DNS (15053, UDP and TCP on loopback) is served when the proxy has the DNS option
 * (dns/pod-dns-server.ts); without it the pod's DNS capture rules send DNS to a port nobody
 * listens on, so DNS fails closed rather than leaving uncaptured.
 */
import type { PodUid } from '../api/ids.js';
import { DNS_PORT, INBOUND_HBONE_PORT, INBOUND_PLAINTEXT_PORT, OUTBOUND_PORT } from '../api/ports.js';
import type { WorkloadInfo } from '../api/zds/messages.js';
import type { TimerHandle } from '../host/clock.js';
import type { Logger } from '../host/log.js';
import type { TcpConnection, TcpListener } from '../host/sockets.js';
import type { ZdsNetnsHandle } from '../host/zds-transport.js';
import type { PeerIdentity } from '../api/identity.js';
import { handleInboundHbone, handleInboundPlaintext } from './inbound.js';
import { PodDnsServer } from './dns/pod-dns-server.js';
import { handleOutbound } from './outbound.js';
import { record, type PodContext, type ProxyDeps, type TrackedConnection } from './pod-context.js';
import type { ProxyWorkload } from './proxy-deps.js';

export type DrainMode = 'immediate' | 'graceful';

const HANDLERS: readonly {
  readonly port: number;
  readonly name: string;
  readonly handle: (ctx: PodContext, c: TcpConnection) => Promise<void>;
}[] = [
  { port: OUTBOUND_PORT, name: 'outbound', handle: handleOutbound },
  { port: INBOUND_PLAINTEXT_PORT, name: 'inbound-plaintext', handle: handleInboundPlaintext },
  { port: INBOUND_HBONE_PORT, name: 'inbound-hbone', handle: handleInboundHbone },
];

export class PodProxy implements PodContext {
  readonly log: Logger;
  private readonly listeners: TcpListener[] = [];
  private readonly live = new Set<TrackedConnection>();
  private readonly handlers = new Set<Promise<void>>();
  private dnsServer: PodDnsServer | undefined;
  private isStopping = false;

  constructor(
    readonly uid: PodUid,
    readonly info: WorkloadInfo,
    readonly handle: ZdsNetnsHandle,
    readonly deps: ProxyDeps,
  ) {
    this.log = deps.log.child({ pod: `${info.namespace}/${info.name}`, uid });
  }

  get netns(): ZdsNetnsHandle['netns'] {
    return this.handle.netns;
  }

  get stopping(): boolean {
    return this.isStopping;
  }

  ownWorkload(): ProxyWorkload | undefined {
    const w = this.deps.workloads.byUid(this.uid);
    // As upstream (WorkloadInfo::matches): name, namespace and service account must agree.
    if (
      !w ||
      w.name !== this.info.name ||
      w.namespace !== this.info.namespace ||
      w.serviceAccount !== this.info.serviceAccount
    )
      return undefined;
    return w;
  }

  ownIdentity(): PeerIdentity | undefined {
    const w = this.ownWorkload();
    return w
      ? { trustDomain: this.deps.trustDomain, namespace: w.namespace, serviceAccount: w.serviceAccount }
      : undefined;
  }

  track(c: TrackedConnection): void {
    this.live.add(c);
  }

  untrack(c: TrackedConnection): void {
    this.live.delete(c);
  }

  connections(): number {
    return this.live.size;
  }

  /** Open the listeners; on any failure close those opened and throw (the ZDS Add is nacked). */
  async start(): Promise<void> {
    const { deps } = this;
    for (const family of deps.families) {
      for (const h of HANDLERS) {
        const res = await deps.sockets.listenTcp(
          {
            netns: this.netns,
            family,
            address: family === 4 ? '0.0.0.0' : '::',
            port: h.port,
            mark: deps.mark,
            reusePort: deps.reusePort,
            ...(deps.transparent ? { transparent: true } : {}),
            ...(family === 6 ? { v6Only: true } : {}),
          },
          (conn) => this.accepted(h.name, h.handle, conn),
        );
        if (!res.ok) {
          await this.closeListeners();
          throw new Error(
            `pod ${this.info.namespace}/${this.info.name}: cannot open the ${h.name} listener on port ${h.port} (IPv${family}) in ${this.netns}: ${res.kind} ${res.errno} (${res.message}); is another proxy without SO_REUSEPORT holding it?`,
          );
        }
        this.listeners.push(res.value);
      }
    }
    if (deps.dns) {
      const dns = new PodDnsServer(this, deps.dns);
      try {
        await dns.start();
      } catch (e) {
        await this.closeListeners();
        throw e;
      }
      this.dnsServer = dns;
    }
    this.log.info('pod proxy listening', {
      netns: this.netns,
      ports: [...HANDLERS.map((h) => h.port), ...(this.dnsServer ? [DNS_PORT] : [])],
      families: deps.families,
    });
  }

  private accepted(
    name: string,
    handle: (ctx: PodContext, c: TcpConnection) => Promise<void>,
    conn: TcpConnection,
  ): void {
    const p = handle(this, conn).catch((e: unknown) => {
      this.log.error('connection handler failed', { listener: name, error: (e as Error).message });
      conn.reset();
    });
    this.handlers.add(p);
    void p.finally(() => this.handlers.delete(p));
  }

  /** Policies changed: close the live inbound connections the authorizer now denies. */
  recheck(): void {
    const self = this.ownWorkload();
    for (const c of [...this.live]) {
      if (!c.authz) continue;
      const d = self
        ? this.deps.authorizer.evaluate(c.authz)
        : { allow: false, reason: 'local workload no longer known' };
      if (d.allow) continue;
      this.live.delete(c);
      record(this, { ...c.record, event: 'closed-by-policy', reason: d.reason });
      this.log.info('live connection closed: policy now denies it', {
        target: c.record.target,
        src: c.record.downstream.src,
        reason: d.reason,
      });
      c.relay.abort();
    }
  }

  /**
   * Stop: close the listeners at once; immediate = reset every connection now (pod deleted);
   * graceful = let connections finish for `drainMs`, then reset the rest (proxy shutdown).
   */
  async stop(mode: DrainMode, drainMs = 0): Promise<void> {
    if (this.isStopping) return;
    this.isStopping = true;
    await this.closeListeners();
    if (mode === 'graceful' && this.live.size > 0 && drainMs > 0) {
      await new Promise<void>((resolve) => {
        const timer: TimerHandle = this.deps.clock.setTimer(drainMs, () => {
          if (this.live.size > 0)
            this.log.warn('drain duration expired with pending connections, forcefully shutting down', {
              connections: this.live.size,
            });
          resolve();
        });
        const check = (): void => {
          if (this.live.size === 0) {
            timer.cancel();
            resolve();
          }
        };
        for (const c of this.live) void c.relay.done.then(() => queueMicrotask(check));
      });
    }
    for (const c of [...this.live]) c.relay.abort();
    this.live.clear();
    this.handle.close();
    this.log.info('pod proxy stopped', { mode });
  }

  private async closeListeners(): Promise<void> {
    const ls = this.listeners.splice(0);
    const dns = this.dnsServer;
    this.dnsServer = undefined;
    await Promise.all([...ls.map((l) => l.close()), ...(dns ? [dns.stop()] : [])]);
  }
}
