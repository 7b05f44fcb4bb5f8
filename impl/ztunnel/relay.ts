/**
 * Copy bytes both ways between two streams until both directions have ended. An end of stream
 * is passed on as a half-close; a failure on either side resets the other (as ztunnel's
 * copy_bidirectional does), so a reset is never turned into a clean end.
 *
 * Awaiting each write is backpressure, not a round trip: the port's write resolves as soon as
 * the stream can take more (the Linux adapters buffer up to 256 KiB and batch one event-loop
 * turn's writes into one writev), so reading the next chunk overlaps with sending this one.
 */
import type { ByteStream } from '../host/hbone.js';
import type { Relay, RelayResult, Sockets } from '../host/sockets.js';

export type { Relay, RelayResult };

/** Outside JavaScript when the adapter can take the two (Sockets.relayNative), else relay(). */
export function relayConnections(sockets: Sockets, a: ByteStream, b: ByteStream): Relay {
  return sockets.relayNative?.(a, b) ?? relay(a, b);
}

export function relay(a: ByteStream, b: ByteStream): Relay {
  let aborted = false;
  let failed = false;
  const pump = async (from: ByteStream, to: ByteStream): Promise<number> => {
    let n = 0;
    for (;;) {
      const r = await from.read();
      if (aborted || failed) return n;
      if (r.done) {
        if (r.failure) {
          failed = true;
          to.reset();
        } else {
          await to.end();
        }
        return n;
      }
      const w = await to.write(r.bytes);
      if (!w.ok) {
        failed = true;
        from.reset();
        return n;
      }
      n += r.bytes.byteLength;
    }
  };
  const done = Promise.all([pump(a, b), pump(b, a)]).then(([aToB, bToA]): RelayResult => {
    if (!aborted && !failed) {
      a.close();
      b.close();
    }
    return { aToB, bToA, ended: aborted ? 'aborted' : failed ? 'reset' : 'eof' };
  });
  return {
    done,
    abort: () => {
      if (aborted) return;
      aborted = true;
      a.reset();
      b.reset();
    },
  };
}
