/**
 * The conntrack template the raw table's CT target attaches to a packet (xt_CT.c).
 *
 * `-j CT --zone N` does not just remember a zone: it sets skb->_nfct to a per-rule template
 * entry (IPS_TEMPLATE) with ctinfo IP_CT_NEW, and nf_conntrack_in later swaps it for the real
 * entry. Until then — the rest of the raw chain at that hook — every match that asks
 * nf_ct_get() sees the template: `-m connmark --mark X` compares the template's mark (0),
 * `--ctstate NEW` matches, `--ctstate INVALID` does not, and the original tuple is all zeros.
 * So `-j CT --zone 1` followed by `-m connmark ! --mark 0x111/0xfff -j DROP` drops, where the
 * same DROP without the CT rule before it would not match (no entry: connmark is false).
 *
 * xt_ct_target also ignores a packet that already carries anything in skb->_nfct ("previously
 * seen (loopback)? Ignore."): a template from an earlier CT rule, the UNTRACKED marker of
 * `--notrack`, or the entry a looped packet brought over lo. The first CT rule wins.
 *
 * Not modelled: the template is shared by every packet that hits the same rule, so a CONNMARK
 * written to it in raw would persist across packets; the model keeps one template per packet
 * (the generated rulesets never write a ctmark in raw).
 */
import { anyAddress, type Family, type IpAddress } from '../../impl/api/ip/address.js';
import type { ConntrackRef } from './netfilter/types.js';

export class CtTemplate implements ConntrackRef {
  readonly state = 'NEW' as const;
  readonly direction = 'original' as const;
  mark = 0;
  readonly origSrc: IpAddress;
  readonly origDst: IpAddress;
  readonly origSport = 0;
  readonly origDport = 0;
  readonly snat = false;
  readonly dnat = false;

  constructor(
    readonly zone: number,
    family: Family,
  ) {
    this.origSrc = anyAddress(family);
    this.origDst = anyAddress(family);
  }
}

/** What skb->_nfct holds, as far as xt_ct_target cares: may a CT rule still attach something? */
export function ctTargetApplies(skb: {
  readonly ct: unknown;
  readonly untracked: boolean;
  readonly template: CtTemplate | undefined;
}): boolean {
  return skb.ct === undefined && !skb.untracked && skb.template === undefined;
}
