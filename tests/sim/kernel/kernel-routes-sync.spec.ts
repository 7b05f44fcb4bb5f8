/**
 * A device's kernel-managed routes (netns.ts) are recomputed on every link and address change
 * and left in place when nothing changed: setting an up link up again is a no-op, while a real
 * change (an address, the link state, a kernel route deleted by hand) re-syncs them. Also the
 * text caches of ip-address.ts: a prefix parsed once answers later calls the same way.
 */
import { test, expect } from '@playwright/test';
import { SimKernel } from '../../../sim/kernel/kernel.js';
import { AddressError, parsePrefix, formatPrefix, parseIp, formatIp } from '../../../sim/kernel/ip-address.js';
import { formatRoute } from '../../../sim/kernel/route.js';

function routesOf(k: SimKernel, ns: string, dev: string): string[] {
  return k.netns(ns).routes.all().filter((r) => r.dev === dev).map(formatRoute).sort();
}

function kernelWithBridge(): SimKernel {
  const k = new SimKernel({ trace: false });
  k.addNetns('h');
  k.addBridge('h', 'cni0');
  k.addAddress('h', 'cni0', '10.244.0.1/24');
  k.addAddress('h', 'cni0', 'fd00:10:244::1/64');
  k.setLink('h', 'cni0', true);
  return k;
}

const BRIDGE_ROUTES = [
  '10.244.0.0/24 dev cni0 proto kernel src 10.244.0.1',
  'fd00:10:244::/64 dev cni0 proto kernel src fd00:10:244::1 metric 256',
  'local 10.244.0.1 dev cni0 table local proto kernel src 10.244.0.1',
  'local fd00:10:244::1 dev cni0 table local proto kernel src fd00:10:244::1',
];

test('setting an up link up again leaves its kernel routes as they are', () => {
  const k = kernelWithBridge();
  const before = k.netns('h').routes.all();
  k.setLink('h', 'cni0', true);
  k.setLink('h', 'cni0', true);
  expect(k.netns('h').routes.all()).toEqual(before);
  expect(routesOf(k, 'h', 'cni0')).toEqual(BRIDGE_ROUTES);
});

test('link down drops the prefix routes and keeps the local ones; up brings them back', () => {
  const k = kernelWithBridge();
  k.setLink('h', 'cni0', false);
  expect(routesOf(k, 'h', 'cni0')).toEqual(BRIDGE_ROUTES.filter((r) => r.startsWith('local ')));
  k.setLink('h', 'cni0', true);
  expect(routesOf(k, 'h', 'cni0')).toEqual(BRIDGE_ROUTES);
});

test('a kernel route removed by hand comes back at the next link change of its device', () => {
  const k = kernelWithBridge();
  const n = k.netns('h').routes.remove((r) => r.proto === 'kernel' && r.dev === 'cni0' && r.dst.len === 24);
  expect(n).toBe(1);
  expect(routesOf(k, 'h', 'cni0')).toHaveLength(3);
  k.setLink('h', 'cni0', true);
  expect(routesOf(k, 'h', 'cni0')).toEqual(BRIDGE_ROUTES);
});

test('address changes update only their device; a device without addresses has no kernel routes', () => {
  const k = kernelWithBridge();
  k.addVeth('h', 'veth1', 'h', 'veth2');
  k.setLink('h', 'veth1', true);
  expect(routesOf(k, 'h', 'veth1')).toEqual([]);
  k.addAddress('h', 'cni0', '10.244.0.9/24'); // secondary: local route with the primary as source
  expect(routesOf(k, 'h', 'cni0')).toContain('local 10.244.0.9 dev cni0 table local proto kernel src 10.244.0.1');
  k.netns('h').removeAddress('cni0', '10.244.0.9/24');
  expect(routesOf(k, 'h', 'cni0')).toEqual(BRIDGE_ROUTES);
  k.removeLink(k.netns('h'), 'cni0');
  expect(routesOf(k, 'h', 'cni0')).toEqual([]);
  // A new device of the same name starts without routes and gets its own.
  k.addBridge('h', 'cni0');
  k.setLink('h', 'cni0', true);
  expect(routesOf(k, 'h', 'cni0')).toEqual([]);
  k.addAddress('h', 'cni0', '10.244.0.1/24');
  expect(routesOf(k, 'h', 'cni0')).toEqual(BRIDGE_ROUTES.filter((r) => !r.includes('fd00')));
});

