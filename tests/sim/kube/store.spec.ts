import { test, expect } from '@playwright/test';
import { ApiStore, type WatchEvent } from '../../../sim/kube/store.js';
import { VirtualClock } from '../../../sim/time/virtual-clock.js';
import { SeededRandom } from '../../../sim/time/seeded-random.js';
import { isKubeApiError, type KubeObjectOf } from '../../../impl/host/kube.js';
import { validateSchema, validateWrite } from '../../../sim/kube/validation.js';

function world(eventWindow = 1000) {
  const clock = new VirtualClock();
  const store = new ApiStore({ clock, random: new SeededRandom(7), eventWindow });
  store.create('Namespace', { metadata: { name: 'default' } });
  return { clock, store };
}

function pod(name: string, labels: Record<string, string> = {}, nodeName?: string): KubeObjectOf<'Pod'> {
  return {
    metadata: { name, namespace: 'default', labels },
    spec: { nodeName, containers: [{ name: 'app', image: 'app:1' }] },
  };
}

function code(fn: () => unknown): number | undefined {
  try {
    fn();
  } catch (e) {
    if (isKubeApiError(e)) return e.code;
    throw e;
  }
  return undefined;
}

test('one global resourceVersion counter; uid and creationTimestamp from the ports', () => {
  const { store, clock } = world();
  clock.advance(5_000);
  const a = store.create('Pod', pod('a'));
  const sa = store.create('ServiceAccount', { metadata: { name: 'sa', namespace: 'default' } });
  expect(Number(sa.metadata?.resourceVersion)).toBe(Number(a.metadata?.resourceVersion) + 1);
  expect(a.metadata?.creationTimestamp).toBe('2025-01-01T00:00:05Z');
  expect(a.metadata?.uid).toMatch(/^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/);
  expect(a.status?.phase).toBe('Pending');
  // Same seed, same history → same uids (deterministic replay).
  const again = world();
  again.clock.advance(5_000);
  expect(again.store.create('Pod', pod('a')).metadata?.uid).toBe(a.metadata?.uid);
});

test('label selectors: =, ==, !=, in, notin, exists, !key', () => {
  const { store } = world();
  store.create('Pod', pod('a', { app: 'web', tier: 'fe' }));
  store.create('Pod', pod('b', { app: 'db' }));
  store.create('Pod', pod('c', {}));
  const names = (sel: string) =>
    store.list('Pod', { namespace: 'default', labelSelector: sel }).items.map((p) => p.metadata?.name);
  expect(names('app=web')).toEqual(['a']);
  expect(names('app==db')).toEqual(['b']);
  expect(names('app!=web')).toEqual(['b', 'c']);
  expect(names('app in (web, db)')).toEqual(['a', 'b']);
  expect(names('app notin (web)')).toEqual(['b', 'c']);
  expect(names('tier')).toEqual(['a']);
  expect(names('!tier')).toEqual(['b', 'c']);
  expect(names('app,!tier')).toEqual(['b']);
  // Only a pod's own labels count: a key named like an Object property is absent from all three.
  expect(names('constructor')).toEqual([]);
  expect(names('!toString')).toEqual(['a', 'b', 'c']);
  expect(code(() => names('app in web'))).toBe(400);
});

test('field selectors: spec.nodeName, status.phase, metadata.name; unsupported field is 400', () => {
  const { store } = world();
  store.create('Pod', pod('a', {}, 'n1'));
  store.create('Pod', pod('b', {}, 'n2'));
  store.create('Pod', pod('c'));
  store.patch('Pod', 'b', 'default', { status: { phase: 'Running' } }, 'status');
  const names = (sel: string) => store.list('Pod', { fieldSelector: sel }).items.map((p) => p.metadata?.name);
  expect(names('spec.nodeName=n1')).toEqual(['a']);
  expect(names('spec.nodeName=')).toEqual(['c']);
  expect(names('status.phase=Running')).toEqual(['b']);
  expect(names('status.phase!=Running,metadata.name!=c')).toEqual(['a']);
  expect(code(() => names('spec.hostNetwork=true'))).toBe(400);
  expect(code(() => store.list('ServiceAccount', { fieldSelector: 'spec.nodeName=n1' }))).toBe(400);
});

