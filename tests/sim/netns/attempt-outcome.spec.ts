/**
 * A world's connect attempt (e2e/netns/probe-protocol.ts). The worlds pick a random source port
 * per attempt; a port that turns out taken in the source's netns (EADDRINUSE at bind) is the
 * world's own unlucky choice, so another is picked — any other outcome, errors included, is the
 * observation and stands. A failed attempt's report names the call and the errno, or keeps the
 * message when there is no errno.
 */
import { test, expect } from '@playwright/test';
import {
  attemptError,
  fromFreeSourcePort,
  sourcePortTaken,
  type ConnectOutcome,
} from '../../../e2e/netns/probe-protocol.js';

const taken: ConnectOutcome = { result: 'error', code: 'EADDRINUSE', call: 'bind', message: 'in use' };
const established: ConnectOutcome = { result: 'established', code: undefined, call: undefined, message: undefined };

test('only EADDRINUSE at bind is a taken source port', () => {
  expect(sourcePortTaken(taken)).toBe(true);
  expect(sourcePortTaken({ ...taken, call: 'connect' })).toBe(false);
  expect(sourcePortTaken({ ...taken, code: 'ECONNREFUSED' })).toBe(false);
  expect(sourcePortTaken(established)).toBe(false);
});

test('a taken port is picked again; the attempt that ran reports its own port', async () => {
  const ports = [20001, 20002, 20003];
  const tried: number[] = [];
  const r = await fromFreeSourcePort(
    async (p) => {
      tried.push(p);
      return p === 20003 ? established : taken;
    },
    () => ports.shift()!,
  );
  expect(tried).toEqual([20001, 20002, 20003]);
  expect(r).toEqual({ value: established, sourcePort: 20003 });
});

test('another error is not retried, and after `tries` taken ports the last outcome stands', async () => {
  const refused: ConnectOutcome = { result: 'error', code: 'ECONNREFUSED', call: 'connect', message: 'refused' };
  let n = 0;
  const once = await fromFreeSourcePort(
    async () => (n++, refused),
    () => 30000 + n,
  );
  expect(once).toEqual({ value: refused, sourcePort: 30000 });
  expect(n).toBe(1);
  let calls = 0;
  const stuck = await fromFreeSourcePort(
    async () => (calls++, taken),
    () => 40000 + calls,
    3,
  );
  expect(calls).toBe(3);
  expect(stuck.value).toEqual(taken);
});

test('a failed attempt reads as call: errno, or keeps its message when there is no errno', () => {
  expect(attemptError({ result: 'error', code: 'EPERM', call: 'socket(AF_PACKET)', message: 'x' })).toBe(
    'socket(AF_PACKET): EPERM',
  );
  expect(
    attemptError({ result: 'error', code: 'EUNKNOWN', call: 'unknown', message: 'Cannot find module sockets.node' }),
  ).toBe('unknown: EUNKNOWN (Cannot find module sockets.node)');
});

test('the default pick draws source ports in 20000–59999', async () => {
  const seen = new Set<number>();
  for (let i = 0; i < 200; i++) {
    const { sourcePort } = await fromFreeSourcePort(async () => established);
    seen.add(sourcePort);
  }
  for (const p of seen) expect(p >= 20_000 && p < 60_000, String(p)).toBe(true);
  expect(seen.size).toBeGreaterThan(150); // random, not one port
});
