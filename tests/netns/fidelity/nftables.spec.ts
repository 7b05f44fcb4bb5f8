/**
 * The simulator's nftables model against Linux: hand-written labs with `nftables:` documents —
 * alone, and mixed with `iptables:` in one namespace — give the same results on the real kernel
 * (in private namespaces made by the lab runner) as in the sim; so does upstream istio-cni's
 * in-pod nftables document (fixtures/labs/inpod-nft.yaml). Also: when nft rules turn conntrack on.
 */
import { readFileSync } from 'node:fs';
import { test, expect } from '@playwright/test';
import { netnsLabWorld } from '../../worlds.js';
import { parseLab, type Lab } from '../../../sim/lab/lab-file.js';
import { runLab } from '../../../sim/lab/run-lab.js';
import { KernelLab, runLabOnKernel } from '../../../e2e/netns/lab-runner.js';
import { compareResults } from '../../../scenarios/fidelity/compare.js';
import { ALONE_LAB, FORWARD_LAB, MIXED_LAB, ROUTE_LAB, TPROXY_LAB } from '../../sim/kernel/nftables/labs.js';
import { namespacesWithPrefix } from './fixture.js';

const world = netnsLabWorld();
test.skip(!world.available, world.reason);

async function both(lab: Lab): Promise<{
  sim: ReturnType<typeof runLab>['results'];
  kernel: Awaited<ReturnType<typeof runLabOnKernel>>['results'];
}> {
  const sim = runLab(lab, 'lab', { trace: false }).results;
  const kernel = (await runLabOnKernel(lab)).results;
  return { sim, kernel };
}

test('iptables and nft chains in one namespace: priority order, NAT chains merged, accept ends one chain, skuid on a kernel RST — sim = kernel', async () => {
  const lab = parseLab(MIXED_LAB, 'mixed.yaml');
  const { sim, kernel } = await both(lab);
  const by = Object.fromEntries(kernel.map((r) => [r.name, r]));
  expect(by['mark-before-mangle']).toMatchObject({ outcome: 'established', acceptedBy: 's8081' });
  expect(by['mark-after-mangle']!.outcome).toBe('timeout');
  // a tie: the nft chain (registered after iptables' mangle) runs first and sees no mark yet
  expect(by['mark-tie-mangle']).toMatchObject({ outcome: 'established', acceptedBy: 's8088' });
  expect(by['nft-tie']).toMatchObject({ outcome: 'established', acceptedBy: 's8089' });
  expect(by['accept-then-filter-drop']!.outcome).toBe('timeout');
  expect(by['nft-nat-first']).toMatchObject({ outcome: 'established', acceptedBy: 'p15002' });
  expect(by['iptables-nat-first']).toMatchObject({ outcome: 'established', acceptedBy: 'p15001' });
  expect(by['nft-nat-accepts']).toMatchObject({ outcome: 'established', acceptedBy: 'p15001' });
  expect(by['nat-in-the-core']).toMatchObject({ outcome: 'established', acceptedBy: 'p15002' });
  expect(by['rst-from-kernel-socket']!.outcome).toBe('refused');
  expect(compareResults(sim, kernel)).toEqual([]);
});

test('nftables alone: prerouting redirect and dnat, input policy drop, skuid at input — sim = kernel', async () => {
  const lab = parseLab(ALONE_LAB, 'alone.yaml');
  const { sim, kernel } = await both(lab);
  const by = Object.fromEntries(kernel.map((r) => [r.name, r]));
  expect(by['redirected']).toMatchObject({ outcome: 'established', acceptedBy: 's8080' });
  expect(by['dnat']).toMatchObject({ outcome: 'established', acceptedBy: 's8081' });
  expect(by['skuid-on-input']!.outcome).toBe('timeout');
  expect(by['policy-drop']!.outcome).toBe('timeout');
  expect(by['skuid-early-demux']!.outcome).toBe('timeout');
  expect(by['redirected-v6']).toMatchObject({ outcome: 'established', acceptedBy: 's8090v6' });
  expect(by['dnat-ip-not-for-v6']!.outcome).toBe('timeout');
  expect(compareResults(sim, kernel)).toEqual([]);
});

test('tproxy statement: assigns a transparent listener; with none the rule breaks and the packet is delivered as addressed — sim = kernel', async () => {
  const lab = parseLab(TPROXY_LAB, 'tproxy.yaml');
  const { sim, kernel } = await both(lab);
  const by = Object.fromEntries(kernel.map((r) => [r.name, r]));
  expect(by['tproxied']).toMatchObject({ outcome: 'established', acceptedBy: 'tp' });
  expect(by['no-tproxy-socket']).toMatchObject({ outcome: 'established', acceptedBy: 's9001' });
  expect(by['tproxied-then-skuid']!.outcome).toBe('timeout');
  expect(compareResults(sim, kernel)).toEqual([]);
});