test('merge patch: nested merge, null deletes, arrays replace; no-op patch keeps the resourceVersion', () => {
  const { store } = world();
  store.create('Pod', {
    ...pod('a', { x: '1', y: '2' }),
    metadata: { name: 'a', namespace: 'default', labels: { x: '1', y: '2' }, annotations: { keep: 'k' } },
  });
  const p = store.patch('Pod', 'a', 'default', {
    metadata: { labels: { x: null, z: '3' }, annotations: { 'ambient.istio.io/redirection': 'enabled' } },
  });
  expect(p.metadata?.labels).toEqual({ y: '2', z: '3' });
  expect(p.metadata?.annotations).toEqual({ keep: 'k', 'ambient.istio.io/redirection': 'enabled' });
  const same = store.patch('Pod', 'a', 'default', { metadata: { labels: { y: '2' } } });
  expect(same.metadata?.resourceVersion).toBe(p.metadata?.resourceVersion);
  const s = store.patch(
    'Pod',
    'a',
    'default',
    { status: { podIPs: [{ ip: '10.244.0.5' }, { ip: 'fd00::5' }] } },
    'status',
  );
  const s2 = store.patch('Pod', 'a', 'default', { status: { podIPs: [{ ip: '10.244.0.6' }] } }, 'status');
  expect(s.status?.podIPs).toHaveLength(2);
  expect(s2.status?.podIPs).toEqual([{ ip: '10.244.0.6' }]);
});

test('status subresource: the object ignores .status; /status changes .status (and, for pods only, metadata as podStatusStrategy allows)', () => {
  const { store } = world();
  store.create('Pod', pod('a'));
  const viaObject = store.patch('Pod', 'a', 'default', {
    metadata: { annotations: { a: '1' } },
    status: { phase: 'Running' },
  });
  expect(viaObject.metadata?.annotations).toEqual({ a: '1' });
  expect(viaObject.status?.phase).toBe('Pending');
  const viaStatus = store.patch(
    'Pod',
    'a',
    'default',
    { metadata: { annotations: { b: '2' } }, status: { phase: 'Running' } },
    'status',
  );
  expect(viaStatus.status?.phase).toBe('Running');
  expect(viaStatus.metadata?.annotations).toEqual({ a: '1', b: '2' });
  // ServiceAccount has no status subresource.
  store.create('ServiceAccount', { metadata: { name: 'sa', namespace: 'default' } });
  expect(code(() => store.patch('ServiceAccount', 'sa', 'default', {}, 'status'))).toBe(404);
  // Custom resource with a status subresource: status dropped on create.
  const ap = store.create('AuthorizationPolicy', {
    metadata: { name: 'p', namespace: 'default' },
    spec: { action: 'DENY' },
    status: { x: 1 },
  });
  expect(ap.status).toBeUndefined();
  expect(ap.apiVersion).toBe('security.istio.io/v1');
  // For custom resources /status ignores everything but .status.
  const apStatus = store.patch(
    'AuthorizationPolicy',
    'p',
    'default',
    { metadata: { annotations: { c: '3' } }, status: { y: 2 } },
    'status',
  );
  expect(apStatus.metadata?.annotations).toBeUndefined();
  expect(apStatus.status).toEqual({ y: 2 });
});

