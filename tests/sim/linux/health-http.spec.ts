/**
 * The components' health endpoint (impl/linux/health-http.ts): the agent's operator action
 * `POST /repair` is served on its Unix status socket (mode 0600) and nowhere else — not without
 * the action, and never on a TCP address, which the host network reaches.
 */
import { test, expect } from '@playwright/test';
import * as fs from 'node:fs';
import * as http from 'node:http';
import * as os from 'node:os';
import * as path from 'node:path';
import { serveHealth, type HealthSource } from '../../../impl/linux/health-http.js';

const source: HealthSource = {
  live: () => true,
  ready: () => ({ ready: true, detail: 'ok' }),
  metrics: () => Promise.resolve({ contentType: 'text/plain', text: '' }),
  status: () => ({ component: 'test' }),
};

function call(socketPath: string, method: string, url: string): Promise<{ code: number; body: string }> {
  return new Promise((resolve, reject) => {
    const req = http.request({ socketPath, method, path: url }, (res) => {
      let body = '';
      res.setEncoding('utf8');
      res.on('data', (d: string) => (body += d));
      res.on('end', () => resolve({ code: res.statusCode ?? 0, body }));
    });
    req.on('error', reject);
    req.end();
  });
}

test('POST /repair on the Unix status socket runs the action and answers with its result; the socket is 0600', async () => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'al-health-'));
  const sock = path.join(dir, 'agent-status.sock');
  let passes = 0;
  const server = await serveHealth(sock, 0, source, {
    repair: () => Promise.resolve({ started: ++passes, completed: passes }),
  });
  try {
    expect(fs.statSync(sock).mode & 0o777).toBe(0o600);
    expect(await call(sock, 'POST', '/repair')).toEqual({ code: 200, body: '{"started":1,"completed":1}' });
    expect(passes).toBe(1);
    expect(await call(sock, 'GET', '/status')).toEqual({ code: 200, body: '{"component":"test"}' });
    // Only POST /repair: another POST is refused, and runs nothing.
    expect((await call(sock, 'POST', '/status')).code).toBe(405);
    expect(passes).toBe(1);
  } finally {
    await server.close();
    fs.rmSync(dir, { recursive: true, force: true });
  }
});

test('without the action POST /repair is refused (405); with it on a TCP address serveHealth refuses to start', async () => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'al-health-'));
  const sock = path.join(dir, 'proxy-status.sock');
  const server = await serveHealth(sock, 0, source);
  try {
    expect(await call(sock, 'POST', '/repair')).toEqual({ code: 405, body: 'GET only\n' });
  } finally {
    await server.close();
    fs.rmSync(dir, { recursive: true, force: true });
  }
  await expect(serveHealth('0.0.0.0', 15021, source, { repair: () => Promise.resolve(undefined) })).rejects.toThrow(
    'health endpoint: admin actions are served on a Unix socket only, not on 0.0.0.0:15021',
  );
});
