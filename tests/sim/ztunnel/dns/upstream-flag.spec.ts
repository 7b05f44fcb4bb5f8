/** The proxy's --dns-upstream flag: strict parsing, so a typo stops start-up (exit 2) instead of breaking pod DNS. */
import { test, expect } from '@playwright/test';
import { spawnSync } from 'node:child_process';
import * as path from 'node:path';
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

test('the proxy process exits 2 (a usage error) on a bad --dns-upstream, certificate flags that make no one mode (the CA mode, or the named shared-root test mode), an admin address off loopback or an unknown log level, naming the flag', () => {
  const proxy = path.resolve(import.meta.dirname, '..', '..', '..', '..', 'bin', 'ambient-lab-proxy.js');
  const run = (...args: string[]) =>
    spawnSync(process.execPath, [proxy, '--node', 'n1', '--kubeconfig', '/nonexistent', ...args], {
      encoding: 'utf8',
      timeout: 60_000,
    });
  const bad = run('--dns-upstream', 'kube-dns.kube-system');
  expect(bad.status, bad.stderr).toBe(2);
  expect(bad.stderr).toContain('--dns-upstream: "kube-dns.kube-system" is not an IP address');
  // the root key is refused outside the named test mode; the CA mode needs the CA and its root
  const key = run('--ca-cert', '/tmp/x.pem', '--ca-key', '/tmp/x.key');
  expect(key.status, key.stderr).toBe(2);
  expect(key.stderr).toContain(
    '--ca-cert/--ca-key hold the root key: they are for --certificates=shared-root-test only',
  );
  const noCa = run();
  expect(noCa.status, noCa.stderr).toBe(2);
  expect(noCa.stderr).toContain('--certificates=ca needs --ca-address');
  const badCa = run('--ca-address', 'http://ca:15012', '--ca-root', '/tmp/x.pem');
  expect(badCa.status, badCa.stderr).toBe(2);
  expect(badCa.stderr).toContain('--ca-address: CA address "http://ca:15012": expected https://HOST:PORT');
  const half = run('--certificates', 'shared-root-test', '--ca-cert', '/tmp/x.pem');
  expect(half.status, half.stderr).toBe(2);
  expect(half.stderr).toContain('--certificates=shared-root-test needs --ca-cert and --ca-key');
  // the profile (the agent's, from the same manifests) is one of the names, exactly
  const profile = run('--profile', 'Strict');
  expect(profile.status, profile.stderr).toBe(2);
  expect(profile.stderr).toContain('--profile must be one of upstream, strict, got "Strict"');
  // the admin port (identities, config dump, log level) never on a node address
  for (const host of ['0.0.0.0', '10.0.0.1', '::']) {
    const admin = run('--admin-address', host);
    expect(admin.status, admin.stderr).toBe(2);
    expect(admin.stderr).toContain(`--admin-address "${host}" is not a loopback address`);
  }
  const level = run('--log-level', 'verbose');
  expect(level.status, level.stderr).toBe(2);
  expect(level.stderr).toContain('--log-level must be one of debug, info, warn, error, got "verbose"');
});
