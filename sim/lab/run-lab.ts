/**
 * Runs a lab (lab-file.ts) in the simulated kernel: builds the topology, opens the listening
 * sockets, then plays each connection attempt in order and reports what happened to it.
 */
import { SimKernel, type SimKernelOptions } from '../kernel/kernel.js';
import { credentials } from '../kernel/process.js';
import { formatSockAddr, type SimSocket } from '../kernel/socket.js';
import { SimErrnoError, SimConfigError } from '../kernel/errors.js';
import { RestoreError, IpSetError } from '../kernel/netfilter/errors.js';
import { NftError } from '../kernel/nftables/errors.js';
import type { TraceEvent } from '../kernel/trace.js';
import { LabError, modelledCaps, type Lab, type LabAttempt, type ListenerOutcome } from './lab-file.js';

/** What one attempt came to; the same shape is produced by the real-kernel runner. */
export interface AttemptResult {
  readonly name: string;
  /** established / refused / timeout / unreachable (TCP); delivered / no-socket / dropped (UDP, raw). */
  readonly outcome: string;
  /** Name of the lab socket that accepted or received it. */
  readonly acceptedBy: string | undefined;
  /** SO_ORIGINAL_DST as read on the accepted socket (TCP), if readable. */
  readonly originalDst: string | undefined;
  /** The peer address the receiving socket sees. */
  readonly sourceSeen: string | undefined;
  /** The local address the receiving socket sees. */
  readonly localSeen: string | undefined;
  readonly reason: string;
  readonly trace: readonly TraceEvent[];
}

/** What one lab socket came to; the same shape is produced by the real-kernel runner. */
export interface ListenerResult {
  readonly name: string;
  /** `listening`, or the errno its setup failed with. */
  readonly outcome: string;
  /** The socket's `expect` in the lab file. */
  readonly expected: ListenerOutcome;
  /** The call that failed, in words (empty when listening). */
  readonly detail: string;
}

/** What a lab came to, in any world: each listener's outcome, then each attempt's result. */
export interface LabResults {
  readonly listeners: readonly ListenerResult[];
  readonly results: readonly AttemptResult[];
}

export interface LabRun extends LabResults {
  readonly kernel: SimKernel;
  readonly sockets: ReadonlyMap<string, SimSocket>;
}

/** `netfilterFactory`, `nftablesFactory`: a replaced netfilter / nftables model (differential-testing positive controls). */
interface LabRunOptions {
  readonly trace?: boolean;
  readonly netfilterFactory?: SimKernelOptions['netfilterFactory'];
  readonly nftablesFactory?: SimKernelOptions['nftablesFactory'];
}

