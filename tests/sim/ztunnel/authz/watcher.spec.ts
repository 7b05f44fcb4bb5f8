/**
 * The policy watcher over the sim API (ApiStore + SimKubeApi + VirtualClock): sync, fail closed
 * before it, live updates with notifications, API errors retried on the clock, a missing CRD.
 */
import { test, expect } from '@playwright/test';
import { ApiStore } from '../../../../sim/kube/store.js';
import { SimKubeApi } from '../../../../sim/kube/sim-kube-api.js';
import { VirtualClock } from '../../../../sim/time/virtual-clock.js';
import { SeededRandom } from '../../../../sim/time/seeded-random.js';
import { MemoryLogger } from '../../../../sim/log/memory-logger.js';
import { PolicyAuthorizer } from '../../../../impl/ztunnel/authz/engine.js';
import { PolicyStore } from '../../../../impl/ztunnel/authz/policy-store.js';
import { AuthorizationPolicyWatcher } from '../../../../impl/ztunnel/authz/policy-watcher.js';
import { ROOT, ap, req } from './helpers.js';

const flush = (): Promise<void> => new Promise((r) => setImmediate(r));

async function world() {
  const clock = new VirtualClock();
  const api = new ApiStore({ clock, random: new SeededRandom(7) });
  for (const name of [ROOT, 'app']) api.create('Namespace', { metadata: { name } });
  const kube = new SimKubeApi(api, clock);
  const log = new MemoryLogger();
  const store = new PolicyStore({ rootNamespace: ROOT, log });
  const authz = new PolicyAuthorizer({ store, log });
  const watcher = new AuthorizationPolicyWatcher({
    kube,
    clock,
    log,
    store,
    initialBackoffMs: 1000,
    maxBackoffMs: 8000,
  });
  /** Let microtasks and every timer due within `ms` run. */
  const run = async (ms = 0): Promise<void> => {
    const until = clock.now() + ms;
    for (let i = 0; i < 1000; i++) {
      await flush();
      const due = clock.nextDue();
      if (due === undefined || due > until) break;
      clock.fireNext();
    }
    await flush();
    if (clock.now() < until) clock.advance(until - clock.now());
    await flush();
  };
  return { clock, api, kube, log, store, authz, watcher, run };
}

const denyClient = ap('app', 'd', { action: 'DENY', rules: [{ from: [{ source: { namespaces: ['client'] } }] }] });

test('denies until the first list completes, then follows the API', async () => {
  const w = await world();
  w.api.create('AuthorizationPolicy', denyClient);
  expect(w.authz.evaluate(req()).allow).toBe(false);
  expect(w.store.synced).toBe(false);
  w.watcher.start();
  await w.run();
  expect(w.store.synced).toBe(true);
  expect(w.authz.evaluate(req()).reason).toMatch(/explicitly denied by: app\/d/);

  let notified = 0;
  w.authz.onChange(() => {
    notified++;
  });
  w.api.delete('AuthorizationPolicy', 'd', 'app');
  await w.run();
  expect(notified).toBe(1);
  expect(w.authz.evaluate(req()).allow).toBe(true);

  w.api.create('AuthorizationPolicy', ap('app', 'a', { rules: [{ from: [{ source: { namespaces: ['other'] } }] }] }));
  await w.run();
  expect(notified).toBe(2);
  expect(w.authz.evaluate(req()).allow).toBe(false);
  w.watcher.stop();
});

test('an update that changes scope is applied as a replacement', async () => {
  const w = await world();
  w.api.create('AuthorizationPolicy', ap('app', 'd', { action: 'DENY', rules: [{}] }));
  w.watcher.start();
  await w.run();
  const other = req({ dst: { labels: { app: 'other' } } });
  expect(w.authz.evaluate(other).allow).toBe(false);
  w.api.patch('AuthorizationPolicy', 'd', 'app', { spec: { selector: { matchLabels: { app: 'server' } } } });
  await w.run();
  expect(w.authz.evaluate(other).allow).toBe(true);
  expect(w.authz.evaluate(req()).allow).toBe(false);
  w.watcher.stop();
});

test('a list failure before the first sync keeps failing closed and retries with backoff', async () => {
  const w = await world();
  w.api.create('AuthorizationPolicy', denyClient);
  w.api.failNext({ n: 2, code: 503, match: (r) => r.kind === 'AuthorizationPolicy' && r.verb === 'list' });
  w.watcher.start();
  await w.run();
  expect(w.store.synced).toBe(false);
  expect(w.authz.evaluate(req({ srcIdentity: undefined })).allow).toBe(false);
  await w.run(999);
  expect(w.store.synced).toBe(false); // first retry at +1000 ms
  await w.run(1);
  expect(w.store.synced).toBe(false); // second failure; next retry at +2000 ms
  await w.run(2000);
  expect(w.store.synced).toBe(true);
  expect(w.authz.evaluate(req()).reason).toMatch(/app\/d/);
  expect(
    w.log.entries
      .filter((e) => e.level === 'warn' && e.msg.includes('AuthorizationPolicies'))
      .map((e) => e.fields['retryInMs']),
  ).toEqual([1000, 2000]);
  w.watcher.stop();
});

test('changes made during an outage are picked up by the relist (no stale allow)', async () => {
  const w = await world();
  w.watcher.start();
  await w.run();
  expect(w.authz.evaluate(req()).allow).toBe(true);
  // the watch drops and the re-watch fails; meanwhile a DENY is created
  w.api.failNext({ n: 1, code: 500, match: (r) => r.kind === 'AuthorizationPolicy' && r.verb === 'watch' });
  w.api.dropWatches((x) => x.kind === 'AuthorizationPolicy');
  w.api.create('AuthorizationPolicy', denyClient);
  await w.run(10_000);
  expect(w.authz.evaluate(req()).allow).toBe(false);
  w.watcher.stop();
});

test('a missing CRD (404) means no policies exist: synced, default allow, and it keeps retrying', async () => {
  const w = await world();
  w.api.failNext({ n: 1, code: 404, match: (r) => r.kind === 'AuthorizationPolicy' && r.verb === 'list' });
  w.watcher.start();
  await w.run();
  expect(w.store.synced).toBe(true);
  expect(w.authz.evaluate(req()).allow).toBe(true);
  // the CRD "appears" with a policy: the retry picks it up
  w.api.create('AuthorizationPolicy', denyClient);
  await w.run(1000);
  expect(w.authz.evaluate(req()).allow).toBe(false);
  w.watcher.stop();
});

test('an invalid policy from the API is enforced in its fail-closed form and logged', async () => {
  const w = await world();
  w.api.create(
    'AuthorizationPolicy',
    ap('app', 'bad', { action: 'DENY', rules: [{ from: [{ source: { ipBlocks: ['10.0.0.0/99'] } }] }] }),
  );
  w.watcher.start();
  await w.run();
  expect(w.authz.evaluate(req({ srcIdentity: undefined, srcIp: '192.0.2.1' })).allow).toBe(false);
  const warn = w.log.entries.find((e) => e.msg.startsWith('invalid authorization policy'));
  expect(warn?.fields['policy']).toBe('app/bad');
  w.watcher.stop();
});
