/**
 * The Linux adapter of the nftables backend: `nft -f` documents (impl/node-agent/nftables/)
 * applied in a pod's or the node's network namespace as one transaction, tables read back in the
 * kernel's own words, and removed — each as `nsenter --net=<NetnsId path> nft ...` (Debian
 * package nftables).
 *
 * - apply: `nft -f -` with the document text. nft commits the whole document atomically: a
 *   document the kernel rejects changes nothing, and the error names the netns, the command and
 *   nft's message. Each rules table is flushed and refilled, so apply twice = apply once.
 * - read: every table of the namespace from one `nft -j -s list ruleset` (libnftables' JSON, the
 *   stable machine interface; stateless: no counter values), each table as its objects in the
 *   kernel's order without their handles (`listAll`). Two reads of an unchanged namespace are
 *   equal, and any table, chain, set or rule added, removed or changed since — by anyone — makes a
 *   different listing; re-creating identical rules (new handles) does not. Drift detection
 *   compares a read with the read taken right after apply (nft rewrites what it is given, so the
 *   document's own text is not comparable).
 * - tables: every table of the namespace; iptables-nft's own tables (`ip nat`, `ip6 filter`, ...)
 *   are among them (impl/api/nft-tables.ts `isIptablesTable` tells them apart).
 * - remove: `nft delete table` for each named table that exists, in one transaction.
 * - addElement / deleteElement: a member of a set (the host's probe sets), idempotent.
 */
import type { NetnsId } from '../api/ids.js';
import { isIpAddress } from '../api/ip/address.js';
import { tableKey, type NftFamily, type NftTableRef } from '../api/nft-tables.js';
import { nsenterRun, nsenterText } from './nsenter.js';

class NftRulesError extends Error {
  override readonly name = 'NftRulesError';
}

/** Each table's listing by `tableKey`, as the kernel prints it without counters; absent: not there. */
type NftTablesState = Readonly<Record<string, string | undefined>>;

const NAME = /^[A-Za-z][A-Za-z0-9_-]{0,63}$/;
const FAMILIES: readonly string[] = ['ip', 'ip6', 'inet', 'arp', 'bridge', 'netdev'];

export class LinuxNftRules {
  private readonly timeoutMs: number;
  constructor(opts: { readonly timeoutMs?: number } = {}) {
    this.timeoutMs = opts.timeoutMs ?? 30_000;
  }

  /** Apply a rendered document (renderNft) in one transaction; returns the listed tables it names. */
  async apply(netns: NetnsId, text: string, tables: readonly NftTableRef[]): Promise<NftTablesState> {
    const argv = ['nft', '-f', '-'];
    const r = await nsenterRun(netns, argv, { timeoutMs: this.timeoutMs, input: text });
    if (!r.ok)
      throw new NftRulesError(
        `applying the nftables rules in ${netns} failed (nothing changed: nft commits a document whole): ${nsenterText(netns, argv)} exited ${r.code}: ${r.stderr.trim()}`,
      );
    return this.read(netns, tables);
  }

  async read(netns: NetnsId, tables: readonly NftTableRef[]): Promise<NftTablesState> {
    tables.forEach(checkRef);
    const all = await this.listAll(netns);
    const out: Record<string, string | undefined> = {};
    for (const t of tables) out[tableKey(t)] = all.get(tableKey(t));
    return out;
  }

  /**
   * Every table's listing by `tableKey`, from one `nft -j -s list ruleset`: the repair loop reads
   * each pod on every pass, so one process, not one per table. A listing is the JSON array of the
   * table's objects (the table, its sets, chains and rules, ...) in the order nft gives them, each
   * without its `handle`. Output that is not nft's JSON, or an object that names no table, is an
   * error, never skipped.
   */
  async listAll(netns: NetnsId): Promise<Map<string, string>> {
    const argv = ['nft', '-j', '-s', 'list', 'ruleset'];
    const r = await nsenterRun(netns, argv, { timeoutMs: this.timeoutMs });
    if (!r.ok)
      throw new NftRulesError(
        `listing the nftables ruleset in ${netns} failed: ${nsenterText(netns, argv)} exited ${r.code}: ${r.stderr.trim()} (is nft installed? Debian package nftables)`,
      );
    return groupRulesetJson(netns, r.stdout);
  }

