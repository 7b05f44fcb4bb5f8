/**
 * sim bridge: simMac (built from char codes since it runs three times per pod ADD) gives the
 * MAC the byte-list definition gives: 0a, then FNV-1a of the seed's four bytes, then the low
 * byte of FNV-1a of seed + "#", as two lowercase hex digits each, joined with ":".
 */
import { test, expect } from '@playwright/test';
import { fnv1a, simMac } from '../../../sim/cni/bridge.js';

function reference(seed: string): string {
  const a = fnv1a(seed);
  const b = fnv1a(`${seed}#`);
  return [0x0a, (a >>> 24) & 0xff, (a >>> 16) & 0xff, (a >>> 8) & 0xff, a & 0xff, b & 0xff]
    .map((x) => x.toString(16).padStart(2, '0'))
    .join(':');
}

test('simMac matches the byte-list definition', () => {
  const seeds = ['', 'x', 'node-1/cni0', 'node-7-sb42/eth0/host', 'node-7-sb42/eth0'];
  for (let i = 0; i < 5000; i++) seeds.push(`n${i % 97}-sb${i}/eth${i % 3}${i % 2 ? '/host' : ''}`);
  const digits = new Set<string>();
  for (const s of seeds) {
    const mac = simMac(s);
    expect(mac, s).toBe(reference(s));
    for (const ch of mac.replace(/:/g, '')) digits.add(ch);
  }
  expect(simMac('x')).toMatch(/^0a(:[0-9a-f]{2}){5}$/);
  expect(digits.size).toBe(16); // every hex digit occurred, letters included
});
