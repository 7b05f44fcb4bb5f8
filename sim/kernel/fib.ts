/**
 * The forwarding information base lookup: policy rules in priority order, each consulting its
 * table, the first route found decides (kernel fib_lookup / fib6_lookup). Also source address
 * selection for locally generated packets, and address classification for `-m addrtype`.
 */
import { isLoopback, isMulticast, isUnspecified, type Family, type IpAddress } from '../../impl/api/ip/address.js';
import { ruleMatches, type PolicyRule, type RuleQuery } from './policy-rule.js';
import { TABLE_LOCAL, type Route } from './route.js';
import type { Netns } from './netns.js';
import type { AddrType } from './netfilter/types.js';

export type RouteDecision =
  | {
      readonly kind: 'local';
      readonly route: Route;
      readonly rule: PolicyRule;
      readonly dev: string;
      readonly nextHop: IpAddress;
    }
  | {
      readonly kind: 'unicast';
      readonly route: Route;
      readonly rule: PolicyRule;
      /** Device the packet leaves by (for 'local': lo, as the kernel delivers via loopback). */
      readonly dev: string;
      /** Neighbour to hand the packet to: the gateway, or the destination itself when on-link. */
      readonly nextHop: IpAddress;
    }
  | {
      readonly kind: 'blackhole' | 'unreachable' | 'prohibit';
      readonly route: Route | undefined;
      readonly rule: PolicyRule | undefined;
    };

export function fibLookup(ns: Netns, q: RuleQuery): RouteDecision {
  const isUp = (dev: string): boolean => ns.links.get(dev)?.up ?? false;
  for (const rule of ns.rules.list(q.family)) {
    if (!ruleMatches(rule, q)) continue;
    if (rule.action !== 'lookup') return { kind: rule.action, route: undefined, rule };
    const route = ns.routes.lookup(rule.table, q.dst, isUp);
    if (!route) continue;
    if (route.type === 'blackhole' || route.type === 'unreachable' || route.type === 'prohibit') {
      return { kind: route.type, route, rule };
    }
    if (route.type === 'local') {
      return { kind: 'local', route, rule, dev: 'lo', nextHop: q.dst };
    }
    if (!route.dev) continue;
    return { kind: 'unicast', route, rule, dev: route.dev, nextHop: route.via ?? q.dst };
  }
  return { kind: 'unreachable', route: undefined, rule: undefined };
}

/** Source address for a locally generated packet (prefsrc, else the out device's, else any local). */
export function selectSource(ns: Netns, d: RouteDecision, dst: IpAddress): IpAddress | undefined {
  if (d.kind !== 'local' && d.kind !== 'unicast') return undefined;
  if (d.route.src) return d.route.src;
  if (d.kind === 'local') {
    // Talking to one of our own addresses: the kernel uses that address as the source. IPv4 does
    // so for any RTN_LOCAL route (ip_route_output_key_hash_rcu: saddr = daddr), also for a
    // foreign destination sent to a policy table's `local 0.0.0.0/0 dev lo` — connect() then
    // fails on the non-local source (kernel.ts).
    if (dst.family === 4 || isLocalAddress(ns, dst)) return dst;
    // IPv6 has no such shortcut: ip6_route_get_saddr → ipv6_dev_get_saddr chooses among the
    // addresses of every device (the destination is global, so not only those of lo).
    return selectV6SourceAnyDevice(ns, dst);
  }
  const dev = ns.links.get(d.dev);
  const fam = dst.family;
  const onDev = dev?.addresses.filter((a) => a.addr.family === fam) ?? [];
  // Prefer an address whose subnet holds the next hop, then the device's first address.
  const inSubnet = onDev.find((a) => a.prefix.len > 0 && sameSubnet(a.prefix, d.nextHop));
  if (inSubnet) return inSubnet.addr;
  if (onDev[0]) return onDev[0].addr;
  for (const link of ns.links.values()) {
    if (link.kind === 'loopback') continue;
    const a = link.addresses.find((x) => x.addr.family === fam);
    if (a) return a.addr;
  }
  return undefined;
}

/**
 * RFC 6724 source selection over all devices, reduced to the rules that can differ between the
 * model's addresses (ipv6_dev_get_saddr): rule 2, a scope at least the destination's (so not ::1
 * or a link-local address for a global destination); rule 5, with an outgoing device, an address
 * of that device; rule 8, the longest common prefix, capped at the address's prefix length. Ties
 * keep the first address found (devices in creation order). A link-local destination takes only
 * the outgoing device's addresses (the candidate set of section 4).
 */
