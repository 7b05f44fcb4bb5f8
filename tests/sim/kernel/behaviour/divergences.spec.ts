/**
 * Known divergences from Linux, kept as fixme tests that state what the kernel does. Each one
 * is too large to fix locally; remove `fixme` once the model is corrected.
 */
import { test, expect } from '@playwright/test';
import { client, listenTcp, routed, table } from './world.js';

test.fixme('the answer a REJECT sends travels the reverse path: if it is dropped there, connect times out', () => {
  // Linux: REJECT emits an ICMP error or RST that goes through routing and netfilter back to the
  // client; the model reports 'refused' as soon as the REJECT rule is hit.
  const k = routed();
  listenTcp(k, 's', '0.0.0.0', 80);
  k.iptablesRestore('s', 4, table('filter', '-A INPUT -p tcp --dport 80 -j REJECT --reject-with tcp-reset'));
  k.iptablesRestore('r', 4, table('filter', '-A FORWARD -p tcp --sport 80 -j DROP'));
  expect(k.connect(client(k, 'c'), '203.0.113.2', 80).outcome).toBe('timeout');
});
