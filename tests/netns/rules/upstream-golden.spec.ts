/**
 * Issue 20: istio-cni's own golden rule files (fixtures/upstream-golden/, copied with their source
 * commit) against our `upstream` profile on the real kernel, through tools/upstream-golden.ts:
 * every rule set loaded into a private namespace, read back with iptables-save / ip6tables-save,
 * normalised, and compared. Any difference fails; files we cannot express are listed with their
 * reason (none today), never skipped.
 */
import { test, expect } from '@playwright/test';
import { netnsWorld } from '../../worlds.js';
import { listNetns } from '../../../e2e/netns/ip.js';
import { newRunPrefix } from '../../../e2e/netns/netns-run.js';
import { CASES, NOT_EXPRESSIBLE, compareAll } from '../../../tools/upstream-golden.js';

const w = netnsWorld();
test.skip(!w.available, w.reason);
test.setTimeout(180_000);

test('all 21 rule sets of the 14 upstream golden files are identical to ours once loaded into a kernel', async () => {
  // Its own prefix: other tests running alongside make and remove namespaces of theirs.
  const prefix = newRunPrefix();
  const results = await compareAll(CASES, () => undefined, prefix);
  const differing = results
    .filter((r) => r.differences.length > 0)
    .map((r) => `${r.file} ${r.family}:\n  ${r.differences.join('\n  ')}`);
  expect(differing).toEqual([]);
  expect(results.map((r) => `${r.file} ${r.family}`)).toHaveLength(21);
  expect(results.filter((r) => r.file.startsWith('hostprobe'))).toHaveLength(3);
  // Not vacuous: every rule set has rules, and the default set is upstream's 18.
  for (const r of results) expect(r.rules, `${r.file} ${r.family}`).toBeGreaterThan(0);
  expect(results.find((r) => r.file === 'default.golden')?.rules).toBe(18);
  expect(NOT_EXPRESSIBLE.map((n) => `${n.file}: ${n.reason}`)).toEqual([]);
  // Its namespaces are gone again.
  expect((await listNetns()).filter((n) => n.startsWith(prefix))).toEqual([]);
});

test('control: a wrong mapping differs on the kernel (default.golden with DNS capture off, dns_pod_disabled with IPv6 probe address changed)', async () => {
  const def = CASES.find((c) => c.file === 'default.golden')!;
  const v6 = CASES.find((c) => c.file === 'dns_pod_disabled_and_on_globally_ipv6.golden')!;
  const results = await compareAll([
    { ...def, dnsCapture: false },
    { ...v6, probeSnat: { ...v6.probeSnat, ipv6: 'fd00::1' } },
  ]);
  expect(results.map((r) => `${r.file} ${r.family} ${r.differences.length > 0 ? 'differs' : 'same'}`)).toEqual([
    'default.golden ipv4 differs',
    'dns_pod_disabled_and_on_globally_ipv6.golden ipv4 same',
    'dns_pod_disabled_and_on_globally_ipv6.golden ipv6 differs',
  ]);
  expect(results[0]!.differences).toContain(
    'only upstream: -A ISTIO_OUTPUT ! -d 127.0.0.1/32 -p tcp -m tcp --dport 53 -m mark ! --mark 0x539/0xfff -j REDIRECT --to-ports 15053',
  );
  expect(results[0]!.differences).toContain('only upstream: *raw');
});
