/**
 * probeSetSteps: the diff that makes a host probe ipset equal the mesh's claims (pure).
 */
import { test, expect } from '@playwright/test';
import { podUid } from '../../../impl/api/ids.js';
import { canonicalIp, probeSetSteps } from '../../../impl/node-agent/probe-set-sync.js';

const A = podUid('uid-a');
const B = podUid('uid-b');

test('canonical addresses: ipset and Kubernetes spellings of one address compare equal', () => {
  expect(canonicalIp('fd00:10:244::2')).toBe(canonicalIp('fd00:10:244:0:0:0:0:0002'));
  expect(canonicalIp('FD00::1/128')).toBe(canonicalIp('fd00::1'));
  expect(canonicalIp('10.244.0.2/32')).toBe('10.244.0.2');
  expect(canonicalIp('fd00::1')).not.toBe(canonicalIp('fd00::10'));
});

test('stale members go, missing members of enrolled pods come, members in canonical disguise stay', () => {
  const steps = probeSetSteps(
    [
      { ip: '10.244.0.2', comment: A },
      { ip: '10.244.0.9', comment: 'uid-gone' },
      { ip: 'fd00::2', comment: A },
    ],
    [{ uid: A, ips: ['10.244.0.5', 'fd00:0::2'], required: true }],
  );
  expect(steps.remove).toEqual([
    { ip: '10.244.0.2', comment: A },
    { ip: '10.244.0.9', comment: 'uid-gone' },
  ]);
  expect(steps.add).toEqual([{ ip: '10.244.0.5', uid: A }]);
});

test('an address owned by another pod is re-owned; a pending pod keeps its current member but gets none added', () => {
  const steps = probeSetSteps(
    [
      { ip: '10.244.0.3', comment: A },
      { ip: '10.244.0.7', comment: B },
    ],
    [
      { uid: B, ips: ['10.244.0.3'], required: true },
      { uid: A, ips: ['10.244.0.3', '10.244.0.8'], required: false },
      { uid: B, ips: ['10.244.0.7'], required: false },
    ],
  );
  // 10.244.0.3: A's view is stale (B is enrolled with it); 10.244.0.7: B pending, current: stays.
  expect(steps.remove).toEqual([{ ip: '10.244.0.3', comment: A }]);
  expect(steps.add).toEqual([{ ip: '10.244.0.3', uid: B }]);
});

test('nothing to do when the set already equals the claims', () => {
  expect(probeSetSteps([{ ip: '10.244.0.2', comment: A }], [{ uid: A, ips: ['10.244.0.2'], required: true }])).toEqual({
    remove: [],
    add: [],
  });
});