test('lo: its routes appear with the link up, once each, and go when it is set down', () => {
  const k = new SimKernel({ trace: false });
  k.addNetns('p');
  expect(routesOf(k, 'p', 'lo')).toEqual([]);
  k.setLink('p', 'lo', true);
  k.setLink('p', 'lo', true);
  expect(routesOf(k, 'p', 'lo')).toEqual([
    'local 127.0.0.0/8 dev lo table local proto kernel src 127.0.0.1',
    'local 127.0.0.1 dev lo table local proto kernel src 127.0.0.1',
    'local ::1 dev lo table local proto kernel src ::1',
  ]);
  k.setLink('p', 'lo', false);
  expect(routesOf(k, 'p', 'lo')).toEqual([]);
});

test('parsed prefixes: host bits masked, strict refuses them even when the text was parsed before', () => {
  expect(formatPrefix(parsePrefix('10.244.3.7/24'))).toBe('10.244.3.0/24');
  expect(() => parsePrefix('10.244.3.7/24', { strict: true })).toThrow(AddressError);
  expect(() => parsePrefix('10.244.3.7/24', { strict: true })).toThrow(/host bits set/);
  expect(formatPrefix(parsePrefix('10.244.3.0/24', { strict: true }))).toBe('10.244.3.0/24');
  expect(parsePrefix('fd00::5').len).toBe(128);
  expect(() => parsePrefix('10.0.0.0/33')).toThrow(/invalid prefix length/);
  expect(() => parsePrefix('10.0.0.0/33')).toThrow(/invalid prefix length/);
  const p = parsePrefix('192.0.2.0/24');
  expect(Object.isFrozen(p) && Object.isFrozen(p.addr)).toBe(true);
});

test('IPv4 text: the dotted-quad grammar, in and out', () => {
  for (const ok of ['0.0.0.0', '10.244.0.1', '255.255.255.255', '192.0.2.10']) expect(formatIp(parseIp(ok))).toBe(ok);
  for (const bad of ['256.0.0.1', '01.2.3.4', '1.2.3', '1.2.3.4.', '.1.2.3', '1..2.3', '1.2.3.4 ', '1.2.3.0004', '1.2.3.+4', '']) {
    expect(() => parseIp(bad), bad).toThrow(AddressError);
  }
});

test('IPv6 text: groups, one ::, an embedded dotted quad last; canonical output', () => {
  const cases: Array<[string, string]> = [
    ['::', '::'], ['::1', '::1'], ['1::', '1::'], ['FD00:0:0::5', 'fd00::5'], ['1:2:3:4:5:6:7:8', '1:2:3:4:5:6:7:8'],
    ['::ffff:192.0.2.1', '::ffff:c000:201'], ['1:2:3:4:5:6:192.0.2.1', '1:2:3:4:5:6:c000:201'], ['1:2:3:4:5:6:7::', '1:2:3:4:5:6:7:0'],
  ];
  for (const [text, canonical] of cases) expect(formatIp(parseIp(text)), text).toBe(canonical);
  for (const bad of [':::', '1:::2', '1::2::3', '12345::', '1:2:3:4:5:6:7:8:9', '1:2:3:4:5:6:7:8::', '::1:2:3:4:5:6:7:8', '1:', ':1', '1::2:',
    '::1.2.3.4:5', '1:2:3:4:5:6:7:1.2.3.4', '::256.1.1.1', 'fd00::g', 'fd00 ::1']) {
    expect(() => parseIp(bad), bad).toThrow(AddressError);
  }
});