function selectV6SourceAnyDevice(ns: Netns, dst: IpAddress, outDev?: string): IpAddress | undefined {
  const scope = (a: IpAddress): number => (isLoopback(a) ? 1 : a.value >> 118n === 0x3fan ? 2 : 14);
  const common = (a: IpAddress): number => {
    let n = 0;
    while (n < 128 && ((a.value >> BigInt(127 - n)) & 1n) === ((dst.value >> BigInt(127 - n)) & 1n)) n++;
    return n;
  };
  const onlyOut = outDev !== undefined && scope(dst) <= 2;
  let best: { addr: IpAddress; scopeOk: boolean; sameDev: boolean; prefix: number } | undefined;
  for (const link of ns.links.values()) {
    if (onlyOut && link.name !== outDev) continue;
    for (const a of link.addresses) {
      if (a.addr.family !== 6) continue;
      const c = {
        addr: a.addr,
        scopeOk: scope(a.addr) >= scope(dst),
        sameDev: link.name === outDev,
        prefix: Math.min(common(a.addr), a.prefix.len),
      };
      const better =
        !best ||
        (c.scopeOk !== best.scopeOk ? c.scopeOk : c.sameDev !== best.sameDev ? c.sameDev : c.prefix > best.prefix);
      if (better) best = c;
    }
  }
  return best?.addr;
}

/**
 * The source MASQUERADE takes for a packet leaving by `outDev`. IPv4 (nf_nat_masquerade_ipv4 →
 * inet_select_addr with universe scope): a primary address of the device, preferring one whose
 * subnet holds the next hop — host-scope 127/8 does not qualify, so leaving by lo it is the first
 * such address of any device (lo, then the others); none → the kernel drops. IPv6
 * (nf_nat_masquerade_ipv6 → ipv6_dev_get_saddr): ordinary source selection for the destination.
 */
export function masqueradeSource(
  ns: Netns,
  outDev: string | undefined,
  nextHop: IpAddress,
  dst: IpAddress,
): IpAddress | undefined {
  const dev = outDev ? ns.links.get(outDev) : undefined;
  if (dst.family === 6) {
    if (isLoopback(dst) || isLocalAddress(ns, dst)) return dst;
    // Not simply the device's first address: leaving by lo for a global destination, ::1 loses
    // to a global address of another device on scope (found by the nftables long run, seed 20261260).
    return selectV6SourceAnyDevice(ns, dst, dev?.name);
  }
  const primaries = (l: {
    addresses: readonly { addr: IpAddress; prefix: { addr: IpAddress; len: number } }[];
  }): IpAddress[] =>
    l.addresses
      .filter(
        (a, i) =>
          a.addr.family === 4 &&
          !isLoopback(a.addr) &&
          !l.addresses
            .slice(0, i)
            .some(
              (q) =>
                q.addr.family === 4 && q.prefix.len === a.prefix.len && q.prefix.addr.value === a.prefix.addr.value,
            ),
      )
      .map((a) => a.addr);
  if (dev) {
    const own = dev.addresses.filter((a) => primaries(dev).includes(a.addr));
    const chosen = own.find((a) => a.prefix.len > 0 && sameSubnet(a.prefix, nextHop)) ?? own[0];
    if (chosen) return chosen.addr;
  }
  const all = [...ns.links.values()].sort((a, b) =>
    a.kind === 'loopback' ? -1 : b.kind === 'loopback' ? 1 : a.index - b.index,
  );
  for (const l of all) {
    const a = primaries(l)[0];
    if (a) return a;
  }
  return undefined;
}

function sameSubnet(p: { addr: IpAddress; len: number }, a: IpAddress): boolean {
  const bits = a.family === 4 ? 32 : 128;
  if (p.addr.family !== a.family) return false;
  const shift = BigInt(bits - p.len);
  return a.value >> shift === p.addr.value >> shift;
}

/** Is the address configured locally (a `local` route in the local table)? */
export function isLocalAddress(ns: Netns, addr: IpAddress): boolean {
  return ns.routes.lookup(TABLE_LOCAL, addr, () => true)?.type === 'local';
}

/** Classification used by `-m addrtype` (inet_addr_type / ip6 addrtype semantics, simplified). */
export function addrType(ns: Netns, addr: IpAddress, family: Family, iface?: string): AddrType {
  if (isUnspecified(addr)) return family === 4 ? 'BROADCAST' : 'UNSPEC';
  if (isMulticast(addr)) return 'MULTICAST';
  if (family === 4 && addr.value === 0xffffffffn) return 'BROADCAST';
  if (iface !== undefined) {
    const link = ns.links.get(iface);
    if (link?.addresses.some((a) => a.addr.family === family && a.addr.value === addr.value)) return 'LOCAL';
    if (
      family === 4 &&
      link?.addresses.some(
        (a) =>
          a.addr.family === 4 &&
          a.prefix.len < 31 &&
          (addr.value | ((1n << BigInt(32 - a.prefix.len)) - 1n)) === addr.value &&
          sameSubnet(a.prefix, addr),
      )
    )
      return 'BROADCAST';
    return 'UNICAST';
  }
  if (isLocalAddress(ns, addr)) return 'LOCAL';
  if (family === 4) {
    for (const link of ns.links.values()) {
      for (const a of link.addresses) {
        if (a.addr.family !== 4 || a.prefix.len >= 31) continue;
        const host = (1n << BigInt(32 - a.prefix.len)) - 1n;
        if (sameSubnet(a.prefix, addr) && (addr.value & host) === host) return 'BROADCAST';
      }
    }
  }
  return 'UNICAST';
}