  async remove(netns: NetnsId, tables: readonly NftTableRef[]): Promise<void> {
    tables.forEach(checkRef);
    const present = (await this.tables(netns)).map(tableKey);
    const doomed = tables.filter((t) => present.includes(tableKey(t)));
    if (doomed.length === 0) return;
    const argv = ['nft', '-f', '-'];
    const text = doomed.map((t) => `delete table ${tableKey(t)}\n`).join('');
    const r = await nsenterRun(netns, argv, { timeoutMs: this.timeoutMs, input: text });
    if (!r.ok)
      throw new NftRulesError(
        `removing nftables tables ${doomed.map(tableKey).join(', ')} in ${netns} failed (none was removed: one transaction): ${nsenterText(netns, argv)} exited ${r.code}: ${r.stderr.trim()}`,
      );
  }

  /** Add `ip` to a set (the host's probe sets), with a comment (the pod's uid); already there: fine. */
  async addElement(netns: NetnsId, table: NftTableRef, set: string, ip: string, comment: string): Promise<void> {
    checkRef(table);
    checkName(set);
    checkAddress(ip);
    if (!/^[A-Za-z0-9_./:-]{0,128}$/.test(comment))
      throw new NftRulesError(`nftables element comment ${JSON.stringify(comment)}: letters, digits and -_./: only`);
    const argv = ['nft', 'add', 'element', table.family, table.name, set, `{ ${ip} comment "${comment}" }`];
    const r = await nsenterRun(netns, argv, { timeoutMs: this.timeoutMs });
    if (!r.ok)
      throw new NftRulesError(
        `adding ${ip} to nftables set ${set} in ${netns} failed: ${nsenterText(netns, argv)} exited ${r.code}: ${r.stderr.trim()}`,
      );
  }

  /** Remove `ip` from a set; not there: fine. */
  async deleteElement(netns: NetnsId, table: NftTableRef, set: string, ip: string): Promise<void> {
    checkRef(table);
    checkName(set);
    checkAddress(ip);
    const argv = ['nft', 'delete', 'element', table.family, table.name, set, `{ ${ip} }`];
    const r = await nsenterRun(netns, argv, { timeoutMs: this.timeoutMs });
    if (!r.ok && !/No such file or directory/.test(r.stderr))
      throw new NftRulesError(
        `removing ${ip} from nftables set ${set} in ${netns} failed: ${nsenterText(netns, argv)} exited ${r.code}: ${r.stderr.trim()}`,
      );
  }

  /** A set's members with their comments (`nft -j list set`). */
  async elements(
    netns: NetnsId,
    table: NftTableRef,
    set: string,
  ): Promise<readonly { readonly ip: string; readonly comment: string }[]> {
    checkRef(table);
    checkName(set);
    const argv = ['nft', '-j', 'list', 'set', table.family, table.name, set];
    const r = await nsenterRun(netns, argv, { timeoutMs: this.timeoutMs });
    if (!r.ok)
      throw new NftRulesError(
        `listing nftables set ${set} in ${netns} failed: ${nsenterText(netns, argv)} exited ${r.code}: ${r.stderr.trim()}`,
      );
    return parseElements(netns, set, r.stdout);
  }

  /** Every table of the namespace (iptables-nft's among them). */
  async tables(netns: NetnsId): Promise<NftTableRef[]> {
    const argv = ['nft', 'list', 'tables'];
    const r = await nsenterRun(netns, argv, { timeoutMs: this.timeoutMs });
    if (!r.ok)
      throw new NftRulesError(
        `listing nftables tables in ${netns} failed: ${nsenterText(netns, argv)} exited ${r.code}: ${r.stderr.trim()} (is nft installed? Debian package nftables)`,
      );
    const out: NftTableRef[] = [];
    for (const line of r.stdout.split('\n')) {
      if (line.trim() === '') continue;
      const m = /^table (\S+) (\S+)$/.exec(line.trim());
      if (!m || !FAMILIES.includes(m[1]!))
        throw new NftRulesError(`listing nftables tables in ${netns}: unexpected line ${JSON.stringify(line)}`);
      out.push({ family: m[1] as NftFamily, name: m[2]! });
    }
    return out;
  }
}

