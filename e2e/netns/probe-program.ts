/**
 * The probe: a small program run inside a network namespace as a given uid/gid with a given
 * capability set (NetnsProcesses + setpriv). It opens listening sockets and makes connection
 * attempts on request, with marks, IP_TRANSPARENT and SO_REUSEPORT set through the native addon,
 * and reports what it saw: accepting listener, peer, local address, SO_ORIGINAL_DST, errno.
 * Protocol: probe-protocol.ts (JSON lines on stdin/stdout). Run as `node probe-program.js`.
 *
 * Every socket call happens in this process, so the kernel's permission checks (SO_MARK needs
 * NET_ADMIN, ...) and owner matches (`-m owner --uid-owner`) see the probe's real identity.
 */
import * as dgram from 'node:dgram';
import * as net from 'node:net';
import { execFile } from 'node:child_process';
import { randomInt } from 'node:crypto';
import { readFileSync, writeFileSync } from 'node:fs';
import { createInterface } from 'node:readline';
import { fdCalls, NativeSocketError, RawSocket } from '../../impl/linux/sockets-native.js';
import { packetRecv, packetSend } from './packet-native.js';
import {
  formatEndpoint,
  type ConnectOutcome,
  type ConnectRequest,
  type HeldSendOutcome,
  type HeldSendRequest,
  type HoldOutcome,
  type HoldRequest,
  type ListenRequest,
  type ProbeEvent,
  type ProbeReply,
  type ProbeRequest,
  type RawSendOutcome,
  type RawSendRequest,
} from './probe-protocol.js';
import { buildFrame, ipBytes, parseFrame, TCP_ACK, TCP_RST, TCP_SYN } from './raw-frame.js';

type Closer = () => void;
const listeners = new Map<string, Closer>();
/** Connected TCP sockets waiting for a `release` (ConnectRequest.holdData), by tag. */
const held = new Map<string, net.Socket>();

function send(line: ProbeReply | ProbeEvent): void {
  process.stdout.write(JSON.stringify(line) + '\n');
}

function errCode(e: unknown): { code: string; call: string; message: string } {
  if (e instanceof NativeSocketError) return { code: e.code, call: e.syscall, message: e.message };
  const err = e as NodeJS.ErrnoException;
  return {
    code: typeof err.code === 'string' ? err.code : 'EUNKNOWN',
    call: err.syscall ?? 'unknown',
    message: err.message ?? String(e),
  };
}

function familyOf(address: string): 4 | 6 {
  return address.includes(':') ? 6 : 4;
}

/** The fd under an accepted net.Socket (libuv keeps it on the internal handle). */
function fdOf(sock: net.Socket): number | undefined {
  const handle = (sock as unknown as { _handle?: { fd?: unknown } | null })._handle;
  return typeof handle?.fd === 'number' && handle.fd >= 0 ? handle.fd : undefined;
}

function originalDst(sock: net.Socket): string {
  const fd = fdOf(sock);
  if (fd === undefined) return '(ENOTSOCK)';
  try {
    const a = fdCalls.originalDst(fd, '');
    return formatEndpoint(a.address, a.port);
  } catch (e) {
    return `(${errCode(e).code})`;
  }
}

function openConfigured(
  family: 4 | 6,
  type: 'stream' | 'dgram',
  opts: { mark: number | undefined; transparent: boolean; reuseport?: boolean; reuseaddr?: boolean },
): RawSocket {
  const raw = RawSocket.open(undefined, family === 4 ? 'inet' : 'inet6', type);
  try {
    if (opts.reuseport) raw.setOption('SO_REUSEPORT', 1);
    if (opts.reuseaddr) raw.setOption('SO_REUSEADDR', 1);
    if (opts.mark !== undefined) raw.setOption('SO_MARK', opts.mark);
    if (opts.transparent) raw.setOption(family === 4 ? 'IP_TRANSPARENT' : 'IPV6_TRANSPARENT', 1);
  } catch (e) {
    raw.close();
    throw e;
  }
  return raw;
}

