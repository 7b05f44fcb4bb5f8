/**
 * The ZDS protocol between ZdsServer (agent) and ZdsClient (proxy) over the in-memory
 * transport, on virtual time: hello, snapshot, streaming, nack, ack timeout, reconnect,
 * replacement by a second proxy, rejection of a proxy with the wrong uid, protocol errors.
 */
import { test, expect } from '@playwright/test';
import { podUid } from '../../../impl/api/ids.js';
import { encodeRequest } from '../../../impl/api/zds/codec.js';
import { ZdsSendError } from '../../../impl/node-agent/zds-server.js';
import { ADDRESS, PROXY, ZdsWorld, nsOf, pod } from './world.js';

function sendError(o: { ok: boolean; error?: unknown }): ZdsSendError {
  expect(o.ok).toBe(false);
  expect(o.error).toBeInstanceOf(ZdsSendError);
  return o.error as ZdsSendError;
}

test('hello, then a snapshot of every enrolled pod (Add with netns, Keep without), then SnapshotSent', async () => {
  const w = new ZdsWorld();
  w.enroll(pod(1), pod(2), pod(3, false));
  await w.server.start();
  const { client, proxy, events } = w.client();
  client.start();
  await w.run(50);

  expect(proxy.calls).toEqual([
    `add pod-1 ${nsOf(1)}`,
    `add pod-2 ${nsOf(2)}`,
    'keep pod-3',
    'snapshot-sent [pod-1 pod-2 pod-3]',
  ]);
  expect(proxy.servedUids()).toEqual(['pod-1', 'pod-2']);
  expect(proxy.served.get(podUid('pod-1'))?.info).toEqual({
    name: 'app-1',
    namespace: 'default',
    serviceAccount: 'sa',
  });
  expect(w.types()).toEqual(['connected', 'snapshot-sent']);
  expect(w.serverEvents[0]).toMatchObject({ type: 'connected', peer: PROXY, version: 1 });
  expect(w.serverEvents[1]).toMatchObject({ workloads: 3, nacks: 0 });
  expect(w.server.connected()).toBe(true);
  expect(w.server.synced()).toBe(true);
  expect(client.ready()).toBe(true);
  expect(events.map((e) => e.type)).toEqual(['connected', 'ready']);
  await client.stop();
  await w.server.stop();
});

test('readiness waits for the snapshot: not synced until SnapshotSent is acked', async () => {
  const w = new ZdsWorld();
  w.enroll(pod(1));
  await w.server.start();
  w.net.setLatency(10);
  const { client } = w.client();
  client.start();
  await w.run(25); // hello arrived (10), Add sent, its ack not yet back
  expect(w.server.connected()).toBe(true);
  expect(w.server.synced()).toBe(false);
  expect(client.ready()).toBe(false);
  await w.run(100);
  expect(w.server.synced()).toBe(true);
  expect(client.ready()).toBe(true);
});

test('Add and Del stream after the snapshot and resolve on ack; calls are serialised in order', async () => {
  const w = new ZdsWorld();
  await w.server.start();
  const { client, proxy } = w.client();
  client.start();
  await w.run(20);
  const adds = [4, 5, 6].map((n) => w.server.addWorkload(pod(n).uid, pod(n).info, nsOf(n)));
  const del = w.server.delWorkload(podUid('pod-5'));
  const all = await w.outcome(Promise.all([...adds, del]));
  expect(all.ok).toBe(true);
  expect(proxy.calls.slice(1)).toEqual([
    `add pod-4 ${nsOf(4)}`,
    `add pod-5 ${nsOf(5)}`,
    `add pod-6 ${nsOf(6)}`,
    'del pod-5',
  ]);
  expect(proxy.servedUids()).toEqual(['pod-4', 'pod-6']);
  await client.stop();
});

test('an Add for a pod with a new netns replaces the old one; the old handle is released', async () => {
  const w = new ZdsWorld();
  await w.server.start();
  const { client, proxy } = w.client();
  client.start();
  await w.run(20);
  const p = pod(1);
  expect((await w.outcome(w.server.addWorkload(p.uid, p.info, nsOf(1)))).ok).toBe(true);
  expect((await w.outcome(w.server.addWorkload(p.uid, p.info, nsOf(1)))).ok).toBe(true); // same netns: no-op
  expect(w.net.openHandles).toBe(1);
  expect((await w.outcome(w.server.addWorkload(p.uid, p.info, nsOf(9)))).ok).toBe(true);
  expect(proxy.served.get(p.uid)?.netns.identity).toBe(nsOf(9));
  expect(w.net.openHandles).toBe(1);
  await client.stop();
});

