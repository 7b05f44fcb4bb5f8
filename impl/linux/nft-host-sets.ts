/**
 * The HostIpSets port over nftables sets (the nftables backend): the node's probe sets live in
 * the table beside the rule that names them (nftables sets are table-scoped; profile-nft.ts
 * `probeSetTable`), members are pod IPs with the pod's uid as the element comment, as upstream's
 * HostNftSetManager keeps them. Run in the node's network namespace (`hostNetns`).
 */
import type { NetnsId } from '../api/ids.js';
import type { Profile } from '../api/profile.js';
import type { HostIpSets, IpSetSpec } from '../host/ipsets.js';
import { renderNft } from '../node-agent/nftables/nft-document.js';
import { probeSetDocument, probeSetTable } from '../node-agent/nftables/profile-nft.js';
import type { LinuxNftRules } from './nft-rules.js';

export class NftHostIpSets implements HostIpSets {
  /** The family of each set this adapter has ensured (the port names sets, nftables needs their table). */
  private readonly families = new Map<string, IpSetSpec['family']>();

  constructor(
    private readonly nft: LinuxNftRules,
    private readonly hostNetns: NetnsId,
    private readonly profile: Profile,
  ) {}

  async ensure(set: IpSetSpec): Promise<void> {
    const doc = probeSetDocument(this.profile, set);
    const table = probeSetTable(this.profile, set.family);
    await this.nft.apply(this.hostNetns, renderNft(doc), [table]);
    this.families.set(set.name, set.family);
  }

  async add(set: string, ip: string, comment: string): Promise<void> {
    const table = this.tableOf(set);
    // Replace: delete first (absent is fine), so the comment is the new owner's.
    await this.nft.deleteElement(this.hostNetns, table, set, ip);
    await this.nft.addElement(this.hostNetns, table, set, ip, comment);
  }

  async remove(set: string, ip: string, comment: string): Promise<void> {
    const cur = (await this.list(set)).find((m) => m.ip === ip);
    if (cur && cur.comment === comment) await this.nft.deleteElement(this.hostNetns, this.tableOf(set), set, ip);
  }

  list(set: string): Promise<readonly { readonly ip: string; readonly comment: string }[]> {
    return this.nft.elements(this.hostNetns, this.tableOf(set), set);
  }

  private tableOf(set: string): ReturnType<typeof probeSetTable> {
    const family = this.families.get(set);
    if (family === undefined)
      throw new Error(
        `nftables probe set ${JSON.stringify(set)} was never ensured here: ensure() it first (the agent does at start)`,
      );
    return probeSetTable(this.profile, family);
  }
}
