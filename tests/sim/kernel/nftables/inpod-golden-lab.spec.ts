/**
 * Upstream istio-cni's in-pod nftables document (fixtures/upstream-golden-nft/default.golden)
 * in the simulator: fixtures/labs/inpod-nft.yaml is inpod.yaml with that document in the pod and
 * upstream's host probe rule on the node. Outbound TCP reaches 15001, inbound 15006, HBONE
 * 15008, the kubelet's probe is SNATed by uid, DNS goes to 15053, the proxy's own traffic passes.
 */
import { test, expect } from '@playwright/test';
import * as fs from 'node:fs';
import { parseLab } from '../../../../sim/lab/lab-file.js';
import { runLab } from '../../../../sim/lab/run-lab.js';

const text = fs.readFileSync('fixtures/labs/inpod-nft.yaml', 'utf8');

test('the lab carries the golden documents unchanged', () => {
  const lab = parseLab(text, 'inpod-nft.yaml');
  const pod = lab.namespaces.find((n) => n.name === 'pod-a')!;
  const body = (s: string): string =>
    s
      .split('\n')
      .filter((l) => l !== '' && !l.startsWith('#'))
      .join('\n');
  expect(body(pod.nftables!)).toBe(body(fs.readFileSync('fixtures/upstream-golden-nft/default.golden', 'utf8')));
  expect(pod.iptables).toBeUndefined();
  const node = lab.namespaces.find((n) => n.name === 'node')!;
  expect(node.nftables).toContain(body(fs.readFileSync('fixtures/upstream-golden-nft/hostprobe.golden', 'utf8')));
});

test('the upstream nftables document captures outbound on 15001 and inbound on 15006', () => {
  const run = runLab(parseLab(text, 'inpod-nft.yaml'), 'inpod-nft.yaml', { trace: false });
  const by = Object.fromEntries(run.results.map((r) => [r.name, r]));
  expect(by['app-a-to-pod-b']).toMatchObject({
    outcome: 'established',
    acceptedBy: 'proxy-outbound',
    originalDst: '10.244.1.6:8080',
    localSeen: '127.0.0.1:15001',
  });
  expect(by['pod-b-to-app-a']).toMatchObject({
    outcome: 'established',
    acceptedBy: 'proxy-inbound',
    originalDst: '10.244.1.5:8080',
  });
  expect(by['pod-b-to-hbone']).toMatchObject({ outcome: 'established', acceptedBy: 'proxy-hbone' });
  expect(by['kubelet-probe']).toMatchObject({ outcome: 'established', acceptedBy: 'app-a' });
  expect(by['kubelet-probe']!.sourceSeen).toMatch(/^169\.254\.7\.127:/);
  expect(by['root-on-node']).toMatchObject({ outcome: 'established', acceptedBy: 'proxy-inbound' });
  expect(by['proxy-upstream']).toMatchObject({ outcome: 'established', acceptedBy: 'app-b' });
  expect(by['app-dns']).toMatchObject({ outcome: 'no-socket', localSeen: '127.0.0.1:15053' });
});

test('positive control: without the pod document nothing is captured', () => {
  const without = text.replace(/ {4}nftables: \|\n {6}# Upstream istio-cni in-pod[\s\S]*?(?=\n {2}- name: pod-b)/, '');
  expect(without).not.toBe(text);
  const run = runLab(parseLab(without, 'x.yaml'), 'x.yaml', { trace: false });
  expect(run.results.find((r) => r.name === 'app-a-to-pod-b')).toMatchObject({ acceptedBy: 'app-b' });
});
