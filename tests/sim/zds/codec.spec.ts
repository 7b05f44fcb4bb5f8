/**
 * The ZDS wire format: golden bytes derived by hand from the protobuf encoding rules and the
 * upstream field numbers, the .proto file agreeing with the codec's descriptor, and malformed
 * frames failing with a ZdsCodecError (never another exception, never a wrong message).
 */
import * as fs from 'node:fs';
import * as path from 'node:path';
import { test, expect } from '@playwright/test';
import fc from 'fast-check';
import protobuf from 'protobufjs';
import { podUid } from '../../../impl/api/ids.js';
import {
  decodeHello,
  decodeRequest,
  decodeResponse,
  encodeHello,
  encodeRequest,
  encodeResponse,
  ZdsCodecError,
  type ZdsCodecErrorReason,
} from '../../../impl/api/zds/codec.js';
import type { WorkloadRequest } from '../../../impl/api/zds/messages.js';
import { ZDS_SCHEMA } from '../../../impl/api/zds/schema.js';

const hex = (s: string): Uint8Array =>
  Uint8Array.from(
    s
      .trim()
      .split(/\s+/)
      .map((b) => parseInt(b, 16)),
  );
const toHex = (b: Uint8Array): string => Array.from(b, (x) => x.toString(16).padStart(2, '0')).join(' ');
const str = (s: string): string => toHex(new TextEncoder().encode(s));

// Each entry: message, and its bytes written out field by field (tag = field<<3 | wire type).
const REQUESTS: Array<{ name: string; msg: WorkloadRequest; bytes: string }> = [
  {
    name: 'AddWorkload',
    msg: { kind: 'add', uid: podUid('u1'), info: { name: 'a', namespace: 'ns', serviceAccount: 'sa' } },
    // WorkloadRequest.add (1, len) = 0a 11 { AddWorkload.uid (1, len) 0a 02 "u1",
    //   .workload_info (2, len) 12 0b { name (1) 0a 01 "a", namespace (2) 12 02 "ns", service_account (3) 1a 02 "sa" } }
    bytes: `0a 11 0a 02 ${str('u1')} 12 0b 0a 01 ${str('a')} 12 02 ${str('ns')} 1a 02 ${str('sa')}`,
  },
  {
    name: 'AddWorkload with empty info fields (proto3 omits them)',
    msg: { kind: 'add', uid: podUid('u1'), info: { name: '', namespace: '', serviceAccount: '' } },
    bytes: `0a 06 0a 02 ${str('u1')} 12 00`,
  },
  // WorkloadRequest.keep is field 5: tag (5<<3)|2 = 0x2a; KeepWorkload.uid is field 1.
  { name: 'KeepWorkload', msg: { kind: 'keep', uid: podUid('p1') }, bytes: `2a 04 0a 02 ${str('p1')}` },
  // WorkloadRequest.del is field 2; DelWorkload.uid is field 2 (field 1 unused upstream).
  { name: 'DelWorkload', msg: { kind: 'del', uid: podUid('p1') }, bytes: `12 04 12 02 ${str('p1')}` },
  // WorkloadRequest.snapshot_sent is field 3 with an empty message.
  { name: 'SnapshotSent', msg: { kind: 'snapshot-sent' }, bytes: '1a 00' },
];

test.describe('golden bytes', () => {
  for (const c of REQUESTS) {
    test(`WorkloadRequest ${c.name}`, () => {
      expect(toHex(encodeRequest(c.msg))).toBe(toHex(hex(c.bytes)));
      expect(decodeRequest(hex(c.bytes))).toEqual(c.msg);
    });
  }

  test('ZdsHello V1 is 08 01; NOT_USED is the empty message', () => {
    expect(toHex(encodeHello({ version: 1 }))).toBe('08 01');
    expect(decodeHello(hex('08 01'))).toEqual({ version: 1 });
    expect(encodeHello({ version: 0 })).toHaveLength(0);
    expect(decodeHello(new Uint8Array())).toEqual({ version: 0 });
    // An unknown future version is kept as a number (proto3 open enum).
    expect(decodeHello(hex('08 07'))).toEqual({ version: 7 });
  });

  test('WorkloadResponse: ACK is ack{} = 0a 00, NACK carries the error', () => {
    expect(toHex(encodeResponse({ kind: 'ack', error: '' }))).toBe('0a 00');
    expect(decodeResponse(hex('0a 00'))).toEqual({ kind: 'ack', error: '' });
    const nack = `0a 06 0a 04 ${str('boom')}`;
    expect(toHex(encodeResponse({ kind: 'ack', error: 'boom' }))).toBe(nack);
    expect(decodeResponse(hex(nack))).toEqual({ kind: 'ack', error: 'boom' });
  });

  test('unknown fields inside a payload are skipped (proto3), so a newer peer still decodes', () => {
    // DelWorkload with an extra field 9 (varint 5) before its uid.
    expect(decodeRequest(hex(`12 06 48 05 12 02 ${str('p1')}`))).toEqual({ kind: 'del', uid: 'p1' });
    // The reserved trust_domain (WorkloadInfo field 4) is ignored, not misread as another field.
    const add = `0a 0e 0a 02 ${str('u1')} 12 08 0a 01 ${str('a')} 22 03 ${str('td1')}`;
    expect(decodeRequest(hex(add))).toEqual({
      kind: 'add',
      uid: 'u1',
      info: { name: 'a', namespace: '', serviceAccount: '' },
    });
  });
});

