/**
 * The Linux plugin-event transport (HTTP over a Unix socket): permissions, bounded bodies,
 * validation, timeouts, stale sockets. Runs in the netns project (real OS, root).
 */
import { test, expect } from '@playwright/test';
import * as fs from 'node:fs';
import * as http from 'node:http';
import * as os from 'node:os';
import * as path from 'node:path';
import { netnsWorld } from '../../worlds.js';
import { HttpPluginEventTransport } from '../../../impl/linux/plugin-events-http.js';
import { PluginEventTransportError } from '../../../impl/host/plugin-events.js';
import type { PluginEvent } from '../../../impl/api/plugin-event.js';

const w = netnsWorld();
test.skip(!w.available, w.reason);

const event: PluginEvent = {
  kind: 'add',
  netns: '/var/run/netns/cni-1',
  podName: 'web',
  podNamespace: 'shop',
  podUid: 'u-1',
  containerId: 'c1',
  ips: ['10.244.1.5'],
};
const opts = { maxBodyBytes: 4096, requestTimeoutMs: 2000 };

function tmpdir(): string {
  return fs.mkdtempSync(path.join(os.tmpdir(), 'al-pe-'));
}

function rawPost(
  sock: string,
  body: string,
  headers: Record<string, string> = {},
): Promise<{ status: number; body: string }> {
  return new Promise((resolve, reject) => {
    const req = http.request({ socketPath: sock, path: '/v1/events', method: 'POST', headers }, (res) => {
      let b = '';
      res.on('data', (c) => (b += c));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, body: b }));
    });
    req.on('error', reject);
    req.end(body);
  });
}

test('round trip: the handler gets the validated event and the client gets its reply; socket is 0600 in a 0700 dir', async () => {
  const dir = path.join(tmpdir(), 'run');
  const sock = path.join(dir, 'events.sock');
  const t = new HttpPluginEventTransport();
  const seen: PluginEvent[] = [];
  const server = await t.serve(
    sock,
    async (e) => {
      seen.push(e);
      return { ok: true, status: 'enabled' };
    },
    opts,
  );
  try {
    expect(fs.statSync(sock).mode & 0o777).toBe(0o600);
    expect(fs.statSync(dir).mode & 0o777).toBe(0o700);
    expect(await t.send(sock, event, 2000)).toEqual({ ok: true, status: 'enabled' });
    expect(seen).toEqual([event]);
  } finally {
    await server.close();
  }
});

test('oversized, malformed and unknown-field bodies are refused with 413/400 and never reach the handler', async () => {
  const sock = path.join(tmpdir(), 'events.sock');
  const t = new HttpPluginEventTransport();
  let calls = 0;
  const server = await t.serve(
    sock,
    async () => {
      calls++;
      return { ok: true, status: 'enabled' };
    },
    opts,
  );
  try {
    expect((await rawPost(sock, 'x'.repeat(5000), { 'content-length': '5000' })).status).toBe(413);
    expect((await rawPost(sock, '{oops')).status).toBe(400);
    const inj = await rawPost(sock, JSON.stringify({ ...event, netns: '/var/run/netns/x\n-A INPUT -j ACCEPT' }));
    expect(inj.status).toBe(400);
    expect(inj.body).toContain('invalid netns');
    expect((await rawPost(sock, JSON.stringify({ ...event, extra: 1 }))).status).toBe(400);
    expect((await rawPost(sock, JSON.stringify({ ...event, netns: '/proc/../etc' }))).status).toBe(400);
    expect(calls).toBe(0);
  } finally {
    await server.close();
  }
});

test('a handler error becomes a 500 with a retryable reply; a slow agent times the client out', async () => {
  const sock = path.join(tmpdir(), 'events.sock');
  const t = new HttpPluginEventTransport();
  let slow = false;
  const server = await t.serve(
    sock,
    async () => {
      if (slow) await new Promise((r) => setTimeout(r, 1500));
      throw new Error('no proxy connection');
    },
    opts,
  );
  try {
    expect(await t.send(sock, event, 2000)).toEqual({ ok: false, error: 'no proxy connection', retryable: true });
    slow = true;
    const err = await t.send(sock, event, 200).then(
      () => undefined,
      (e: unknown) => e,
    );
    expect(err).toBeInstanceOf(PluginEventTransportError);
    expect((err as PluginEventTransportError).reason).toBe('timeout');
  } finally {
    await server.close();
  }
});

test('no agent: the client fails with "unavailable"; a stale socket file is replaced; a regular file is not', async () => {
  const dir = tmpdir();
  const sock = path.join(dir, 'events.sock');
  const t = new HttpPluginEventTransport();
  const err = await t.send(sock, event, 500).then(
    () => undefined,
    (e: unknown) => e,
  );
  expect((err as PluginEventTransportError).reason).toBe('unavailable');
  const first = await t.serve(sock, async () => ({ ok: true, status: 'enabled' }), opts);
  await first.close();
  // Simulate a crash leaving the socket file behind.
  const stale = http.createServer();
  await new Promise<void>((r) => stale.listen(sock, () => r()));
  await new Promise<void>((r) => stale.close(() => r()));
  fs.writeFileSync(path.join(dir, 'x'), '');
  const again = await t.serve(sock, async () => ({ ok: true, status: 'enabled' }), opts);
  expect(await t.send(sock, event, 1000)).toEqual({ ok: true, status: 'enabled' });
  await again.close();
  const regular = path.join(dir, 'regular');
  fs.writeFileSync(regular, 'keep me');
  await expect(t.serve(regular, async () => ({ ok: true, status: 'enabled' }), opts)).rejects.toThrow('not a socket');
  expect(fs.readFileSync(regular, 'utf8')).toBe('keep me');
});
