/**
 * The node proxy's certificate manager (impl/ztunnel/cert-manager.ts), in virtual time: one fetch
 * per identity however many ask, refresh at half the lifetime, per-identity backoff on failure
 * (1 s doubling, ±20 %, at most 150 s) with the current certificate kept until it expires, and
 * fail closed (undefined, a log line, a metric) when there is none.
 */
import { test, expect } from '@playwright/test';
import { CertificateManager } from '../../../impl/ztunnel/cert-manager.js';
import type { WorkloadCertificate } from '../../../impl/host/certificates.js';
import { VirtualClock } from '../../../sim/time/virtual-clock.js';
import { SeededRandom } from '../../../sim/time/seeded-random.js';
import { MemoryLogger } from '../../../sim/log/memory-logger.js';

const WEB = 'spiffe://cluster.local/ns/shop/sa/web';
const HOUR = 3600_000;

/** A CA behind the port: each fetch takes `latencyMs`, and succeeds unless `failing`. */
function setup(latencyMs = 50) {
  const clock = new VirtualClock();
  const log = new MemoryLogger();
  const calls: { identity: string; at: number }[] = [];
  const counts = { fetched: 0, failed: 0 };
  const ca = { failing: false, lifetimeMs: 24 * HOUR };
  const mgr = new CertificateManager({
    clock,
    random: new SeededRandom(3),
    log,
    metrics: { fetched: () => counts.fetched++, failed: () => counts.failed++ },
    fetcher: {
      fetch: async (identity) => {
        calls.push({ identity, at: clock.now() });
        await clock.sleep(latencyMs);
        if (ca.failing) throw new Error('CA unreachable: ECONNREFUSED');
        const now = clock.epochMs();
        const c: WorkloadCertificate = {
          identity,
          certPem: `cert-${calls.length}`,
          chainPem: ['root'],
          keyPem: `key-${calls.length}`,
          notBeforeMs: now,
          notAfterMs: now + ca.lifetimeMs,
        };
        return c;
      },
    },
  });
  /** Move virtual time on by `ms`, letting promise continuations run between timers. */
  const run = async (ms: number): Promise<void> => {
    const until = clock.now() + ms;
    for (;;) {
      for (let i = 0; i < 5; i++) await new Promise((r) => setImmediate(r));
      const next = clock.nextDue();
      if (next === undefined || next > until) break;
      clock.fireNext();
    }
    clock.advance(Math.max(0, until - clock.now()));
    for (let i = 0; i < 5; i++) await new Promise((r) => setImmediate(r));
  };
  return { clock, log, calls, counts, ca, mgr, run };
}

test('concurrent asks share one fetch; the certificate is refreshed at half its lifetime', async () => {
  const s = setup();
  const both = Promise.all([s.mgr.certificateFor(WEB), s.mgr.certificateFor(WEB)]);
  await s.run(100);
  const [a, b] = await both;
  expect(a?.certPem).toBe('cert-1');
  expect(b).toBe(a);
  expect(s.calls).toHaveLength(1);
  // Served from the cache until the half-life refresh, then the new one.
  await s.run(11 * HOUR);
  expect((await s.mgr.certificateFor(WEB))?.certPem).toBe('cert-1');
  expect(s.calls).toHaveLength(1);
  await s.run(1 * HOUR + 100);
  expect(s.calls).toHaveLength(2);
  expect(s.calls[1]!.at).toBe(12 * HOUR + 50);
  expect((await s.mgr.certificateFor(WEB))?.certPem).toBe('cert-2');
  expect(s.counts.fetched).toBe(2);
});

test('no certificate: fail closed with a log line and a metric; retries back off 1 s doubling (±20 %) up to 150 s; a success resets', async () => {
  const s = setup();
  s.ca.failing = true;
  const first = s.mgr.certificateFor(WEB);
  await s.run(100);
  expect(await first).toBeUndefined();
  expect(s.counts.failed).toBe(1);
  expect(s.log.entries.find((e) => e.level === 'warn')?.msg).toMatch(
    /no workload certificate: HBONE for this identity fails closed/,
  );
  await s.run(600_000);
  const gaps = s.calls.slice(1).map((c, i) => c.at - s.calls[i]!.at - 50);
  const nominal = [1_000, 2_000, 4_000, 8_000, 16_000, 32_000, 64_000, 128_000, 150_000];
  for (let i = 0; i < nominal.length; i++) {
    expect(gaps[i], `retry ${i + 1}`).toBeGreaterThanOrEqual(nominal[i]! * 0.8);
    expect(gaps[i], `retry ${i + 1}`).toBeLessThanOrEqual(nominal[i]! * 1.2);
  }
  // The CA is back: the next retry succeeds, and a later failure starts again at 1 s.
  s.ca.failing = false;
  await s.run(200_000);
  expect((await s.mgr.certificateFor(WEB))?.certPem).toBeDefined();
  expect(s.counts.fetched).toBe(1);
  s.ca.failing = true;
  const before = s.calls.length;
  await s.run(12 * 3600_000 + 5_000); // the half-life refresh fails; its first retry is ~1 s later
  const retry = s.calls[before + 1]!.at - s.calls[before]!.at - 50;
  expect(retry).toBeGreaterThanOrEqual(800);
  expect(retry).toBeLessThanOrEqual(1_200);
});

test('a failed renewal keeps the current certificate until it expires, retrying before that; then fail closed', async () => {
  const s = setup();
  s.ca.lifetimeMs = 10 * 60_000; // 10 min: refresh at 5 min
  const p = s.mgr.certificateFor(WEB);
  await s.run(100);
  expect((await p)?.certPem).toBe('cert-1');
  s.ca.failing = true;
  await s.run(6 * 60_000); // the refresh at 5 min fails, and its retries
  expect((await s.mgr.certificateFor(WEB))?.certPem).toBe('cert-1');
  expect(s.log.entries.some((e) => /renewal failed; keeping the current one/.test(e.msg))).toBe(true);
  await s.run(5 * 60_000); // past the expiry
  const after = s.mgr.certificateFor(WEB);
  await s.run(100);
  expect(await after).toBeUndefined();
  expect(s.mgr.held()).toEqual([{ identity: WEB, notAfterMs: undefined }]);
});

test('forget ends the refreshes of an identity no pod has any more', async () => {
  const s = setup();
  const p = s.mgr.certificateFor(WEB);
  await s.run(100);
  await p;
  s.mgr.forget(WEB);
  await s.run(48 * HOUR);
  expect(s.calls).toHaveLength(1);
  expect(s.mgr.held()).toEqual([]);
});
