/**
 * Bridges between the ports' pull-based byte streams and Node streams, so node:tls and
 * node:http2 run over any TcpConnection (Linux or simulated) and their tunnelled streams can be
 * handed back to the proxy as ByteStreams.
 */
import { Duplex } from 'node:stream';
import type { ByteStream } from '../host/hbone.js';
import type { ReadResult, SocketOutcome } from '../host/sockets.js';

/** A Node Duplex over a ByteStream (TLS runs on top of it). */
export class ByteStreamDuplex extends Duplex {
  private reading = false;

  constructor(private readonly conn: ByteStream) {
    super({ allowHalfOpen: true });
  }

  override _read(): void {
    if (this.reading) return;
    this.reading = true;
    void this.conn.read().then((r) => {
      this.reading = false;
      if (r.done) {
        if (r.failure) this.destroy(Object.assign(new Error(r.failure.message), { code: r.failure.errno }));
        else this.push(null);
        return;
      }
      if (this.push(Buffer.from(r.bytes.buffer, r.bytes.byteOffset, r.bytes.byteLength))) this._read();
    });
  }

  override _write(chunk: Buffer, _enc: BufferEncoding, cb: (e?: Error | null) => void): void {
    void this.conn.write(chunk).then((r) => cb(r.ok ? null : Object.assign(new Error(r.message), { code: r.errno })));
  }

  override _final(cb: (e?: Error | null) => void): void {
    void this.conn.end().then(() => cb());
  }

  override _destroy(err: Error | null, cb: (e?: Error | null) => void): void {
    if (err) this.conn.reset();
    else this.conn.close();
    cb(err);
  }
}

/**
 * Bytes a writer may leave queued in a stream before write() waits for 'drain'. Node's own
 * high-water mark (16 KiB) would make a relay wait for every 64 KiB read to pass through
 * HTTP/2 and TLS before reading the next; upstream's h2 send buffer is 256 KiB.
 * Only a write() that returned false makes Node emit 'drain', so a writer waits only when
 * `writableNeedDrain` says one will come.
 */
export const WRITE_BUFFER = 256 << 10;

/** A ByteStream over a Node Duplex (an HTTP/2 CONNECT stream). */
export function duplexByteStream(d: Duplex, onReset?: () => void): ByteStream {
  const queue: ReadResult[] = [];
  let waiter: ((r: ReadResult) => void) | undefined;
  let finished = false;
  let corked = false;
  const push = (r: ReadResult): void => {
    if (finished) return;
    if (r.done) finished = true;
    if (waiter) {
      const w = waiter;
      waiter = undefined;
      w(r);
    } else {
      queue.push(r);
      if (!r.done && queue.length > 16) d.pause(); // backpressure: stop reading until drained
    }
  };
  d.on('data', (b: Buffer) => push({ done: false, bytes: new Uint8Array(b.buffer, b.byteOffset, b.byteLength) }));
  // node:http2 ends a stream the peer reset (RST_STREAM) with 'end' too, and only then says
  // 'aborted' (rstCode is not set yet at 'end'): a clean end is believed one turn later, so a
  // reset is never passed on as a half-close.
  d.on('end', () => setImmediate(() => push({ done: true })));
  d.on('aborted', () =>
    push({
      done: true,
      failure: {
        ok: false,
        kind: 'reset',
        errno: 'ECONNRESET',
        call: 'recv',
        message: 'HBONE stream reset by the peer',
      },
    }),
  );
  d.on('error', (e: NodeJS.ErrnoException) =>
    push({
      done: true,
      failure: { ok: false, kind: 'reset', errno: e.code ?? 'ECONNRESET', call: 'recv', message: e.message },
    }),
  );
  d.on('close', () => push({ done: true }));
  return {
    read: () => {
      const r = queue.shift();
      if (r) {
        if (r.done) queue.unshift(r);
        if (queue.length <= 4) d.resume();
        return Promise.resolve(r);
      }
      d.resume();
      return new Promise((resolve) => {
        waiter = resolve;
      });
    },
    // Resolves at once while less than WRITE_BUFFER bytes wait in the stream, else on 'drain'
    // (backpressure without a round trip per chunk); a later failure surfaces as a read failure.
    write: (bytes) => {
      const closed: SocketOutcome<void> = {
        ok: false,
        kind: 'reset',
        errno: 'EPIPE',
        call: 'send',
        message: 'stream already closed',
      };
      if (d.destroyed || d.writableEnded) return Promise.resolve(closed);
      // As the Linux socket's write: one event-loop turn's writes leave as one batch (HTTP/2
      // DATA frames and TLS records sized by what was written, not by each read).
      if (!corked) {
        corked = true;
        d.cork();
        setImmediate(() => {
          corked = false;
          d.uncork();
        });
      }
      d.write(bytes);
      if (d.writableLength < WRITE_BUFFER || !d.writableNeedDrain)
        return Promise.resolve({ ok: true, value: undefined });
      return new Promise<SocketOutcome<void>>((resolve) => {
        const done = (): void => {
          d.off('drain', done);
          d.off('close', done);
          resolve(d.destroyed ? closed : { ok: true, value: undefined });
        };
        d.on('drain', done);
        d.on('close', done);
      });
    },
    end: () =>
      new Promise<void>((resolve) => {
        if (d.writableEnded || d.destroyed) return resolve();
        d.end(() => resolve());
      }),
    close: () => {
      if (!d.writableEnded) d.end();
    },
    reset: () => {
      onReset?.();
      d.destroy();
    },
  };
}