async function listen(r: ListenRequest): Promise<void> {
  if (listeners.has(r.name))
    throw Object.assign(new Error(`listener ${r.name} exists`), { code: 'EEXIST', syscall: 'listen' });
  const raw = openConfigured(r.family, r.proto === 'tcp' ? 'stream' : 'dgram', r);
  try {
    raw.bind(r.address, r.port);
    if (r.proto === 'tcp') raw.listen(128);
  } catch (e) {
    raw.close();
    throw e;
  }
  if (r.proto === 'tcp') {
    const server = net.createServer((sock) => {
      const peer = formatEndpoint(sock.remoteAddress ?? '?', sock.remotePort ?? 0);
      send({
        ev: 'accept',
        listener: r.name,
        peer,
        local: formatEndpoint(sock.localAddress ?? '?', sock.localPort ?? 0),
        originalDst: originalDst(sock),
        tag: undefined,
      });
      let data = '';
      sock.setEncoding('utf8');
      sock.on('data', (d: string) => {
        data += d;
        const nl = data.indexOf('\n');
        if (nl >= 0) send({ ev: 'tag', listener: r.name, peer, tag: data.slice(0, nl) });
      });
      sock.on('error', () => undefined);
      sock.on('end', () => sock.destroy());
      setTimeout(() => sock.destroy(), 2_000).unref();
    });
    server.on('error', () => undefined);
    await new Promise<void>((resolve) => server.listen({ fd: raw.release() }, resolve));
    listeners.set(r.name, () => server.close());
  } else {
    const s = dgram.createSocket(r.family === 4 ? 'udp4' : 'udp6');
    s.on('message', (msg, rinfo) =>
      send({
        ev: 'datagram',
        listener: r.name,
        peer: formatEndpoint(rinfo.address, rinfo.port),
        tag: msg.toString('utf8'),
      }),
    );
    s.on('error', () => undefined);
    await new Promise<void>((resolve) => s.bind({ fd: raw.release() }, resolve));
    listeners.set(r.name, () => s.close());
  }
}

function connectTcp(r: ConnectRequest, raw: RawSocket): Promise<ConnectOutcome> {
  const sock = new net.Socket({ fd: raw.release() });
  return new Promise((resolve) => {
    let done = false;
    const finish = (o: ConnectOutcome): void => {
      if (done) return;
      done = true;
      clearTimeout(timer);
      resolve(o);
    };
    const timer = setTimeout(() => {
      sock.destroy();
      finish({ result: 'timeout', code: undefined, call: 'connect', message: `no answer within ${r.timeoutMs} ms` });
    }, r.timeoutMs);
    sock.on('error', (e) => {
      sock.destroy();
      finish({ result: 'error', ...errCode(e) });
    });
    sock.once('connect', () => {
      if (r.holdData) {
        held.set(r.tag, sock);
        // A runner that never releases must not leak the socket.
        setTimeout(() => {
          if (held.get(r.tag) === sock) {
            held.delete(r.tag);
            sock.destroy();
          }
        }, 5_000).unref();
      } else {
        // The end of the connection, as this client saw it, is what the world waits on: whoever
        // took the connection (an app, a proxy) wrote its report before its answer or close.
        let reply = '';
        let peerEnded = false;
        sock.on('data', (d: Buffer) => {
          if (reply.length < 256) reply += d.toString('utf8');
        });
        sock.on('end', () => {
          peerEnded = true;
        });
        sock.once('close', () => send({ ev: 'closed', tag: r.tag, reply: reply.slice(0, 256), peerEnded }));
        sock.end(r.tag + '\n');
        setTimeout(() => sock.destroy(), 1_000).unref();
      }
      finish({ result: 'established', code: undefined, call: undefined, message: undefined });
    });
    // Must run in the tick that adopted the fd (see impl/linux/sockets.ts).
    sock.connect({ port: r.port, host: r.address });
  });
}

