/**
 * The node agent's settings (impl/linux/node-agent-config.ts): upstream's defaults, the settings
 * upstream has and we lacked (host probe SNAT addresses, the iptables variant), their validation
 * (a bad value names the flag; the process exits 2), and that the SNAT addresses really reach
 * both the host and the in-pod rules.
 */
import { test, expect } from '@playwright/test';
import { spawnSync } from 'node:child_process';
import * as path from 'node:path';
import { fileURLToPath } from 'node:url';
import { agentSettings } from '../../../../impl/linux/node-agent-config.js';
import { ConfigError } from '../../../../impl/linux/component-main.js';
import { chooseIptablesTools, iptablesTools } from '../../../../impl/linux/iptables-backend.js';
import { cidr } from '../../../../impl/node-agent/rule-ir.js';
import { AgentWorld, HOST_NS } from './harness.js';

const REPO = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../../../..');
const settings = (...argv: string[]) => agentSettings(['--node', 'n1', ...argv], {});

function configError(argv: string[], env: NodeJS.ProcessEnv = {}): string {
  try {
    agentSettings(['--node', 'n1', ...argv], env);
  } catch (e) {
    expect(e).toBeInstanceOf(ConfigError);
    return (e as Error).message;
  }
  throw new Error(`expected a ConfigError for ${argv.join(' ')}`);
}

test("defaults are upstream's chart defaults: IPv6 and DNS capture on; off only when asked", () => {
  expect(settings().config).toMatchObject({ ipv6: true, dnsCapture: true });
  expect(settings().config.probeSnat).toBeUndefined(); // the builders' default: upstream's addresses
  expect(settings().forceIptablesBinary).toBeUndefined();
  expect(settings('--ipv6=false', '--dns-capture', 'false').config).toMatchObject({ ipv6: false, dnsCapture: false });
  expect(
    agentSettings(['--node', 'n1'], { AMBIENT_LAB_IPV6: 'false', AMBIENT_LAB_DNS_CAPTURE: '0' }).config,
  ).toMatchObject({ ipv6: false, dnsCapture: false });
});

test('HOST_PROBE_SNAT_IP / HOST_PROBE_SNAT_IPV6: --host-probe-snat-ip and --host-probe-snat-ipv6 (or the AMBIENT_LAB_ variables) set the probe addresses', () => {
  expect(settings('--host-probe-snat-ip', '169.254.9.9').config.probeSnat).toEqual({
    ipv4: cidr('169.254.9.9'),
    ipv6: cidr('fd16:9254:7127:1337:ffff:ffff:ffff:ffff'),
  });
  expect(agentSettings(['--node', 'n1'], { AMBIENT_LAB_HOST_PROBE_SNAT_IPV6: 'fd16::7' }).config.probeSnat).toEqual({
    ipv4: cidr('169.254.7.127'),
    ipv6: cidr('fd16::7'),
  });
});

test('bad values are usage errors naming the flag', () => {
  const cases: [string[], RegExp][] = [
    [
      ['--host-probe-snat-ip', '169.254.7.0/24'],
      /--host-probe-snat-ip must be one IPv4 address without a prefix length/,
    ],
    [['--host-probe-snat-ip', 'fd16::1'], /--host-probe-snat-ip must be one IPv4 address/],
    [['--host-probe-snat-ip', '127.0.0.9'], /--host-probe-snat-ip "127.0.0.9" is unspecified, loopback/],
    [['--host-probe-snat-ip', '0.0.0.0'], /--host-probe-snat-ip/],
    [['--host-probe-snat-ip', '169.254.7.127 -j ACCEPT'], /--host-probe-snat-ip must be one IPv4 address/],
    [['--host-probe-snat-ipv6', '169.254.7.127'], /--host-probe-snat-ipv6 must be one IPv6 \(lowercase\) address/],
    [['--host-probe-snat-ipv6', 'FD16::1'], /--host-probe-snat-ipv6 must be one IPv6 \(lowercase\) address/],
    [['--host-probe-snat-ipv6', 'ff02::1'], /--host-probe-snat-ipv6 "ff02::1" is unspecified, loopback or multicast/],
    [
      ['--force-iptables-binary', 'nftables'],
      /--force-iptables-binary must be one of legacy, nft \(or unset to detect\), got "nftables"/,
    ],
    [['--ipv6', 'yes'], /--ipv6 must be true or false/],
    [['--exclude-namespaces', 'kube-system,Bad_NS'], /--exclude-namespaces: "Bad_NS" is not a namespace name/],
    [['--system-namespace', 'a.b'], /--system-namespace: "a.b" is not a namespace name/],
    [['--own-pod-prefixes', '-x'], /--own-pod-prefixes: "-x" is not the start of a pod name/],
    [['--allowed-proxy-uids', '1337,x'], /--allowed-proxy-uids must be a numeric id/],
    [['--pod-uid-sources', 'cgroup,proc'], /--pod-uid-sources: unknown source "proc"/],
  ];
  for (const [argv, re] of cases) expect(configError(argv), argv.join(' ')).toMatch(re);
});