test('conflicts, not found, already exists, validation errors', () => {
  const { store } = world();
  const a = store.create('Pod', pod('a'));
  const fresh = store.patch('Pod', 'a', 'default', { metadata: { labels: { v: '2' } } });
  expect(code(() => store.update('Pod', { ...a, metadata: { ...a.metadata, labels: { v: '3' } } }))).toBe(409);
  const ok = store.update('Pod', { ...fresh, metadata: { ...fresh.metadata, labels: { v: '3' } } });
  expect(ok.metadata?.labels).toEqual({ v: '3' });
  expect(
    code(() =>
      store.patch('Pod', 'a', 'default', {
        metadata: { resourceVersion: a.metadata?.resourceVersion, labels: { q: '1' } },
      }),
    ),
  ).toBe(409);
  expect(code(() => store.get('Pod', 'nope', 'default'))).toBe(404);
  expect(code(() => store.delete('Pod', 'nope', 'default'))).toBe(404);
  expect(code(() => store.create('Pod', pod('a')))).toBe(409);
  expect(code(() => store.create('Pod', { ...pod('b'), metadata: { name: 'b', namespace: 'nons' } }))).toBe(404);
  let msg = '';
  try {
    store.create('Pod', {
      metadata: { name: 'bad', namespace: 'default' },
      spec: { containers: [{ name: 'c', securityContext: { runAsUser: 'root' as unknown as number } }] },
    });
  } catch (e) {
    msg = (e as Error).message;
    expect(isKubeApiError(e, 422)).toBe(true);
  }
  expect(msg).toContain('spec.containers[0].securityContext.runAsUser');
  expect(
    code(() => store.create('Pod', { metadata: { name: 'nospec', namespace: 'default' }, spec: {} as never })),
  ).toBe(422);
  expect(code(() => store.create('Pod', pod('Upper_Case')))).toBe(422);
  expect(
    code(() =>
      store.create('AuthorizationPolicy', {
        metadata: { name: 'p', namespace: 'default' },
        spec: { action: 'MAYBE' as never },
      }),
    ),
  ).toBe(422);
  expect(code(() => store.patch('Pod', 'a', 'default', { spec: { nodeName: 'n9' } }))).toBe(422);
  expect(code(() => store.patch('Pod', 'a', 'default', { metadata: { uid: 'other' } }))).toBe(422);
});

test('watch: events come through the clock, in order, never inside the mutating call', () => {
  const { store, clock } = world();
  const seen: string[] = [];
  store.watch(
    'Pod',
    { namespace: 'default', resourceVersion: store.resourceVersion() },
    (ev) => seen.push(`${ev.type}:${ev.object.metadata?.name}`),
    () => seen.push('closed'),
  );
  store.create('Pod', pod('a'));
  store.patch('Pod', 'a', 'default', { metadata: { labels: { x: 'y' } } });
  store.delete('Pod', 'a', 'default');
  expect(seen).toEqual([]);
  clock.advance(0);
  expect(seen).toEqual(['ADDED:a', 'MODIFIED:a', 'DELETED:a']);
});

test('watchers share one frozen snapshot per resourceVersion: they cannot change the store; callers get mutable copies', () => {
  const { store, clock } = world();
  const seen: WatchEvent[][] = [[], []];
  for (const into of seen)
    store.watch(
      'Pod',
      { namespace: 'default', resourceVersion: store.resourceVersion() },
      (ev) => into.push(ev),
      () => undefined,
    );
  const created = store.create('Pod', pod('a', { v: '1' }));
  store.patch('Pod', 'a', 'default', { status: { phase: 'Running' } }, 'status');
  clock.advance(0);
  const [a0, a1] = [seen[0]!, seen[1]!];
  expect(a0.map((e) => e.type)).toEqual(['ADDED', 'MODIFIED']);
  // One object per version for every watcher (no copy per watcher), frozen all the way down.
  expect(a0[0]!.object).toBe(a1[0]!.object);
  expect(a0[1]!.object).toBe(a1[1]!.object);
  expect(Object.isFrozen(a0[0]!.object.metadata?.labels)).toBe(true);
  expect(() => {
    (a0[0]!.object.metadata!.labels as Record<string, string>)['v'] = 'changed';
  }).toThrow(TypeError);
  expect(() => {
    a0[1]!.object.status = { phase: 'Failed' };
  }).toThrow(TypeError);
  // The earlier version is unchanged by the later write (copy-on-write, not in-place).
  expect((a0[0]!.object.status as { phase?: string }).phase).toBe('Pending');
  expect(store.get('Pod', 'a', 'default').status?.phase).toBe('Running');
  expect(store.get('Pod', 'a', 'default').metadata?.labels).toEqual({ v: '1' });
  // What callers get back is theirs to change.
  created.metadata!.labels!['v'] = 'mine';
  const got = store.get('Pod', 'a', 'default');
  got.metadata!.labels!['v'] = 'mine too';
  store.list('Pod', { namespace: 'default' }).items[0]!.spec!.containers[0]!.image = 'other';
  expect(store.get('Pod', 'a', 'default').metadata?.labels).toEqual({ v: '1' });
  expect(store.get('Pod', 'a', 'default').spec?.containers[0]?.image).toBe('app:1');
  // A status write is validated like any other write (the whole object, every time).
  expect(
    code(() => store.patch('Pod', 'a', 'default', { status: { podIPs: [{ ip: 7 as unknown as string }] } }, 'status')),
  ).toBe(422);
  expect(store.get('Pod', 'a', 'default').status?.podIPs).toBeUndefined();
});

