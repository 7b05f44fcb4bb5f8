/**
 * The positive controls of the differential property (scenarios/fidelity/wrong-models.ts) are
 * really wrong: on labs where the rule matters they answer differently from the simulator's
 * model. (That the differential then finds them against the real kernel is
 * tests/netns/fidelity/differential.spec.ts.)
 */
import { test, expect } from '@playwright/test';
import { parseLab } from '../../../sim/lab/lab-file.js';
import { runSim } from '../../../scenarios/fidelity/differential.js';
import { compareResults } from '../../../scenarios/fidelity/compare.js';
import { nftNatChainsIgnored, redirectKeepsAddress } from '../../../scenarios/fidelity/wrong-models.js';

/** An app's outbound connection redirected in nat OUTPUT to a proxy listening on every address. */
const OUTBOUND_REDIRECT = parseLab(
  `
version: 1
namespaces:
  - name: client
    routes: [{ dst: default, via: 10.244.1.1 }]
    iptables: |
      *nat
      -A OUTPUT -p tcp -m owner ! --uid-owner 1337 ! -d 127.0.0.1 -j REDIRECT --to-ports 15001
      COMMIT
  - name: server
    routes: [{ dst: default, via: 10.244.1.2 }]
veths:
  - a: { netns: client, name: eth0, addresses: [10.244.1.2/24] }
    b: { netns: server, name: eth0, addresses: [10.244.1.1/24] }
sockets:
  - { name: proxy-out, netns: client, port: 15001, uid: 1337 }
  - { name: remote-15001, netns: server, port: 15001, uid: 1000 }
attempts:
  - { name: app-out, netns: client, address: 10.244.1.1, port: 8080, uid: 1000 }
`,
  'outbound-redirect',
);

test('REDIRECT in nat OUTPUT: the model sends the connection to the local proxy at 127.0.0.1 with the original destination kept in conntrack', () => {
  const [r] = runSim(OUTBOUND_REDIRECT);
  expect(r).toMatchObject({
    outcome: 'established',
    acceptedBy: 'proxy-out',
    localSeen: '127.0.0.1:15001',
    originalDst: '10.244.1.1:8080',
  });
});

test('the wrong model "REDIRECT keeps the address" sends it to the remote host\'s port instead, and the comparison shows it', () => {
  const right = runSim(OUTBOUND_REDIRECT);
  const wrong = runSim(OUTBOUND_REDIRECT, { netfilterFactory: redirectKeepsAddress });
  expect(wrong[0]).toMatchObject({ outcome: 'established', acceptedBy: 'remote-15001', localSeen: '10.244.1.1:15001' });
  const fields = compareResults(wrong, right)
    .map((d) => d.field)
    .sort();
  expect(fields).toEqual(['acceptedBy', 'localSeen', 'originalDst']);
});

test('the wrong nftables model "the NAT core never runs nft nat chains" leaves an nft redirect undone, and the comparison shows it', () => {
  const lab = parseLab(
    `
version: 1
namespaces:
  - name: client
    routes: [{ dst: default, via: 10.244.1.1 }]
    nftables: |
      table inet t {
        chain out {
          type nat hook output priority -100; policy accept;
          meta l4proto tcp meta skuid != 1337 ip daddr != 127.0.0.1 redirect to :15001
        }
      }
  - name: server
    routes: [{ dst: default, via: 10.244.1.2 }]
veths:
  - a: { netns: client, name: eth0, addresses: [10.244.1.2/24] }
    b: { netns: server, name: eth0, addresses: [10.244.1.1/24] }
sockets:
  - { name: proxy-out, netns: client, port: 15001, uid: 1337 }
  - { name: remote-8080, netns: server, port: 8080, uid: 1000 }
attempts:
  - { name: app-out, netns: client, address: 10.244.1.1, port: 8080, uid: 1000 }
`,
    'nft-outbound-redirect',
  );
  const right = runSim(lab);
  expect(right[0]).toMatchObject({ outcome: 'established', acceptedBy: 'proxy-out', originalDst: '10.244.1.1:8080' });
  const wrong = runSim(lab, { nftablesFactory: nftNatChainsIgnored });
  expect(wrong[0]).toMatchObject({ outcome: 'established', acceptedBy: 'remote-8080' });
  expect(compareResults(wrong, right).map((d) => d.field)).toContain('acceptedBy');
});
