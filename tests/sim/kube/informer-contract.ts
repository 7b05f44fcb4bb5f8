/**
 * The Informer contract (impl/host/kube.ts), written once and run against every adapter of the
 * Kube port: the sim adapter over the store in virtual time, and the client-node adapter over
 * the HTTP facade in real time. Faults are injected in the shared ApiStore.
 */
import { test, expect } from '@playwright/test';
import type { ApiStore } from '../../../sim/kube/store.js';
import { isKubeApiError, type Informer, type KubeApi, type KubeObjectOf } from '../../../impl/host/kube.js';

interface ContractWorld {
  readonly store: ApiStore;
  readonly api: KubeApi;
  /** Let the world run until `cond` holds (virtual time: fire timers; real: poll). */
  until(cond: () => boolean, what: string): Promise<void>;
  close(): Promise<void>;
}

type Pod = KubeObjectOf<'Pod'>;

function pod(name: string, labels: Record<string, string> = {}, nodeName?: string): Pod {
  return {
    metadata: { name, namespace: 'default', labels },
    spec: { nodeName, containers: [{ name: 'app', image: 'app:1' }] },
  };
}

/** Records an informer's events as strings, ignoring barrier pods. */
function record(inf: Informer<Pod>): { log: string[]; connects: () => number; errors: unknown[] } {
  const log: string[] = [];
  const errors: unknown[] = [];
  let connects = 0;
  const push =
    (verb: string) =>
    (p: Pod): void => {
      const n = p.metadata?.name ?? '';
      if (!n.startsWith('zz-barrier')) log.push(`${verb}:${n}`);
    };
  inf.on('add', push('add'));
  inf.on('update', push('update'));
  inf.on('delete', push('delete'));
  inf.on('connect', () => {
    connects++;
  });
  inf.on('error', (e) => errors.push(e));
  return { log, connects: () => connects, errors };
}

