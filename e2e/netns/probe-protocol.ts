/**
 * The line protocol between the lab runner and a probe program (probe-program.ts) running in a
 * network namespace as some uid with some capabilities: one JSON request per line on stdin, one
 * JSON reply per line on stdout (same `id`), plus unsolicited event lines (no `id`) for what
 * the probe's listening sockets see.
 */
import { randomInt } from 'node:crypto';

type ProbeProto = 'tcp' | 'udp';

export interface ListenRequest {
  readonly op: 'listen';
  readonly name: string;
  readonly proto: ProbeProto;
  readonly family: 4 | 6;
  readonly address: string;
  readonly port: number;
  readonly mark: number | undefined;
  readonly transparent: boolean;
  readonly reuseport: boolean;
  /**
   * SO_REUSEADDR, as servers set it (Node's net, nginx): bind succeeds over the port's TIME_WAIT
   * sockets — e.g. a stopped proxy's closed connections on 15006 — but never over a listener.
   */
  readonly reuseaddr?: boolean;
}

export interface ConnectRequest {
  readonly op: 'connect';
  /** Tag written on the connection (TCP) or sent as the datagram (UDP), so the receiver can say whose it was. */
  readonly tag: string;
  readonly proto: ProbeProto;
  readonly address: string;
  readonly port: number;
  readonly mark: number | undefined;
  readonly transparent: boolean;
  readonly source: string | undefined;
  readonly sourcePort: number | undefined;
  readonly timeoutMs: number;
  /**
   * TCP: once connected, write nothing until a `release` request names this tag. The lab runner
   * holds the data until the listener's probe has read the accepted socket's peer and
   * SO_ORIGINAL_DST, so those are read after the handshake and before any data segment (and the
   * receiver's ACK of it) has passed conntrack — the moment the simulator models. Unheld, which
   * of the two comes first depends on process scheduling.
   */
  readonly holdData?: boolean;
  /** `continue`: a socket option the kernel refuses is left unset and the attempt goes on (lab on_sockopt_error). */
  readonly onSockoptError?: 'fail' | 'continue';
}

/**
 * Send one crafted frame with an AF_PACKET socket (needs CAP_NET_RAW: without it the socket()
 * call fails with EPERM) out of `ifname`: a TCP SYN, or a UDP datagram carrying `tag`. The
 * frame skips the sender's own netfilter and routing, so the caller names the addresses and the
 * next hop's MAC. For TCP the probe then watches the device for the answer from dst:dport
 * (SYN-ACK: something listened; RST: nothing did) until `timeoutMs`.
 */
export interface RawSendRequest {
  readonly op: 'raw-send';
  readonly tag: string;
  readonly proto: ProbeProto;
  readonly ifname: string;
  /** Next hop's MAC (the gateway's, or the destination's on the same link). */
  readonly dstMac: string;
  readonly source: string;
  readonly sourcePort: number;
  readonly address: string;
  readonly port: number;
  readonly timeoutMs: number;
}

/** What a raw-send came to. */
export interface RawSendOutcome {
  /** 'sent' (UDP, or TCP without an answer in time), 'syn-ack', 'rst', or 'error' (code names the errno). */
  readonly result: 'sent' | 'syn-ack' | 'rst' | 'error';
  readonly code: string | undefined;
  readonly call: string | undefined;
  readonly message: string | undefined;
}

/** Write the tag on a connection held by `ConnectRequest.holdData` and close it (value: whether it was held). */
interface ReleaseRequest {
  readonly op: 'release';
  readonly tag: string;
}

/**
 * Open a TCP connection and hold it (World.holdConnection): the probe writes `HOLD <tag>` and
 * waits for the pod app's `held <namespace>/<name>` (world-pod-app.ts); the connection then stays
 * open until a `held-close` names the tag. Reply: a HoldOutcome.
 */
export interface HoldRequest {
  readonly op: 'hold';
  readonly tag: string;
  readonly address: string;
  readonly port: number;
  readonly sourcePort: number;
  readonly timeoutMs: number;
}

export interface HoldOutcome extends ConnectOutcome {
  /** The first line the peer answered (`held <pod>` from a pod app); undefined when none came in time. */
  readonly greeting: string | undefined;
}

/** Write `line` on a held connection and wait for the peer's `ack <line>`. Reply: a HeldSendOutcome. */
export interface HeldSendRequest {
  readonly op: 'held-send';
  readonly tag: string;
  readonly line: string;
  readonly timeoutMs: number;
}

/**
 * What a held-send came to, as the holding side saw it: 'ack' (the peer echoed the line), 'ended'
 * (the peer closed, FIN), 'error' (the socket failed: ECONNRESET, ECONNABORTED after SOCK_DESTROY,
 * EPIPE; `code`), 'timeout' (no answer in time), 'gone' (no held connection by that tag).
 */
export interface HeldSendOutcome {
  readonly result: 'ack' | 'ended' | 'error' | 'timeout' | 'gone';
  readonly code: string | undefined;
  readonly detail: string;
}

