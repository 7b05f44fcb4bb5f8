/**
 * Domain names on the wire (RFC 1035 §3.1, §4.1.4): a sequence of length-prefixed labels ending
 * in a zero byte, where a label byte 0b11xxxxxx starts a 14-bit compression pointer to an
 * earlier name. Reading is defensive: a pointer must point strictly before where the current
 * run of labels started (so every jump goes further back and a chain must end), the number of jumps is bounded, labels
 * are at most 63 bytes and the name at most 255 — a crafted loop or overlong name is a
 * DnsWireError, never a hang. Names are written without compression.
 */
import { DnsWireError } from './wire-error.js';

const MAX_LABEL_BYTES = 63;
const MAX_NAME_BYTES = 255;
/** More jumps than a legal name could need (a name has at most 127 labels). */
const MAX_POINTER_JUMPS = 127;

interface DecodedName {
  /** Lower-case, dot-separated, no trailing dot; '' for the root. */
  readonly name: string;
  /** Offset right after the name in the original position (after the first pointer, if any). */
  readonly next: number;
}

export function readName(buf: Uint8Array, offset: number): DecodedName {
  const labels: string[] = [];
  let pos = offset;
  let next: number | undefined;
  let wireLength = 1; // the final zero byte
  let jumps = 0;
  /** Start of the run of labels being read: the next pointer must land before it. */
  let runStart = offset;
  for (;;) {
    if (pos >= buf.length) throw new DnsWireError('name runs past the end of the message', pos);
    const len = buf[pos]!;
    const tag = len & 0xc0;
    if (tag === 0xc0) {
      if (pos + 1 >= buf.length) throw new DnsWireError('compression pointer cut short', pos);
      const target = ((len & 0x3f) << 8) | buf[pos + 1]!;
      if (target >= runStart)
        throw new DnsWireError(
          `compression pointer to ${target} does not point before ${runStart} (a loop or forward reference)`,
          pos,
        );
      if (++jumps > MAX_POINTER_JUMPS) throw new DnsWireError('too many compression pointers', pos);
      if (next === undefined) next = pos + 2;
      pos = target;
      runStart = target;
      continue;
    }
    if (tag !== 0) throw new DnsWireError(`label type 0x${tag.toString(16)} is reserved`, pos);
    if (len === 0) {
      return { name: labels.join('.'), next: next ?? pos + 1 };
    }
    if (pos + 1 + len > buf.length) throw new DnsWireError('label runs past the end of the message', pos);
    wireLength += len + 1;
    if (wireLength > MAX_NAME_BYTES) throw new DnsWireError(`name longer than ${MAX_NAME_BYTES} bytes`, pos);
    labels.push(asciiLower(buf.subarray(pos + 1, pos + 1 + len)));
    pos += 1 + len;
  }
}

/** Lower-case the ASCII letters only (DNS compares names case-insensitively, RFC 4343); other bytes as latin1. */
function asciiLower(bytes: Uint8Array): string {
  let s = '';
  for (const b of bytes) s += String.fromCharCode(b >= 0x41 && b <= 0x5a ? b + 0x20 : b);
  return s;
}

/** The wire form of `name` (trailing dot optional). Throws on an empty or overlong label. */
export function encodeName(name: string): Uint8Array {
  const trimmed = name.endsWith('.') ? name.slice(0, -1) : name;
  const labels = trimmed === '' ? [] : trimmed.split('.');
  const out: number[] = [];
  for (const l of labels) {
    if (l.length === 0 || l.length > MAX_LABEL_BYTES)
      throw new Error(`cannot encode DNS name "${name}": label "${l}" must be 1..${MAX_LABEL_BYTES} bytes`);
    out.push(l.length);
    for (let i = 0; i < l.length; i++) {
      const c = l.charCodeAt(i);
      if (c > 0xff) throw new Error(`cannot encode DNS name "${name}": non-latin1 character (use the punycode form)`);
      out.push(c);
    }
  }
  out.push(0);
  if (out.length > MAX_NAME_BYTES)
    throw new Error(`cannot encode DNS name "${name}": longer than ${MAX_NAME_BYTES} bytes on the wire`);
  return Uint8Array.from(out);
}
