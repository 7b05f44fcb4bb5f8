/** The proxy's --dns-upstream flag: strict parsing, so a typo stops start-up instead of breaking pod DNS. */
import { test, expect } from '@playwright/test';
import { parseDnsUpstream } from '../../../../impl/linux/dns-upstream.js';

test('IPv4 and bracketed IPv6 entries, port default 53', () => {
  expect(parseDnsUpstream(['10.96.0.10', '10.96.0.11:5353', '[fd00:10:96::a]:53', 'fd00::53', '[fd00::1]'])).toEqual([
    { family: 4, address: '10.96.0.10', port: 53 },
    { family: 4, address: '10.96.0.11', port: 5353 },
    { family: 6, address: 'fd00:10:96::a', port: 53 },
    { family: 6, address: 'fd00::53', port: 53 },
    { family: 6, address: 'fd00::1', port: 53 },
  ]);
});

test('names, bad ports and junk are refused with the entry named', () => {
  expect(() => parseDnsUpstream(['kube-dns.kube-system'])).toThrow(/"kube-dns.kube-system" is not an IP address/);
  expect(() => parseDnsUpstream(['10.96.0.10:0'])).toThrow(/port in "10.96.0.10:0" must be 1..65535/);
  expect(() => parseDnsUpstream(['10.96.0.10:70000'])).toThrow(/must be 1..65535/);
  expect(() => parseDnsUpstream(['10.96.0.300'])).toThrow(/not an IP address/);
  expect(() => parseDnsUpstream(['[10.96.0.10]:53'])).toThrow(/not an IP address/);
  expect(parseDnsUpstream([])).toEqual([]);
});
