/**
 * The components' HTTP endpoints (impl/linux/http-endpoints.ts, endpoint-routes.ts): each route
 * is served no farther than its reach allows (the agent's POST /repair on its Unix socket only,
 * the admin routes on loopback or a Unix socket, never on the node's addresses), the runtime log
 * level changes every logger of the process and rejects bad values without change, readiness
 * answers 503 with its reason, and a config dump never carries a key.
 */
import { test, expect } from '@playwright/test';
import * as fs from 'node:fs';
import * as http from 'node:http';
import * as os from 'node:os';
import * as path from 'node:path';
import {
  configDumpRoutes,
  loggingRoutes,
  metricsRoutes,
  readinessRoutes,
  repairRoutes,
  statusRoutes,
} from '../../../impl/linux/endpoint-routes.js';
import { isLoopbackHost, serveEndpoints } from '../../../impl/linux/http-endpoints.js';
import { LogLevelControl, pinoLogger } from '../../../impl/linux/logger-pino.js';
import { PromMetrics } from '../../../impl/linux/metrics-prom.js';

type Target = { socketPath: string } | { host: string; port: number };

function call(to: Target, method: string, url: string): Promise<{ code: number; body: string }> {
  return new Promise((resolve, reject) => {
    const req = http.request({ ...to, method, path: url }, (res) => {
      let body = '';
      res.setEncoding('utf8');
      res.on('data', (d: string) => (body += d));
      res.on('end', () => resolve({ code: res.statusCode ?? 0, body }));
    });
    req.on('error', reject);
    req.end();
  });
}

function tmp(): string {
  return fs.mkdtempSync(path.join(os.tmpdir(), 'al-endpoints-'));
}

test('POST /repair on the Unix socket runs the action and answers with its result; the socket is 0600; other methods are refused', async () => {
  const dir = tmp();
  const sock = path.join(dir, 'agent-status.sock');
  let passes = 0;
  const server = await serveEndpoints('agent status socket', { socket: sock }, [
    ...statusRoutes(() => ({ component: 'test' })),
    ...repairRoutes(() => Promise.resolve({ started: ++passes, completed: passes })),
  ]);
  try {
    expect(fs.statSync(sock).mode & 0o777).toBe(0o600);
    expect(await call({ socketPath: sock }, 'POST', '/repair')).toEqual({
      code: 200,
      body: '{"started":1,"completed":1}',
    });
    expect(passes).toBe(1);
    expect(await call({ socketPath: sock }, 'GET', '/status')).toEqual({ code: 200, body: '{"component":"test"}' });
    const wrong = await call({ socketPath: sock }, 'POST', '/status');
    expect(wrong.code).toBe(405);
    expect(wrong.body).toContain('/status takes GET only');
    expect((await call({ socketPath: sock }, 'GET', '/repair')).code).toBe(405);
    const missing = await call({ socketPath: sock }, 'GET', '/nope');
    expect(missing.code).toBe(404);
    expect(missing.body).toContain('paths: /status /repair');
    expect(passes).toBe(1);
  } finally {
    await server.close();
    fs.rmSync(dir, { recursive: true, force: true });
  }
});

test('reach: the repair action will not start on TCP, the admin routes will not start on a non-loopback address, and both start where allowed', async () => {
  const control = new LogLevelControl('info');
  await expect(
    serveEndpoints(
      'agent',
      { host: '127.0.0.1', port: 0 },
      repairRoutes(() => Promise.resolve(undefined)),
    ),
  ).rejects.toThrow('agent: POST /repair may be served on a Unix socket only, not on 127.0.0.1:0');
  for (const host of ['0.0.0.0', '::', '10.0.0.1'])
    await expect(
      serveEndpoints('proxy admin', { host, port: 0 }, [...loggingRoutes(control), ...statusRoutes(() => ({}))]),
    ).rejects.toThrow(
      `proxy admin: GET /logging may be served on a loopback address or a Unix socket only, not on ${host}:0`,
    );
  const ok = await serveEndpoints('proxy admin', { host: '127.0.0.1', port: 0 }, loggingRoutes(control));
  expect(ok.port).toBeGreaterThan(0);
  await ok.close();
  expect(['127.0.0.1', '127.9.9.9', '::1', 'localhost', '::ffff:127.0.0.1'].every(isLoopbackHost)).toBe(true);
  expect(['0.0.0.0', '::', '10.0.0.1', 'fd00::1', '128.0.0.1', 'example.com'].some(isLoopbackHost)).toBe(false);
});

