/**
 * The node agent hands the proxy network namespaces as paths (/var/run/netns/<name>, what the
 * real runtime and the sim's NetnsFinder give), while the sim kernel names namespaces by bare
 * name. This Sockets decorator translates the one into the other before the sim adapter sees
 * it — the proxy code stays unchanged, as it would on Linux where the path is what setns opens.
 */
import { netnsId, type NetnsId } from '../../../impl/api/ids.js';
import type {
  BindUdpOptions,
  ConnectTcpOptions,
  ListenTcpOptions,
  SocketOutcome,
  Sockets,
  TcpConnection,
  TcpListener,
  UdpDatagram,
  UdpSocket,
} from '../../../impl/host/sockets.js';
import { simNetnsName } from '../../../sim/kernel/netns.js';

function byName(netns: NetnsId | undefined): NetnsId | undefined {
  return netns === undefined ? undefined : netnsId(simNetnsName(netns));
}

export class NetnsPathSockets implements Sockets {
  constructor(private readonly inner: Sockets) {}

  listenTcp(opts: ListenTcpOptions, onConnection: (conn: TcpConnection) => void): Promise<SocketOutcome<TcpListener>> {
    const netns = byName(opts.netns);
    return this.inner.listenTcp(netns === undefined ? opts : { ...opts, netns }, onConnection);
  }

  connectTcp(opts: ConnectTcpOptions): Promise<SocketOutcome<TcpConnection>> {
    const netns = byName(opts.netns);
    return this.inner.connectTcp(netns === undefined ? opts : { ...opts, netns });
  }

  bindUdp(opts: BindUdpOptions, onDatagram: (d: UdpDatagram) => void): Promise<SocketOutcome<UdpSocket>> {
    if (!this.inner.bindUdp)
      throw new Error(
        "NetnsPathSockets: the wrapped Sockets adapter has no UDP (bindUdp); the proxy's DNS listener needs it",
      );
    const netns = byName(opts.netns);
    return this.inner.bindUdp(netns === undefined ? opts : { ...opts, netns }, onDatagram);
  }
}