/** One object of nft's JSON output: `{ <kind>: { family, table | name, handle, ... } }`. */
type NftJsonObject = Readonly<Record<string, Readonly<Record<string, unknown>>>>;

/**
 * `nft -j list ruleset` output grouped by table (see listAll). nft lists an empty ruleset as the
 * metainfo object alone; an empty namespace has no tables.
 */
export function groupRulesetJson(netns: string, json: string): Map<string, string> {
  const bad = (why: string): NftRulesError =>
    new NftRulesError(
      `reading the nftables ruleset in ${netns}: ${why} in ${JSON.stringify(json.slice(0, 200))} (nft -j list ruleset)`,
    );
  let doc: unknown;
  try {
    doc = JSON.parse(json);
  } catch {
    throw bad('not JSON');
  }
  const items = (doc as { nftables?: unknown } | null)?.nftables;
  if (!Array.isArray(items)) throw bad('no "nftables" array');
  const groups = new Map<string, unknown[]>();
  for (const item of items as unknown[]) {
    if (typeof item !== 'object' || item === null || Array.isArray(item)) throw bad('an entry is not an object');
    const kinds = Object.keys(item);
    if (kinds.length !== 1) throw bad(`an entry has ${kinds.length} keys, not one`);
    const kind = kinds[0]!;
    if (kind === 'metainfo') continue;
    const body = (item as NftJsonObject)[kind];
    if (typeof body !== 'object' || body === null) throw bad(`a ${kind} entry has no body`);
    const family = body['family'];
    // A table names itself; everything else names its table.
    const table = kind === 'table' ? body['name'] : body['table'];
    if (typeof family !== 'string' || !FAMILIES.includes(family) || typeof table !== 'string')
      throw bad(`a ${kind} entry names no table (family ${JSON.stringify(family)}, table ${JSON.stringify(table)})`);
    const { handle: _handle, ...rest } = body; // handles are renumbered when identical rules are made again
    const key = tableKey({ family: family as NftFamily, name: table });
    const list = groups.get(key) ?? [];
    if (kind !== 'table' && !groups.has(key)) throw bad(`a ${kind} of table ${key} comes before the table`);
    list.push({ [kind]: rest });
    groups.set(key, list);
  }
  return new Map([...groups].map(([key, objs]) => [key, JSON.stringify(objs)]));
}

/** `nft -j list set` output: elements are addresses, or `{ elem: { val, comment } }` with a comment. */
function parseElements(netns: string, set: string, json: string): { ip: string; comment: string }[] {
  const bad = (why: string): NftRulesError =>
    new NftRulesError(`reading nftables set ${set} in ${netns}: ${why} in ${JSON.stringify(json.slice(0, 200))}`);
  let doc: unknown;
  try {
    doc = JSON.parse(json);
  } catch {
    throw bad('not JSON');
  }
  const items = (doc as { nftables?: unknown }).nftables;
  if (!Array.isArray(items)) throw bad('no "nftables" array');
  const entry = items.find((x): x is { set: { elem?: unknown } } => typeof x === 'object' && x !== null && 'set' in x);
  if (!entry) throw bad('no set');
  const elems = entry.set.elem ?? [];
  if (!Array.isArray(elems)) throw bad('"elem" is not an array');
  return elems.map((e: unknown) => {
    if (typeof e === 'string') return { ip: e, comment: '' };
    const inner = (e as { elem?: { val?: unknown; comment?: unknown } }).elem;
    if (!inner || typeof inner.val !== 'string') throw bad('an element is neither an address nor {elem: {val}}');
    return { ip: inner.val, comment: typeof inner.comment === 'string' ? inner.comment : '' };
  });
}

function checkAddress(ip: string): void {
  if (!isIpAddress(ip) || ip.includes('/'))
    throw new NftRulesError(`nftables element ${JSON.stringify(ip)}: not an address`);
}

function checkName(name: string): void {
  if (!NAME.test(name)) throw new NftRulesError(`nftables name ${JSON.stringify(name)}: not a table or set name`);
}

function checkRef(t: NftTableRef): void {
  if (!FAMILIES.includes(t.family))
    throw new NftRulesError(`nftables family ${JSON.stringify(t.family)}: not a family`);
  checkName(t.name);
}
