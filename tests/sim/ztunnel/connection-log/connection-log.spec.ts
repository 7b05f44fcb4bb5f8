/** Connection log: round trip through JSON lines, validation rules, the datapath adapter. */
import { test, expect } from '@playwright/test';
import { VirtualClock } from '../../../../sim/time/virtual-clock.js';
import {
  JsonLinesSink,
  LineConnectionLog,
  MemoryConnectionLogSink,
  formatRecord,
  parseConnectionLog,
  parseEndpoint,
  validateRecord,
  type ConnectionLogRecord,
} from '../../../../impl/ztunnel/connection-log.js';

const forwarded: ConnectionLogRecord = {
  v: 1,
  time: 1500,
  event: 'forwarded',
  direction: 'inbound-hbone',
  pod: 'app/server',
  downstream: { src: { ip: '10.244.2.20', port: 40000 }, dst: { ip: '10.244.1.10', port: 15008 } },
  target: { ip: '10.244.1.10', port: 8080 },
  upstream: { src: { ip: '10.244.2.20', port: 40001 }, dst: { ip: '10.244.1.10', port: 8080 } },
  srcIdentity: 'spiffe://cluster.local/ns/client/sa/client-sa',
  dstIdentity: 'spiffe://cluster.local/ns/app/sa/server',
  mode: 'hbone',
  decision: { allow: true, reason: 'allowed by: app/a rules[0]' },
};

test('records round-trip through JSON lines exactly', () => {
  const lines: string[] = [];
  const sink = new JsonLinesSink((l) => lines.push(l));
  const denied: ConnectionLogRecord = {
    v: 1,
    time: 2000,
    event: 'denied',
    direction: 'inbound-plaintext',
    pod: 'app/server',
    downstream: { src: { ip: 'fd00::2', port: 5000 }, dst: { ip: 'fd00::1', port: 15006 } },
    decision: { allow: false, reason: 'explicitly denied by: istio-system/istio_converted_static_strict' },
  };
  sink.write(forwarded);
  sink.write(denied);
  expect(lines.every((l) => l.endsWith('\n') && !l.slice(0, -1).includes('\n'))).toBe(true);
  const parsed = parseConnectionLog(lines.join(''));
  expect(parsed.errors).toEqual([]);
  expect(parsed.records).toEqual([forwarded, denied]);
});

test('the parser reports every bad line with its number and keeps the good ones', () => {
  const text = [
    formatRecord(forwarded).trim(),
    '{not json',
    '',
    JSON.stringify({ ...forwarded, event: 'teleported' }),
    formatRecord(forwarded).trim(),
  ].join('\n');
  const parsed = parseConnectionLog(text);
  expect(parsed.records).toHaveLength(2);
  expect(parsed.errors.map((e) => e.line)).toEqual([2, 4]);
  expect(parsed.errors[1]!.message).toMatch(/line 4: event: expected one of/);
});

const invalid: { name: string; rec: unknown; msg: RegExp }[] = [
  { name: 'wrong version', rec: { ...forwarded, v: 2 }, msg: /v: expected 1/ },
  { name: 'unknown field', rec: { ...forwarded, extra: 1 }, msg: /extra: unknown field/ },
  {
    name: 'bad address',
    rec: { ...forwarded, downstream: { src: { ip: '10.0.0.300', port: 1 }, dst: forwarded.downstream.dst } },
    msg: /downstream\.src\.ip/,
  },
  { name: 'bad port', rec: { ...forwarded, target: { ip: '10.0.0.1', port: 70000 } }, msg: /target\.port/ },
  { name: 'identity not SPIFFE', rec: { ...forwarded, srcIdentity: 'cluster.local/ns/a/sa/b' }, msg: /srcIdentity/ },
  { name: 'forwarded without upstream', rec: { ...forwarded, upstream: undefined }, msg: /upstream: required/ },
  {
    name: 'HBONE forwarded without peer identity',
    rec: { ...forwarded, srcIdentity: undefined },
    msg: /srcIdentity: required/,
  },
  {
    name: 'forwarded although denied',
    rec: { ...forwarded, decision: { allow: false, reason: 'x' } },
    msg: /forwarded.*allow === false/,
  },
  {
    name: 'denied although allowed',
    rec: { ...forwarded, event: 'denied', decision: { allow: true, reason: 'x' } },
    msg: /denied.*allow === true/,
  },
  {
    name: 'closed-by-policy without decision',
    rec: { ...forwarded, event: 'closed-by-policy', decision: undefined },
    msg: /decision: required/,
  },
  { name: 'negative bytes', rec: { ...forwarded, bytesSent: -1 }, msg: /bytesSent/ },
  { name: 'time missing', rec: { ...forwarded, time: undefined }, msg: /time/ },
];
for (const c of invalid) {
  test(`validation rejects: ${c.name}`, () => {
    // JSON round trip drops undefined fields, as a reader of the file would see them
    expect(() => validateRecord(JSON.parse(JSON.stringify(c.rec)))).toThrow(c.msg);
  });
}