function sendUdp(r: ConnectRequest, raw: RawSocket): Promise<ConnectOutcome> {
  const s = dgram.createSocket(familyOf(r.address) === 4 ? 'udp4' : 'udp6');
  return new Promise((resolve) => {
    s.on('error', (e) => {
      s.close();
      resolve({ result: 'error', ...errCode(e), call: 'send' });
    });
    s.bind({ fd: raw.release() }, () => {
      s.send(r.tag, r.port, r.address, (e) => {
        if (e) resolve({ result: 'error', ...errCode(e), call: 'send' });
        else resolve({ result: 'sent', code: undefined, call: undefined, message: undefined });
        // Keep the socket a moment so a reply-direction ICMP does not race with close.
        setTimeout(() => s.close(), 200).unref();
      });
    });
  });
}

async function attempt(r: ConnectRequest): Promise<ConnectOutcome> {
  const family = familyOf(r.address);
  let raw: RawSocket;
  try {
    const ignore = r.onSockoptError === 'continue';
    // With on_sockopt_error continue, an option the kernel refuses is left unset, as by a program
    // that ignores the error; IP_FREEBIND (which needs nothing) then follows only a transparent socket.
    raw = openConfigured(
      family,
      r.proto === 'tcp' ? 'stream' : 'dgram',
      ignore ? { mark: undefined, transparent: false } : r,
    );
    let transparent = r.transparent && !ignore;
    if (ignore) {
      const tryOption = (name: Parameters<RawSocket['setOption']>[0], value: number): boolean => {
        try {
          raw.setOption(name, value);
          return true;
        } catch (e) {
          if (e instanceof NativeSocketError) return false;
          throw e;
        }
      };
      if (r.mark !== undefined) tryOption('SO_MARK', r.mark);
      if (r.transparent) transparent = tryOption(family === 4 ? 'IP_TRANSPARENT' : 'IPV6_TRANSPARENT', 1);
    }
    if (r.source !== undefined || r.sourcePort !== undefined || r.proto === 'udp') {
      if (transparent) raw.setOption(family === 4 ? 'IP_FREEBIND' : 'IPV6_FREEBIND', 1);
      try {
        raw.bind(r.source ?? (family === 4 ? '0.0.0.0' : '::'), r.sourcePort ?? 0);
      } catch (e) {
        raw.close();
        throw e;
      }
    }
  } catch (e) {
    return { result: 'error', ...errCode(e) };
  }
  return r.proto === 'tcp' ? connectTcp(r, raw) : sendUdp(r, raw);
}

const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

/** A connection held open for the world (HoldRequest): what arrived on it, and how it ended. */
interface Holding {
  readonly sock: net.Socket;
  /** Received and not yet consumed by a held-send. */
  buf: string;
  ended: boolean;
  error: { code: string; message: string } | undefined;
  /** Wakes a waiter when anything above changes. */
  wake: (() => void) | undefined;
}
const holdings = new Map<string, Holding>();

/** Wait until `pick` finds an answer in `h`, or `timeoutMs` passes. */
async function waitHolding<T>(h: Holding, timeoutMs: number, pick: () => T | undefined): Promise<T | undefined> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const v = pick();
    if (v !== undefined) return v;
    const left = deadline - Date.now();
    if (left <= 0) return undefined;
    await new Promise<void>((resolve) => {
      const t = setTimeout(resolve, left);
      h.wake = () => {
        clearTimeout(t);
        resolve();
      };
    });
    h.wake = undefined;
  }
}

/** Take one line from a holding's buffer. */
function takeLine(h: Holding): string | undefined {
  const nl = h.buf.indexOf('\n');
  if (nl < 0) return undefined;
  const line = h.buf.slice(0, nl);
  h.buf = h.buf.slice(nl + 1);
  return line;
}

