/** Policy IP blocks (translate.ts parseCidr) and the peer addresses they match (match.ts). */
import { test, expect } from '@playwright/test';
import { formatIp } from '../../../../impl/api/ip/address.js';
import { formatPrefix } from '../../../../impl/api/ip/prefix.js';
import { parseCidr } from '../../../../impl/ztunnel/authz/translate.js';
import { connectionFacts } from '../../../../impl/ztunnel/authz/match.js';
import { req } from './helpers.js';

test('peers: v4-mapped IPv6 addresses are their IPv4 address; unparsable ones match no block', () => {
  const f = connectionFacts(req({ srcIp: '::ffff:192.0.2.1', dstIp: 'fd00::1%eth0' }));
  expect(f.srcIp && formatIp(f.srcIp)).toBe('192.0.2.1');
  expect(f.dstIp).toBeUndefined();
});

test('blocks: an address is a host block, host bits cleared, the text kept', () => {
  expect(parseCidr('10.0.0.1')).toEqual({
    prefix: { addr: { family: 4, value: 0x0a000001n }, len: 32 },
    text: '10.0.0.1',
  });
  expect(formatPrefix(parseCidr('10.0.0.7/31')!.prefix)).toBe('10.0.0.6/31');
  expect(formatPrefix(parseCidr('fd00::1')!.prefix)).toBe('fd00::1/128');
  expect(formatPrefix(parseCidr('::ffff:192.0.2.1')!.prefix)).toBe('192.0.2.1/32');
  // A mapped address in hex with a length counts as IPv4: the length is checked against 32.
  expect(formatPrefix(parseCidr('::ffff:a00:0/24')!.prefix)).toBe('10.0.0.0/24');
  for (const bad of [
    '10.0.0.0/33',
    '10.0.0.0/',
    '10.0.0.0/01',
    'fd00::/129',
    '::ffff:10.0.0.0/104',
    '::ffff:a00:0/104',
    '010.0.0.1',
    'fd00::1%eth0',
    '',
  ]) {
    expect(parseCidr(bad), bad).toBeUndefined();
  }
});
