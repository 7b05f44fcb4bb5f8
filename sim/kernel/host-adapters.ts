/**
 * Sim adapters of two node-agent ports over the simulated kernel:
 * - HostIpSets: the node namespace's modelled ipsets (SimHostIpSets), or its nftables sets
 *   (SimNftHostIpSets, the nftables backend);
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
import type { Profile } from '../../impl/api/profile.js';
import { renderNft } from '../../impl/node-agent/nftables/nft-document.js';
import { probeSetDocument, probeSetTable } from '../../impl/node-agent/nftables/profile-nft.js';
import type { NfTables } from './nftables/nftables.js';

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

/**
 * HostIpSets over the node namespace's nftables sets (the nftables backend), in the table
 * beside the rule that names them (profile-nft.ts probeSetTable). The model's set elements carry
 * no comment, so the pod uid each member was added for is kept here, beside the set: a sim-only
 * bookkeeping the Linux adapter reads from the element comments instead.
 */
export class SimNftHostIpSets implements HostIpSets {
  private readonly families = new Map<string, IpSetSpec['family']>();
  private readonly owners = new Map<string, Map<string, string>>();

  constructor(
    private readonly kernel: SimKernel,
    private readonly hostNetns: string,
    private readonly profile: Profile,
  ) {}

  private nft(): NfTables {
    return this.kernel.netns(this.hostNetns).nftables;
  }

  async ensure(set: IpSetSpec): Promise<void> {
    this.nft().apply(renderNft(probeSetDocument(this.profile, set)), { source: `probe set ${set.name}` });
    this.families.set(set.name, set.family);
  }

  async add(set: string, ip: string, comment: string): Promise<void> {
    const t = this.tableOf(set);
    const key = canonicalIp(ip);
    if (this.has(set, key)) this.nft().deleteElements(t.family, t.name, set, [key]);
    this.nft().addElements(t.family, t.name, set, [key]);
    this.ownersOf(set).set(key, comment);
  }

  async remove(set: string, ip: string, comment: string): Promise<void> {
    const t = this.tableOf(set);
    const key = canonicalIp(ip);
    if (!this.has(set, key) || this.ownersOf(set).get(key) !== comment) return;
    this.nft().deleteElements(t.family, t.name, set, [key]);
    this.ownersOf(set).delete(key);
  }

  async list(set: string): Promise<readonly { ip: string; comment: string }[]> {
    const t = this.tableOf(set);
    return this.nft()
      .elements(t.family, t.name, set)
      .map((e) => ({ ip: e, comment: this.ownersOf(set).get(canonicalIp(e)) ?? '' }));
  }

  private has(set: string, key: string): boolean {
    const t = this.tableOf(set);
    return this.nft()
      .elements(t.family, t.name, set)
      .some((e) => canonicalIp(e) === key);
  }

  private ownersOf(set: string): Map<string, string> {
    return this.owners.get(set) ?? this.owners.set(set, new Map()).get(set)!;
  }

  private tableOf(set: string): ReturnType<typeof probeSetTable> {
    const family = this.families.get(set);
    if (family === undefined)
      throw new Error(`nftables probe set ${JSON.stringify(set)} was never ensured here: ensure() it first`);
    return probeSetTable(this.profile, family);
  }
}

function canonicalIp(text: string): string {
  return formatIp(parseIp(text.replace(/\/(32|128)$/, '')));
}
