/**
 * The host ipset port: the node namespace's address sets (the host probe SNAT set of enrolled
 * pod IPs, comment = pod UID). On Linux: `ipset` in the host netns; in the sim: the node
 * namespace's modelled sets. Removal requires both address and comment to match, so a pod never
 * removes an address that another pod has since taken. Types only.
 */
export interface IpSetSpec {
  readonly name: string;
  readonly family: 'ipv4' | 'ipv6';
}

export interface HostIpSets {
  /** Create the set if absent (hash:ip with comments); keeps existing members. */
  ensure(set: IpSetSpec): Promise<void>;
  /** Add or replace `ip` with `comment`. */
  add(set: string, ip: string, comment: string): Promise<void>;
  /** Remove `ip` only if its comment is `comment`; absent is fine. */
  remove(set: string, ip: string, comment: string): Promise<void>;
  list(set: string): Promise<readonly { readonly ip: string; readonly comment: string }[]>;
}