test('a NACK from the proxy rejects addWorkload with its error; the connection stays usable', async () => {
  const w = new ZdsWorld();
  await w.server.start();
  const { client, proxy, events } = w.client();
  proxy.failAdd.set(podUid('pod-7'), 'bind 15001 in pod-7: EADDRINUSE');
  client.start();
  await w.run(20);
  const err = sendError(await w.outcome(w.server.addWorkload(pod(7).uid, pod(7).info, nsOf(7))));
  expect(err.reason).toBe('nack');
  expect(err.uid).toBe('pod-7');
  expect(err.proxyError).toBe('bind 15001 in pod-7: EADDRINUSE');
  expect(err.message).toContain('the proxy refused it');
  // The caller got the rejection: the event says so, so the agent does not queue the pod twice.
  expect(w.serverEvents.at(-1)).toMatchObject({ type: 'nack', request: 'add', uid: 'pod-7', origin: 'caller' });
  expect(events.at(-1)).toMatchObject({ type: 'nack', uid: 'pod-7' });
  expect(w.net.openHandles).toBe(0); // the client closed the handle of the refused Add
  expect((await w.outcome(w.server.addWorkload(pod(8).uid, pod(8).info, nsOf(8)))).ok).toBe(true);
  expect(w.server.connected()).toBe(true);
  await client.stop();
});

test('a NACK during the snapshot is counted and does not stop the snapshot', async () => {
  const w = new ZdsWorld();
  w.enroll(pod(1), pod(2));
  await w.server.start();
  const { client, proxy } = w.client();
  proxy.failAdd.set(podUid('pod-1'), 'no');
  client.start();
  await w.run(50);
  expect(w.serverEvents.find((e) => e.type === 'snapshot-sent')).toMatchObject({ workloads: 2, nacks: 1 });
  expect(proxy.servedUids()).toEqual(['pod-2']);
  await client.stop();
});

test('no proxy connected: addWorkload fails at once with no-proxy; delWorkload succeeds', async () => {
  const w = new ZdsWorld();
  await w.server.start();
  const err = sendError(await w.outcome(w.server.addWorkload(pod(1).uid, pod(1).info, nsOf(1)), 0));
  expect(err.reason).toBe('no-proxy');
  expect(err.message).toContain(ADDRESS);
  expect((await w.outcome(w.server.delWorkload(podUid('pod-1')), 0)).ok).toBe(true);
});

test('a lost ack times out the request, closes the connection, and the proxy reconnects to a fresh snapshot', async () => {
  const w = new ZdsWorld({ ackTimeoutMs: 5000 });
  w.enroll(pod(1));
  await w.server.start();
  const { client, proxy, events } = w.client();
  client.start();
  await w.run(20);
  w.net.dropNextFrame('client-to-server'); // the proxy's ack for the next request is lost
  const p = w.server.addWorkload(pod(2).uid, pod(2).info, nsOf(2));
  w.enroll(pod(2));
  let settled = false;
  p.then(
    () => {
      settled = true;
    },
    () => {
      settled = true;
    },
  );
  await w.run(4990);
  expect(settled, 'the request must wait for the whole ack timeout').toBe(false);
  expect(w.server.connected()).toBe(true);
  const err = sendError(await w.outcome(p, 20));
  expect(err.reason).toBe('timeout');
  expect(err.message).toContain('no ack');
  expect(w.types()).toContain('disconnected');
  await w.run(100); // backoff then reconnect
  expect(events.map((e) => e.type)).toEqual(['connected', 'ready', 'disconnected', 'connected', 'ready']);
  expect(proxy.calls.filter((c) => c.startsWith('snapshot-sent'))).toEqual([
    'snapshot-sent [pod-1]',
    'snapshot-sent [pod-1 pod-2]',
  ]);
  expect(w.server.synced()).toBe(true);
  await client.stop();
});