function buildLabKernel(
  lab: Lab,
  file: string,
  opts: LabRunOptions = {},
): { kernel: SimKernel; sockets: Map<string, SimSocket>; listeners: ListenerResult[] } {
  const k = new SimKernel({
    kernelVersion: lab.kernel,
    trace: opts.trace ?? true,
    ...(opts.netfilterFactory ? { netfilterFactory: opts.netfilterFactory } : {}),
    ...(opts.nftablesFactory ? { nftablesFactory: opts.nftablesFactory } : {}),
  });
  const at = (path: string, line: number | undefined, f: () => void): void => {
    try {
      f();
    } catch (e) {
      if (
        e instanceof SimConfigError ||
        e instanceof SimErrnoError ||
        e instanceof IpSetError ||
        (e instanceof Error && !(e instanceof RestoreError))
      ) {
        throw new LabError(file, line, path, e.message);
      }
      throw e;
    }
  };
  lab.namespaces.forEach((n, i) => {
    const p = `namespaces[${i}]`;
    at(p, undefined, () => {
      k.addNetns(n.name);
      k.setLink(n.name, 'lo', true);
      k.setForwarding(n.name, 4, n.forwarding[4]);
      k.setForwarding(n.name, 6, n.forwarding[6]);
    });
    n.links.forEach((l, j) =>
      at(`${p}.links[${j}]`, undefined, () => {
        k.addBridge(n.name, l.name);
        for (const a of l.addresses) k.addAddress(n.name, l.name, a);
        k.setLink(n.name, l.name, l.up);
      }),
    );
  });
  lab.veths.forEach((v, i) =>
    at(`veths[${i}]`, undefined, () => {
      k.addVeth(v.a.netns, v.a.name, v.b.netns, v.b.name);
      for (const end of [v.a, v.b]) {
        if (end.master) k.setMaster(end.netns, end.name, end.master);
        for (const a of end.addresses) k.addAddress(end.netns, end.name, a);
        k.setLink(end.netns, end.name, true);
      }
    }),
  );
  lab.namespaces.forEach((n, i) => {
    const p = `namespaces[${i}]`;
    n.routes.forEach((r, j) =>
      at(`${p}.routes[${j}]`, undefined, () =>
        k.addRoute(n.name, {
          dst: r.dst,
          ...(r.family ? { family: r.family } : {}),
          ...(r.via ? { via: r.via } : {}),
          ...(r.dev ? { dev: r.dev } : {}),
          ...(r.table !== undefined ? { table: r.table } : {}),
          type: r.type,
          ...(r.src ? { src: r.src } : {}),
          ...(r.metric !== undefined ? { metric: r.metric } : {}),
        }),
      ),
    );
    n.rules.forEach((r, j) =>
      at(`${p}.rules[${j}]`, undefined, () =>
        k.addRule(n.name, {
          family: r.family,
          priority: r.priority,
          ...(r.fwmark ? { fwmark: r.fwmark.value, mask: r.fwmark.mask } : {}),
          ...(r.from ? { from: r.from } : {}),
          ...(r.to ? { to: r.to } : {}),
          ...(r.iif ? { iif: r.iif } : {}),
          ...(r.oif ? { oif: r.oif } : {}),
          ...(r.table !== undefined ? { table: r.table } : {}),
          action: r.action,
        }),
      ),
    );
    if (n.ipsets) at(`${p}.ipsets`, undefined, () => k.ipsetRestore(n.name, n.ipsets!));
    for (const [fam, text, line, key] of [
      [4, n.iptables, n.iptablesLine, 'iptables'],
      [6, n.ip6tables, n.ip6tablesLine, 'ip6tables'],
    ] as const) {
      if (!text) continue;
      try {
        k.iptablesRestore(n.name, fam, text, { source: `${file} ${key} of ${n.name}` });
      } catch (e) {
        if (e instanceof RestoreError)
          throw new LabError(file, line + e.line, `${p}.${key}`, `${e.problem}\n  in line: ${e.lineText}`);
        throw new LabError(file, line, `${p}.${key}`, (e as Error).message);
      }
    }
    if (n.nftables !== undefined) {
      try {
        k.netns(n.name).nftables.apply(n.nftables, { source: `${file} nftables of ${n.name}` });
      } catch (e) {
        const line = n.nftablesLine ?? 0;
        if (e instanceof NftError)
          throw new LabError(file, line + e.line, `${p}.nftables`, `${e.problem}\n  in line: ${e.lineText}`);
        throw new LabError(file, line, `${p}.nftables`, (e as Error).message);
      }
    }
  });
  const sockets = new Map<string, SimSocket>();
  const listeners: ListenerResult[] = [];
  lab.sockets.forEach((s, i) =>
    at(`sockets[${i}]`, undefined, () => {
      const sock = k.socket(s.netns, s.proto, s.family, credentials(s.uid, s.gid, modelledCaps(s.caps)), s.name);
      try {
        if (s.mark !== undefined) k.setsockopt(sock, 'SO_MARK', s.mark);
        if (s.transparent) k.setsockopt(sock, 'IP_TRANSPARENT', true);
        if (s.reuseport) k.setsockopt(sock, 'SO_REUSEPORT', true);
        k.bind(sock, s.address, s.port);
        if (s.proto === 'tcp') k.listen(sock);
      } catch (e) {
        // Expected to fail (`expect: ERRNO`): record how it failed, whatever errno, and go on.
        if (s.expect === 'listening' || !(e instanceof SimErrnoError)) throw e;
        k.close(sock);
        listeners.push({ name: s.name, outcome: e.errno, expected: s.expect, detail: e.message });
        return;
      }
      sockets.set(s.name, sock);
      listeners.push({ name: s.name, outcome: 'listening', expected: s.expect, detail: '' });
    }),
  );
  return { kernel: k, sockets, listeners };
}

