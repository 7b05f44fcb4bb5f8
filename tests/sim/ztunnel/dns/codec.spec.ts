import { test, expect } from '@playwright/test';
import { RR_TYPE, RCODE } from '../../../../impl/ztunnel/dns/constants.js';
import { decodeMessage, encodeMessage, type DnsMessage } from '../../../../impl/ztunnel/dns/message.js';
import { encodeName, readName } from '../../../../impl/ztunnel/dns/name.js';
import { errorReply, localAnswer } from '../../../../impl/ztunnel/dns/response.js';
import { frame, FrameReader } from '../../../../impl/ztunnel/dns/tcp-framing.js';
import { DnsWireError } from '../../../../impl/ztunnel/dns/wire-error.js';

function query(id: number, name: string, type: number): DnsMessage {
  return {
    header: {
      id,
      response: false,
      opcode: 0,
      authoritative: false,
      truncated: false,
      recursionDesired: true,
      recursionAvailable: false,
      rcode: 0,
    },
    questions: [{ name, type, class: 1 }],
    answers: [],
    authority: [],
    additional: [],
  };
}

test('a query round-trips through encode and decode, names lower-cased', () => {
  const bytes = encodeMessage(query(0xbeef, 'Web.Default.SVC.cluster.local', RR_TYPE.AAAA));
  // header 12 + name (3web7default3svc7cluster5local0 = 31) + 4
  expect(bytes.length).toBe(12 + 31 + 4);
  const m = decodeMessage(bytes);
  expect(m.header.id).toBe(0xbeef);
  expect(m.header.recursionDesired).toBe(true);
  expect(m.questions).toEqual([{ name: 'web.default.svc.cluster.local', type: RR_TYPE.AAAA, class: 1 }]);
});

test('a local answer carries the question, the addresses and NOERROR', () => {
  const q = decodeMessage(encodeMessage(query(7, 'a.b', RR_TYPE.A)));
  const r = decodeMessage(encodeMessage(localAnswer(q, q.questions[0]!, [Uint8Array.of(10, 244, 1, 5)])));
  expect(r.header).toMatchObject({ id: 7, response: true, rcode: RCODE.NOERROR, recursionDesired: true });
  expect(r.answers.map((a) => [a.name, a.type, [...a.data]])).toEqual([['a.b', RR_TYPE.A, [10, 244, 1, 5]]]);
  expect(decodeMessage(encodeMessage(errorReply(9, RCODE.FORMERR))).header).toMatchObject({
    id: 9,
    rcode: RCODE.FORMERR,
    response: true,
  });
});

test('compression pointers are followed backwards', () => {
  // name at 0: 3foo3bar0 ; at 9: 3baz + pointer to 4 ("bar")
  const buf = Uint8Array.of(3, 0x66, 0x6f, 0x6f, 3, 0x62, 0x61, 0x72, 0, 3, 0x62, 0x61, 0x7a, 0xc0, 4);
  expect(readName(buf, 9)).toEqual({ name: 'baz.bar', next: 15 });
});

test('pointer loops and forward pointers are rejected, not followed', () => {
  // A pointer to itself.
  expect(() => readName(Uint8Array.of(0xc0, 0), 0)).toThrow(DnsWireError);
  // Two names pointing at each other: label at 0 then pointer to 4; at 4 a label then pointer to 0.
  const loop = Uint8Array.of(1, 0x61, 0xc0, 4, 1, 0x62, 0xc0, 0);
  expect(() => readName(loop, 0)).toThrow(/does not point before/);
  expect(() => readName(loop, 4)).toThrow(/does not point before/);
  // Forward pointer.
  expect(() => readName(Uint8Array.of(0xc0, 2, 0), 0)).toThrow(DnsWireError);
});

test('malformed inputs throw DnsWireError naming the problem', () => {
  const good = encodeMessage(query(1, 'example.com', RR_TYPE.A));
  const cases: [Uint8Array, RegExp][] = [
    [good.slice(0, 5), /header/],
    [good.slice(0, good.length - 1), /cut short/],
    [good.slice(0, 14), /past the end/],
    [Uint8Array.from([...good, 0]), /after the last record/],
    [Uint8Array.from([...good.slice(0, 12), 0x40, 0, 0, 1, 0, 1]), /reserved/],
  ];
  // ancount says 1 but there is no answer.
  const lying = Uint8Array.from(good);
  lying[7] = 1;
  cases.push([lying, /past the end|cut short/]);
  for (const [bytes, msg] of cases) {
    expect(() => decodeMessage(bytes)).toThrow(DnsWireError);
    expect(() => decodeMessage(bytes)).toThrow(msg);
  }
});

test('overlong labels and names are rejected on both sides', () => {
  expect(() => encodeName(`${'a'.repeat(64)}.com`)).toThrow(/label/);
  expect(() => encodeName(Array.from({ length: 130 }, () => 'ab').join('.'))).toThrow(/255/);
  // 5 labels of 63 bytes on the wire: 320 bytes > 255.
  const parts: number[] = [];
  for (let i = 0; i < 5; i++) parts.push(63, ...new Array<number>(63).fill(0x61));
  parts.push(0);
  expect(() => readName(Uint8Array.from(parts), 0)).toThrow(/longer than 255/);
});

test('TCP framing reassembles messages split and joined across reads', () => {
  const a = encodeMessage(query(1, 'a.example', RR_TYPE.A));
  const b = encodeMessage(query(2, 'b.example', RR_TYPE.A));
  const stream = Uint8Array.from([...frame(a), ...frame(b)]);
  const r = new FrameReader();
  const out: Uint8Array[] = [];
  for (let i = 0; i < stream.length; i += 5) out.push(...r.push(stream.subarray(i, i + 5)));
  expect(out.map((m) => decodeMessage(m).header.id)).toEqual([1, 2]);
  expect(r.pending()).toBe(0);
  expect(r.push(Uint8Array.of(0, 10, 1))).toEqual([]);
  expect(r.pending()).toBe(3);
});
