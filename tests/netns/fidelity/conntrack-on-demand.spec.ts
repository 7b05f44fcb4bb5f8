/**
 * Formerly the known divergence `conntrack-only-when-needed`: Linux tracks a namespace's
 * connections of a family only while a rule there needs conntrack (nf_ct_netns_get at rule
 * load), and the model now does the same (Netfilter.needsConntrack). Without such a rule
 * SO_ORIGINAL_DST on an accepted socket fails with ENOENT; a rule that needs conntrack without
 * matching anything (a REDIRECT for another port, a conntrack match, CT --zone) makes it work;
 * rules that do not need it (MARK, CT --notrack, owner) leave it failing. Sim and kernel agree.
 */
import { test, expect } from '@playwright/test';
import { netnsLabWorld } from '../../worlds.js';
import { parseLab } from '../../../sim/lab/lab-file.js';
import { runLab } from '../../../sim/lab/run-lab.js';
import { KernelLab, runLabOnKernel } from '../../../e2e/netns/lab-runner.js';
import { compareResults } from '../../../scenarios/fidelity/compare.js';

const world = netnsLabWorld();
test.skip(!world.available, world.reason);

const twoNs = (serverIptables: string | undefined): string => `
version: 1
namespaces:
  - name: client
    routes: [{ dst: default, via: 10.244.1.1 }]
  - name: server
    routes: [{ dst: default, via: 10.244.1.2 }]
${
  serverIptables
    ? `    iptables: |\n${serverIptables
        .split('\n')
        .map((l) => `      ${l}`)
        .join('\n')}`
    : ''
}
veths:
  - a: { netns: client, name: eth0, addresses: [10.244.1.2/24] }
    b: { netns: server, name: eth0, addresses: [10.244.1.1/24] }
sockets:
  - { name: app, netns: server, port: 18080, uid: 1000 }
attempts:
  - { name: plain, netns: client, address: 10.244.1.1, port: 18080, uid: 1000 }
`;

const CASES: readonly { name: string; rules: string | undefined; tracked: boolean }[] = [
  { name: 'no rules', rules: undefined, tracked: false },
  {
    name: 'MARK only',
    rules: '*mangle\n-A PREROUTING -p udp --dport 9 -j MARK --set-mark 0x5\nCOMMIT\n',
    tracked: false,
  },
  {
    name: 'CT --notrack only',
    rules: '*raw\n-A PREROUTING -p udp --dport 9 -j CT --notrack\nCOMMIT\n',
    tracked: false,
  },
  {
    name: 'a REDIRECT that matches nothing here',
    rules: '*nat\n-A PREROUTING -p udp --dport 9 -j REDIRECT --to-ports 10\nCOMMIT\n',
    tracked: true,
  },
  {
    name: 'a conntrack match',
    rules: '*filter\n-A INPUT -m conntrack --ctstate INVALID -j RETURN\nCOMMIT\n',
    tracked: true,
  },
  {
    name: 'CT --zone for other traffic',
    rules: '*raw\n-A PREROUTING -p udp --dport 9 -j CT --zone 3\nCOMMIT\n',
    tracked: true,
  },
];

for (const c of CASES) {
  test(`server with ${c.name}: SO_ORIGINAL_DST ${c.tracked ? 'works' : 'fails with ENOENT'}, in the sim as on Linux`, async () => {
    const lab = parseLab(twoNs(c.rules), `conntrack-on-demand ${c.name}`);
    const sim = runLab(lab, c.name, { trace: false }).results;
    const kernel = (await runLabOnKernel(lab)).results;
    expect(compareResults(sim, kernel, new Set())).toEqual([]);
    expect(kernel.find((r) => r.name === 'plain')?.originalDst).toBe(c.tracked ? '10.244.1.1:18080' : '(ENOENT)');
  });
}

test('tracking stops again once the last rule that needs it is gone, on Linux as in the sim', async () => {
  const redirect = parseLab(twoNs(CASES[3]!.rules), 'conntrack-on-demand on');
  const none = parseLab(twoNs('*nat\nCOMMIT\n'), 'conntrack-on-demand off again');
  const k = await KernelLab.create(redirect);
  try {
    await k.configure(redirect);
    expect((await k.runAttempts(redirect.attempts))[0]?.originalDst).toBe('10.244.1.1:18080');
    // The same namespaces, the REDIRECT removed (an empty nat table stays loaded).
    await k.configure(none);
    expect((await k.runAttempts(none.attempts))[0]?.originalDst).toBe('(ENOENT)');
  } finally {
    await k.dispose();
  }
  // The model: the same two restores into one namespace.
  const sim = runLab(redirect, 'on', { trace: false });
  expect(sim.kernel.netns('server').netfilter[4].needsConntrack()).toBe(true);
  sim.kernel.iptablesRestore('server', 4, '*nat\nCOMMIT\n');
  expect(sim.kernel.netns('server').netfilter[4].needsConntrack()).toBe(false);
});
