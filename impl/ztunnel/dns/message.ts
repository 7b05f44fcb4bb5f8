/**
 * A DNS message (RFC 1035 §4.1): header, questions and the three resource-record sections.
 * decodeMessage reads every section (rdata kept as bytes) and rejects anything that does not
 * fit — counts that overrun the buffer, truncated fields, bad names — with a DnsWireError, so a
 * caller answers FORMERR or drops the frame instead of acting on half a message. encodeMessage
 * writes names uncompressed.
 */
import { encodeName, readName } from './name.js';
import { DnsWireError } from './wire-error.js';

interface DnsHeader {
  readonly id: number;
  /** QR: a response. */
  readonly response: boolean;
  readonly opcode: number;
  readonly authoritative: boolean;
  readonly truncated: boolean;
  readonly recursionDesired: boolean;
  readonly recursionAvailable: boolean;
  readonly rcode: number;
}

export interface DnsQuestion {
  /** Lower-case, no trailing dot. */
  readonly name: string;
  readonly type: number;
  readonly class: number;
}

export interface DnsRecord {
  readonly name: string;
  readonly type: number;
  readonly class: number;
  readonly ttl: number;
  readonly data: Uint8Array;
}

export interface DnsMessage {
  readonly header: DnsHeader;
  readonly questions: readonly DnsQuestion[];
  readonly answers: readonly DnsRecord[];
  readonly authority: readonly DnsRecord[];
  readonly additional: readonly DnsRecord[];
}

const HEADER_BYTES = 12;

function u16(buf: Uint8Array, at: number, what: string): number {
  if (at + 2 > buf.length) throw new DnsWireError(`${what} cut short`, at);
  return (buf[at]! << 8) | buf[at + 1]!;
}

function u32(buf: Uint8Array, at: number, what: string): number {
  return ((u16(buf, at, what) << 16) >>> 0) + u16(buf, at + 2, what);
}

/** The header id of a frame, if it has one (to address a FORMERR to a message that does not decode). */
export function peekId(buf: Uint8Array): number | undefined {
  return buf.length >= 2 ? (buf[0]! << 8) | buf[1]! : undefined;
}

export function decodeMessage(buf: Uint8Array): DnsMessage {
  if (buf.length < HEADER_BYTES)
    throw new DnsWireError(`${buf.length} bytes is shorter than the ${HEADER_BYTES}-byte header`, 0);
  const flags = u16(buf, 2, 'flags');
  const header: DnsHeader = {
    id: u16(buf, 0, 'id'),
    response: (flags & 0x8000) !== 0,
    opcode: (flags >> 11) & 0xf,
    authoritative: (flags & 0x0400) !== 0,
    truncated: (flags & 0x0200) !== 0,
    recursionDesired: (flags & 0x0100) !== 0,
    recursionAvailable: (flags & 0x0080) !== 0,
    rcode: flags & 0xf,
  };
  const counts = [
    u16(buf, 4, 'qdcount'),
    u16(buf, 6, 'ancount'),
    u16(buf, 8, 'nscount'),
    u16(buf, 10, 'arcount'),
  ] as const;
  let pos = HEADER_BYTES;
  const questions: DnsQuestion[] = [];
  for (let i = 0; i < counts[0]; i++) {
    const n = readName(buf, pos);
    questions.push({
      name: n.name,
      type: u16(buf, n.next, 'question type'),
      class: u16(buf, n.next + 2, 'question class'),
    });
    pos = n.next + 4;
  }
  const section = (count: number): DnsRecord[] => {
    const out: DnsRecord[] = [];
    for (let i = 0; i < count; i++) {
      const n = readName(buf, pos);
      const type = u16(buf, n.next, 'record type');
      const cls = u16(buf, n.next + 2, 'record class');
      const ttl = u32(buf, n.next + 4, 'record ttl');
      const len = u16(buf, n.next + 8, 'rdlength');
      const start = n.next + 10;
      if (start + len > buf.length)
        throw new DnsWireError(`rdata of ${len} bytes runs past the end of the message`, start);
      out.push({ name: n.name, type, class: cls, ttl, data: buf.slice(start, start + len) });
      pos = start + len;
    }
    return out;
  };
  const answers = section(counts[1]);
  const authority = section(counts[2]);
  const additional = section(counts[3]);
  if (pos !== buf.length) throw new DnsWireError(`${buf.length - pos} bytes after the last record`, pos);
  return { header, questions, answers, authority, additional };
}

export function encodeMessage(m: DnsMessage): Uint8Array {
  const parts: Uint8Array[] = [];
  const h = m.header;
  const flags =
    (h.response ? 0x8000 : 0) |
    ((h.opcode & 0xf) << 11) |
    (h.authoritative ? 0x0400 : 0) |
    (h.truncated ? 0x0200 : 0) |
    (h.recursionDesired ? 0x0100 : 0) |
    (h.recursionAvailable ? 0x0080 : 0) |
    (h.rcode & 0xf);
  const head = new Uint8Array(HEADER_BYTES);
  const put16 = (b: Uint8Array, at: number, v: number): void => {
    b[at] = (v >> 8) & 0xff;
    b[at + 1] = v & 0xff;
  };
  put16(head, 0, h.id);
  put16(head, 2, flags);
  put16(head, 4, m.questions.length);
  put16(head, 6, m.answers.length);
  put16(head, 8, m.authority.length);
  put16(head, 10, m.additional.length);
  parts.push(head);
  for (const q of m.questions) {
    parts.push(encodeName(q.name));
    const t = new Uint8Array(4);
    put16(t, 0, q.type);
    put16(t, 2, q.class);
    parts.push(t);
  }
  for (const r of [...m.answers, ...m.authority, ...m.additional]) {
    if (r.data.length > 0xffff)
      throw new Error(`cannot encode DNS record ${r.name}: rdata of ${r.data.length} bytes exceeds 65535`);
    parts.push(encodeName(r.name));
    const t = new Uint8Array(10);
    put16(t, 0, r.type);
    put16(t, 2, r.class);
    put16(t, 4, (r.ttl >>> 16) & 0xffff);
    put16(t, 6, r.ttl & 0xffff);
    put16(t, 8, r.data.length);
    parts.push(t, r.data);
  }
  const total = parts.reduce((n, p) => n + p.length, 0);
  const out = new Uint8Array(total);
  let at = 0;
  for (const p of parts) {
    out.set(p, at);
    at += p.length;
  }
  return out;
}
