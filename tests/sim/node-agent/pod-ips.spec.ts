/** podIps (impl/api/pod-ips.ts): both status fields, primary first, no duplicates, nothing that is not an address. */
import { test, expect } from '@playwright/test';
import { podIps } from '../../../impl/api/pod-ips.js';

test('podIPs in order, then podIP when it is not listed', () => {
  expect(podIps({ status: { podIPs: [{ ip: '10.244.0.5' }, { ip: 'fd00:10:244::5' }], podIP: '10.244.0.5' } })).toEqual(
    ['10.244.0.5', 'fd00:10:244::5'],
  );
  expect(podIps({ status: { podIP: '10.244.0.6' } })).toEqual(['10.244.0.6']);
  expect(podIps({ status: {} })).toEqual([]);
  expect(podIps({})).toEqual([]);
});

test('values that are not IP addresses never come through (they would reach ipset and rule text)', () => {
  expect(
    podIps({
      status: {
        podIPs: [{ ip: '10.244.0.7 -j ACCEPT' }, { ip: '' }, {}, { ip: '300.1.1.1' }],
        podIP: '10.244.0.8\n-A X',
      },
    }),
  ).toEqual([]);
});
