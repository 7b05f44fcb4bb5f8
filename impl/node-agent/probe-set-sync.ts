/**
 * What the host probe ipsets should hold, compared with what they hold: the steps that make them
 * equal. The sets are the key of the probe SNAT carve-out (host-probe-rules.ts), so a member
 * nobody owns any more is a carve-out for whoever gets that address next, and a missing member
 * is an enrolled pod whose kubelet probes lose theirs.
 *
 * Adding and removing per pod event is not enough: the agent forgets a pod's old addresses when
 * it restarts (or the node reboots) while the pod's sandbox changes, or when the pod is deleted
 * while the agent is down. So the agent also compares whole sets (start-up, repair passes).
 *
 * Pure: addresses are compared in a canonical form (ipset prints its own), members are matched
 * by address AND owner (comment = pod UID).
 */
import type { PodUid } from '../api/ids.js';

/** One pod's claim on set membership. */
export interface ProbeSetClaim {
  readonly uid: PodUid;
  /** Addresses (of the set's family) the pod has now. */
  readonly ips: readonly string[];
  /**
   * true: fully enrolled (rules and proxy ack) — its addresses must be members.
   * false: enrolling or pending — members it already has may stay (they are its current
   * addresses), none are added (enrollment adds them after the proxy's ack).
   */
  readonly required: boolean;
}

export interface ProbeSetMember {
  readonly ip: string;
  readonly comment: string;
}

interface ProbeSetSteps {
  readonly remove: readonly ProbeSetMember[];
  readonly add: readonly { readonly ip: string; readonly uid: PodUid }[];
}

/**
 * Canonical text of an address: IPv4 as is, IPv6 as eight lowercase hex groups without leading
 * zeros (so `fd00:10:244::2` and `fd00:10:244:0:0:0:0:2` compare equal). A prefix length of a
 * single address (/32, /128) is dropped.
 */
export function canonicalIp(text: string): string {
  const addr = text.replace(/\/(32|128)$/, '').toLowerCase();
  if (!addr.includes(':')) return addr;
  const [head = '', tail] = addr.split('::');
  const h = head === '' ? [] : head.split(':');
  const t = tail === undefined || tail === '' ? [] : tail.split(':');
  const zeros = tail === undefined ? [] : Array<string>(Math.max(0, 8 - h.length - t.length)).fill('0');
  return [...h, ...zeros, ...t].map((g) => Number.parseInt(g, 16).toString(16)).join(':');
}

/**
 * Steps to make one set equal to the claims: remove every member not owned by a claim with that
 * address (stale, or owned by another pod), add every required address missing or owned by
 * another pod. An address two claims name goes to the required one (the other's view is stale).
 */
export function probeSetSteps(members: readonly ProbeSetMember[], claims: readonly ProbeSetClaim[]): ProbeSetSteps {
  const owner = new Map<string, { uid: PodUid; required: boolean; ip: string }>();
  for (const c of claims) {
    for (const ip of c.ips) {
      const k = canonicalIp(ip);
      const cur = owner.get(k);
      if (!cur || (c.required && !cur.required)) owner.set(k, { uid: c.uid, required: c.required, ip });
    }
  }
  const remove: ProbeSetMember[] = [];
  const present = new Set<string>();
  for (const m of members) {
    const k = canonicalIp(m.ip);
    const o = owner.get(k);
    if (o && o.uid === m.comment) present.add(k);
    else remove.push(m);
  }
  const add: { ip: string; uid: PodUid }[] = [];
  for (const [k, o] of owner) if (o.required && !present.has(k)) add.push({ ip: o.ip, uid: o.uid });
  return { remove, add };
}
