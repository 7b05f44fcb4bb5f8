/**
 * A device's kernel-managed routes (netns.ts) are recomputed on every link and address change
 * and left in place when nothing changed: setting an up link up again is a no-op, while a real
 * change (an address, the link state, a kernel route deleted by hand) re-syncs them.
 */
import { test, expect } from '@playwright/test';
import { SimKernel } from '../../../sim/kernel/kernel.js';
import { formatRoute } from '../../../sim/kernel/route.js';

function routesOf(k: SimKernel, ns: string, dev: string): string[] {
  return k
    .netns(ns)
    .routes.all()
    .filter((r) => r.dev === dev)
    .map(formatRoute)
    .sort();
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
