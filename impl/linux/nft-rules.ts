/**
 * The Linux adapter of the nftables backend (in progress, docs/design.md "nftables"): an `nft -f`
 * document (impl/node-agent/nftables/) applied in a pod's or the node's network namespace as one
 * transaction, read back in the kernel's own words, and removed — each as
 * `nsenter --net=<NetnsId path> nft ...` (Debian package nftables).
 *
 * - apply: `nft -f -` with the rendered document. nft commits the whole document atomically:
 *   a document the kernel rejects changes nothing, and the error names the netns, the command
 *   and nft's message. Each table of the document is flushed and refilled, so apply twice =
 *   apply once; tables the document does not name are left alone.
 * - read: `nft -s list table inet <name>` for each named table (stateless: no counters), so two
 *   reads of an unchanged namespace are equal and any rule added, removed or changed since — by
 *   anyone — shows as a different text. Drift detection compares a read with the read taken
 *   right after apply (the kernel's canonical form of the document; nft rewrites what it is
 *   given, so the document's own text is not comparable).
 * - remove: `nft delete table` for each named table that exists; absent ones are fine.
 * - addElement / deleteElement: a member of a set (the host's probe sets), idempotent.
 */
import type { NetnsId } from '../api/ids.js';
import { isIpAddress } from '../api/ip/address.js';
import { renderNft, type NftDocument } from '../node-agent/nftables/nft-document.js';
import { nsenterRun, nsenterText } from './nsenter.js';

class NftRulesError extends Error {
  override readonly name = 'NftRulesError';
}

/** Each named table's listing, as the kernel prints it without counters; absent: not there. */
type NftTablesState = Readonly<Record<string, string | undefined>>;

const TABLE_NAME = /^[A-Za-z][A-Za-z0-9_-]{0,63}$/;

export class LinuxNftRules {
  private readonly timeoutMs: number;
  constructor(opts: { readonly timeoutMs?: number } = {}) {
    this.timeoutMs = opts.timeoutMs ?? 30_000;
  }

  async apply(netns: NetnsId, doc: NftDocument): Promise<NftTablesState> {
    const text = renderNft(doc);
    const argv = ['nft', '-f', '-'];
    const r = await nsenterRun(netns, argv, { timeoutMs: this.timeoutMs, input: text });
    if (!r.ok)
      throw new NftRulesError(
        `applying the nftables rules in ${netns} failed (nothing changed: nft commits a document whole): ${nsenterText(netns, argv)} exited ${r.code}: ${r.stderr.trim()}`,
      );
    return this.read(
      netns,
      doc.tables.map((t) => t.name),
    );
  }

  async read(netns: NetnsId, tables: readonly string[]): Promise<NftTablesState> {
    const present = await this.tables(netns);
    const out: Record<string, string | undefined> = {};
    for (const name of tables) {
      checkTable(name);
      if (!present.includes(name)) {
        out[name] = undefined;
        continue;
      }
      const argv = ['nft', '-s', 'list', 'table', 'inet', name];
      const r = await nsenterRun(netns, argv, { timeoutMs: this.timeoutMs });
      if (!r.ok)
        throw new NftRulesError(
          `reading nftables table ${name} in ${netns} failed: ${nsenterText(netns, argv)} exited ${r.code}: ${r.stderr.trim()}`,
        );
      out[name] = r.stdout;
    }
    return out;
  }

  async remove(netns: NetnsId, tables: readonly string[]): Promise<void> {
    const present = await this.tables(netns);
    for (const name of tables) {
      checkTable(name);
      if (!present.includes(name)) continue;
      const argv = ['nft', 'delete', 'table', 'inet', name];
      const r = await nsenterRun(netns, argv, { timeoutMs: this.timeoutMs });
      if (!r.ok)
        throw new NftRulesError(
          `removing nftables table ${name} in ${netns} failed: ${nsenterText(netns, argv)} exited ${r.code}: ${r.stderr.trim()}`,
        );
    }
  }

  /** Add `ip` to a set (the host's probe sets), with a comment (the pod's uid); already there: fine. */
  async addElement(netns: NetnsId, table: string, set: string, ip: string, comment: string): Promise<void> {
    checkTable(table);
    checkTable(set);
    checkAddress(ip);
    if (!/^[A-Za-z0-9_./:-]{0,128}$/.test(comment))
      throw new NftRulesError(`nftables element comment ${JSON.stringify(comment)}: letters, digits and -_./: only`);
    const argv = ['nft', 'add', 'element', 'inet', table, set, `{ ${ip} comment "${comment}" }`];
    const r = await nsenterRun(netns, argv, { timeoutMs: this.timeoutMs });
    if (!r.ok)
      throw new NftRulesError(
        `adding ${ip} to nftables set ${set} in ${netns} failed: ${nsenterText(netns, argv)} exited ${r.code}: ${r.stderr.trim()}`,
      );
  }

  /** Remove `ip` from a set; not there: fine. */
  async deleteElement(netns: NetnsId, table: string, set: string, ip: string): Promise<void> {
    checkTable(table);
    checkTable(set);
    checkAddress(ip);
    const argv = ['nft', 'delete', 'element', 'inet', table, set, `{ ${ip} }`];
    const r = await nsenterRun(netns, argv, { timeoutMs: this.timeoutMs });
    if (!r.ok && !/No such file or directory/.test(r.stderr))
      throw new NftRulesError(
        `removing ${ip} from nftables set ${set} in ${netns} failed: ${nsenterText(netns, argv)} exited ${r.code}: ${r.stderr.trim()}`,
      );
  }

  /** The inet tables the namespace holds. */
  private async tables(netns: NetnsId): Promise<string[]> {
    const argv = ['nft', 'list', 'tables', 'inet'];
    const r = await nsenterRun(netns, argv, { timeoutMs: this.timeoutMs });
    if (!r.ok)
      throw new NftRulesError(
        `listing nftables tables in ${netns} failed: ${nsenterText(netns, argv)} exited ${r.code}: ${r.stderr.trim()} (is nft installed? Debian package nftables)`,
      );
    return r.stdout
      .split('\n')
      .map((l) => /^table inet (\S+)$/.exec(l.trim())?.[1])
      .filter((n): n is string => n !== undefined);
  }
}

function checkAddress(ip: string): void {
  if (!isIpAddress(ip) || ip.includes('/'))
    throw new NftRulesError(`nftables element ${JSON.stringify(ip)}: not an address`);
}

function checkTable(name: string): void {
  if (!TABLE_NAME.test(name)) throw new NftRulesError(`nftables table name ${JSON.stringify(name)}: not a table name`);
}
