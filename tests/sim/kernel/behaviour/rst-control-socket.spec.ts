/**
 * Kernel behaviour: the RST answering a segment that finds no connection leaves from the
 * namespace's TCP control socket, a kernel socket without a file (sim/kernel/tcp-reset.ts).
 * IPv4 (ip_send_unicast_reply) attaches it to the reset: `-m owner --socket-exists` matches, while
 * `--uid-owner`/`--gid-owner` behave as for no socket. IPv6 (tcp_v6_send_response) sends the reset
 * with no socket. Found by the differential property (seed 20261202); both checked on Linux 6.1
 * (fixtures/fidelity/rst-ctl-socket-exists-*.yaml).
 */
import { test, expect } from '@playwright/test';
import { renderTrace } from '../../../../sim/kernel/trace.js';
import type { Family } from '../../../../impl/api/ip/address.js';
import { client, pair, table } from './world.js';

const target = (family: Family): string => (family === 4 ? '192.0.2.2' : 'fd00::2');

/** A SYN to a port nobody listens on in b, with `rule` in b's mangle POSTROUTING. */
function refusedWith(family: Family, rule: string): ReturnType<ReturnType<typeof pair>['connect']> {
  const k = pair();
  k.iptablesRestore('b', family, table('mangle', `-A POSTROUTING -p tcp --tcp-flags RST RST ${rule} -j DROP`));
  return k.connect(client(k, 'a', { family }), target(family), 81);
}

test('IPv4: --socket-exists matches the RST (the control socket): it is dropped and the client times out', () => {
  const r = refusedWith(4, '-m owner --socket-exists');
  expect(r.outcome, renderTrace(r.trace)).toBe('timeout');
  expect(r.reason).toContain('DROP in mangle POSTROUTING');
});

test('IPv4: ! --socket-exists does not match the RST: the client is refused', () => {
  const r = refusedWith(4, '-m owner ! --socket-exists');
  expect(r.outcome, renderTrace(r.trace)).toBe('refused');
});

test('IPv4: uid/gid criteria see no file behind the control socket: --uid-owner 0 misses, ! --uid-owner 0 hits', () => {
  expect(refusedWith(4, '-m owner --uid-owner 0').outcome).toBe('refused');
  expect(refusedWith(4, '-m owner --gid-owner 0').outcome).toBe('refused');
  expect(refusedWith(4, '-m owner ! --uid-owner 0').outcome).toBe('timeout');
  // Socket present, no file: --socket-exists together with a negated uid matches too.
  expect(refusedWith(4, '-m owner --socket-exists ! --uid-owner 1000').outcome).toBe('timeout');
});

test('IPv6: the RST has no socket at all: --socket-exists misses and ! --socket-exists hits', () => {
  expect(refusedWith(6, '-m owner --socket-exists').outcome).toBe('refused');
  expect(refusedWith(6, '-m owner ! --socket-exists').outcome).toBe('timeout');
});
