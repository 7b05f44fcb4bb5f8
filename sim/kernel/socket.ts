/**
 * Sockets in one network namespace: bind rules (EADDRINUSE, EADDRNOTAVAIL, wildcard overlap,
 * SO_REUSEPORT groups limited to one effective uid), listening and established lookup for
 * incoming segments (established 4-tuple first, then the most specific listener), and the
 * transparent-socket lookup that TPROXY performs.
 */
import {
  formatIp,
  ipEquals,
  ipKey,
  isUnspecified,
  mapV4,
  type Family,
  type IpAddress,
} from '../../impl/api/ip/address.js';
import { SimErrnoError } from './errors.js';
import type { Credentials } from './process.js';

export type SockProto = 'tcp' | 'udp';
type SockState = 'new' | 'bound' | 'listening' | 'established' | 'closed';

export interface SockAddr {
  readonly addr: IpAddress;
  readonly port: number;
}

export function formatSockAddr(a: SockAddr): string {
  return a.addr.family === 6 ? `[${formatIp(a.addr)}]:${a.port}` : `${formatIp(a.addr)}:${a.port}`;
}

interface Datagram {
  readonly from: SockAddr;
  readonly to: SockAddr;
  readonly payload: string;
}

export class SimSocket {
  state: SockState = 'new';
  local: SockAddr | undefined;
  remote: SockAddr | undefined;
  mark = 0;
  transparent = false;
  reusePort = false;
  reuseAddr = false;
  v6only = false;
  /** Listener this socket was accepted from (established server sockets). */
  acceptedFrom: SimSocket | undefined;
  readonly acceptQueue: SimSocket[] = [];
  readonly inbox: Datagram[] = [];

  constructor(
    readonly id: number,
    readonly netns: string,
    readonly family: Family,
    readonly proto: SockProto,
    readonly owner: Credentials,
    /** Free-form name for traces and reports ("proxy outbound", "app"). */
    readonly label: string,
  ) {}

  /**
   * An address as the socket API reports it for this socket (accept, getpeername, getsockname,
   * recvfrom): on an AF_INET6 socket an IPv4 address — a dual-stack socket's IPv4 traffic — is
   * reported IPv4-mapped (::ffff:a.b.c.d), as Linux does. The socket tables keep the plain
   * address, which is what the packets carry.
   */
  reported(a: SockAddr): SockAddr {
    return this.family === 6 && a.addr.family === 4 ? { addr: mapV4(a.addr), port: a.port } : a;
  }

  describe(): string {
    const where = this.local ? formatSockAddr(this.local) : 'unbound';
    return `socket#${this.id}${this.label ? ` "${this.label}"` : ''} ${this.proto}${this.family === 6 ? '6' : ''} ${where} in ${this.netns}`;
  }
}

function fourTupleKey(proto: SockProto, local: SockAddr, remote: SockAddr): string {
  return `${proto}|${ipKey(local.addr)}|${local.port}|${ipKey(remote.addr)}|${remote.port}`;
}

/** Does a bound address of family `f` accept traffic for `addr`? (v4-mapped v6 wildcard). */
function bindCovers(s: SimSocket, addr: IpAddress): boolean {
  const l = s.local;
  if (!l) return false;
  if (isUnspecified(l.addr)) {
    if (l.addr.family === addr.family) return true;
    return l.addr.family === 6 && addr.family === 4 && !s.v6only;
  }
  return ipEquals(l.addr, addr);
}

/** Would binding `s` to `addr` conflict with the existing binding of `o` (same port)? */
function bindsOverlap(s: SimSocket, addr: IpAddress, o: SimSocket): boolean {
  const l = o.local;
  if (!l) return false;
  if (isUnspecified(addr)) {
    if (l.addr.family === addr.family) return true;
    if (addr.family === 6 && !s.v6only && l.addr.family === 4) return true;
    return addr.family === 4 && l.addr.family === 6 && isUnspecified(l.addr) && !o.v6only;
  }
  return bindCovers(o, addr);
}

export class SocketTable {
  private readonly sockets = new Set<SimSocket>();
  private readonly established = new Map<string, SimSocket>();
  /** Bound (not accepted) sockets by `proto:port`, so bind and listener lookup stay O(sockets on the port). */
  private readonly byPort = new Map<string, Set<SimSocket>>();
  /** Next ephemeral port to try (a cursor, like the kernel's port offset; deterministic). */
  private cursor = 32768;

  add(s: SimSocket): void {
    this.sockets.add(s);
  }

  all(): SimSocket[] {
    return [...this.sockets];
  }

  private onPort(proto: SockProto, port: number): Set<SimSocket> | undefined {
    return this.byPort.get(`${proto}:${port}`);
  }