test('the agent process exits 2 on a bad flag value, naming the flag, before touching anything', () => {
  const r = spawnSync(
    process.execPath,
    [path.join(REPO, 'bin', 'ambient-lab-agent.js'), '--node', 'n1', '--force-iptables-binary', 'both'],
    { encoding: 'utf8', timeout: 60_000 },
  );
  expect(r.status, r.stderr).toBe(2);
  expect(r.stderr).toContain('--force-iptables-binary must be one of legacy, nft');
  const r2 = spawnSync(
    process.execPath,
    [path.join(REPO, 'bin', 'ambient-lab-agent.js'), '--node', 'n1', '--host-probe-snat-ip', '10.0.0.0/8'],
    { encoding: 'utf8', timeout: 60_000 },
  );
  expect(r2.status, r2.stderr).toBe(2);
  expect(r2.stderr).toContain('--host-probe-snat-ip');
});

test('strict will not run with the proxy at uid 0 (every root app would share its exemption): a usage error, exit 2', () => {
  expect(configError(['--profile', 'strict'])).toMatch(
    /--profile strict with --proxy-uid 0 .* every root app would skip it too/,
  );
  expect(configError(['--profile', 'strict', '--proxy-uid', '0'])).toMatch(/--proxy-uid 0/);
  expect(configError([], { AMBIENT_LAB_PROFILE: 'strict' })).toMatch(/--proxy-uid 0/);
  expect(settings('--profile', 'strict', '--proxy-uid', '1337').config).toMatchObject({
    profile: 'strict',
    proxyUid: 1337,
  });
  expect(settings().config).toMatchObject({ profile: 'upstream', proxyUid: 0 }); // upstream has no such exemption by uid
  const r = spawnSync(
    process.execPath,
    [path.join(REPO, 'bin', 'ambient-lab-agent.js'), '--node', 'n1', '--profile', 'strict'],
    {
      encoding: 'utf8',
      timeout: 60_000,
    },
  );
  expect(r.status, r.stderr).toBe(2);
  expect(r.stderr).toContain('--proxy-uid');
});

test('set SNAT addresses reach both sides: the host rule SNATs to them and the in-pod probe carve-out accepts exactly them', async () => {
  const w = new AgentWorld('upstream', { ipv6: true, probeSnat: { ipv4: cidr('169.254.9.9'), ipv6: cidr('fd16::9') } });
  await w.namespace('shop', { 'istio.io/dataplane-mode': 'ambient' });
  await w.startAgent();
  w.startProxy();
  await w.run(100);
  const { netns, cni } = await w.pod('shop', 'web');
  expect(cni.exitCode, cni.stdout).toBe(0);
  await w.run(100);
  expect(w.kernel.iptablesSave(HOST_NS, 4)).toContain('--to-source 169.254.9.9');
  expect(w.kernel.iptablesSave(HOST_NS, 6)).toContain('--to-source fd16::9');
  const inpod = w.kernel.iptablesSave(netns, 4);
  expect(inpod).toContain('-A ISTIO_PRERT -s 169.254.9.9/32 -p tcp -m tcp -j ACCEPT');
  expect(inpod).toContain('-A ISTIO_OUTPUT -d 169.254.9.9/32 -p tcp -m tcp -j ACCEPT');
  expect(inpod).not.toContain('169.254.7.127');
  expect(w.kernel.iptablesSave(netns, 6)).toContain('-A ISTIO_PRERT -s fd16::9/128 -p tcp -m tcp -j ACCEPT');
});