export function defineInformerContract(adapter: string, makeWorld: () => Promise<ContractWorld>): void {
  test.describe(`Informer contract: ${adapter}`, () => {
    let w: ContractWorld;
    let barriers = 0;
    test.beforeEach(async () => {
      w = await makeWorld();
      w.store.create('Namespace', { metadata: { name: 'default' } });
    });
    test.afterEach(async () => {
      await w.close();
    });

    /** Everything before it has been delivered to `inf` once the barrier pod shows up (watch order). */
    async function barrier(inf: Informer<Pod>): Promise<void> {
      const name = `zz-barrier-${++barriers}`;
      w.store.create('Pod', pod(name));
      await w.until(() => inf.get(name, 'default') !== undefined, `barrier ${name} reaches the informer`);
    }

    test('lists, then delivers add/update/delete in order; start resolves with the cache filled', async () => {
      w.store.create('Pod', pod('a'));
      w.store.create('Pod', pod('b'));
      const inf = w.api.informer('Pod', { namespace: 'default' });
      const r = record(inf);
      await inf.start();
      expect(
        inf
          .list('default')
          .map((p) => p.metadata?.name)
          .sort(),
      ).toEqual(['a', 'b']);
      expect(r.log).toEqual(['add:a', 'add:b']);
      w.store.patch('Pod', 'a', 'default', { metadata: { labels: { v: '2' } } });
      w.store.delete('Pod', 'b', 'default');
      w.store.create('Pod', pod('c'));
      await barrier(inf);
      expect(r.log).toEqual(['add:a', 'add:b', 'update:a', 'delete:b', 'add:c']);
      expect(inf.get('a', 'default')?.metadata?.labels).toEqual({ v: '2' });
      expect(inf.get('b', 'default')).toBeUndefined();
      expect(r.connects()).toBe(1);
      inf.stop();
    });

    test('update fires only when the resourceVersion changes', async () => {
      w.store.create('Pod', pod('a', { x: '1' }));
      const inf = w.api.informer('Pod', { namespace: 'default' });
      const r = record(inf);
      await inf.start();
      await w.api.patchMerge('Pod', 'a', 'default', { metadata: { labels: { x: '1' } } }); // no-op: same RV
      await barrier(inf);
      expect(r.log).toEqual(['add:a']);
      await w.api.patchMerge('Pod', 'a', 'default', { metadata: { labels: { x: '2' } } });
      await barrier(inf);
      expect(r.log).toEqual(['add:a', 'update:a']);
      inf.stop();
    });

    test('a dropped watch reconnects from the last resourceVersion: no event lost, none repeated, no relist', async () => {
      w.store.create('Pod', pod('a'));
      const inf = w.api.informer('Pod', { namespace: 'default' });
      const r = record(inf);
      await inf.start();
      expect(w.store.dropWatches()).toBe(1);
      w.store.create('Pod', pod('b'));
      w.store.patch('Pod', 'a', 'default', { metadata: { labels: { after: 'drop' } } });
      await w.until(() => r.connects() === 2, 'informer reconnects');
      await barrier(inf);
      expect(r.log).toEqual(['add:a', 'add:b', 'update:a']);
      expect(r.errors).toEqual([]);
      inf.stop();
    });

    test('410 Gone (expired resourceVersion): relist emits delete for vanished, update for changed, add for new', async () => {
      for (const n of ['a', 'b', 'c']) w.store.create('Pod', pod(n));
      const inf = w.api.informer('Pod', { namespace: 'default' });
      const r = record(inf);
      await inf.start();
      // Hide the next changes from the open watch, then compact them away and break the watch.
      w.store.setWatchDelay(1e9);
      w.store.delete('Pod', 'a', 'default');
      w.store.patch('Pod', 'b', 'default', { metadata: { labels: { v: '2' } } });
      w.store.create('Pod', pod('d'));
      w.store.compact();
      w.store.setWatchDelay(0);
      w.store.dropWatches();
      await w.until(() => inf.get('d', 'default') !== undefined, 'relist after 410');
      expect(r.log).toEqual(['add:a', 'add:b', 'add:c', 'delete:a', 'update:b', 'add:d']);
      expect(r.connects()).toBeGreaterThanOrEqual(3); // start, re-watch (410), relist
      expect(r.errors).toEqual([]);
      w.store.create('Pod', pod('e'));
      await barrier(inf);
      expect(r.log.at(-1)).toBe('add:e'); // and it keeps watching
      inf.stop();
    });

    test('410 answered to the watch request itself also relists', async () => {
      w.store.create('Pod', pod('a'));
      const inf = w.api.informer('Pod', { namespace: 'default' });
      const r = record(inf);
      await inf.start();
      w.store.setWatchDelay(1e9);
      w.store.delete('Pod', 'a', 'default');
      w.store.setWatchDelay(0);
      w.store.failNext({ code: 410, match: (q) => q.verb === 'watch' });
      w.store.dropWatches();
      await w.until(() => r.log.includes('delete:a'), 'relist emits the missed delete');
      expect(r.errors).toEqual([]);
      inf.stop();
    });

    test('any other error: emitted once, the informer stops; start() again recovers by relisting', async () => {
      w.store.create('Pod', pod('a'));
      w.store.failNext({ code: 500, match: (q) => q.verb === 'list' });
      const inf = w.api.informer('Pod', { namespace: 'default' });
      const r = record(inf);
      await inf.start(); // resolves, does not reject
      await w.until(() => r.errors.length > 0, 'error reported');
      expect(isKubeApiError(r.errors[0], 500)).toBe(true);
      expect(r.log).toEqual([]);
      w.store.create('Pod', pod('b'));
      await inf.start();
      expect(r.log).toEqual(['add:a', 'add:b']);
      expect(r.errors).toHaveLength(1);
      inf.stop();
    });

    test('selectors: label selector leaving is delete, entering is add; field selector spec.nodeName', async () => {
      w.store.create('Pod', pod('a', { mesh: 'on' }, 'n1'));
      w.store.create('Pod', pod('b', { mesh: 'on' }, 'n2'));
      w.store.create('Pod', pod('c', {}, 'n1'));
      const byLabel = w.api.informer('Pod', { labelSelector: 'mesh=on' });
      const byNode = w.api.informer('Pod', { fieldSelector: 'spec.nodeName=n1' });
      const rl = record(byLabel);
      const rn = record(byNode);
      await byLabel.start();
      await byNode.start();
      expect(rl.log).toEqual(['add:a', 'add:b']);
      expect(rn.log).toEqual(['add:a', 'add:c']);
      w.store.patch('Pod', 'a', 'default', { metadata: { labels: { mesh: null } } });
      w.store.patch('Pod', 'c', 'default', { metadata: { labels: { mesh: 'on' } } });
      w.store.create('Pod', pod('zz-barrier-sel', { mesh: 'on' }, 'n1'));
      await w.until(
        () =>
          byLabel.get('zz-barrier-sel', 'default') !== undefined &&
          byNode.get('zz-barrier-sel', 'default') !== undefined,
        'barrier',
      );
      expect(rl.log).toEqual(['add:a', 'add:b', 'delete:a', 'add:c']);
      expect(rn.log).toEqual(['add:a', 'add:c', 'update:a', 'update:c']);
      byLabel.stop();
      byNode.stop();
    });

    test('stop(): no further events; the cache is kept', async () => {
      w.store.create('Pod', pod('a'));
      const inf = w.api.informer('Pod', { namespace: 'default' });
      const r = record(inf);
      await inf.start();
      inf.stop();
      w.store.create('Pod', pod('b'));
      // A second informer sees b, so the first had every chance to.
      const other = w.api.informer('Pod', { namespace: 'default' });
      await other.start();
      await barrier(other);
      expect(r.log).toEqual(['add:a']);
      expect(r.errors).toEqual([]);
      expect(inf.get('a', 'default')).toBeDefined();
      other.stop();
    });
  });
}