test("pod watches by node (the kubelets' selector) see only their node's pods, in the same order as any other watch", () => {
  const { store, clock } = world();
  const seen: string[] = [];
  const watch = (tag: string, fieldSelector?: string): void => {
    store.watch(
      'Pod',
      {
        namespace: 'default',
        resourceVersion: store.resourceVersion(),
        ...(fieldSelector !== undefined ? { fieldSelector } : {}),
      },
      (ev) => seen.push(`${tag} ${ev.type} ${ev.object.metadata?.name}`),
      () => undefined,
    );
  };
  watch('n1', 'spec.nodeName=n1');
  watch('n2', 'spec.nodeName==n2');
  watch('unbound', 'spec.nodeName=');
  watch('n1-running', 'spec.nodeName=n1,status.phase=Running');
  watch('not-n1', 'spec.nodeName!=n1');
  watch('all');
  store.create('Pod', pod('a', {}, 'n1'));
  store.create('Pod', pod('b', {}, 'n2'));
  store.create('Pod', pod('c'));
  store.patch('Pod', 'a', 'default', { status: { phase: 'Running' } }, 'status');
  store.delete('Pod', 'b', 'default');
  clock.advance(0);
  expect(seen).toEqual([
    'n1 ADDED a',
    'all ADDED a',
    'n2 ADDED b',
    'not-n1 ADDED b',
    'all ADDED b',
    'unbound ADDED c',
    'not-n1 ADDED c',
    'all ADDED c',
    'n1 MODIFIED a',
    'n1-running ADDED a',
    'all MODIFIED a',
    'n2 DELETED b',
    'not-n1 DELETED b',
    'all DELETED b',
  ]);
});

test('a write validates what it changed: the same verdict as validating the whole object', () => {
  const { store } = world();
  const old = store.get(
    'Pod',
    store.create('Pod', pod('a', { v: '1' }, 'n1')).metadata!.name!,
    'default',
  ) as unknown as Record<string, unknown>;
  const verdict = (f: () => void): string => {
    try {
      f();
      return 'ok';
    } catch (e) {
      return isKubeApiError(e, 422) ? (e as Error).message : `unexpected ${String(e)}`;
    }
  };
  const variants: Array<Record<string, unknown>> = [
    { ...old, status: { phase: 'Running', podIP: '10.244.0.2', podIPs: [{ ip: '10.244.0.2' }] } },
    { ...old, status: { phase: 'Running', podIPs: [{ ip: 7 }] } },
    { ...old, status: { conditions: [{ type: 'Ready' }] } }, // status (required) missing in a condition
    { ...old, status: 'Running' },
    { ...old, status: null },
    { ...old, spec: { containers: [{ name: 'app', image: 'app:2' }] } },
    { ...old, spec: { containers: [{ image: 'app:2' }] } }, // a container needs a name
    { ...old, metadata: { ...(old['metadata'] as object), resourceVersion: '99' } },
    { ...old, metadata: { ...(old['metadata'] as object), annotations: { a: 5 } } },
    { ...old, metadata: { ...(old['metadata'] as object), labels: 'x' } },
    { ...old, extra: { anything: true } },
  ];
  for (const next of variants) {
    expect(
      verdict(() => validateWrite('Pod', 'a', next, old)),
      JSON.stringify(next),
    ).toBe(verdict(() => validateSchema('Pod', 'a', next)));
  }
  // Both outcomes occur, and the failures name the field.
  expect(verdict(() => validateWrite('Pod', 'a', variants[1]!, old))).toContain('status.podIPs[0].ip');
  expect(verdict(() => validateWrite('Pod', 'a', variants[0]!, old))).toBe('ok');
  // Through the API: an annotation that is not a string fails a merge patch.
  expect(
    code(() => store.patch('Pod', 'a', 'default', { metadata: { annotations: { a: 5 as unknown as string } } })),
  ).toBe(422);
});

