/**
 * ZDS codec: our message types <-> protobuf bytes of istio.workload.zds (one message per frame).
 *
 * Encoding uses protobufjs with proto3 conventions (default values are omitted, so the bytes
 * equal what Go's and prost's encoders produce). Decoding is strict, because a frame comes from
 * another process and a wrong guess here would enroll or drop the wrong pod:
 * - frames over ZDS_MAX_FRAME_BYTES are rejected (upstream's 1024-byte buffer);
 * - every known field must have its declared wire type (protobufjs alone would misread it);
 * - truncated varints or lengths, field number 0 and groups are rejected;
 * - strings must be valid UTF-8 (as prost requires);
 * - a request or response must carry exactly one known payload case; an unknown case (a newer
 *   field number) or two cases in one frame are errors, not "last one wins";
 * - an Add must carry workload_info (upstream ztunnel: protocol error otherwise); uids must be
 *   valid pod UIDs.
 * Unknown fields inside a payload are skipped, as proto3 requires.
 * Every failure is a ZdsCodecError naming the message, the field and what to check.
 */
import protobuf from 'protobufjs';
import { podUid, type PodUid } from '../ids.js';
import {
  ZDS_MAX_FRAME_BYTES,
  ZDS_VERSION,
  type WorkloadInfo,
  type WorkloadRequest,
  type WorkloadResponse,
  type ZdsHello,
} from './messages.js';
import { ZDS_PACKAGE, ZDS_SCHEMA } from './schema.js';

export type ZdsCodecErrorReason =
  | 'oversized'
  | 'empty'
  | 'truncated'
  | 'wire-type'
  | 'invalid-tag'
  | 'invalid-utf8'
  | 'no-payload'
  | 'ambiguous-payload'
  | 'missing-field'
  | 'invalid-field';

export class ZdsCodecError extends Error {
  constructor(
    readonly reason: ZdsCodecErrorReason,
    message: string,
  ) {
    super(message);
    this.name = 'ZdsCodecError';
  }
}

const root = protobuf.Root.fromJSON(ZDS_SCHEMA);
function lookup(name: string): protobuf.Type {
  return root.lookupType(`${ZDS_PACKAGE}.${name}`);
}
const T = {
  hello: lookup('ZdsHello'),
  request: lookup('WorkloadRequest'),
  response: lookup('WorkloadResponse'),
} as const;

const utf8 = new TextDecoder('utf-8', { fatal: true });

// ---- encoding ----

function finish(type: protobuf.Type, obj: Record<string, unknown>, what: string): Uint8Array {
  const bytes = type.encode(type.fromObject(obj)).finish();
  if (bytes.length > ZDS_MAX_FRAME_BYTES) {
    throw new ZdsCodecError(
      'oversized',
      `encoding ${what}: ${bytes.length} bytes exceed the ZDS frame limit of ${ZDS_MAX_FRAME_BYTES}; shorten the names in it`,
    );
  }
  return bytes;
}

/** Only non-default strings, so the bytes match proto3 encoders that omit defaults. */
function strings(entries: Record<string, string>): Record<string, string> {
  const out: Record<string, string> = {};
  for (const [k, v] of Object.entries(entries)) if (v !== '') out[k] = v;
  return out;
}

export function encodeHello(hello: ZdsHello): Uint8Array {
  return finish(T.hello, hello.version === 0 ? {} : { version: hello.version }, 'ZdsHello');
}

export function encodeRequest(req: WorkloadRequest): Uint8Array {
  switch (req.kind) {
    case 'add': {
      const info = strings({
        name: req.info.name,
        namespace: req.info.namespace,
        service_account: req.info.serviceAccount,
      });
      return finish(
        T.request,
        { add: { ...strings({ uid: req.uid }), workload_info: info } },
        `AddWorkload ${req.uid}`,
      );
    }
    case 'keep':
      return finish(T.request, { keep: strings({ uid: req.uid }) }, `KeepWorkload ${req.uid}`);
    case 'del':
      return finish(T.request, { del: strings({ uid: req.uid }) }, `DelWorkload ${req.uid}`);
    case 'snapshot-sent':
      return finish(T.request, { snapshot_sent: {} }, 'SnapshotSent');
  }
}

export function encodeResponse(res: WorkloadResponse): Uint8Array {
  return finish(T.response, { ack: strings({ error: res.error }) }, 'WorkloadResponse');
}

// ---- strict structural check (before protobufjs decodes) ----

const WIRE = { varint: 0, fixed64: 1, len: 2, startGroup: 3, endGroup: 4, fixed32: 5 } as const;

function expectedWireType(field: protobuf.Field): number {
  field.resolve();
  if (field.resolvedType instanceof protobuf.Type) return WIRE.len;
  if (field.resolvedType instanceof protobuf.Enum) return WIRE.varint;
  if (field.type === 'string' || field.type === 'bytes') return WIRE.len;
  // The ZDS schema has no other scalar types; refuse to guess if one is ever added.
  throw new Error(`ZDS codec: no wire type known for field ${field.name} of type ${field.type}`);
}

interface Scan {
  /** Ids of known fields seen, in order (repeats included). */
  readonly known: number[];
  readonly unknown: number[];
}

