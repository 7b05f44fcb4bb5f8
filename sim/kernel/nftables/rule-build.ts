/**
 * What the rule parser knows while it reads one rule: the table (its family and named sets), the
 * protocol context nft keeps (which network and transport protocol earlier matches fixed, for
 * `dnat to`, `redirect to :P` and `tproxy`, and to refuse conflicting protocols), and what the
 * rule has compiled so far.
 */
import { NftSyntaxError } from './errors.js';
import type { ChainConstraint, NftOp, NftTableState, NftVerdict } from './model.js';

export class RuleBuild {
  readonly ops: NftOp[] = [];
  readonly listing: string[] = [];
  readonly constraints: ChainConstraint[] = [];
  needsConntrack = false;
  verdict: NftVerdict | undefined;
  /** A terminal statement was read (a verdict, NAT, reject): only `comment` may follow. */
  terminal: string | undefined;
  effect: string | undefined;
  /** Network protocol fixed by the table family or an earlier match. */
  nf: 4 | 6 | undefined;
  private nfBy: string;
  /** Transport protocol fixed by an earlier match (`meta l4proto tcp`, `tcp dport ...`). */
  l4: 'tcp' | 'udp' | undefined;

  constructor(readonly table: NftTableState) {
    this.nf = table.family === 'ip' ? 4 : table.family === 'ip6' ? 6 : undefined;
    this.nfBy = table.family;
  }

  /** Record that a match implies network protocol `f` (refusing a conflict as nft does). */
  network(f: 4 | 6, word: string): void {
    if (this.nf !== undefined && this.nf !== f)
      throw new NftSyntaxError(`conflicting protocols specified: ${this.nfBy} vs. ${word}`);
    this.nf = f;
    this.nfBy = word;
  }

  transport(p: 'tcp' | 'udp'): void {
    if (this.l4 !== undefined && this.l4 !== p)
      throw new NftSyntaxError(`conflicting protocols specified: ${this.l4} vs. ${p}`);
    this.l4 = p;
  }

  beforeStatement(word: string): void {
    if (this.terminal !== undefined && word !== 'comment')
      throw new NftSyntaxError(
        `Statement after terminal statement has no effect: "${word}" after "${this.terminal}" (end the rule with the verdict)`,
      );
  }
}
