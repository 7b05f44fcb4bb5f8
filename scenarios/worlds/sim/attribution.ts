/**
 * Who took a connection, read off the simulated kernel. The kernel's connect() returns the
 * listening socket that accepted and the client socket that asked; every socket carries a label
 * naming its process: the node proxy's start with PROXY_LABEL_PREFIX, an app container's are
 * "<namespace>/<pod>/<container>" (SimContainer), the kubelet's probes "kubelet probe <node>".
 *
 * ConnectRecorder wraps the kernel's connect on the world's own kernel instance (the SimWorld
 * builds its kernel itself, so there is no injection point): while an attempt is being
 * observed, every handshake in the whole world is recorded — the attacker's first hop and every
 * leg a proxy opens because of it.
 */
import type { Acceptor, PodRef } from '../../world.js';
import type { ConnectResult as KernelConnect, SimKernel } from '../../../sim/kernel/kernel.js';
import type { SimSocket } from '../../../sim/kernel/socket.js';
import { INBOUND_HBONE_PORT, INBOUND_PLAINTEXT_PORT, OUTBOUND_PORT } from '../../../impl/api/ports.js';
import { PROXY_LABEL_PREFIX } from './node-stack.js';

/** The proxy's DNS port (not served by the worlds' proxies yet: see node-stack.ts; a listener there is the proxy's DNS server). */
const DNS_PORT = 15053;

export class ConnectRecorder {
  private sink: KernelConnect[] | undefined;

  constructor(kernel: SimKernel) {
    const original = kernel.connect.bind(kernel);
    kernel.connect = (s, dst, port): KernelConnect => {
      const r = original(s, dst, port);
      this.sink?.push(r);
      return r;
    };
  }

  begin(): void {
    this.sink = [];
  }

  /** Stop recording; the handshakes since begin(), in order. */
  end(): KernelConnect[] {
    const out = this.sink ?? [];
    this.sink = undefined;
    return out;
  }

  /** Handshakes so far in the current attempt. */
  current(): readonly KernelConnect[] {
    return this.sink ?? [];
  }
}

export function isProxySocket(s: SimSocket): boolean {
  return s.label.startsWith(PROXY_LABEL_PREFIX);
}

/** The node of the proxy process that owns a proxy socket (its label: ztunnel@<node>#<incarnation>). */
export function proxyNodeOf(s: SimSocket): string | undefined {
  if (!isProxySocket(s)) return undefined;
  const rest = s.label.slice(PROXY_LABEL_PREFIX.length);
  const hash = rest.lastIndexOf('#');
  return hash < 0 ? rest : rest.slice(0, hash);
}

export function isProbeSocket(s: SimSocket): boolean {
  return s.label.startsWith('kubelet probe');
}

/** The pod an app container's socket belongs to, from its label, if it names a known pod. */
export function appPodOf(s: SimSocket, known: (ref: PodRef) => boolean): PodRef | undefined {
  const parts = s.label.split('/');
  if (parts.length !== 3) return undefined;
  const ref = { namespace: parts[0]!, name: parts[1]! };
  return known(ref) ? ref : undefined;
}

export function proxyAcceptor(port: number): Acceptor {
  switch (port) {
    case OUTBOUND_PORT:
      return 'proxy-outbound';
    case INBOUND_PLAINTEXT_PORT:
      return 'proxy-inbound';
    case INBOUND_HBONE_PORT:
      return 'proxy-hbone';
    case DNS_PORT:
      return 'proxy-dns';
    default:
      return 'other';
  }
}