async function hold(r: HoldRequest): Promise<HoldOutcome> {
  if (holdings.has(r.tag))
    throw Object.assign(new Error(`a connection is held as ${r.tag}`), { code: 'EEXIST', syscall: 'hold' });
  let raw: RawSocket;
  try {
    raw = openConfigured(familyOf(r.address), 'stream', { mark: undefined, transparent: false });
    try {
      raw.bind(familyOf(r.address) === 4 ? '0.0.0.0' : '::', r.sourcePort);
    } catch (e) {
      raw.close();
      throw e;
    }
  } catch (e) {
    return { result: 'error', ...errCode(e), greeting: undefined };
  }
  const sock = new net.Socket({ fd: raw.release() });
  const h: Holding = { sock, buf: '', ended: false, error: undefined, wake: undefined };
  const poke = (): void => h.wake?.();
  const connected = new Promise<ConnectOutcome>((resolve) => {
    const timer = setTimeout(() => {
      sock.destroy();
      resolve({ result: 'timeout', code: undefined, call: 'connect', message: `no answer within ${r.timeoutMs} ms` });
    }, r.timeoutMs);
    sock.once('connect', () => {
      clearTimeout(timer);
      resolve({ result: 'established', code: undefined, call: undefined, message: undefined });
    });
    sock.on('error', (e) => {
      clearTimeout(timer);
      h.error = { code: errCode(e).code, message: errCode(e).message };
      poke();
      resolve({ result: 'error', ...errCode(e) });
    });
  });
  sock.setEncoding('utf8');
  sock.on('data', (d: string) => {
    h.buf += d;
    poke();
  });
  sock.on('end', () => {
    h.ended = true;
    poke();
  });
  // Must run in the tick that adopted the fd (see impl/linux/sockets.ts).
  sock.connect({ port: r.port, host: r.address });
  const out = await connected;
  if (out.result !== 'established') return { ...out, greeting: undefined };
  holdings.set(r.tag, h);
  sock.write(`HOLD ${r.tag}\n`);
  const greeting = await waitHolding(h, r.timeoutMs, () => takeLine(h) ?? (h.ended || h.error ? '' : undefined));
  return { ...out, greeting: greeting === '' ? undefined : greeting };
}

async function heldSend(r: HeldSendRequest): Promise<HeldSendOutcome> {
  const h = holdings.get(r.tag);
  if (!h) return { result: 'gone', code: undefined, detail: `no connection is held as ${r.tag}` };
  const ended = (): HeldSendOutcome | undefined =>
    h.error
      ? { result: 'error', code: h.error.code, detail: h.error.message }
      : h.ended
        ? { result: 'ended', code: undefined, detail: 'the peer closed the connection (FIN)' }
        : undefined;
  // Whatever ended the connection before this send (a reset, SOCK_DESTROY) is the answer.
  const before = ended();
  if (before) return before;
  h.buf = '';
  h.sock.write(`${r.line}\n`);
  const answer = await waitHolding(h, r.timeoutMs, () => {
    const line = takeLine(h);
    if (line !== undefined)
      return { result: 'ack' as const, code: undefined, detail: `the peer answered ${JSON.stringify(line)}` };
    return ended();
  });
  return answer ?? { result: 'timeout', code: undefined, detail: `no answer within ${r.timeoutMs} ms` };
}

/**
 * AF_PACKET: one crafted frame out of `ifname`, then (TCP) the answer read off the same packet
 * socket. The socket is opened as this process — no CAP_NET_RAW, no socket (EPERM).
 */
async function rawSend(r: RawSendRequest): Promise<RawSendOutcome> {
  let sock: RawSocket;
  try {
    sock = RawSocket.open(undefined, 'packet', 'raw');
  } catch (e) {
    return { result: 'error', ...errCode(e) };
  }
  try {
    if (!/^[A-Za-z0-9_.-]{1,15}$/.test(r.ifname))
      throw Object.assign(new Error(`bad device name ${JSON.stringify(r.ifname)}`), {
        code: 'EINVAL',
        syscall: 'raw-send',
      });
    const srcMac = readFileSync(`/sys/class/net/${r.ifname}/address`, 'utf8').trim();
    const frame = buildFrame({
      proto: r.proto,
      srcMac,
      dstMac: r.dstMac,
      src: r.source,
      dst: r.address,
      sport: r.sourcePort,
      dport: r.port,
      payload: Buffer.from(r.tag, 'utf8'),
      seq: randomInt(1, 0x7fffffff),
    });
    packetSend(sock.fd, r.ifname, frame);
    if (r.proto === 'udp') return { result: 'sent', code: undefined, call: undefined, message: undefined };
    // The peer's answer comes back to this netns's kernel (which, having no socket for it, resets
    // it); the packet socket sees it too, first.
    const peer = ipBytes(r.address);
    for (let waited = 0; waited < r.timeoutMs; waited += 10) {
      for (let f = packetRecv(sock.fd); f; f = packetRecv(sock.fd)) {
        const p = f.outgoing ? undefined : parseFrame(f.frame);
        if (!p || p.proto !== 'tcp' || p.sport !== r.port || p.dport !== r.sourcePort || !ipBytes(p.src).equals(peer))
          continue;
        if ((p.flags & (TCP_SYN | TCP_ACK)) === (TCP_SYN | TCP_ACK))
          return { result: 'syn-ack', code: undefined, call: undefined, message: undefined };
        if (p.flags & TCP_RST) return { result: 'rst', code: undefined, call: undefined, message: undefined };
      }
      await sleep(10);
    }
    return { result: 'sent', code: undefined, call: undefined, message: `no answer within ${r.timeoutMs} ms` };
  } catch (e) {
    return { result: 'error', ...errCode(e) };
  } finally {
    sock.close();
  }
}