test('endpoints parse v4 and bracketed v6, and nothing else', () => {
  expect(parseEndpoint('10.0.0.1:80')).toEqual({ ip: '10.0.0.1', port: 80 });
  expect(parseEndpoint('[fd00::1]:15008')).toEqual({ ip: 'fd00::1', port: 15008 });
  for (const bad of ['fd00::1:80', '10.0.0.1', 'host:80', '10.0.0.1:99999'])
    expect(() => parseEndpoint(bad)).toThrow(/not an address:port/);
});

test("the adapter turns the datapath's records into validated lines stamped with Clock time", () => {
  const clock = new VirtualClock();
  const sink = new MemoryConnectionLogSink();
  const errors: string[] = [];
  const log = new LineConnectionLog(clock, sink, (e) => errors.push(e.message));
  clock.advance(250);
  log.record({
    event: 'denied',
    direction: 'inbound-plaintext',
    pod: 'app/server',
    downstream: { src: '10.244.2.20:40000', dst: '10.244.1.10:15006' },
    target: '10.244.1.10:8080',
    reason: 'allow policies exist, but none allowed (app/a)',
  });
  log.record({
    event: 'denied',
    direction: 'inbound-hbone',
    pod: 'app/server',
    downstream: { src: '10.244.2.20:40000', dst: '10.244.1.10:15008' },
    target: 'not-an-address',
    reason: 'CONNECT target is not this pod',
  });
  log.record({
    event: 'forwarded',
    direction: 'outbound',
    pod: 'app/server',
    downstream: { src: '10.244.1.10:1', dst: '10.96.0.1:80' },
    target: '10.96.0.1:80',
  });
  expect(sink.records).toHaveLength(2);
  expect(sink.records[0]).toMatchObject({
    v: 1,
    time: 250,
    decision: { allow: false, reason: 'allow policies exist, but none allowed (app/a)' },
    target: { ip: '10.244.1.10', port: 8080 },
  });
  expect(sink.records[1]!.target).toBeUndefined();
  expect(sink.records[1]!.reason).toMatch(/target not-an-address/);
  // a forwarded record without an upstream tuple is not silently written
  expect(errors).toEqual([expect.stringMatching(/upstream: required/)]);
});

test('an inbound forwarded record carries the allowing decision', () => {
  const sink = new MemoryConnectionLogSink();
  const log = new LineConnectionLog(new VirtualClock(), sink, (e) => {
    throw e;
  });
  log.record({
    event: 'forwarded',
    direction: 'inbound-plaintext',
    pod: 'app/server',
    mode: 'plaintext',
    downstream: { src: '10.244.2.20:40000', dst: '10.244.1.10:15006' },
    target: '10.244.1.10:8080',
    upstream: { src: '10.244.2.20:40000', dst: '10.244.1.10:8080' },
    reason: 'no ALLOW policy applies: allowed by default',
  });
  expect(sink.records[0]!.decision).toEqual({ allow: true, reason: 'no ALLOW policy applies: allowed by default' });
});