/** Close a held connection (value: whether one was held by that tag). */
interface HeldCloseRequest {
  readonly op: 'held-close';
  readonly tag: string;
}

/** Root probes only: run a program (iptables-restore, ip, ipset) inside the probe's namespace. */
interface ExecRequest {
  readonly op: 'exec';
  readonly argv: readonly string[];
  readonly input: string | undefined;
}

/** Root probes only: write /proc/sys/<key> (a `net/...` path; per-netns). */
interface SysctlRequest {
  readonly op: 'sysctl';
  readonly key: string;
  readonly value: string;
}

interface CloseAllRequest {
  readonly op: 'close-all';
}

export type ProbeRequest =
  | ListenRequest
  | ConnectRequest
  | RawSendRequest
  | ReleaseRequest
  | HoldRequest
  | HeldSendRequest
  | HeldCloseRequest
  | ExecRequest
  | SysctlRequest
  | CloseAllRequest;

export type ProbeReply =
  | { readonly id: number; readonly ok: true; readonly value?: unknown }
  | { readonly id: number; readonly ok: false; readonly code: string; readonly message: string };

/** What a connect request came to, as seen by the connecting side. */
export interface ConnectOutcome {
  /** 'established', 'timeout', or 'error' with the errno name in `code`. */
  readonly result: 'established' | 'sent' | 'timeout' | 'error';
  readonly code: string | undefined;
  /** Which call failed (socket/setsockopt/bind/connect/send). */
  readonly call: string | undefined;
  readonly message: string | undefined;
}

/**
 * A failed attempt as the worlds report it (ConnectResult.error): the call and the errno, as the
 * simulator words it too (`socket(AF_PACKET): EPERM`); a failure without an errno (the probe
 * could not load its socket addon, say) keeps its message, or the report would say only EUNKNOWN.
 */
export function attemptError(out: ConnectOutcome): string {
  const errno = out.code !== undefined && out.code !== 'EUNKNOWN' ? out.code : undefined;
  return `${out.call ?? 'connect'}: ${errno ?? `${out.code ?? 'error'} (${out.message ?? 'no message'})`}`;
}

/**
 * Whether an attempt failed only because the source port the world picked at random was taken
 * (bound, or in TIME_WAIT, in the source's netns): the world's own choice, not an observation,
 * so the world picks another port rather than report it.
 */
export function sourcePortTaken(out: ConnectOutcome): boolean {
  return out.result === 'error' && out.code === 'EADDRINUSE' && out.call === 'bind';
}

/**
 * A source port for one attempt, at random in 20000–59999: the worlds find what arrived by the
 * client's port, so each attempt has its own.
 */
export function randomSourcePort(): number {
  return randomInt(20_000, 60_000);
}

/**
 * Run `attempt` from a random source port (`pick`, randomSourcePort unless a test gives its
 * own), picking again while the port is taken; after `tries` taken ports the last outcome stands
 * (an error the caller reports).
 */
export async function fromFreeSourcePort<T extends ConnectOutcome>(
  attempt: (sourcePort: number) => Promise<T>,
  pick: () => number = randomSourcePort,
  tries = 5,
): Promise<{ readonly value: T; readonly sourcePort: number }> {
  for (let i = 1; ; i++) {
    const sourcePort = pick();
    const value = await attempt(sourcePort);
    if (i >= tries || !sourcePortTaken(value)) return { value, sourcePort };
  }
}

/** How long a world's connect attempt waits for the handshake (or a UDP answer) before it is a timeout. */
const WORLD_CONNECT_TIMEOUT_MS = 3000;

/**
 * A world's connect attempt through a probe (netns or kind: anything that answers requests),
 * from a random source port that is not taken (fromFreeSourcePort).
 */
export function connectThrough(
  probe: { request(r: ProbeRequest): Promise<unknown> },
  req: Omit<ConnectRequest, 'op' | 'sourcePort' | 'timeoutMs'>,
): Promise<{ readonly value: ConnectOutcome; readonly sourcePort: number }> {
  return fromFreeSourcePort(
    async (sourcePort) =>
      (await probe.request({
        op: 'connect',
        ...req,
        sourcePort,
        timeoutMs: WORLD_CONNECT_TIMEOUT_MS,
      })) as ConnectOutcome,
  );
}

/**
 * A TCP connect's outcome as the World reports it (ConnectResult.outcome): the errno decides
 * between refused (RST), unreachable (ICMP) and anything else (an error the caller words).
 */
export function tcpConnectOutcome(
  out: ConnectOutcome,
): 'established' | 'timeout' | 'refused' | 'unreachable' | 'error' {
  if (out.result === 'established' || out.result === 'timeout') return out.result;
  if (out.code === 'ECONNREFUSED') return 'refused';
  if (out.code === 'ENETUNREACH' || out.code === 'EHOSTUNREACH') return 'unreachable';
  return 'error';
}