test('the agent side drops the connection: the proxy backs off, reconnects and reconciles to the new snapshot', async () => {
  const w = new ZdsWorld();
  w.enroll(pod(1), pod(2));
  await w.server.start();
  const { client, proxy, events } = w.client();
  client.start();
  await w.run(20);
  expect(proxy.servedUids()).toEqual(['pod-1', 'pod-2']);
  w.enrolled.delete(podUid('pod-2')); // unenrolled while the proxy was away
  w.net.disconnectAll();
  await w.run(2);
  expect(client.ready()).toBe(false);
  expect(w.server.connected()).toBe(false);
  await w.run(100);
  expect(events.map((e) => e.type)).toEqual(['connected', 'ready', 'disconnected', 'connected', 'ready']);
  const retry = events.find((e) => e.type === 'disconnected');
  // first retry: 10 ms +- 20 % jitter
  expect(retry && 'retryInMs' in retry ? retry.retryInMs : -1).toBeGreaterThanOrEqual(8);
  expect(retry && 'retryInMs' in retry ? retry.retryInMs : -1).toBeLessThanOrEqual(12);
  expect(proxy.servedUids()).toEqual(['pod-1']);
  expect(w.types()).toEqual(['connected', 'snapshot-sent', 'disconnected', 'connected', 'snapshot-sent']);
  await client.stop();
});

test('connect failures back off exponentially with jitter up to the cap, deterministically per seed', async () => {
  const delays = async (seed: number): Promise<number[]> => {
    const w = new ZdsWorld();
    const { client, events } = w.client(PROXY, seed);
    client.start(); // no server listening
    await w.run(120_000);
    await client.stop();
    return events.flatMap((e) => (e.type === 'connect-failed' ? [e.retryInMs] : []));
  };
  const a = await delays(3);
  expect(a.length).toBeGreaterThan(12);
  expect(a).toEqual(await delays(3));
  expect(a).not.toEqual(await delays(4));
  for (const [i, d] of a.entries()) {
    const base = Math.min(15_000, 10 * 2 ** i);
    expect(d).toBeGreaterThanOrEqual(Math.floor(base * 0.8));
    expect(d).toBeLessThanOrEqual(Math.ceil(base * 1.2));
  }
  expect(Math.max(...a)).toBeLessThanOrEqual(18_000);
});

test('the proxy starts before the agent and connects once it listens', async () => {
  const w = new ZdsWorld();
  w.enroll(pod(1));
  const { client, proxy } = w.client();
  client.start();
  await w.run(500);
  expect(client.connected()).toBe(false);
  await w.server.start();
  await w.run(2000);
  expect(client.ready()).toBe(true);
  expect(proxy.servedUids()).toEqual(['pod-1']);
  await client.stop();
});

test('a second proxy (restart) takes over Adds; Dels go to both; when it goes, the first is resynced', async () => {
  const w = new ZdsWorld();
  w.enroll(pod(1));
  await w.server.start();
  const first = w.client({ pid: 100, uid: 1337, gid: 1337 }, 1);
  first.client.start();
  await w.run(20);
  const second = w.client({ pid: 200, uid: 1337, gid: 1337 }, 2);
  second.client.start();
  await w.run(20);
  expect(second.proxy.servedUids()).toEqual(['pod-1']); // fresh snapshot for the new connection
  expect(w.server.activePeer()?.pid).toBe(200);

  w.enroll(pod(2));
  expect((await w.outcome(w.server.addWorkload(pod(2).uid, pod(2).info, nsOf(2)))).ok).toBe(true);
  expect(second.proxy.servedUids()).toEqual(['pod-1', 'pod-2']);
  expect(first.proxy.servedUids()).toEqual(['pod-1']); // the old proxy does not get new pods

  w.enrolled.delete(podUid('pod-1'));
  expect((await w.outcome(w.server.delWorkload(podUid('pod-1')))).ok).toBe(true);
  expect(first.proxy.servedUids()).toEqual([]); // a draining old proxy also drops deleted pods
  expect(second.proxy.servedUids()).toEqual(['pod-2']);

  await second.client.stop();
  await w.run(20);
  expect(w.server.activePeer()?.pid).toBe(100);
  expect(first.proxy.servedUids()).toEqual(['pod-2']); // resynced with what it missed
  expect(first.proxy.calls.filter((c) => c.startsWith('snapshot-sent'))).toHaveLength(1); // no second SnapshotSent
  await first.client.stop();
});