export function runLab(lab: Lab, file: string, opts: LabRunOptions = {}): LabRun {
  const { kernel, sockets, listeners } = buildLabKernel(lab, file, opts);
  const results = lab.attempts.map((a) => runAttempt(kernel, a));
  return { kernel, sockets, listeners, results };
}

function runAttempt(k: SimKernel, a: LabAttempt): AttemptResult {
  const owner = credentials(a.uid, a.gid, modelledCaps(a.caps));
  const base = {
    name: a.name,
    acceptedBy: undefined,
    originalDst: undefined,
    sourceSeen: undefined,
    localSeen: undefined,
  };
  try {
    if (a.raw) {
      const r = k.sendRaw(a.netns, owner, a.raw.dev, {
        proto: a.proto,
        src: a.source!,
        sport: a.sourcePort ?? 40000,
        dst: a.address,
        dport: a.port,
        flags: a.proto === 'tcp' ? { syn: true } : {},
        ...(a.raw.nextHop ? { nextHop: a.raw.nextHop } : {}),
      });
      return { ...base, outcome: r.delivery, acceptedBy: r.socket?.label, reason: r.reason, trace: r.trace };
    }
    const family = a.address.includes(':') ? 6 : 4;
    const s = k.socket(a.netns, a.proto, family, owner, a.name);
    const setopt = (set: () => void): void => {
      try {
        set();
      } catch (e) {
        // on_sockopt_error: continue — the program ignores the error and goes on without the option.
        if (!(e instanceof SimErrnoError && a.onSockoptError === 'continue')) throw e;
      }
    };
    if (a.mark !== undefined) setopt(() => k.setsockopt(s, 'SO_MARK', a.mark!));
    if (a.transparent) setopt(() => k.setsockopt(s, 'IP_TRANSPARENT', true));
    if (a.source !== undefined || a.sourcePort !== undefined)
      k.bind(s, a.source ?? (family === 4 ? '0.0.0.0' : '::'), a.sourcePort ?? 0);
    if (a.proto === 'udp') {
      const r = k.sendUdp(s, a.address, a.port, a.payload);
      k.close(s);
      return {
        ...base,
        outcome: r.outcome,
        acceptedBy: r.socket?.label,
        reason: r.reason,
        trace: r.trace,
        sourceSeen: r.from ? formatSockAddr(r.from) : undefined,
        localSeen: r.to ? formatSockAddr(r.to) : undefined,
      };
    }
    const r = k.connect(s, a.address, a.port);
    let originalDst: string | undefined;
    if (r.server) {
      try {
        originalDst = formatSockAddr(k.originalDst(r.server));
      } catch (e) {
        originalDst = e instanceof SimErrnoError ? `(${e.errno})` : undefined;
      }
    }
    const result: AttemptResult = {
      ...base,
      outcome: r.outcome,
      acceptedBy: r.listener?.label,
      originalDst,
      sourceSeen: r.server?.remote ? formatSockAddr(r.server.reported(r.server.remote)) : undefined,
      localSeen: r.server?.local ? formatSockAddr(r.server.reported(r.server.local)) : undefined,
      reason: r.reason,
      trace: r.trace,
    };
    // Leave nothing established behind, so attempts do not influence each other's conntrack view.
    if (r.server) k.close(r.server);
    if (r.outcome === 'established') k.close(s);
    return result;
  } catch (e) {
    if (e instanceof SimErrnoError) return { ...base, outcome: `error ${e.errno}`, reason: e.message, trace: [] };
    throw e;
  }
}
