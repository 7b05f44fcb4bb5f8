/**
 * The node proxy's workload certificates from the mesh CA, kept as ztunnel's SecretManager keeps
 * them (src/identity/manager.rs):
 *   - one fetch in flight per identity: concurrent asks for it wait for the same fetch;
 *   - a certificate is refreshed at half its lifetime (notBefore + lifetime/2, as ztunnel's
 *     WorkloadCertificate::refresh_at);
 *   - a failed fetch is retried with a per-identity exponential backoff — 1 s, doubling, ±20 %
 *     jitter, at most 150 s — reset by a success; a certificate still valid is kept and served
 *     meanwhile, the retry coming no later than its expiry;
 *   - without a valid certificate the answer is `undefined`: fail closed (no HBONE for that
 *     identity), with a log line and the `failed` metric each time a fetch fails.
 * How a certificate is fetched (a key, a CSR, the CA's endpoint and token) is the
 * CertificateFetcher port's business.
 */
import type { Clock, TimerHandle, WallClock } from '../host/clock.js';
import type { Logger } from '../host/log.js';
import type { CertificateFetcher, WorkloadCertificate } from '../host/certificates.js';
import type { Random } from '../host/random.js';

interface CertManagerDeps {
  readonly fetcher: CertificateFetcher;
  readonly clock: Clock & WallClock;
  readonly random: Random;
  readonly log: Logger;
  readonly metrics?: { fetched(identity: string): void; failed(identity: string): void };
}

const BACKOFF_FIRST_MS = 1_000;
const BACKOFF_MAX_MS = 150_000;
const JITTER = 0.2;

interface Entry {
  cert: WorkloadCertificate | undefined;
  inFlight: Promise<WorkloadCertificate | undefined> | undefined;
  timer: TimerHandle | undefined;
  /** The next retry delay after a failure (before jitter); reset by a success. */
  backoffMs: number;
}

export class CertificateManager {
  private readonly entries = new Map<string, Entry>();

  constructor(private readonly deps: CertManagerDeps) {}

  /** A valid certificate for `identity`, fetching one when there is none; undefined: fail closed. */
  async certificateFor(identity: string): Promise<WorkloadCertificate | undefined> {
    let e = this.entries.get(identity);
    if (!e) {
      e = { cert: undefined, inFlight: undefined, timer: undefined, backoffMs: BACKOFF_FIRST_MS };
      this.entries.set(identity, e);
    }
    if (e.cert && this.valid(e.cert)) return e.cert;
    return e.inFlight ?? this.fetch(identity, e);
  }

  /** Fetch `identity`'s certificate ahead of its first use (a pod with it is now served). */
  prefetch(identity: string): void {
    void this.certificateFor(identity);
  }

  /** Stop keeping `identity` (no pod of this node has it any more): its timer ends, its certificate goes. */
  forget(identity: string): void {
    this.entries.get(identity)?.timer?.cancel();
    this.entries.delete(identity);
  }

  stop(): void {
    for (const id of [...this.entries.keys()]) this.forget(id);
  }

  /** Identities kept, with the expiry of each one's certificate (undefined: none valid). */
  held(): { identity: string; notAfterMs: number | undefined }[] {
    return [...this.entries].map(([identity, e]) => ({
      identity,
      notAfterMs: e.cert && this.valid(e.cert) ? e.cert.notAfterMs : undefined,
    }));
  }

  private valid(c: WorkloadCertificate): boolean {
    const now = this.deps.clock.epochMs();
    return now >= c.notBeforeMs && now < c.notAfterMs;
  }

  private fetch(identity: string, e: Entry): Promise<WorkloadCertificate | undefined> {
    e.timer?.cancel();
    e.timer = undefined;
    const p = this.deps.fetcher.fetch(identity).then(
      (cert) => {
        if (this.entries.get(identity) !== e) return cert; // forgotten meanwhile
        e.cert = cert;
        e.inFlight = undefined;
        e.backoffMs = BACKOFF_FIRST_MS;
        this.deps.metrics?.fetched(identity);
        const refreshAt = cert.notBeforeMs + (cert.notAfterMs - cert.notBeforeMs) / 2;
        this.schedule(identity, e, refreshAt - this.deps.clock.epochMs());
        this.deps.log.info('workload certificate fetched', {
          identity,
          notAfter: new Date(cert.notAfterMs).toISOString(),
        });
        return cert;
      },
      (err: unknown) => {
        if (this.entries.get(identity) !== e) return undefined;
        e.inFlight = undefined;
        this.deps.metrics?.failed(identity);
        const jitter = 1 + (this.deps.random.next() * 2 - 1) * JITTER;
        let delay = Math.round(e.backoffMs * jitter);
        e.backoffMs = Math.min(e.backoffMs * 2, BACKOFF_MAX_MS);
        const kept = e.cert && this.valid(e.cert) ? e.cert : undefined;
        if (kept) delay = Math.min(delay, kept.notAfterMs - this.deps.clock.epochMs());
        this.schedule(identity, e, delay);
        const why = err instanceof Error ? err.message : String(err);
        if (kept)
          this.deps.log.warn('workload certificate renewal failed; keeping the current one until it expires', {
            identity,
            error: why,
            retryInMs: delay,
            notAfter: new Date(kept.notAfterMs).toISOString(),
          });
        else
          this.deps.log.warn('no workload certificate: HBONE for this identity fails closed until a fetch succeeds', {
            identity,
            error: why,
            retryInMs: delay,
          });
        return kept;
      },
    );
    e.inFlight = p;
    return p;
  }

  private schedule(identity: string, e: Entry, delayMs: number): void {
    e.timer?.cancel();
    e.timer = this.deps.clock.setTimer(Math.max(0, delayMs), () => {
      e.timer = undefined;
      if (this.entries.get(identity) === e && !e.inFlight) void this.fetch(identity, e);
    });
  }
}
