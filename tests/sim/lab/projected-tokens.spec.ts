/**
 * The token refresher's rule (e2e/netns/projected-tokens.ts), as kubelet's for projected tokens:
 * refresh past 80 % of the lifetime or past 24 h, whichever comes first; a test may ask for
 * sooner. The write replaces the file whole, with the owner and mode asked for.
 */
import { test, expect } from '@playwright/test';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { refreshDue, writeTokenFile, type ProjectedToken } from '../../../e2e/netns/projected-tokens.js';

const token = (expirationSeconds: number): ProjectedToken => ({
  file: '/x',
  gid: 1337,
  mode: 0o440,
  namespace: 'ambient-lab-system',
  serviceAccount: 'ambient-lab-proxy',
  pod: { name: 'p', uid: 'u' },
  audience: 'istio-ca',
  expirationSeconds,
  mintedAtMs: 0,
});

test('refresh at 80 % of the lifetime, at 24 h at the latest, or sooner when asked', () => {
  const h = 3600_000;
  expect(refreshDue(token(43200), 0.8 * 12 * h - 1)).toBe(false);
  expect(refreshDue(token(43200), 0.8 * 12 * h)).toBe(true);
  expect(refreshDue(token(7 * 24 * 3600), 24 * h - 1)).toBe(false);
  expect(refreshDue(token(7 * 24 * 3600), 24 * h)).toBe(true);
  expect(refreshDue(token(43200), 299, 300)).toBe(false);
  expect(refreshDue(token(43200), 300, 300)).toBe(true);
});

test('the token file is replaced whole, with the mode asked for, and nothing is left beside it', () => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'al-token-'));
  try {
    const file = path.join(dir, 'istio-token');
    fs.writeFileSync(file, 'old');
    const gid = process.getgid?.() ?? 0;
    writeTokenFile(file, 'new', gid, 0o440);
    expect(fs.readFileSync(file, 'utf8')).toBe('new');
    expect(fs.statSync(file).mode & 0o777).toBe(0o440);
    expect(fs.readdirSync(dir)).toEqual(['istio-token']);
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
});