function scan(type: protobuf.Type, bytes: Uint8Array, where: string): Scan {
  const r = protobuf.Reader.create(bytes);
  const known: number[] = [];
  const unknown: number[] = [];
  try {
    while (r.pos < r.len) {
      const tag = r.uint32();
      const id = tag >>> 3;
      const wt = tag & 7;
      if (id === 0)
        throw new ZdsCodecError(
          'invalid-tag',
          `${where}: field number 0 at byte ${r.pos - 1} (not a valid protobuf tag)`,
        );
      if (wt === WIRE.startGroup || wt === WIRE.endGroup || wt === 6 || wt === 7) {
        throw new ZdsCodecError(
          'wire-type',
          `${where}: field ${id} has wire type ${wt} (groups and reserved wire types are not used by ZDS)`,
        );
      }
      const field = type.fieldsById[id];
      if (!field) {
        unknown.push(id);
        r.skipType(wt);
        continue;
      }
      const want = expectedWireType(field);
      if (wt !== want) {
        throw new ZdsCodecError(
          'wire-type',
          `${where}: field ${id} (${field.name}) has wire type ${wt}, expected ${want}; the peer speaks a different schema`,
        );
      }
      known.push(id);
      if (want === WIRE.varint) {
        r.uint64();
        continue;
      }
      const len = r.uint32();
      if (r.pos + len > r.len) {
        throw new ZdsCodecError(
          'truncated',
          `${where}: field ${id} (${field.name}) declares ${len} bytes but only ${r.len - r.pos} remain`,
        );
      }
      const sub = bytes.subarray(r.pos, r.pos + len);
      r.pos += len;
      if (field.resolvedType instanceof protobuf.Type) {
        scan(field.resolvedType, sub, `${where}.${field.name}`);
      } else if (field.type === 'string') {
        try {
          utf8.decode(sub);
        } catch {
          throw new ZdsCodecError('invalid-utf8', `${where}: field ${id} (${field.name}) is not valid UTF-8`);
        }
      }
    }
  } catch (e) {
    if (e instanceof ZdsCodecError) throw e;
    // protobufjs's Reader throws RangeError("index out of range") when a varint or skip runs off the end.
    throw new ZdsCodecError('truncated', `${where}: frame ends in the middle of a field (${(e as Error).message})`);
  }
  return { known, unknown };
}

function checkFrame(bytes: Uint8Array, what: string): void {
  if (bytes.length > ZDS_MAX_FRAME_BYTES) {
    throw new ZdsCodecError(
      'oversized',
      `${what}: frame of ${bytes.length} bytes exceeds the ZDS limit of ${ZDS_MAX_FRAME_BYTES}`,
    );
  }
}

/** A oneof message: exactly one occurrence of one known case. */
function scanOneof(type: protobuf.Type, bytes: Uint8Array, what: string): void {
  checkFrame(bytes, what);
  const s = scan(type, bytes, what);
  if (s.known.length === 0) {
    const extra =
      s.unknown.length > 0
        ? ` (it has unknown field(s) ${[...new Set(s.unknown)].join(', ')}: a payload case this version does not know)`
        : '';
    throw new ZdsCodecError(
      bytes.length === 0 ? 'empty' : 'no-payload',
      `${what}: no payload${extra}; expected one of ${type.oneofsArray[0]?.oneof.join(', ')}`,
    );
  }
  if (s.known.length > 1) {
    throw new ZdsCodecError(
      'ambiguous-payload',
      `${what}: ${s.known.length} payload fields (${s.known.join(', ')}) in one frame; exactly one is allowed`,
    );
  }
}

// ---- decoding ----

function uidOf(raw: unknown, where: string): PodUid {
  const s = typeof raw === 'string' ? raw : '';
  if (s === '') throw new ZdsCodecError('missing-field', `${where}: uid is empty`);
  try {
    return podUid(s);
  } catch (e) {
    throw new ZdsCodecError('invalid-field', `${where}: ${(e as Error).message}`);
  }
}

function str(raw: unknown): string {
  return typeof raw === 'string' ? raw : '';
}

type Decoded = Record<string, unknown>;

export function decodeHello(bytes: Uint8Array): ZdsHello {
  checkFrame(bytes, 'ZdsHello');
  scan(T.hello, bytes, 'ZdsHello');
  const m = T.hello.decode(bytes) as unknown as Decoded;
  const version = typeof m['version'] === 'number' ? m['version'] : ZDS_VERSION.NOT_USED;
  return { version };
}

export function decodeRequest(bytes: Uint8Array): WorkloadRequest {
  scanOneof(T.request, bytes, 'WorkloadRequest');
  const m = T.request.decode(bytes) as unknown as Decoded;
  if (m['add'] !== undefined && m['add'] !== null) {
    const add = m['add'] as Decoded;
    const uid = uidOf(add['uid'], 'AddWorkload');
    const wi = add['workload_info'] as Decoded | undefined | null;
    if (wi === undefined || wi === null) {
      throw new ZdsCodecError(
        'missing-field',
        `AddWorkload ${uid}: workload_info is missing (required by the protocol)`,
      );
    }
    const info: WorkloadInfo = {
      name: str(wi['name']),
      namespace: str(wi['namespace']),
      serviceAccount: str(wi['service_account']),
    };
    return { kind: 'add', uid, info };
  }
  if (m['keep'] !== undefined && m['keep'] !== null) {
    return { kind: 'keep', uid: uidOf((m['keep'] as Decoded)['uid'], 'KeepWorkload') };
  }
  if (m['del'] !== undefined && m['del'] !== null) {
    return { kind: 'del', uid: uidOf((m['del'] as Decoded)['uid'], 'DelWorkload') };
  }
  return { kind: 'snapshot-sent' };
}

export function decodeResponse(bytes: Uint8Array): WorkloadResponse {
  scanOneof(T.response, bytes, 'WorkloadResponse');
  const m = T.response.decode(bytes) as unknown as Decoded;
  const ack = m['ack'] as Decoded;
  return { kind: 'ack', error: str(ack['error']) };
}