// upstream's iptables variant choice (DetectIptablesVersion), against fake -save tools
const RULES = '# Generated by iptables-save\n*filter\n:INPUT ACCEPT [0:0]\n-A INPUT -j ACCEPT\nCOMMIT\n';
const run =
  (tools: Record<string, string | Error>) =>
  async (tool: string): Promise<string> => {
    const r = tools[tool];
    if (r === undefined) throw new Error(`${tool}: not found`);
    if (r instanceof Error) throw r;
    return r;
  };

test('iptables variant: legacy when iptables-legacy-save shows rules in the node netns, else nft, else the system tools', async () => {
  expect(
    (await chooseIptablesTools(undefined, run({ 'iptables-legacy-save': RULES, 'iptables-nft-save': RULES }))).tools,
  ).toEqual(iptablesTools('legacy'));
  expect(
    (await chooseIptablesTools(undefined, run({ 'iptables-legacy-save': '', 'iptables-nft-save': RULES }))).tools,
  ).toEqual(iptablesTools('nft'));
  expect((await chooseIptablesTools(undefined, run({ 'iptables-nft-save': '' }))).tools).toEqual(iptablesTools('nft'));
  expect((await chooseIptablesTools(undefined, run({ 'iptables-save': '' }))).tools).toEqual(iptablesTools('system'));
  await expect(chooseIptablesTools(undefined, run({}))).rejects.toThrow(
    /no usable iptables found in the node netns: iptables-legacy-save: not found; iptables-nft-save: not found; iptables-save: not found/,
  );
  expect(iptablesTools('nft')).toEqual({
    variant: 'nft',
    ipv4: { save: 'iptables-nft-save', restore: 'iptables-nft-restore' },
    ipv6: { save: 'ip6tables-nft-save', restore: 'ip6tables-nft-restore' },
  });
});

test('FORCE_IPTABLES_BINARY: --force-iptables-binary legacy|nft uses that variant even where detection would not, or fails naming it', async () => {
  const both = run({ 'iptables-legacy-save': RULES, 'iptables-nft-save': RULES });
  expect((await chooseIptablesTools('nft', both)).tools.variant).toBe('nft');
  expect(
    (await chooseIptablesTools('legacy', run({ 'iptables-legacy-save': '', 'iptables-nft-save': RULES }))).tools
      .variant,
  ).toBe('legacy');
  await expect(chooseIptablesTools('legacy', run({ 'iptables-nft-save': RULES }))).rejects.toThrow(
    /--force-iptables-binary legacy: iptables-legacy-save cannot be used/,
  );
  expect(settings('--force-iptables-binary', 'legacy').forceIptablesBinary).toBe('legacy');
});

// upstream's SplitExcludeNamespaces table (cni/pkg/util/podutil_test.go), through the flag both the agent and the installer read
const SPLIT: [string, string, string[]][] = [
  ['empty string', '', []],
  ['string of spaces', '  ', []],
  ['single namespace', 'kube-system', ['kube-system']],
  ['single namespace with spaces', ' kube-system ', ['kube-system']],
  ['two namespaces', 'kube-system,istio-system', ['kube-system', 'istio-system']],
  ['two namespaces with spaces', ' kube-system , istio-system ', ['kube-system', 'istio-system']],
  ['trailing comma', 'kube-system,', ['kube-system']],
  ['leading comma', ',kube-system', ['kube-system']],
  ['embedded empty', 'kube-system,,istio-system', ['kube-system', 'istio-system']],
  ['only commas', ',,', []],
];
for (const [name, input, want] of SPLIT) {
  test(`TestSplitExcludeNamespaces: ${name}`, () => {
    expect(
      agentSettings(['--node', 'n1'], { AMBIENT_LAB_EXCLUDE_NAMESPACES: input }).config.enrollment.excludeNamespaces,
    ).toEqual(want);
  });
}

test('--backend iptables|nftables (AMBIENT_LAB_BACKEND): iptables by default, as upstream; anything else is a usage error', () => {
  expect(settings().config.backend).toBe('iptables');
  expect(settings('--backend', 'nftables').config.backend).toBe('nftables');
  expect(agentSettings(['--node', 'n1'], { AMBIENT_LAB_BACKEND: 'nftables' }).config.backend).toBe('nftables');
  expect(configError(['--backend', 'ebpf'])).toMatch(/--backend.*iptables, nftables/);
});
