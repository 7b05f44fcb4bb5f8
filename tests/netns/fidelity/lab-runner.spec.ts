import { readFileSync } from 'node:fs';
import { test, expect } from '@playwright/test';
import { netnsLabWorld } from '../../worlds.js';
import { parseLab } from '../../../sim/lab/lab-file.js';
import { runLab } from '../../../sim/lab/run-lab.js';
import { KernelLab, runLabOnKernel, fullRestoreText } from '../../../e2e/netns/lab-runner.js';
import { compareListeners, compareResults } from '../../../scenarios/fidelity/compare.js';
import { namespacesWithPrefix, alive } from './fixture.js';

const world = netnsLabWorld();
test.skip(!world.available, world.reason);

test('the in-pod example lab gives the same results on the kernel as in the sim', async () => {
  const lab = parseLab(readFileSync('fixtures/labs/inpod.yaml', 'utf8'), 'inpod.yaml');
  const sim = runLab(lab, 'inpod.yaml', { trace: false }).results;
  const kernel = (await runLabOnKernel(lab)).results;
  expect(kernel.map((r) => r.name)).toEqual(sim.map((r) => r.name));
  const udp = new Set(lab.attempts.filter((a) => a.proto === 'udp').map((a) => a.name));
  const diffs = compareResults(sim, kernel, udp);
  // pod-b has no rules, so neither Linux nor the model tracks its connections: SO_ORIGINAL_DST
  // on the proxy's upstream connection accepted there fails with ENOENT on both.
  expect(diffs).toEqual([]);
  expect(kernel.find((r) => r.name === 'proxy-upstream')?.originalDst).toBe('(ENOENT)');
  expect(kernel.find((r) => r.name === 'app-a-to-pod-b')).toMatchObject({
    outcome: 'established',
    acceptedBy: 'proxy-outbound',
    originalDst: '10.244.1.6:8080',
    localSeen: '127.0.0.1:15001',
  });
  expect(kernel.find((r) => r.name === 'app-mark-spoof')?.outcome).toBe('error EPERM');
});

test('on_sockopt_error continue: the refused SO_MARK is left unset and the attempt goes on — captured; listeners expected to fail fail with the same errno — on the kernel as in the sim', async () => {
  const text = readFileSync('fixtures/labs/inpod.yaml', 'utf8')
    .replace(
      '{ name: app-mark-spoof, netns: pod-a, address: 10.244.1.6, port: 8080, uid: 1000, mark: 0x539 }',
      '{ name: app-mark-spoof, netns: pod-a, address: 10.244.1.6, port: 8080, uid: 1000, mark: 0x539, on_sockopt_error: continue }',
    )
    .replace(
      '  - { name: app-b, netns: pod-b, port: 8080, uid: 1000 }\n',
      '  - { name: app-b, netns: pod-b, port: 8080, uid: 1000 }\n' +
        '  - { name: second-a, netns: pod-a, port: 8080, uid: 1000, expect: EADDRINUSE }\n' +
        '  - { name: not-there, netns: pod-a, address: 10.9.9.9, port: 9090, uid: 1000, expect: EADDRNOTAVAIL }\n' +
        '  - { name: transparent-app, netns: pod-a, port: 9092, uid: 1000, transparent: true, expect: EPERM }\n' +
        '  - { name: free-port, netns: pod-a, port: 9091, uid: 1000, expect: EADDRINUSE }\n',
    );
  const lab = parseLab(text, 'inpod-continue.yaml');
  expect(lab.attempts.find((a) => a.name === 'app-mark-spoof')?.onSockoptError).toBe('continue');
  const simRun = runLab(lab, 'inpod-continue.yaml', { trace: false });
  const sim = simRun.results;
  const kernelRun = await runLabOnKernel(lab);
  const kernel = kernelRun.results;
  expect(kernelRun.listeners.slice(5).map((l) => `${l.name} ${l.outcome}`)).toEqual([
    'second-a EADDRINUSE',
    'not-there EADDRNOTAVAIL',
    'transparent-app EPERM',
    'free-port listening',
  ]);
  expect(compareListeners(simRun.listeners, kernelRun.listeners)).toEqual([]);
  const udp = new Set(lab.attempts.filter((a) => a.proto === 'udp').map((a) => a.name));
  expect(compareResults(sim, kernel, udp)).toEqual([]);
  // Without the mark the app's connection is redirected to the proxy like any other.
  expect(kernel.find((r) => r.name === 'app-mark-spoof')).toMatchObject({
    outcome: 'established',
    acceptedBy: 'proxy-outbound',
  });
});

