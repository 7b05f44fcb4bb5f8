/**
 * impl/api/ip: the one address and prefix grammar (the sim kernel, the CNI vocabulary and the
 * ztunnel's policies all read through it), its canonical output, and its text caches: a text
 * parsed once answers later calls the same way.
 */
import { test, expect } from '@playwright/test';
import {
  AddressError,
  formatIp,
  ipBytes,
  isIpAddress,
  parseIp,
  tryParseIp,
  tryParseIpUnmapped,
  mapV4,
  unmapV4,
} from '../../../impl/api/ip/address.js';
import { formatPrefix, isCidr, parsePrefix, prefixContains, tryParsePrefix } from '../../../impl/api/ip/prefix.js';

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
  for (const bad of [
    '256.0.0.1',
    '01.2.3.4',
    '1.2.3',
    '1.2.3.4.',
    '.1.2.3',
    '1..2.3',
    '1.2.3.4 ',
    '1.2.3.0004',
    '1.2.3.+4',
    '',
  ]) {
    expect(() => parseIp(bad), bad).toThrow(AddressError);
  }
});

test('IPv6 text: groups, one ::, an embedded dotted quad last; canonical output', () => {
  const cases: Array<[string, string]> = [
    ['::', '::'],
    ['::1', '::1'],
    ['1::', '1::'],
    ['FD00:0:0::5', 'fd00::5'],
    ['1:2:3:4:5:6:7:8', '1:2:3:4:5:6:7:8'],
    ['::ffff:192.0.2.1', '::ffff:192.0.2.1'], // IPv4-mapped: mixed notation (RFC 5952 §5)
    ['1:2:3:4:5:6:192.0.2.1', '1:2:3:4:5:6:c000:201'],
    ['1:2:3:4:5:6:7::', '1:2:3:4:5:6:7:0'],
  ];
  for (const [text, canonical] of cases) expect(formatIp(parseIp(text)), text).toBe(canonical);
  for (const bad of [
    ':::',
    '1:::2',
    '1::2::3',
    '12345::',
    '1:2:3:4:5:6:7:8:9',
    '1:2:3:4:5:6:7:8::',
    '::1:2:3:4:5:6:7:8',
    '1:',
    ':1',
    '1::2:',
    '::1.2.3.4:5',
    '1:2:3:4:5:6:7:1.2.3.4',
    '::256.1.1.1',
    'fd00::g',
    'fd00 ::1',
  ]) {
    expect(() => parseIp(bad), bad).toThrow(AddressError);
  }
});

test('a dotted quad only as the last 32 bits of the whole address (RFC 4291 §2.2), not before ::', () => {
  for (const bad of ['192.0.2.1::', '1:192.0.2.1::', '192.0.2.1::1', '::192.0.2.1:1']) {
    expect(tryParseIp(bad), bad).toBeUndefined();
  }
  expect(formatIp(parseIp('1::192.0.2.1'))).toBe('1::c000:201');
});

test('validators for configuration and API values (CNI results, pod IPs, connection logs)', () => {
  for (const ok of [
    '10.244.0.1',
    '::',
    '::1',
    'fd00:10:244::1',
    '1:2:3:4:5:6:7:8',
    '::ffff:192.0.2.1',
    '1:2:3:4:5:6:192.0.2.1',
    'FD00::A',
  ])
    expect(isIpAddress(ok), ok).toBe(true);
  for (const bad of [
    '10.244.0',
    '10.244.0.256',
    '01.2.3.4',
    '1:2:3:4:5:6:7:8:9',
    ':1:2',
    '1::2::3',
    'fd00:g::1',
    '',
    ':',
    '1:2:3:4:5:6:7:',
    '1:::2',
    '1::2:3:4:5:6:7:8',
    '1:2:3:4:5:6:7:192.0.2.1',
    '192.0.2.1::',
    '::192.0.2.1:1',
    '12345::1',
    'fd00::1%eth0',
    ' 10.0.0.1',
    7,
    undefined,
  ])
    expect(isIpAddress(bad), String(bad)).toBe(false);
  expect(isCidr('10.244.0.0/24')).toBe(true);
  expect(isCidr('fd00::/0')).toBe(true);
  // A CIDR needs its length, in decimal without leading zeros; tool text (parsePrefix) takes those.
  for (const bad of [
    '10.244.0.0/33',
    'fd00::/129',
    '10.244.0.0',
    '10.244.0.0/',
    '10.244.0.0/024',
    '10.244.0.0/24/1',
    24,
  ])
    expect(isCidr(bad), String(bad)).toBe(false);
  expect(formatPrefix(parsePrefix('10.244.0.0/024'))).toBe('10.244.0.0/24');
  expect(tryParsePrefix('10.244.0.0/024', { canonicalLength: true })).toBeUndefined();
  expect(() => parsePrefix('10.244.0.0/024', { canonicalLength: true })).toThrow(/leading zero/);
});

test('IPv4-mapped addresses stay IPv6 unless unmapped; bytes in network order', () => {
  const mapped = parseIp('::ffff:192.0.2.1');
  expect(mapped.family).toBe(6);
  expect(unmapV4(mapped)).toEqual({ family: 4, value: 0xc0000201n });
  expect(tryParseIpUnmapped('::ffff:192.0.2.1')).toEqual(parseIp('192.0.2.1'));
  expect(tryParseIpUnmapped('::fffe:192.0.2.1')!.family).toBe(6);
  expect(tryParseIpUnmapped('64:ff9b::192.0.2.1')!.family).toBe(6);
  expect(tryParseIpUnmapped('not an ip')).toBeUndefined();
  // mixed notation for the mapped range only (RFC 5952 §5), as Linux and Node.js print it
  expect(formatIp(mapped)).toBe('::ffff:192.0.2.1');
  expect(mapV4(parseIp('192.0.2.1'))).toEqual(mapped);
  expect(mapV4(parseIp('fd00::1'))).toEqual(parseIp('fd00::1'));
  expect(formatIp(parseIp('::fffe:c000:201'))).toBe('::fffe:c000:201');
  expect(formatIp(parseIp('64:ff9b::192.0.2.1'))).toBe('64:ff9b::c000:201');
  expect([...ipBytes(parseIp('10.0.0.1'))]).toEqual([10, 0, 0, 1]);
  expect([...ipBytes(parseIp('fd00::102'))]).toEqual([0xfd, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 2]);
});

test('prefix containment: by the prefix bits, families apart, host bits ignored', () => {
  const c = parsePrefix('10.244.0.0/16');
  expect(prefixContains(c, parseIp('10.244.255.1'))).toBe(true);
  expect(prefixContains(c, parseIp('10.245.0.1'))).toBe(false);
  expect(prefixContains(parsePrefix('10.1.2.3/0'), parseIp('203.0.113.1'))).toBe(true);
  expect(prefixContains(parsePrefix('0.0.0.0/0'), parseIp('fd00::1'))).toBe(false);
  expect(prefixContains(parsePrefix('fd00::/8'), parseIp('fdff::1'))).toBe(true);
  expect(prefixContains(parsePrefix('fd00::/9'), parseIp('fd80::1'))).toBe(false);
  expect(prefixContains(parsePrefix('10.0.0.7/31'), parseIp('10.0.0.6'))).toBe(true);
  expect(prefixContains(parsePrefix('::ffff:10.0.0.0/104'), parseIp('10.0.0.1'))).toBe(false);
});
