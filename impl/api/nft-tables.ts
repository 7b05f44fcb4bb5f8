/**
 * nftables tables by family and name, the vocabulary the nftables backend, its port and its
 * adapters share (`inet istio-ambient-nat`, `ip6 istio-ambient-filter`).
 */
export type NftFamily = 'inet' | 'ip' | 'ip6';

export interface NftTableRef {
  readonly family: NftFamily;
  readonly name: string;
}

/** `<family> <name>`: how nft names a table, and the key of a table in listings. */
export function tableKey(t: NftTableRef): string {
  return `${t.family} ${t.name}`;
}

/** Every table the node agent writes, in either profile, is named with this prefix. */
export const OWN_TABLE_PREFIX = 'istio-ambient';

export function isOwnTable(t: { readonly name: string }): boolean {
  return t.name === OWN_TABLE_PREFIX || t.name.startsWith(`${OWN_TABLE_PREFIX}-`);
}

const IPTABLES_TABLES: readonly string[] = ['raw', 'mangle', 'nat', 'filter', 'security'];

/** A table iptables-nft / ip6tables-nft keeps (read through iptables-save, not as nftables). */
export function isIptablesTable(t: { readonly family: string; readonly name: string }): boolean {
  return (t.family === 'ip' || t.family === 'ip6') && IPTABLES_TABLES.includes(t.name);
}