test('a kernel lab removes its namespaces and stops its probes, also when a case fails to configure', async () => {
  const lab = parseLab(readFileSync('fixtures/labs/inpod.yaml', 'utf8'), 'inpod.yaml');
  const k = await KernelLab.create(lab);
  const prefix = k.run.prefix;
  await k.configure(lab);
  const pids = await k.pids();
  expect(pids.length).toBeGreaterThan(3);
  expect(await namespacesWithPrefix(prefix)).toHaveLength(3);
  const broken = {
    ...lab,
    namespaces: lab.namespaces.map((n) =>
      n.name === 'pod-b' ? { ...n, iptables: '*nat\n-A OUTPUT -j NO_SUCH_CHAIN\nCOMMIT\n' } : n,
    ),
  };
  await expect(k.configure(broken)).rejects.toThrow(/iptables of pod-b/);
  await k.dispose();
  expect(await namespacesWithPrefix(prefix)).toEqual([]);
  expect(pids.filter(alive)).toEqual([]);
});

test('fullRestoreText resets undeclared built-in policies and unnamed tables', () => {
  const t = fullRestoreText('*nat\n-A OUTPUT -j ACCEPT\nCOMMIT\n');
  expect(t).toContain(
    '*nat\n:PREROUTING ACCEPT [0:0]\n:INPUT ACCEPT [0:0]\n:OUTPUT ACCEPT [0:0]\n:POSTROUTING ACCEPT [0:0]\n-A OUTPUT -j ACCEPT\nCOMMIT',
  );
  expect(t).toContain('*filter\n:INPUT ACCEPT [0:0]\n:FORWARD ACCEPT [0:0]\n:OUTPUT ACCEPT [0:0]\nCOMMIT');
  expect(fullRestoreText('*filter\n:INPUT DROP [0:0]\nCOMMIT\n')).toContain(
    '*filter\n:FORWARD ACCEPT [0:0]\n:OUTPUT ACCEPT [0:0]\n:INPUT DROP [0:0]\nCOMMIT',
  );
});

test("a fresh kernel lab is ready for its first attempt: IPv6 through a router end whose ifindex equals its peer's", async () => {
  // client eth0 and router eth-c are both index 2 of their namespace, and eth-c is set up second:
  // without waiting for linkwatch, eth-c has no link-local address yet, sends no neighbour
  // solicitation, and the first SYN routed out of it is stuck past the connect timeout.
  const lab = parseLab(
    `
version: 1
namespaces:
  - name: client
    routes: [{ dst: default, family: 6, via: fd00:1::1 }]
  - name: router
    forwarding: { ipv6: true }
  - name: server
    routes: [{ dst: default, family: 6, via: fd00:2::1 }]
veths:
  - a: { netns: client, name: eth0, addresses: [fd00:1::2/64] }
    b: { netns: router, name: eth-c, addresses: [fd00:1::1/64] }
  - a: { netns: server, name: eth0, addresses: [fd00:2::2/64] }
    b: { netns: router, name: eth-s, addresses: [fd00:2::1/64] }
sockets:
  - { name: app, netns: client, family: 6, address: "::", port: 18080, uid: 1000 }
attempts:
  - { name: first, netns: server, address: fd00:1::2, port: 18080, uid: 1000 }
`,
    'fresh-topology',
  );
  const kernel = (await runLabOnKernel(lab)).results;
  expect(kernel.map((r) => ({ name: r.name, outcome: r.outcome, acceptedBy: r.acceptedBy }))).toEqual([
    { name: 'first', outcome: 'established', acceptedBy: 'app' },
  ]);
  expect(kernel[0]?.sourceSeen).toMatch(/^\[fd00:2::2\]:\d+$/);
});