export interface AcceptEvent {
  readonly ev: 'accept';
  readonly listener: string;
  readonly peer: string;
  readonly local: string;
  /** `addr:port`, or `(ERRNO)` when SO_ORIGINAL_DST failed. */
  readonly originalDst: string;
  /** The tag the client wrote first, when it arrived. */
  readonly tag: string | undefined;
}

export interface DatagramEvent {
  readonly ev: 'datagram';
  readonly listener: string;
  readonly peer: string;
  readonly tag: string;
}

/**
 * A TCP connection made by a connect request (without holdData) has closed: what the peer sent
 * (at most 256 characters; a pod app answers `ok <namespace>/<name>`) and whether the peer ended
 * it (FIN) — false when the client gave up after its 1 s hold (reset, or a peer still open).
 */
export interface ClosedEvent {
  readonly ev: 'closed';
  readonly tag: string;
  readonly reply: string;
  readonly peerEnded: boolean;
}

export type ProbeEvent =
  | AcceptEvent
  | DatagramEvent
  | ClosedEvent
  | { readonly ev: 'tag'; readonly listener: string; readonly peer: string; readonly tag: string };

/** `addr:port` as the simulator prints it (`[v6]:port`); v4-mapped v6 addresses stay as the kernel reports them. */
export function formatEndpoint(address: string, port: number): string {
  return address.includes(':') ? `[${address}]:${port}` : `${address}:${port}`;
}

/**
 * Send one raw frame through a probe (netns or kind: anything that answers requests) and map the
 * answer to a connect-style outcome: an error keeps its errno and names socket(AF_PACKET) when the
 * socket itself was refused; anything else was sent (the raw answer says what came back).
 */
export async function rawSendThrough(
  probe: { request(r: ProbeRequest): Promise<unknown> },
  req: Omit<RawSendRequest, 'op' | 'timeoutMs'>,
): Promise<{ readonly out: ConnectOutcome; readonly rawAnswer: RawSendOutcome['result'] }> {
  const r = (await probe.request({ op: 'raw-send', ...req, timeoutMs: 1000 })) as RawSendOutcome;
  const out: ConnectOutcome =
    r.result === 'error'
      ? { result: 'error', code: r.code, call: r.call === 'socket' ? 'socket(AF_PACKET)' : r.call, message: r.message }
      : { result: 'sent', code: undefined, call: undefined, message: undefined };
  return { out, rawAnswer: r.result };
}

/** What `iptables-restore` of these leaves: every table the mesh writes, flushed. */
const EMPTY_TABLES = '*raw\nCOMMIT\n*mangle\nCOMMIT\n*nat\nCOMMIT\n*filter\nCOMMIT\n';

/**
 * The app's NET_ADMIN attack: flush every table of its netns through the probe (running as the
 * app), v6 too for a dual-stack pod. A refusal names the tool, the errno class and `who`.
 */
export function flushTablesThrough(
  probe: { request(r: ProbeRequest): Promise<unknown> },
  dualStack: boolean,
  who: string,
): Promise<{ readonly ok: true } | { readonly ok: false; readonly error: string }> {
  return restoreThrough(probe, dualStack, who, EMPTY_TABLES, false);
}

/**
 * The app's NET_ADMIN restore of `input` through the probe (running as the app), v6 too for a
 * dual-stack pod; `noflush` for an insert (scenarios/world.ts INSERTED_RULES).
 */
export async function restoreThrough(
  probe: { request(r: ProbeRequest): Promise<unknown> },
  dualStack: boolean,
  who: string,
  input: string,
  noflush: boolean,
): Promise<{ readonly ok: true } | { readonly ok: false; readonly error: string }> {
  for (const tool of dualStack ? ['iptables-restore', 'ip6tables-restore'] : ['iptables-restore']) {
    try {
      await probe.request({ op: 'exec', argv: noflush ? [tool, '--noflush'] : [tool], input });
    } catch (e) {
      const msg = e instanceof Error ? e.message : String(e);
      const errno = /Permission denied|Operation not permitted|must be root/i.test(msg) ? 'EPERM' : 'failed';
      return { ok: false, error: `${tool}: ${errno} (${who}): ${msg}` };
    }
  }
  return { ok: true };
}

/**
 * `nft -f -` of `input` through a probe running as the app (World.appExec nft-flush / nft-insert):
 * nftables has one ruleset for both families. A refusal names the tool, the errno class and `who`.
 */
export async function nftThrough(
  probe: { request(r: ProbeRequest): Promise<unknown> },
  who: string,
  input: string,
): Promise<{ readonly ok: true } | { readonly ok: false; readonly error: string }> {
  try {
    await probe.request({ op: 'exec', argv: ['nft', '-f', '-'], input });
  } catch (e) {
    const msg = e instanceof Error ? e.message : String(e);
    const errno = /Permission denied|Operation not permitted/i.test(msg) ? 'EPERM' : 'failed';
    return { ok: false, error: `nft: ${errno} (${who}): ${msg}` };
  }
  return { ok: true };
}
