/**
 * The `upstream` profile's nftables rules (impl/node-agent/nftables/) against istio-cni's own
 * golden files for its nftables backend (fixtures/upstream-golden-nft/): for every configuration
 * upstream's tests record, our rendered `nft -f` text is the same, line for line. Every golden
 * file is mapped (a new one fails here until it is), and a positive control shows one changed
 * setting changes the text.
 */
import { test, expect } from '@playwright/test';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { renderNft } from '../../../impl/node-agent/nftables/nft-document.js';
import {
  buildUpstreamHostNft,
  buildUpstreamHostSetsNft,
  buildUpstreamInpodNft,
} from '../../../impl/node-agent/nftables/upstream-rules.js';

const DIR = path.resolve('fixtures/upstream-golden-nft');
/** upstream's test config (nftables_test.go constructTestConfig) */
const PROBE_SNAT = { ipv4: '169.254.7.127', ipv6: 'e9ac:1e77:90ca:399f:4d6d:ece2:2f9b:3164' };
const VIRT = ['fake1s0f0', 'fake1s0f1'];

/** common_test.go GetCommonInPodTestCases: the node's DNS setting and the pod's overrides. */
const INPOD: Record<string, { dns: boolean; ingressMode: boolean; virtualInterfaces: string[] }> = {
  default: { dns: true, ingressMode: false, virtualInterfaces: [] },
  ingress: { dns: false, ingressMode: true, virtualInterfaces: [] },
  virtual_interfaces: { dns: false, ingressMode: false, virtualInterfaces: VIRT },
  ingress_and_virtual_interfaces: { dns: false, ingressMode: true, virtualInterfaces: VIRT },
  // the pod's DNS override wins over the node's setting
  dns_pod_enabled_and_off_globally: { dns: true, ingressMode: false, virtualInterfaces: [] },
  dns_pod_disabled_and_on_globally: { dns: false, ingressMode: false, virtualInterfaces: [] },
};

function ours(file: string): string {
  const ipv6 = file.endsWith('_ipv6.golden');
  const name = file.replace(/(_ipv6)?\.golden$/, '');
  if (name === 'hostprobe') return renderNft(buildUpstreamHostNft({ ipv6, kubeletUid: 1000, probeSnat: PROBE_SNAT }));
  const c = INPOD[name];
  if (!c) throw new Error(`golden file ${file} is not mapped to a configuration`);
  return renderNft(buildUpstreamInpodNft({ ipv6, ...c, probeSnat: PROBE_SNAT }));
}

const files = fs.readdirSync(DIR).filter((f) => f.endsWith('.golden'));

test('every golden file of upstream is here and mapped', () => {
  expect(files).toHaveLength(14);
  for (const f of files) expect(() => ours(f)).not.toThrow();
});

for (const f of files)
  test(`upstream nftables golden ${f}: the same text`, () => {
    const golden = fs.readFileSync(path.join(DIR, f), 'utf8').trimEnd().split('\n');
    expect(ours(f).trimEnd().split('\n')).toEqual(golden);
  });

test('positive control: another setting is another text (the comparison can fail)', () => {
  const golden = fs.readFileSync(path.join(DIR, 'default.golden'), 'utf8').trimEnd();
  const noDns = renderNft(
    buildUpstreamInpodNft({
      ipv6: false,
      dns: false,
      ingressMode: false,
      virtualInterfaces: [],
      probeSnat: PROBE_SNAT,
    }),
  ).trimEnd();
  expect(noDns).not.toEqual(golden);
  expect(golden).toContain('istio-ambient-raw');
  expect(noDns).not.toContain('istio-ambient-raw');
});

test('values reach rule text only when valid', () => {
  const base = { ipv6: true, dns: true, ingressMode: false, virtualInterfaces: [] as string[], probeSnat: PROBE_SNAT };
  expect(() => buildUpstreamInpodNft({ ...base, virtualInterfaces: ['eth0; flush ruleset'] })).toThrow(
    'virtual interface "eth0; flush ruleset": not an interface name',
  );
  expect(() => buildUpstreamInpodNft({ ...base, probeSnat: { ...PROBE_SNAT, ipv4: '169.254.7.127 accept' } })).toThrow(
    'not an IPv4 address',
  );
  expect(() => buildUpstreamHostNft({ ipv6: false, kubeletUid: -1, probeSnat: PROBE_SNAT })).toThrow('not a uid');
});

test('the host probe sets render as upstream declares them, in their own document (a flush would empty them)', () => {
  expect(
    renderNft(buildUpstreamHostSetsNft({ ipv6: true }))
      .trimEnd()
      .split('\n'),
  ).toEqual([
    'add table inet istio-ambient-nat',
    'add set inet istio-ambient-nat istio-inpod-probes-v4 { type ipv4_addr ; comment "UUID of the pods that are part of ambient mesh" ; }',
    'add set inet istio-ambient-nat istio-inpod-probes-v6 { type ipv6_addr ; comment "UUID of the pods that are part of ambient mesh" ; }',
  ]);
  const sets = buildUpstreamHostSetsNft({ ipv6: false }).tables[0]!;
  const rules = buildUpstreamHostNft({ ipv6: false, kubeletUid: 0, probeSnat: PROBE_SNAT }).tables[0]!;
  expect(() => renderNft({ tables: [{ ...rules, sets: sets.sets! }] })).toThrow(
    'declare sets and chains in separate documents',
  );
  expect(() =>
    renderNft({ tables: [{ ...sets, sets: [{ name: 's', type: 'ipv4_addr', comment: 'a" ; flush ruleset ; "' }] }] }),
  ).toThrow('has a quote, backslash or newline');
});
