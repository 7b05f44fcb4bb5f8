/**
 * DNS over TCP (RFC 1035 §4.2.2, RFC 7766): every message is preceded by a 2-byte big-endian
 * length. FrameReader collects a byte stream into whole messages; frame() prefixes one.
 */
import { MAX_MESSAGE_BYTES } from './constants.js';

export function frame(message: Uint8Array): Uint8Array {
  if (message.length > MAX_MESSAGE_BYTES)
    throw new Error(
      `cannot frame a DNS message of ${message.length} bytes: the TCP length prefix holds at most ${MAX_MESSAGE_BYTES}`,
    );
  const out = new Uint8Array(message.length + 2);
  out[0] = message.length >> 8;
  out[1] = message.length & 0xff;
  out.set(message, 2);
  return out;
}

export class FrameReader {
  private buf = new Uint8Array(0);

  /** Add bytes from the stream; returns the messages they complete, in order. */
  push(bytes: Uint8Array): Uint8Array[] {
    const joined = new Uint8Array(this.buf.length + bytes.length);
    joined.set(this.buf);
    joined.set(bytes, this.buf.length);
    const out: Uint8Array[] = [];
    let at = 0;
    while (joined.length - at >= 2) {
      const len = (joined[at]! << 8) | joined[at + 1]!;
      if (joined.length - at - 2 < len) break;
      out.push(joined.slice(at + 2, at + 2 + len));
      at += 2 + len;
    }
    this.buf = joined.slice(at);
    return out;
  }

  /** Bytes of an incomplete frame still held (non-zero at end of stream = a cut-off message). */
  pending(): number {
    return this.buf.length;
  }
}
