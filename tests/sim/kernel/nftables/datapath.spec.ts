/**
 * nftables in the simulated datapath: nft base chains and iptables tables merged by priority at
 * each hook, NAT chains merged in the NAT core, accept ending only its own base chain, `meta
 * skuid` without a socket, policy drop, and the trace naming nft rules. The same labs run on the
 * real kernel in tests/netns/fidelity/nftables.spec.ts.
 */
import { test, expect } from '@playwright/test';
import { parseLab } from '../../../../sim/lab/lab-file.js';
import { runLab } from '../../../../sim/lab/run-lab.js';
import { renderTrace } from '../../../../sim/kernel/trace.js';
import { pathOfText } from '../../../../cli/html/packet-path.js';
import { ALONE_LAB, FORWARD_LAB, MIXED_LAB, ROUTE_LAB, TPROXY_LAB } from './labs.js';
import { LabError } from '../../../../sim/lab/lab-file.js';

function results(text: string): Record<string, { outcome: string; acceptedBy?: string | undefined; trace: string }> {
  const run = runLab(parseLab(text, 'lab.yaml'), 'lab.yaml');
  return Object.fromEntries(
    run.results.map((r) => [r.name, { outcome: r.outcome, acceptedBy: r.acceptedBy, trace: renderTrace(r.trace) }]),
  );
}

test('iptables tables and nft chains in one namespace run by priority; NAT chains merge in the NAT core', () => {
  const r = results(MIXED_LAB);
  expect(r['mark-before-mangle']).toMatchObject({ outcome: 'established', acceptedBy: 's8081' });
  expect(r['mark-after-mangle']!.outcome).toBe('timeout');
  expect(r['mark-tie-mangle']).toMatchObject({ outcome: 'established', acceptedBy: 's8088' });
  expect(r['nft-tie']).toMatchObject({ outcome: 'established', acceptedBy: 's8089' });
  expect(r['accept-then-filter-drop']!.outcome).toBe('timeout');
  expect(r['nft-nat-first']).toMatchObject({ outcome: 'established', acceptedBy: 'p15002' });
  expect(r['iptables-nat-first']).toMatchObject({ outcome: 'established', acceptedBy: 'p15001' });
  expect(r['nft-nat-accepts']).toMatchObject({ outcome: 'established', acceptedBy: 'p15001' });
  expect(r['nat-in-the-core']).toMatchObject({ outcome: 'established', acceptedBy: 'p15002' });
  expect(r['rst-from-kernel-socket']!.outcome).toBe('refused');
  // the order at OUTPUT of the first SYN: nft -160, nft -150 (a tie: the later-registered nft chain first), iptables mangle (-150), nft -140
  const head = r['mark-after-mangle']!.trace.split('\n').filter((l) => /^\[a\] OUTPUT (nft|mangle|filter|nat)/.test(l));
  expect(head.slice(0, 4)).toEqual([
    '[a] OUTPUT nft inet t before-mangle (filter, priority -160): ACCEPT',
    '[a] OUTPUT nft inet t tie-mangle (filter, priority -150): ACCEPT',
    '[a] OUTPUT mangle: ACCEPT',
    '[a] OUTPUT nft inet t after-mangle (filter, priority -140): DROP',
  ]);
});

test('nftables alone: prerouting NAT, input policy drop, meta skuid at input never matches an incoming SYN', () => {
  const r = results(ALONE_LAB);
  expect(r['redirected']).toMatchObject({ outcome: 'established', acceptedBy: 's8080' });
  expect(r['dnat']).toMatchObject({ outcome: 'established', acceptedBy: 's8081' });
  expect(r['skuid-on-input']!.outcome).toBe('timeout');
  expect(r['policy-drop']!.outcome).toBe('timeout');
  expect(r['skuid-early-demux']!.outcome).toBe('timeout');
  expect(r['direct']).toMatchObject({ outcome: 'established', acceptedBy: 's8080' });
  expect(r['redirected-v6']).toMatchObject({ outcome: 'established', acceptedBy: 's8090v6' });
  expect(r['dnat-ip-not-for-v6']!.outcome).toBe('timeout');
  expect(r['policy-drop']!.trace).toContain('in policy: policy drop  => drop');
});

test('the trace names the nft rule (chain, position, line, text) and the packet-path reader keeps it', () => {
  const t = results(ALONE_LAB)['redirected']!.trace;
  expect(t).toContain('[server] PREROUTING nft inet srv pre (nat, priority -100): NAT redirect');
  expect(t).toContain('      pre #1 (line 4): tcp dport 80 redirect to :8080  => redirect to :8080');
  const steps = pathOfText(t);
  const nat = steps.find((s) => s.kind === 'nft' && s.text.includes('srv pre'));
  expect(nat?.rules).toEqual([
    { where: 'pre #1 (line 4)', text: 'tcp dport 80 redirect to :8080', effect: 'redirect to :8080' },
  ]);
});

test('tproxy: a transparent listener takes the connection; without one the rule breaks and the packet goes on as addressed', () => {
  const r = results(TPROXY_LAB);
  expect(r['tproxied']).toMatchObject({ outcome: 'established', acceptedBy: 'tp' });
  expect(r['no-tproxy-socket']).toMatchObject({ outcome: 'established', acceptedBy: 's9001' });
  expect(r['tproxied-then-skuid']!.outcome).toBe('timeout');
});

test('a bad nftables document in a lab file names the lab file, its line and the problem', () => {
  const bad = ALONE_LAB.replace('tcp dport 80 redirect to :8080', 'tcp dport 70000 redirect to :8080');
  expect(() => runLab(parseLab(bad, 'lab.yaml'), 'lab.yaml')).toThrow(LabError);
  expect(() => runLab(parseLab(bad, 'lab.yaml'), 'lab.yaml')).toThrow(
    /^lab\.yaml:10 \(namespaces\[1\]\.nftables\): Service out of range: 70000[^]*in line: {5}tcp dport 70000/,
  );
});

test('a route-type output chain that changes the mark re-routes; a filter-type chain does not', () => {
  const r = results(ROUTE_LAB);
  expect(r['route-chain-reroutes']!.outcome).toBe('timeout');
  expect(r['route-chain-reroutes']!.trace).toContain('an nft route chain at OUTPUT changed the packet: re-route');
  expect(r['filter-chain-does-not']).toMatchObject({ outcome: 'established', acceptedBy: 's7001' });
});

test('forwarding: meta skuid never matches a forwarded packet, not even with !=; masquerade hides the client', () => {
  const run = runLab(parseLab(FORWARD_LAB, 'fwd.yaml'), 'fwd.yaml', { trace: false });
  const by = Object.fromEntries(run.results.map((r) => [r.name, r]));
  expect(by['skuid-on-forward']).toMatchObject({ outcome: 'established', acceptedBy: 's9100' });
  expect(by['skuid-on-forward']!.sourceSeen).toMatch(/^10\.2\.0\.1:/);
  expect(by['forward-drop']!.outcome).toBe('timeout');
});