test('/logging: GET shows the level, POST ?level= changes it for loggers made before (children included); a bad level is a 400 that changes nothing', async () => {
  const lines: string[] = [];
  const control = new LogLevelControl('info');
  const log = pinoLogger({ name: 'test', control, write: (l) => lines.push(l) }).child({ node: 'n1' });
  const pod = log.child({ pod: 'shop/web' });
  const server = await serveEndpoints('proxy admin', { host: '127.0.0.1', port: 0 }, loggingRoutes(control));
  const at = { host: '127.0.0.1', port: server.port };
  try {
    pod.debug('hidden');
    expect(lines).toHaveLength(0);
    expect(JSON.parse((await call(at, 'GET', '/logging')).body)).toEqual({ level: 'info' });
    const bad = await call(at, 'POST', '/logging?level=verbose');
    expect(bad.code).toBe(400);
    expect(bad.body).toContain('debug, info, warn, error');
    expect(control.level).toBe('info');
    expect(JSON.parse((await call(at, 'POST', '/logging?level=debug')).body)).toEqual({
      level: 'debug',
      before: 'info',
    });
    pod.debug('shown', { step: 1 });
    expect(lines).toHaveLength(1);
    // the level by name, and the fields of every parent
    expect(JSON.parse(lines[0]!)).toMatchObject({
      level: 'debug',
      name: 'test',
      node: 'n1',
      pod: 'shop/web',
      step: 1,
      msg: 'shown',
    });
    await call(at, 'POST', '/logging?level=error');
    pod.warn('hidden again');
    expect(lines).toHaveLength(1);
  } finally {
    await server.close();
  }
});

test('readiness: 200 "ready" or 503 with the reason; /healthz answers while the process does; metrics are Prometheus text with the process metrics', async () => {
  let ready = false;
  const metrics = new PromMetrics();
  metrics.counter('ambient_lab_test_total', 'A test counter').inc();
  const server = await serveEndpoints('proxy', { host: '127.0.0.1', port: 0 }, [
    ...readinessRoutes('/healthz/ready', () => ({ ready, detail: 'zds not connected' })),
    ...metricsRoutes(metrics),
  ]);
  const at = { host: '127.0.0.1', port: server.port };
  try {
    expect(await call(at, 'GET', '/healthz/ready')).toEqual({ code: 503, body: 'not ready: zds not connected\n' });
    ready = true;
    expect((await call(at, 'GET', '/healthz/ready')).code).toBe(200);
    expect(await call(at, 'GET', '/healthz')).toEqual({ code: 200, body: 'ok\n' });
    for (const p of ['/metrics', '/stats/prometheus']) {
      const m = await call(at, 'GET', p);
      expect(m.code).toBe(200);
      expect(m.body).toContain('ambient_lab_test_total 1');
      expect(m.body).toMatch(/^process_resident_memory_bytes \d+/m);
      expect(m.body).toContain('nodejs_eventloop_lag_seconds');
    }
  } finally {
    await server.close();
  }
});

test('/config_dump is pretty JSON of what it is handed, loopback only', async () => {
  const server = await serveEndpoints('proxy admin', { host: '127.0.0.1', port: 0 }, [
    ...configDumpRoutes(() => ({ certificates: { held: [{ identity: 'spiffe://cluster.local/ns/a/sa/b' }] } })),
  ]);
  try {
    const r = await call({ host: '127.0.0.1', port: server.port }, 'GET', '/config_dump');
    expect(r.code).toBe(200);
    expect(r.body).toContain('\n  "certificates"');
    expect(JSON.parse(r.body)).toEqual({ certificates: { held: [{ identity: 'spiffe://cluster.local/ns/a/sa/b' }] } });
  } finally {
    await server.close();
  }
});
