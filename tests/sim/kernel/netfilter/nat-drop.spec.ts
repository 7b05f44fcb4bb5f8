/** iptables refuses DROP in the nat table (iptables 1.8.9: "not intended for filtering"). */
import { test, expect } from '@playwright/test';
import { Netfilter } from '../../../../sim/kernel/netfilter/netfilter.js';
import { RestoreError } from '../../../../sim/kernel/netfilter/errors.js';

test('DROP in the nat table is rejected at restore, naming the line; DROP in mangle and raw is allowed', () => {
  const nf = new Netfilter(4);
  let err: unknown;
  try {
    nf.restore('*nat\n-A OUTPUT -p tcp -j DROP\nCOMMIT\n', { source: 'test' });
  } catch (e) {
    err = e;
  }
  expect(err).toBeInstanceOf(RestoreError);
  expect((err as RestoreError).line).toBe(2);
  expect((err as RestoreError).message).toContain('DROP');
  expect(() => nf.restore('*mangle\n-A OUTPUT -j DROP\nCOMMIT\n*raw\n-A OUTPUT -j DROP\nCOMMIT\n')).not.toThrow();
});