test('a route-type output chain re-routes on a changed mark, a filter-type chain does not — sim = kernel', async () => {
  const lab = parseLab(ROUTE_LAB, 'route.yaml');
  const { sim, kernel } = await both(lab);
  const by = Object.fromEntries(kernel.map((r) => [r.name, r]));
  expect(by['route-chain-reroutes']!.outcome).toBe('timeout');
  expect(by['filter-chain-does-not']).toMatchObject({ outcome: 'established', acceptedBy: 's7001' });
  expect(compareResults(sim, kernel)).toEqual([]);
});

test('forwarding: skuid never matches a forwarded packet; masquerade — sim = kernel', async () => {
  const lab = parseLab(FORWARD_LAB, 'forward.yaml');
  const { sim, kernel } = await both(lab);
  const by = Object.fromEntries(kernel.map((r) => [r.name, r]));
  expect(by['skuid-on-forward']).toMatchObject({ outcome: 'established', acceptedBy: 's9100' });
  expect(by['skuid-on-forward']!.sourceSeen).toMatch(/^10\.2\.0\.1:/);
  expect(by['forward-drop']!.outcome).toBe('timeout');
  expect(compareResults(sim, kernel)).toEqual([]);
});

test("upstream's in-pod nftables document and host probe rule: sim = kernel", async () => {
  const lab = parseLab(readFileSync('fixtures/labs/inpod-nft.yaml', 'utf8'), 'inpod-nft.yaml');
  const { sim, kernel } = await both(lab);
  expect(kernel.find((r) => r.name === 'app-a-to-pod-b')).toMatchObject({
    outcome: 'established',
    acceptedBy: 'proxy-outbound',
    localSeen: '127.0.0.1:15001',
  });
  expect(kernel.find((r) => r.name === 'pod-b-to-app-a')).toMatchObject({
    outcome: 'established',
    acceptedBy: 'proxy-inbound',
  });
  expect(kernel.find((r) => r.name === 'kubelet-probe')?.sourceSeen).toMatch(/^169\.254\.7\.127:/);
  const udp = new Set(lab.attempts.filter((a) => a.proto === 'udp').map((a) => a.name));
  expect(compareResults(sim, kernel, udp)).toEqual([]);
});

/** Two namespaces; the server has `doc` and a listener; SO_ORIGINAL_DST tells whether it tracked. */
function ctLab(doc: string): Lab {
  return parseLab(
    `version: 1
namespaces:
  - name: client
  - name: server
    nftables: |
${doc
  .split('\n')
  .map((l) => `      ${l}`)
  .join('\n')}
veths:
  - a: { netns: client, name: eth0, addresses: [10.244.1.2/24] }
    b: { netns: server, name: eth0, addresses: [10.244.1.1/24] }
sockets:
  - { name: srv, netns: server, port: 18080, uid: 0 }
attempts:
  - { name: c, netns: client, address: 10.244.1.1, port: 18080, uid: 1000 }
`,
    'ct.yaml',
  );
}

test('conntrack on demand: a ct match in a chain no base chain reaches turns tracking on, marks and notrack do not; cases reset between runs', async () => {
  const ct = ctLab('add table ip t\nadd chain ip t unused\nadd rule ip t unused ct state established accept');
  const ct6 = ctLab('add table ip6 t\nadd chain ip6 t unused\nadd rule ip6 t unused ct state established accept');
  const mark = ctLab(
    'table inet t {\n  chain c {\n    type filter hook prerouting priority -300; policy accept;\n    meta mark set 1 notrack\n  }\n}',
  );
  const natChain = ctLab(
    'table ip t {\n  chain pre {\n    type nat hook prerouting priority dstnat; policy accept;\n  }\n}',
  );
  const k = await KernelLab.create(ct);
  const prefix = k.run.prefix;
  const kernel: Record<string, string | undefined> = {};
  try {
    for (const [name, lab] of [
      ['ct', ct],
      ['ct6', ct6],
      ['mark', mark],
      ['nat chain without rules', natChain],
      ['ct again', ct],
    ] as const) {
      await k.configure(lab);
      kernel[name] = (await k.runAttempts(lab.attempts))[0]?.originalDst;
    }
  } finally {
    await k.dispose();
  }
  expect(await namespacesWithPrefix(prefix)).toEqual([]);
  const sim: Record<string, string | undefined> = {};
  for (const [name, lab] of [
    ['ct', ct],
    ['ct6', ct6],
    ['mark', mark],
    ['nat chain without rules', natChain],
    ['ct again', ct],
  ] as const)
    sim[name] = runLab(lab, name, { trace: false }).results[0]?.originalDst;
  expect(kernel).toEqual({
    ct: '10.244.1.1:18080',
    ct6: '(ENOENT)',
    mark: '(ENOENT)',
    'nat chain without rules': '(ENOENT)',
    'ct again': '10.244.1.1:18080',
  });
  expect(sim).toEqual(kernel);
});