test('zds.proto and the codec descriptor describe the same schema', () => {
  const text = fs.readFileSync(path.resolve(import.meta.dirname, '../../../impl/api/zds/zds.proto'), 'utf8');
  const parsed = protobuf.parse(text, { keepCase: true });
  expect(parsed.package).toBe('istio.workload.zds');
  const fromProto = parsed.root.toJSON({ keepComments: false });
  const fromCodec = protobuf.Root.fromJSON(ZDS_SCHEMA).toJSON({ keepComments: false });
  expect(fromCodec).toEqual(fromProto);
});

function rejects(fn: () => unknown, reason: ZdsCodecErrorReason, text: RegExp): void {
  let thrown: unknown;
  try {
    fn();
  } catch (e) {
    thrown = e;
  }
  expect(thrown, 'expected a ZdsCodecError').toBeInstanceOf(ZdsCodecError);
  expect((thrown as ZdsCodecError).reason).toBe(reason);
  expect((thrown as ZdsCodecError).message).toMatch(text);
}

test.describe('malformed frames', () => {
  const add = hex(REQUESTS[0]!.bytes);

  test('truncated at every length is rejected as truncated (or missing payload)', () => {
    for (let n = 1; n < add.length; n++) {
      rejects(() => decodeRequest(add.subarray(0, n)), 'truncated', /WorkloadRequest/);
    }
    rejects(() => decodeHello(hex('08')), 'truncated', /ends in the middle/);
    rejects(() => decodeResponse(hex('0a 05 0a 03 61')), 'truncated', /declares 5 bytes/);
  });

  test('wrong wire type: a hello read as a response, a varint where a message belongs', () => {
    rejects(() => decodeResponse(hex('08 01')), 'wire-type', /field 1 \(ack\) has wire type 0, expected 2/);
    rejects(() => decodeRequest(hex('18 01')), 'wire-type', /snapshot_sent/);
    rejects(() => decodeHello(hex('0a 00')), 'wire-type', /version/);
    // inside a nested message: DelWorkload.uid as a varint
    rejects(() => decodeRequest(hex('12 02 10 01')), 'wire-type', /WorkloadRequest\.del: field 2 \(uid\)/);
    rejects(() => decodeRequest(hex('0b 0c')), 'wire-type', /groups/);
  });

  test('unknown oneof case, empty frame, two cases in one frame', () => {
    rejects(() => decodeRequest(hex('32 00')), 'no-payload', /unknown field\(s\) 6/);
    rejects(() => decodeRequest(new Uint8Array()), 'empty', /no payload/);
    rejects(() => decodeResponse(hex('12 00')), 'no-payload', /expected one of ack/);
    rejects(() => decodeRequest(hex(`1a 00 12 04 12 02 ${str('p1')}`)), 'ambiguous-payload', /exactly one/);
    rejects(() => decodeResponse(hex('0a 00 0a 00')), 'ambiguous-payload', /2 payload fields/);
  });

  test('oversized frames and messages', () => {
    rejects(() => decodeRequest(new Uint8Array(1025)), 'oversized', /1025 bytes exceeds the ZDS limit of 1024/);
    rejects(() => encodeResponse({ kind: 'ack', error: 'x'.repeat(2000) }), 'oversized', /shorten/);
  });

  test('bad field values: invalid UTF-8, invalid or empty uid, Add without workload_info, field 0', () => {
    rejects(() => decodeRequest(hex('12 04 12 02 ff fe')), 'invalid-utf8', /uid\) is not valid UTF-8/);
    rejects(() => decodeRequest(hex(`12 05 12 03 ${str('a b')}`)), 'invalid-field', /invalid pod UID/);
    rejects(() => decodeRequest(hex('12 00')), 'missing-field', /uid is empty/);
    rejects(() => decodeRequest(hex(`0a 04 0a 02 ${str('u1')}`)), 'missing-field', /workload_info is missing/);
    rejects(() => decodeRequest(hex('02 00')), 'invalid-tag', /field number 0/);
  });

  test('random bytes never crash the decoders: a message or a ZdsCodecError', () => {
    fc.assert(
      fc.property(fc.uint8Array({ maxLength: 64 }), (bytes) => {
        for (const decode of [decodeRequest, decodeResponse, decodeHello] as Array<(b: Uint8Array) => unknown>) {
          try {
            decode(bytes);
          } catch (e) {
            if (!(e instanceof ZdsCodecError)) throw e;
          }
        }
      }),
      { seed: 7, numRuns: 3000 },
    );
  });

  test('every encoded request round-trips', () => {
    const token = fc.stringMatching(/^[A-Za-z0-9][A-Za-z0-9._-]{0,40}$/);
    const req: fc.Arbitrary<WorkloadRequest> = fc.oneof(
      fc.record({
        kind: fc.constant('add' as const),
        uid: token.map(podUid),
        info: fc.record({ name: fc.string(), namespace: fc.string(), serviceAccount: fc.string() }),
      }),
      fc.record({ kind: fc.constant('keep' as const), uid: token.map(podUid) }),
      fc.record({ kind: fc.constant('del' as const), uid: token.map(podUid) }),
      fc.constant({ kind: 'snapshot-sent' as const }),
    );
    fc.assert(
      fc.property(req, (r) => {
        expect(decodeRequest(encodeRequest(r))).toEqual(r);
      }),
      { seed: 11, numRuns: 500 },
    );
  });
});
