/**
 * Deliberately wrong netfilter models, plugged into SimKernel through `netfilterFactory`: the
 * differential property's positive controls. Each must make the property fail.
 */
import type { Family } from '../../sim/kernel/ip-address.js';
import type { NetfilterEngine } from '../../sim/kernel/netns.js';
import { Netfilter } from '../../sim/kernel/netfilter/netfilter.js';
import type { IpSets } from '../../sim/kernel/netfilter/ipset.js';
import type { Hook, TableName } from '../../sim/kernel/netfilter/types.js';

export type NetfilterFactory = (family: Family, ipsets: IpSets) => NetfilterEngine;

/** A model whose engine never runs one (table, hook) pair, as if its rules were not there. */
export function ignoring(table: TableName, hook: Hook): NetfilterFactory {
  return (family, ipsets) => {
    const real = new Netfilter(family, { ipsets });
    return {
      runTable: (t, h, ctx, opts) => real.runTable(t, h, ctx, opts),
      hasRules: (t, h) => (t === table && h === hook ? false : real.hasRules(t, h)),
      restore: (text, opts) => real.restore(text, opts),
      save: (t) => real.save(t),
    };
  };
}

/** REDIRECT/DNAT of arriving connections forgotten: nat PREROUTING never consulted. */
export const natPreroutingIgnored: NetfilterFactory = ignoring('nat', 'PREROUTING');
/** Marks set on locally generated packets forgotten: mangle OUTPUT never consulted. */
export const mangleOutputIgnored: NetfilterFactory = ignoring('mangle', 'OUTPUT');
