/**
 * The `upstream` profile is upstream istio-cni rule for rule: loaded into the simulated kernel,
 * our rendered default v4 plan and upstream's golden ruleset (fixtures/rules/) print the same
 * iptables-save text — same rules, same chains, same order. v6 is the v4 set with the v6
 * loopback and probe addresses (as upstream default_ipv6.golden).
 */
import * as fs from 'node:fs';
import * as path from 'node:path';
import { test, expect } from '@playwright/test';
import { SimKernel } from '../../../../sim/kernel/kernel.js';
import {
  buildHostProbeRules,
  renderHostProbePlan,
  renderIpsetRestore,
} from '../../../../impl/node-agent/host-probe-rules.js';
import { buildInpodPlan } from '../../../../impl/node-agent/rule-builder.js';
import { inpodOptions } from './variants.js';

const repo = path.resolve(import.meta.dirname, '..', '..', '..', '..');
const fixture = (f: string): string => fs.readFileSync(path.join(repo, 'fixtures/rules', f), 'utf8');

function saved(text: string, family: 4 | 6, ipsets?: string): string {
  const k = new SimKernel();
  k.addNetns('ns');
  if (ipsets) k.ipsetRestore('ns', ipsets);
  k.iptablesRestore('ns', family, text);
  return k.iptablesSave('ns', family);
}

test('upstream profile, default v4 (DNS on): same iptables-save as upstream default.golden', () => {
  const ours = buildInpodPlan(inpodOptions('upstream')).iptables.ipv4!;
  const theirs = saved(fixture('upstream-inpod-v4.rules'), 4);
  expect(saved(ours, 4)).toBe(theirs);
  // Guard against a vacuous comparison: the upstream set has 6 hooks and 12 rules in 3 tables.
  expect(theirs.split('\n').filter((l) => l.startsWith('-A')).length).toBe(18);
});

test('upstream profile, host probe v4: same iptables-save as upstream hostprobe.golden', () => {
  const host = buildHostProbeRules({ profile: 'upstream', ipv6: false });
  const sets = renderIpsetRestore(host.ipsets);
  expect(saved(renderHostProbePlan(host).iptables.ipv4!, 4, sets)).toBe(
    saved(fixture('upstream-hostprobe-v4.rules'), 4, sets),
  );
});

test('upstream profile, v6 is the v4 ruleset with ::1/128 and the v6 probe address', () => {
  const plan = buildInpodPlan(inpodOptions('upstream'));
  const fromV4 = saved(plan.iptables.ipv4!, 4)
    .replaceAll('127.0.0.1/32', '::1/128')
    .replaceAll('169.254.7.127/32', 'fd16:9254:7127:1337:ffff:ffff:ffff:ffff/128');
  expect(saved(plan.iptables.ipv6!, 6)).toBe(fromV4);
});

test('upstream profile, ingress mode: inbound redirect and probe accept gone, connmark rules kept', () => {
  const def = saved(buildInpodPlan(inpodOptions('upstream')).iptables.ipv4!, 4).split('\n');
  const ing = saved(buildInpodPlan(inpodOptions('upstream', { ingressMode: true })).iptables.ipv4!, 4).split('\n');
  const removed = def.filter((l) => !ing.includes(l));
  expect(removed).toEqual([
    '-A ISTIO_PRERT -s 169.254.7.127/32 -p tcp -m tcp -j ACCEPT',
    '-A ISTIO_PRERT ! -d 127.0.0.1/32 -p tcp -m tcp ! --dport 15008 -m mark ! --mark 0x539/0xfff -j REDIRECT --to-ports 15006',
  ]);
  expect(ing.filter((l) => !def.includes(l))).toEqual([]);
  expect(ing).toContain('-A ISTIO_PRERT -m mark --mark 0x539/0xfff -j CONNMARK --set-xmark 0x111/0xfff');
});

test('upstream profile, DNS off: no DNS redirects and no raw table', () => {
  const text = buildInpodPlan(inpodOptions('upstream', { dnsCapture: false })).iptables.ipv4!;
  expect(text).not.toContain('15053');
  expect(text).not.toContain('*raw');
  expect(text).toContain('--to-ports 15001');
});

test('upstream profile, IPv6 off: no v6 text, no v6 rule or route; lo without IPv6: v6 rule but no v6 local route', () => {
  const off = buildInpodPlan(inpodOptions('upstream', { ipv6: false }));
  expect(off.iptables.ipv6).toBeUndefined();
  expect(off.rules.map((r) => r.family)).toEqual(['ipv4']);
  expect(off.routes.map((r) => r.family)).toEqual(['ipv4']);
  const noLo6 = buildInpodPlan(inpodOptions('upstream', { loIpv6Disabled: true }));
  expect(noLo6.iptables.ipv6).toBeDefined();
  expect(noLo6.rules.map((r) => r.family)).toEqual(['ipv4', 'ipv6']);
  expect(noLo6.routes.map((r) => `${r.family} ${r.type} ${r.dst} dev ${r.dev} table ${r.table}`)).toEqual([
    'ipv4 local 0.0.0.0/0 dev lo table 100',
  ]);
});

test('return-path policy routing: fwmark 0x111/0xfff pref 32764 lookup 100, local 0.0.0.0/0 and ::/0 dev lo table 100', () => {
  for (const profile of ['upstream', 'strict'] as const) {
    const p = buildInpodPlan(inpodOptions(profile));
    expect(
      p.rules.map((r) => ({
        family: r.family,
        priority: r.priority,
        value: r.fwmark.value,
        mask: r.fwmark.mask,
        table: r.table,
      })),
    ).toEqual([
      { family: 'ipv4', priority: 32764, value: 0x111, mask: 0xfff, table: 100 },
      { family: 'ipv6', priority: 32764, value: 0x111, mask: 0xfff, table: 100 },
    ]);
    expect(p.routes).toEqual([
      { family: 'ipv4', type: 'local', dst: '0.0.0.0/0', dev: 'lo', table: 100 },
      { family: 'ipv6', type: 'local', dst: '::/0', dev: 'lo', table: 100 },
    ]);
  }
});