  /** Record a socket's binding (call after setting s.local). */
  indexBinding(s: SimSocket): void {
    if (!s.local || s.acceptedFrom) return;
    const key = `${s.proto}:${s.local.port}`;
    let set = this.byPort.get(key);
    if (!set) this.byPort.set(key, (set = new Set()));
    set.add(s);
  }

  /** bind(2) conflict rules for a local address+port. */
  checkBind(s: SimSocket, addr: IpAddress, port: number): void {
    for (const o of this.onPort(s.proto, port) ?? []) {
      if (o === s || !o.local || o.state === 'closed') continue;
      if (!bindsOverlap(s, addr, o)) continue;
      if (s.reusePort && o.reusePort) {
        if (s.owner.uid === o.owner.uid) continue;
        throw new SimErrnoError(
          'EADDRINUSE',
          'bind',
          `${formatIp(addr)}:${port} is held by ${o.describe()} with SO_REUSEPORT under uid ${o.owner.uid}; a reuseport group admits only the same effective uid (${s.owner.uid} differs)`,
        );
      }
      // SO_REUSEADDR on both: UDP always shares (udp_lib_lport_inuse); TCP only while the other
      // is not listening (inet_csk_bind_conflict).
      if (s.reuseAddr && o.reuseAddr && (s.proto === 'udp' || o.state !== 'listening')) continue;
      throw new SimErrnoError('EADDRINUSE', 'bind', `${formatIp(addr)}:${port} is already bound by ${o.describe()}`);
    }
  }

  /**
   * A free ephemeral port in 32768..60999 (net.ipv4.ip_local_port_range default), searched from a
   * rotating cursor so consecutive connections get consecutive ports — deterministic.
   */
  ephemeralPort(proto: SockProto, addr: IpAddress, avoid?: (port: number) => boolean): number {
    const lo = 32768;
    const span = 60999 - lo + 1;
    for (let i = 0; i < span; i++) {
      const p = lo + ((this.cursor - lo + i) % span);
      if (avoid?.(p)) continue;
      let taken = false;
      for (const o of this.onPort(proto, p) ?? []) {
        if (o.state !== 'closed' && (bindCovers(o, addr) || isUnspecified(addr))) {
          taken = true;
          break;
        }
      }
      if (!taken) {
        this.cursor = p + 1 > 60999 ? lo : p + 1;
        return p;
      }
    }
    throw new SimErrnoError('EADDRNOTAVAIL', 'connect', 'no free ephemeral port');
  }

  registerEstablished(s: SimSocket): void {
    if (!s.local || !s.remote) throw new Error('registerEstablished: socket has no 4-tuple');
    this.established.set(fourTupleKey(s.proto, s.local, s.remote), s);
  }

  unregister(s: SimSocket): void {
    if (s.local && s.remote) {
      const k = fourTupleKey(s.proto, s.local, s.remote);
      if (this.established.get(k) === s) this.established.delete(k);
    }
    if (s.local) {
      const set = this.onPort(s.proto, s.local.port);
      set?.delete(s);
      if (set && set.size === 0) this.byPort.delete(`${s.proto}:${s.local.port}`);
    }
    this.sockets.delete(s);
  }

  findEstablished(proto: SockProto, local: SockAddr, remote: SockAddr): SimSocket | undefined {
    return this.established.get(fourTupleKey(proto, local, remote));
  }

  /**
   * Listener for an incoming connection request: exact address beats wildcard (the kernel's
   * scoring), and within an SO_REUSEPORT group one member is chosen by the flow hash.
   * `transparentOnly` is TPROXY's rule: a listener is only eligible if IP_TRANSPARENT is set.
   */
  findListener(
    proto: SockProto,
    addr: IpAddress,
    port: number,
    flowHash: number,
    transparentOnly = false,
  ): SimSocket | undefined {
    const candidates: SimSocket[] = [];
    let bestScore = -1;
    for (const s of this.onPort(proto, port) ?? []) {
      const ok = proto === 'tcp' ? s.state === 'listening' : s.state === 'bound' || s.state === 'established';
      if (!ok || s.proto !== proto || s.local?.port !== port || !bindCovers(s, addr)) continue;
      if (transparentOnly && !s.transparent) continue;
      if (proto === 'udp' && s.state === 'established') continue; // connected UDP handled by 4-tuple lookup
      const score = (isUnspecified(s.local.addr) ? 0 : 2) + (s.local.addr.family === addr.family ? 1 : 0);
      if (score > bestScore) {
        bestScore = score;
        candidates.length = 0;
      }
      if (score === bestScore) candidates.push(s);
    }
    if (candidates.length === 0) return undefined;
    if (candidates.length === 1) return candidates[0];
    // Several sockets on one address+port can only be a reuseport group: pick by flow hash.
    candidates.sort((a, b) => a.id - b.id);
    return candidates[flowHash % candidates.length];
  }
}