test('watch with a selector sees objects entering as ADDED and leaving as DELETED', () => {
  const { store, clock } = world();
  store.create('Pod', pod('a', { mesh: 'on' }));
  const seen: string[] = [];
  store.watch(
    'Pod',
    { labelSelector: 'mesh=on' },
    (ev) => seen.push(`${ev.type}:${ev.object.metadata?.name}`),
    () => {},
  );
  store.patch('Pod', 'a', 'default', { metadata: { labels: { mesh: 'off' } } });
  store.patch('Pod', 'a', 'default', { metadata: { labels: { mesh: 'on' } } });
  store.create('Pod', pod('b'));
  clock.advance(0);
  expect(seen).toEqual(['ADDED:a', 'DELETED:a', 'ADDED:a']);
});

test('watch resumes from a resourceVersion; older than the window is 410 Gone; bookmarks carry the RV', () => {
  const { store, clock } = world(3);
  const rv0 = store.resourceVersion();
  for (const n of ['a', 'b', 'c', 'd']) store.create('Pod', pod(n));
  const rv = store.list('Pod', { namespace: 'default' }).items[1]!.metadata!.resourceVersion!; // after b
  const events: WatchEvent[] = [];
  store.watch(
    'Pod',
    { resourceVersion: rv, allowWatchBookmarks: true },
    (ev) => events.push(ev),
    () => {},
  );
  clock.advance(0);
  expect(events.map((e) => e.object.metadata?.name)).toEqual(['c', 'd']);
  store.sendBookmarks();
  clock.advance(0);
  expect(events.at(-1)?.type).toBe('BOOKMARK');
  expect(events.at(-1)?.object.metadata?.resourceVersion).toBe(store.resourceVersion());
  let closed = false;
  const gone: WatchEvent[] = [];
  store.watch(
    'Pod',
    { resourceVersion: rv0 },
    (ev) => gone.push(ev),
    () => {
      closed = true;
    },
  );
  clock.advance(0);
  expect(gone.map((e) => [e.type, (e.object as { code?: number }).code])).toEqual([['ERROR', 410]]);
  expect(closed).toBe(true);
  store.compact();
  const after: WatchEvent[] = [];
  store.watch(
    'Pod',
    { resourceVersion: rv },
    (ev) => after.push(ev),
    () => {},
  );
  clock.advance(0);
  expect(after[0]?.type).toBe('ERROR');
});

test('fault hooks: fail next N matching requests, delay events, drop watches', () => {
  const { store, clock } = world();
  store.failNext({ n: 2, code: 503, match: (r) => r.verb === 'create' && r.kind === 'Pod' });
  expect(code(() => store.create('Pod', pod('a')))).toBe(503);
  expect(store.list('Pod', { namespace: 'default' }).items).toHaveLength(0); // list not matched
  expect(code(() => store.create('Pod', pod('a')))).toBe(503);
  expect(code(() => store.create('Pod', pod('a')))).toBeUndefined();

  const seen: string[] = [];
  store.watch(
    'Pod',
    { resourceVersion: store.resourceVersion() },
    (ev) => seen.push(`${ev.type}:${ev.object.metadata?.name}`),
    () => seen.push('closed'),
  );
  store.setWatchDelay(100);
  store.create('Pod', pod('b'));
  clock.advance(99);
  expect(seen).toEqual([]);
  clock.advance(1);
  expect(seen).toEqual(['ADDED:b']);
  store.create('Pod', pod('c'));
  expect(store.dropWatches()).toBe(1);
  clock.advance(1000);
  expect(seen).toEqual(['ADDED:b', 'closed']); // pending c discarded with the connection
});

test('deleting a namespace deletes its objects first', () => {
  const { store, clock } = world();
  store.create('Namespace', { metadata: { name: 'apps' } });
  store.create('Pod', { ...pod('a'), metadata: { name: 'a', namespace: 'apps' } });
  const seen: string[] = [];
  store.watch(
    'Pod',
    {},
    (ev) => seen.push(`${ev.type}:${ev.object.metadata?.name}`),
    () => {},
  );
  clock.advance(0);
  store.delete('Namespace', 'apps');
  clock.advance(0);
  expect(seen).toEqual(['ADDED:a', 'DELETED:a']);
  expect(code(() => store.get('Namespace', 'apps'))).toBe(404);
});
