/**
 * Sim adapter of the PodFlows port (impl/host/pod-flows.ts) over the simulated kernel: the
 * namespace's established TCP sockets, joined to its default-zone conntrack entries by tuple as
 * the Linux adapter joins `ss` and `conntrack -L`; end() is SimKernel.destroy (SOCK_DESTROY: a RST
 * through the datapath, the socket closed). The cookie is the socket's id.
 */
import type { NetnsId } from '../../impl/api/ids.js';
import type { FlowConntrack, PodFlows, TcpFlow } from '../../impl/host/pod-flows.js';
import { formatIp } from '../../impl/api/ip/address.js';
import type { SimKernel } from './kernel.js';
import { simNetnsName } from './netns.js';
import type { SimSocket } from './socket.js';
import type { Tuple } from './conntrack.js';

export class SimPodFlows implements PodFlows {
  constructor(private readonly kernel: SimKernel) {}

  private sockets(netns: NetnsId): SimSocket[] {
    const name = simNetnsName(netns);
    if (!this.kernel.hasNetns(name)) throw new Error(`pod flows: netns ${netns} does not exist (sim)`);
    return this.kernel
      .netns(name)
      .sockets.all()
      .filter((s) => s.proto === 'tcp' && s.state === 'established' && s.local && s.remote);
  }

  async list(netns: NetnsId): Promise<TcpFlow[]> {
    const n = this.kernel.netns(simNetnsName(netns));
    return this.sockets(netns).map((s) => {
      const local = s.local!;
      const remote = s.remote!;
      const out: Tuple = { proto: 'tcp', src: local.addr, sport: local.port, dst: remote.addr, dport: remote.port };
      const hit = n.conntrack.find(0, out);
      let ct: FlowConntrack | undefined;
      if (hit) {
        // The socket's own tuple is the entry's original one (it opened the connection) or its reply one.
        const e = hit.entry;
        ct = { initiator: hit.dir === 'original' ? 'local' : 'peer', nat: e.dnat || e.snat, mark: e.mark };
      } else {
        const back = n.conntrack.find(0, { ...out, src: out.dst, sport: out.dport, dst: out.src, dport: out.sport });
        if (back)
          ct = {
            initiator: back.dir === 'original' ? 'peer' : 'local',
            nat: back.entry.dnat || back.entry.snat,
            mark: back.entry.mark,
          };
      }
      return {
        family: local.addr.family === 4 ? 'ipv4' : 'ipv6',
        local: { ip: formatIp(local.addr), port: local.port },
        peer: { ip: formatIp(remote.addr), port: remote.port },
        state: 'ESTAB',
        uid: s.owner.uid,
        mark: s.mark,
        cookie: String(s.id),
        conntrack: ct,
      } satisfies TcpFlow;
    });
  }

  async end(netns: NetnsId, flows: readonly TcpFlow[]): Promise<void> {
    const socks = this.sockets(netns);
    for (const f of flows) {
      const s = socks.find((x) => String(x.id) === f.cookie);
      if (s) this.kernel.destroy(s); // already gone: fine (the port's contract)
    }
  }
}
