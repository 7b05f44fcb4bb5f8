/** The hand-written IP/CIDR parser the policy matcher relies on. */
import { test, expect } from '@playwright/test';
import { cidrContains, formatIp, parseCidr, parseIp } from '../../../../impl/ztunnel/authz/ip.js';

test('parses v4, v6 with compression, embedded v4, and canonicalises v4-mapped to v4', () => {
  expect(parseIp('10.0.0.1')).toEqual({ family: 4, bytes: [10, 0, 0, 1] });
  expect(formatIp(parseIp('fd00:0:0:0:0:0:0:1')!)).toBe('fd00::1');
  expect(formatIp(parseIp('::')!)).toBe('::');
  expect(formatIp(parseIp('1:0:0:2:0:0:0:3')!)).toBe('1:0:0:2::3');
  expect(parseIp('::ffff:192.0.2.1')).toEqual({ family: 4, bytes: [192, 0, 2, 1] });
  expect(formatIp(parseIp('64:ff9b::192.0.2.1')!)).toBe('64:ff9b::c000:201');
});

test('rejects malformed addresses', () => {
  for (const bad of ['', '10.0.0', '10.0.0.1.2', '010.0.0.1', '256.0.0.1', '1::2::3', 'fd00::1%eth0', '1:2:3:4:5:6:7:8:9', 'g::1', ' 10.0.0.1', '1:2:3:4:5:6:7::8']) {
    expect(parseIp(bad), bad).toBeUndefined();
  }
});

test('CIDR containment by prefix, families apart, host bits ignored', () => {
  const c = parseCidr('10.244.0.0/16')!;
  expect(cidrContains(c, parseIp('10.244.255.1')!)).toBe(true);
  expect(cidrContains(c, parseIp('10.245.0.1')!)).toBe(false);
  expect(cidrContains(parseCidr('10.1.2.3/0')!, parseIp('203.0.113.1')!)).toBe(true);
  expect(cidrContains(parseCidr('0.0.0.0/0')!, parseIp('fd00::1')!)).toBe(false);
  expect(cidrContains(parseCidr('fd00::/8')!, parseIp('fdff::1')!)).toBe(true);
  expect(cidrContains(parseCidr('fd00::/9')!, parseIp('fd80::1')!)).toBe(false);
  expect(cidrContains(parseCidr('10.0.0.7/31')!, parseIp('10.0.0.6')!)).toBe(true);
  for (const bad of ['10.0.0.0/33', '10.0.0.0/', '10.0.0.0/01', 'fd00::/129', '::ffff:10.0.0.0/104']) expect(parseCidr(bad), bad).toBeUndefined();
});