test('a client running as another uid is rejected before it learns anything', async () => {
  const w = new ZdsWorld({ allowedUids: [PROXY_UID_ALLOWED] });
  w.enroll(pod(1));
  await w.server.start();
  const rogue = w.client({ pid: 666, uid: 1000, gid: 1000 });
  rogue.client.start();
  await w.run(50);
  expect(rogue.proxy.calls).toEqual([]);
  expect(w.net.openHandles).toBe(0);
  expect(rogue.client.ready()).toBe(false);
  expect(w.server.connected()).toBe(false);
  const rejected = w.serverEvents.filter((e) => e.type === 'rejected');
  expect(rejected.length).toBeGreaterThan(0);
  expect(rejected[0]).toMatchObject({ peer: { pid: 666, uid: 1000 } });
  expect(rejected[0] && 'reason' in rejected[0] ? rejected[0].reason : '').toContain(
    'uid 1000 (pid 666) is not an allowed node proxy uid (1337)',
  );
  expect(sendError(await w.outcome(w.server.addWorkload(pod(1).uid, pod(1).info, nsOf(1)), 0)).reason).toBe('no-proxy');
  await rogue.client.stop();
  // The legitimate proxy still gets in afterwards.
  const good = w.client();
  good.client.start();
  await w.run(50);
  expect(good.proxy.servedUids()).toEqual(['pod-1']);
  await good.client.stop();
});

test('a corrupted ack is a protocol error: the agent closes the connection and the pending Add fails', async () => {
  const w = new ZdsWorld();
  await w.server.start();
  const { client, events } = w.client();
  client.start();
  await w.run(20);
  w.net.corruptNextFrame('client-to-server', () => Uint8Array.of(0x08, 0x01)); // a hello where an ack belongs
  const err = sendError(await w.outcome(w.server.addWorkload(pod(1).uid, pod(1).info, nsOf(1)), 5));
  expect(err.reason).toBe('closed');
  expect(w.serverEvents.find((e) => e.type === 'protocol-error')).toMatchObject({
    error: expect.stringContaining('wire type 0, expected 2') as unknown,
  });
  await w.run(100);
  expect(events.filter((e) => e.type === 'ready')).toHaveLength(2); // reconnected
  await client.stop();
});

test('a corrupted request is nacked by the proxy with the decode error, then it reconnects', async () => {
  const w = new ZdsWorld();
  await w.server.start();
  const { client, events } = w.client();
  client.start();
  await w.run(20);
  w.net.corruptNextFrame('server-to-client', (b) => b.subarray(0, b.length - 3)); // truncated
  const err = sendError(await w.outcome(w.server.addWorkload(pod(1).uid, pod(1).info, nsOf(1)), 5));
  expect(err.reason).toBe('nack');
  expect(err.proxyError).toMatch(/^protocol error: WorkloadRequest.*(declares|ends in the middle)/);
  expect(events.find((e) => e.type === 'protocol-error')).toBeDefined();
  expect(w.net.openHandles).toBe(0); // the fd of the undecodable Add was closed
  await w.run(100);
  expect(client.ready()).toBe(true);
  await client.stop();
});

test('a proxy that never says hello is dropped after the hello timeout', async () => {
  const w = new ZdsWorld();
  await w.server.start();
  const conn = await w.net.endpoint(PROXY).connect(ADDRESS);
  await w.run(4999);
  expect(w.types()).toEqual([]);
  await w.run(10);
  expect(w.types()).toEqual(['protocol-error']);
  expect((await w.outcome(conn.receive(), 5)).ok).toBe(true);
});

