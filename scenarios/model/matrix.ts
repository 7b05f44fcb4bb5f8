/**
 * The check matrix: which cells (property × threat × profile) to run, how a budget of
 * histories is spread over them, how a cell's result compares with the expected table, and
 * the summary table.
 */
import type { Backend } from '../../impl/api/backend.js';
import type { Profile } from '../world.js';
import type { PropertyName } from '../properties/index.js';
import type { CheckCatalog, ExpectedVerdict } from './contracts.js';

export interface CellId {
  readonly property: PropertyName;
  readonly threat: string;
  readonly profile: Profile;
  /** The agent's rules backend the cell's worlds deploy. */
  readonly backend: Backend;
}

/** A cell's name in reports: `property × threat × profile`, with `/nftables` for that backend. */
export function cellName(c: CellId): string {
  return `${c.property} × ${c.threat} × ${profileColumn(c)}`;
}

/** The profile as the matrix's column names it: `strict`, `strict/nftables`. */
export function profileColumn(c: Pick<CellId, 'profile' | 'backend'>): string {
  // a report read back from JSON written before the backend axis has no backend: iptables
  return c.backend === 'iptables' || (c.backend as Backend | undefined) === undefined
    ? c.profile
    : `${c.profile}/${c.backend}`;
}

export interface MatrixSelection {
  readonly properties?: readonly string[];
  readonly threats?: readonly string[];
  readonly profiles?: readonly string[];
  /** Default: iptables only (upstream's default backend); `nftables` adds its cells. */
  readonly backends?: readonly string[];
  /** 1-based shard index and count: cell k belongs to shard (k mod count) + 1. */
  readonly shard?: { readonly index: number; readonly count: number };
}

function pick<T extends string>(
  kind: string,
  known: readonly T[],
  wanted: readonly string[] | undefined,
): readonly T[] {
  if (!wanted || wanted.length === 0) return known;
  for (const w of wanted) {
    if (!known.includes(w as T)) throw new Error(`unknown ${kind} ${JSON.stringify(w)}; known: ${known.join(', ')}`);
  }
  return known.filter((k) => wanted.includes(k));
}

export function planCells(catalog: CheckCatalog, sel: MatrixSelection = {}): CellId[] {
  const props = pick(
    'property',
    catalog.properties.map((p) => p.name),
    sel.properties,
  );
  const threats = pick(
    'threat',
    catalog.threats.map((t) => t.id),
    sel.threats,
  );
  const profiles = pick('profile', catalog.profiles, sel.profiles);
  const backends = pick('backend', catalog.backends, sel.backends ?? ['iptables']);
  const all: CellId[] = [];
  for (const property of props)
    for (const threat of threats)
      for (const backend of backends) for (const profile of profiles) all.push({ property, threat, profile, backend });
  if (!sel.shard) return all;
  const { index, count } = sel.shard;
  return all.filter((_, k) => k % count === index - 1);
}

export function parseShard(text: string): { index: number; count: number } {
  const m = /^(\d+)\/(\d+)$/.exec(text);
  const index = Number(m?.[1]);
  const count = Number(m?.[2]);
  if (!m || count < 1 || index < 1 || index > count)
    throw new Error(`--shard ${JSON.stringify(text)}: expected i/n with 1 <= i <= n, e.g. 2/4`);
  return { index, count };
}

/** Spread `total` histories over `cells` cells as evenly as possible (at least one each). */
export function runsPerCell(total: number, cells: number): number {
  return cells === 0 ? 0 : Math.max(1, Math.ceil(total / cells));
}

/** A cell's standing against the table. */
export type CellStatus =
  | 'holds' // expected holds, no counterexample
  | 'bypass found' // expected bypass, counterexample found
  | 'not evaluated' // expected bypass needs an attacker action the World lacks, none found
  | 'unexpected bypass' // expected holds, counterexample found
  | 'bypass not found' // expected bypass (evaluable), none found
  | 'no expectation' // the table has no cell
  | 'error'; // the harness failed

export const FAILING: ReadonlySet<CellStatus> = new Set<CellStatus>([
  'unexpected bypass',
  'bypass not found',
  'no expectation',
  'error',
]);

export function judge(observed: 'holds' | 'bypass' | 'error', expected: ExpectedVerdict | undefined): CellStatus {
  if (observed === 'error') return 'error';
  if (!expected) return 'no expectation';
  if (observed === 'bypass') return expected.verdict === 'bypass' ? 'bypass found' : 'unexpected bypass';
  if (expected.verdict === 'holds') return 'holds';
  return expected.requires ? 'not evaluated' : 'bypass not found';
}

/** A cell's status as the matrix prints it. */
export const SHORT_STATUS: Readonly<Record<CellStatus, string>> = {
  holds: 'holds',
  'bypass found': 'BYPASS',
  'not evaluated': 'n/e',
  'unexpected bypass': '!BYPASS',
  'bypass not found': '!holds',
  'no expectation': '?',
  error: 'ERROR',
};

interface JudgedCell extends CellId {
  readonly status: CellStatus;
  readonly runs: number;
  /** Which search found the bypass: model-based histories, the attack catalog, or both. */
  readonly foundBy?: readonly ('model' | 'attacks')[];
}

function foundMark(c: JudgedCell): string {
  if (!c.foundBy || c.foundBy.length === 0) return '';
  return `[${c.foundBy.map((f) => (f === 'model' ? 'm' : 'a')).join('')}]`;
}

/**
 * The summary table: one row per property × threat, one column per profile (and backend). Cells read
 * "holds" / "BYPASS" (as expected), "!BYPASS" / "!holds" (differs from the table), "n/e", "ERROR".
 */
export function renderMatrix(cells: readonly JudgedCell[]): string {
  const profiles = [...new Set(cells.map(profileColumn))];
  const rows = new Map<string, Map<string, JudgedCell>>();
  for (const c of cells) {
    const key = `${c.property}|${c.threat}`;
    if (!rows.has(key)) rows.set(key, new Map());
    rows.get(key)?.set(profileColumn(c), c);
  }
  const propW = Math.max(8, ...cells.map((c) => c.property.length));
  const thrW = Math.max(6, ...cells.map((c) => c.threat.length));
  const colW = 20;
  const head =
    `${'property'.padEnd(propW)}  ${'threat'.padEnd(thrW)}  ${profiles.map((p) => p.padEnd(colW)).join('')}`.trimEnd();
  const lines = [head, '-'.repeat(head.length)];
  let lastProp = '';
  for (const [key, byProfile] of rows) {
    const [prop, thr] = key.split('|') as [string, string];
    const cols = profiles.map((p) => {
      const c = byProfile.get(p);
      return (c ? `${SHORT_STATUS[c.status]}${foundMark(c)} (${c.runs})` : '').padEnd(colW);
    });
    lines.push(`${(prop === lastProp ? '' : prop).padEnd(propW)}  ${thr.padEnd(thrW)}  ${cols.join('')}`.trimEnd());
    lastProp = prop;
  }
  lines.push(
    '',
    'holds / BYPASS: as the expected table says;  !BYPASS: unexpected bypass;  !holds: expected bypass not found;',
    'n/e: expected bypass needs an attacker action this world does not offer;  (N): histories run;',
    '[m] found by the model-based histories (shrunk counterexample saved), [a] by the attack catalog.',
  );
  return lines.join('\n');
}