function execIn(argv: readonly string[], input: string | undefined): Promise<{ stdout: string; stderr: string }> {
  const [cmd, ...args] = argv;
  return new Promise((resolve, reject) => {
    if (!cmd) {
      reject(new Error('exec: empty argv'));
      return;
    }
    const child = execFile(cmd, args, { timeout: 30_000, maxBuffer: 16 << 20 }, (err, stdout, stderr) => {
      if (err)
        reject(
          Object.assign(new Error(`\`${argv.join(' ')}\` failed: ${String(stderr).trim() || err.message}`), {
            code: 'EEXEC',
            syscall: 'exec',
          }),
        );
      else resolve({ stdout: String(stdout), stderr: String(stderr) });
    });
    if (input !== undefined) child.stdin?.end(input);
  });
}

async function handle(req: ProbeRequest): Promise<unknown> {
  switch (req.op) {
    case 'listen':
      await listen(req);
      return undefined;
    case 'connect':
      return attempt(req);
    case 'raw-send':
      return rawSend(req);
    case 'release': {
      const sock = held.get(req.tag);
      if (!sock) return false;
      held.delete(req.tag);
      sock.end(req.tag + '\n');
      setTimeout(() => sock.destroy(), 1_000).unref();
      return true;
    }
    case 'hold':
      return hold(req);
    case 'held-send':
      return heldSend(req);
    case 'held-close': {
      const h = holdings.get(req.tag);
      holdings.delete(req.tag);
      h?.sock.destroy();
      return h !== undefined;
    }
    case 'exec':
      return execIn(req.argv, req.input);
    case 'sysctl':
      if (!/^net\/[A-Za-z0-9_./@-]+$/.test(req.key) || req.key.includes('..'))
        throw Object.assign(new Error(`sysctl ${req.key}: only net/... paths under /proc/sys`), {
          code: 'EINVAL',
          syscall: 'sysctl',
        });
      writeFileSync(`/proc/sys/${req.key}`, req.value);
      return undefined;
    case 'close-all':
      for (const c of listeners.values()) c();
      listeners.clear();
      for (const h of holdings.values()) h.sock.destroy();
      holdings.clear();
      return undefined;
  }
}

const rl = createInterface({ input: process.stdin });
rl.on('line', (line) => {
  let msg: { id: number } & ProbeRequest;
  try {
    msg = JSON.parse(line) as { id: number } & ProbeRequest;
  } catch {
    process.stderr.write(`probe: not JSON: ${line}\n`);
    return;
  }
  handle(msg).then(
    (value) => send({ id: msg.id, ok: true, value }),
    (e: unknown) => {
      const c = errCode(e);
      send({ id: msg.id, ok: false, code: c.code, message: `${c.call}: ${c.message}` });
    },
  );
});
// The runner closes stdin to stop us; stopping by pid (SIGTERM) works too.
rl.on('close', () => process.exit(0));
process.on('SIGTERM', () => process.exit(0));
send({ ev: 'tag', listener: '', peer: '', tag: 'ready' });
