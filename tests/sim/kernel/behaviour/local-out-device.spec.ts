/**
 * Kernel behaviour: every LOCAL_OUT table (raw, mangle, nat, filter, security) runs inside one
 * nf_hook call (__ip_local_out) whose state->out is the device of the route chosen before the
 * hook. When nat OUTPUT rewrites the destination, ip_route_me_harder re-routes the packet (here to
 * lo), and POSTROUTING sees lo, but `-o` in the later filter OUTPUT still matches the ORIGINAL
 * device. Found by the differential property (seed 20261211: a `-o lo ... ESTABLISHED -j DROP`
 * dropped the redirected final ACK in the model, not on Linux 6.1;
 * fixtures/fidelity/out-dev-fixed-in-local-out-seed-20261211.yaml).
 */
import { test, expect } from '@playwright/test';
import { renderTrace } from '../../../../sim/kernel/trace.js';
import { client, listenTcp, pair, table } from './world.js';

test('filter OUTPUT -o lo does not match a packet nat OUTPUT redirected to lo: the connection completes', () => {
  const k = pair();
  listenTcp(k, 'a', '0.0.0.0', 15001, { label: 'local redirect target' });
  k.iptablesRestore('a', 4, table('nat', '-A OUTPUT -p tcp ! -d 127.0.0.1 -j REDIRECT --to-ports 15001'));
  k.iptablesRestore(
    'a',
    4,
    table('filter', '-A OUTPUT -o lo -p tcp --dport 15001 -m conntrack --ctstate RELATED,ESTABLISHED -j DROP'),
  );
  const r = k.connect(client(k, 'a'), '192.0.2.2', 80);
  expect(r.outcome, renderTrace(r.trace)).toBe('established');
  expect(r.listener?.label).toBe('local redirect target');
});

test('control: filter OUTPUT ! -o lo matches the same redirected final ACK (it still sees the original device)', () => {
  const k = pair();
  listenTcp(k, 'a', '0.0.0.0', 15001, { label: 'local redirect target' });
  k.iptablesRestore('a', 4, table('nat', '-A OUTPUT -p tcp ! -d 127.0.0.1 -j REDIRECT --to-ports 15001'));
  k.iptablesRestore(
    'a',
    4,
    table('filter', '-A OUTPUT ! -o lo -p tcp --dport 15001 -m conntrack --ctstate RELATED,ESTABLISHED -j DROP'),
  );
  const r = k.connect(client(k, 'a'), '192.0.2.2', 80);
  expect(r.outcome, renderTrace(r.trace)).toBe('timeout');
});

// Linux: a route to one of the namespace's own addresses is `local ... dev lo` (IPv4
// ip_route_output sets the output device to loopback for RTN_LOCAL; IPv6 ip6_rt_get_dev_rcu
// does the same for RTF_LOCAL), so OUTPUT's `-o` is lo, not the device holding the address.
// Checked on Linux 6.1 with `-o lo` / `-o <veth>` counters in a private namespace.
for (const [fam, own] of [
  [4, '192.0.2.1'],
  [6, 'fd00::1'],
] as const) {
  test(`IPv${fam}: a connection to the namespace's own address on eth0 leaves by lo in filter OUTPUT`, () => {
    for (const [dev, outcome] of [
      ['lo', 'timeout'],
      ['eth0', 'established'],
    ] as const) {
      const k = pair();
      listenTcp(k, 'a', fam === 4 ? '0.0.0.0' : '::', 8080, { label: 'own app', family: fam });
      k.iptablesRestore('a', fam, table('filter', `-A OUTPUT -o ${dev} -p tcp --dport 8080 -j DROP`));
      const r = k.connect(client(k, 'a', { family: fam }), own, 8080);
      expect(r.outcome, `-o ${dev}: ${renderTrace(r.trace)}`).toBe(outcome);
    }
  });
}
