/**
 * The PodFlows port: the TCP connections a pod's network namespace holds, as the node agent needs
 * them to end the flows that escaped capture while its redirection was drifted (strict profile,
 * impl/node-agent/escaped-flows.ts). Types only; the real adapter is impl/linux/pod-flows.ts
 * (`ss -tanHe` and `conntrack -L` in the namespace, `ss -K` to end), the sim adapter is
 * sim/kernel/pod-flows-adapter.ts.
 *
 * A flow is one TCP socket of the namespace that is not listening, with what conntrack says about
 * its connection. Conntrack is what tells a captured connection from an escaped one: an app
 * socket of a captured outbound connection has the same addresses as an escaped one (REDIRECT is
 * invisible to it), but its entry is NATed to the proxy's port.
 */
import type { NetnsId } from '../api/ids.js';
import type { IpFamily } from './netns-rules.js';

interface FlowEnd {
  /** Address as the kernel prints it (IPv4 dotted, IPv6 compressed; v4-mapped v6 as printed). */
  readonly ip: string;
  readonly port: number;
}

export interface FlowConntrack {
  /** Which side sent the connection's first packet (the entry's original direction). */
  readonly initiator: 'local' | 'peer';
  /** The entry's reply tuple is not the inverse of its original one (REDIRECT, DNAT, SNAT). */
  readonly nat: boolean;
  /** The connection mark (ctmark). */
  readonly mark: number;
}

export interface TcpFlow {
  readonly family: IpFamily;
  readonly local: FlowEnd;
  readonly peer: FlowEnd;
  /** The socket's TCP state as the kernel names it (ESTAB, SYN-SENT, CLOSE-WAIT, ...). */
  readonly state: string;
  /** Owner uid of the socket. */
  readonly uid: number;
  /** SO_MARK of the socket. */
  readonly mark: number;
  /** Identity of the socket for its lifetime (the kernel's socket cookie). */
  readonly cookie: string;
  /** The connection's entry in the default conntrack zone; undefined when it has none. */
  readonly conntrack: FlowConntrack | undefined;
}

export interface PodFlows {
  /** Every non-listening TCP socket of the namespace, both families. Rejects when either read fails. */
  list(netns: NetnsId): Promise<TcpFlow[]>;
  /**
   * End these connections: each socket is destroyed (its owner sees ECONNABORTED, the peer gets a
   * RST). A flow already gone is fine. Rejects naming the netns, the flow and the tool's error
   * when a destroy fails.
   */
  end(netns: NetnsId, flows: readonly TcpFlow[]): Promise<void>;
}
