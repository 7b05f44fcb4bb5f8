/**
 * Forward one query to an upstream resolver from inside the pod's netns, on a socket carrying
 * the proxy mark — so the pod's DNS capture rule (which skips marked packets) does not send it
 * back to the proxy. UDP queries go over UDP (the reply must come from the resolver's address
 * and carry the query's id; anything else is ignored, as a stub resolver does), TCP queries
 * over TCP with length framing. A timeout, a send failure or a refused connection is a
 * failure with a reason; the caller answers SERVFAIL.
 */
import type { NetnsId } from '../../api/ids.js';
import type { MarkValue } from '../../api/marks.js';
import type { Clock } from '../../host/clock.js';
import type { SocketAddress, Sockets } from '../../host/sockets.js';
import { fmt } from '../pod-context.js';
import { peekId } from './message.js';
import { frame, FrameReader } from './tcp-framing.js';

interface ForwardContext {
  readonly sockets: Sockets;
  readonly clock: Clock;
  readonly netns: NetnsId;
  readonly mark: MarkValue;
  readonly timeoutMs: number;
}

export type ForwardResult =
  { readonly ok: true; readonly reply: Uint8Array } | { readonly ok: false; readonly reason: string };

export async function forwardUdp(
  ctx: ForwardContext,
  upstream: SocketAddress,
  query: Uint8Array,
): Promise<ForwardResult> {
  const bindUdp = ctx.sockets.bindUdp?.bind(ctx.sockets);
  if (!bindUdp) return { ok: false, reason: 'the Sockets adapter has no UDP' };
  const id = peekId(query);
  let settle: (r: ForwardResult) => void = () => undefined;
  const done = new Promise<ForwardResult>((resolve) => (settle = resolve));
  const sock = await bindUdp(
    {
      netns: ctx.netns,
      family: upstream.family,
      address: upstream.family === 4 ? '0.0.0.0' : '::',
      port: 0,
      mark: ctx.mark,
    },
    (d) => {
      if (d.from.address !== upstream.address || d.from.port !== upstream.port || peekId(d.bytes) !== id) return;
      settle({ ok: true, reply: d.bytes });
    },
  );
  if (!sock.ok)
    return {
      ok: false,
      reason: `cannot open a UDP socket in ${ctx.netns}: ${sock.kind} ${sock.errno} (${sock.message})`,
    };
  const timer = ctx.clock.setTimer(ctx.timeoutMs, () =>
    settle({ ok: false, reason: `no reply from ${fmt(upstream)} within ${ctx.timeoutMs} ms` }),
  );
  try {
    const sent = await sock.value.send(upstream, query);
    if (!sent.ok)
      return { ok: false, reason: `send to ${fmt(upstream)} failed: ${sent.kind} ${sent.errno} (${sent.message})` };
    return await done;
  } finally {
    timer.cancel();
    await sock.value.close();
  }
}

export async function forwardTcp(
  ctx: ForwardContext,
  upstream: SocketAddress,
  query: Uint8Array,
): Promise<ForwardResult> {
  const c = await ctx.sockets.connectTcp({
    netns: ctx.netns,
    family: upstream.family,
    dst: upstream,
    mark: ctx.mark,
    timeoutMs: ctx.timeoutMs,
  });
  if (!c.ok) return { ok: false, reason: `connect to ${fmt(upstream)} failed: ${c.kind} ${c.errno} (${c.message})` };
  const conn = c.value;
  let timedOut = false;
  const timer = ctx.clock.setTimer(ctx.timeoutMs, () => {
    timedOut = true;
    conn.reset(); // ends the pending read
  });
  try {
    const w = await conn.write(frame(query));
    if (!w.ok) return { ok: false, reason: `write to ${fmt(upstream)} failed: ${w.kind} ${w.errno}` };
    const reader = new FrameReader();
    for (;;) {
      const r = await conn.read();
      if (r.done)
        return {
          ok: false,
          reason: timedOut
            ? `no reply from ${fmt(upstream)} within ${ctx.timeoutMs} ms`
            : `${fmt(upstream)} closed the connection before replying${r.failure ? ` (${r.failure.kind})` : ''}`,
        };
      const frames = reader.push(r.bytes);
      if (frames.length > 0) return { ok: true, reply: frames[0]! };
    }
  } finally {
    timer.cancel();
    conn.close();
  }
}
