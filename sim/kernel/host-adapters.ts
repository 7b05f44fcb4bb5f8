/**
 * Sim adapters of two node-agent ports over the simulated kernel:
 * - HostIpSets: the node namespace's modelled ipsets;
 * - NetnsFinder: the runtime's sandbox records stand in for /proc (which process runs in which
 *   pod's namespace), with the same check upstream added: the namespace must hold one of the
 *   pod's IPs, so a recycled or wrong namespace is never picked.
 */
import type { NetnsId } from '../../impl/api/ids.js';
import { netnsId } from '../../impl/api/ids.js';
import type { HostIpSets, IpSetSpec } from '../../impl/host/ipsets.js';
import type { NetnsFinder } from '../../impl/host/netns-finder.js';
import { formatIp, parseIp } from '../../impl/api/ip/address.js';
import type { SimKernel } from './kernel.js';
import { simNetnsName, simNetnsPath } from './netns.js';

export class SimHostIpSets implements HostIpSets {
  constructor(
    private readonly kernel: SimKernel,
    private readonly hostNetns: string,
  ) {}

  private sets() {
    return this.kernel.ipsetsOf(this.hostNetns);
  }

  async ensure(set: IpSetSpec): Promise<void> {
    this.sets().create(set.name, 'hash:ip', set.family === 'ipv4' ? 4 : 6, { comment: true, exist: true });
  }

  async add(set: string, ip: string, comment: string): Promise<void> {
    const s = this.sets();
    if (s.entries(set).some((e) => sameIp(e.text, ip))) s.del(set, ip, { exist: true });
    s.add(set, ip, { comment, exist: true });
  }

  async remove(set: string, ip: string, comment: string): Promise<void> {
    const s = this.sets();
    if (!s.names().includes(set)) return;
    if (s.entries(set).some((e) => sameIp(e.text, ip) && e.comment === comment)) s.del(set, ip, { exist: true });
  }

  async list(set: string): Promise<readonly { ip: string; comment: string }[]> {
    const s = this.sets();
    if (!s.names().includes(set)) return [];
    return s.entries(set).map((e) => ({ ip: e.text.replace(/\/(32|128)$/, ''), comment: e.comment ?? '' }));
  }
}

function sameIp(a: string, b: string): boolean {
  try {
    const x = parseIp(a.replace(/\/(32|128)$/, ''));
    const y = parseIp(b.replace(/\/(32|128)$/, ''));
    return x.family === y.family && x.value === y.value;
  } catch {
    return false;
  }
}

/** Candidate (pod UID, namespace) pairs, as a /proc scan would find them from cgroups. */
type SandboxCandidates = () => Iterable<{ readonly podUid: string; readonly netns: string }>;

export class SimNetnsFinder implements NetnsFinder {
  constructor(
    private readonly kernel: SimKernel,
    private readonly candidates: SandboxCandidates,
  ) {}

  async find(podUid: string, ips: readonly string[]): Promise<NetnsId | undefined> {
    for (const c of this.candidates()) {
      const name = simNetnsName(c.netns);
      if (c.podUid !== podUid || !c.netns || !this.kernel.hasNetns(name)) continue;
      const ns = this.kernel.netns(name);
      const holds = [...ns.links.values()].some((l) =>
        l.addresses.some((a) => ips.some((ip) => sameIp(ip, formatIp(a.addr)))),
      );
      if (holds) return netnsId(simNetnsPath(name));
    }
    return undefined;
  }

  async exists(netns: NetnsId): Promise<boolean> {
    return this.kernel.hasNetns(simNetnsName(netns));
  }
}