test.describe('the client enforces the request rules (agent misbehaving)', () => {
  /** A raw agent: accepts one connection, reads the hello, sends `frames`, collects the acks. */
  async function rawAgent(
    frames: Array<{ bytes: Uint8Array; netns?: boolean }>,
  ): Promise<{ acks: string[]; events: string[]; handles: number }> {
    const w = new ZdsWorld();
    const l = await w.net.endpoint({ pid: 1, uid: 0, gid: 0 }).listen(ADDRESS);
    const { client, events } = w.client();
    client.start();
    const conn = await w.outcome(l.accept(), 5);
    if (!conn.ok || !conn.value) throw new Error('no connection');
    const c = conn.value;
    await w.outcome(c.receive(), 5); // hello
    const acks: string[] = [];
    for (const f of frames) {
      await c.send(f.bytes, f.netns ? nsOf(1) : undefined);
      const r = await w.outcome(c.receive(), 5);
      if (!r.ok || r.value.kind !== 'frame') break;
      const { decodeResponse } = await import('../../../impl/api/zds/codec.js');
      acks.push(decodeResponse(r.value.frame.bytes).error);
    }
    await client.stop();
    return { acks, events: events.map((e) => e.type), handles: w.net.openHandles };
  }
  const add = (n: number): Uint8Array => encodeRequest({ kind: 'add', uid: pod(n).uid, info: pod(n).info });

  test('Add without a netns handle', async () => {
    const r = await rawAgent([{ bytes: add(1) }]);
    expect(r.acks).toEqual(['protocol error: add pod-1 carries no netns handle']);
    expect(r.events).toContain('protocol-error');
  });

  test('Del with a netns handle (the handle is closed, not leaked)', async () => {
    const r = await rawAgent([{ bytes: encodeRequest({ kind: 'del', uid: podUid('pod-1') }), netns: true }]);
    expect(r.acks).toEqual(['protocol error: unexpected netns handle on a del request']);
    expect(r.handles).toBe(0);
  });

  test('Keep after SnapshotSent, and a second SnapshotSent', async () => {
    const snap = encodeRequest({ kind: 'snapshot-sent' });
    const keep = encodeRequest({ kind: 'keep', uid: podUid('pod-1') });
    expect((await rawAgent([{ bytes: snap }, { bytes: keep }])).acks).toEqual([
      '',
      'protocol error: keep pod-1 after SnapshotSent',
    ]);
    expect((await rawAgent([{ bytes: snap }, { bytes: snap }])).acks).toEqual([
      '',
      'protocol error: a second SnapshotSent on one connection',
    ]);
  });

  test('Del before SnapshotSent removes the pod from the snapshot set', async () => {
    const r = await rawAgent([
      { bytes: add(1), netns: true },
      { bytes: encodeRequest({ kind: 'del', uid: podUid('pod-1') }) },
      { bytes: encodeRequest({ kind: 'snapshot-sent' }) },
    ]);
    expect(r.acks).toEqual(['', '', '']);
    expect(r.events).toContain('ready');
  });
});

test('the whole sequence replays identically on virtual time', async () => {
  const trace = async (): Promise<string[]> => {
    const w = new ZdsWorld();
    w.enroll(pod(1), pod(2, false));
    await w.server.start();
    const { client, proxy } = w.client(PROXY, 9);
    proxy.failAdd.set(podUid('pod-3'), 'nope');
    client.start();
    await w.run(30);
    await w.outcome(w.server.addWorkload(pod(3).uid, pod(3).info, nsOf(3)).catch(() => undefined));
    w.net.disconnectAll();
    await w.run(200);
    await client.stop();
    return [
      ...proxy.calls,
      ...w.serverEvents.map((e) => `${e.type}@${JSON.stringify(e)}`),
      ...w.logs.map((l) => `${l.level} ${l.msg}`),
    ];
  };
  const a = await trace();
  expect(a.length).toBeGreaterThan(10);
  expect(await trace()).toEqual(a);
});

const PROXY_UID_ALLOWED = 1337;

test('a NACK of a snapshot Add is reported with origin snapshot (nobody awaits it; the agent must queue the pod)', async () => {
  const w = new ZdsWorld();
  w.enroll(pod(3), pod(4));
  await w.server.start();
  const { client, proxy } = w.client();
  proxy.failAdd.set(podUid('pod-3'), 'bind 15006 in pod-3: EADDRINUSE');
  client.start();
  await w.run(50);
  const nacks = w.serverEvents.filter((e) => e.type === 'nack');
  expect(nacks).toEqual([expect.objectContaining({ uid: 'pod-3', origin: 'snapshot' })]);
  expect(proxy.servedUids()).toEqual(['pod-4']);
  expect(w.server.connected()).toBe(true); // a nack is not a reason to reconnect
  await client.stop();
});
