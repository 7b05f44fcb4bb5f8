/**
 * `check --html DIR`: the check report as one offline page, DIR/index.html. The matrix shows
 * each cell's status against the expected table; a click on a cell opens its panel: the expected
 * verdict with its reason and bypass classes, what the run found, and for a counterexample its
 * shrunk history, the violating attempt, the replay command and the packet path drawn across
 * namespaces (packet-path.ts). The page needs no network and no other file.
 */
import * as fs from 'node:fs';
import * as path from 'node:path';
import type { CellReport, CheckReport } from '../../scenarios/model/check.js';
import { describeAttempt, type CounterexampleFile } from '../../scenarios/model/counterexample.js';
import { FAILING, SHORT_STATUS } from '../../scenarios/model/matrix.js';
import { esc, page } from './page.js';
import { pathOfText, renderPath } from './packet-path.js';

/** A cell or a counterexample file (whose backend is in its settings); iptables is left unsaid. */
interface CellLike {
  readonly property: string;
  readonly threat: string;
  readonly profile: string;
  readonly backend?: string;
  readonly settings?: { readonly backend?: string };
}
const column = (c: CellLike): string => {
  const b = c.backend ?? c.settings?.backend ?? 'iptables';
  return b === 'iptables' ? c.profile : `${c.profile}/${b}`;
};
const cellKey = (c: CellLike): string => `${c.property}|${c.threat}|${column(c)}`;
const cellId = (c: CellLike): string => `cell-${cellKey(c).replace(/[^A-Za-z0-9_-]/g, '_')}`;
const statusClass = (s: CellReport['status']): string => `st-${s.replace(/ /g, '-')}`;

function counterexampleHtml(f: CounterexampleFile): string {
  const out: string[] = [];
  out.push(`<h3>Counterexample (shrunk)</h3>`);
  out.push(`<p><b>${esc(f.violation.message)}</b></p>`);
  out.push(
    `<p>Replay: <code class="replay">${esc(f.replay)}</code> <span class="muted">seed ${esc(f.seed)}, path ${esc(f.path)}</span></p>`,
  );
  out.push(
    `<ol class="history">${f.steps.map((s) => `<li><code>${esc(s.command)}</code> <span class="muted">→ ${esc(s.detail)}</span></li>`).join('')}</ol>`,
  );
  if (f.attempt) {
    const a = f.attempt;
    const { from, to, deliveries } = describeAttempt(a);
    out.push(
      `<p class="attempt">Violating attempt: <code>${esc(`${from} → ${to}`)}</code>; outcome <b>${esc(a.result.outcome)}</b>, first hop ${esc(a.result.acceptedBy ?? 'none')}, deliveries: ${esc(deliveries)}</p>`,
    );
  }
  if (f.trace) {
    out.push(`<h3>Packet path</h3>`);
    out.push(renderPath(pathOfText(f.trace)));
    out.push(`<details><summary>trace as text</summary><pre>${esc(f.trace)}</pre></details>`);
  }
  return out.join('\n');
}

function cellPanel(c: CellReport, f: CounterexampleFile | undefined): string {
  const e = c.expected;
  const parts: string[] = [
    `<h2>${esc(c.property)} × ${esc(c.threat)} × ${esc(column(c))}: <span class="${statusClass(c.status)}">${esc(c.status)}</span></h2>`,
    `<p class="expected">Expected: <b>${esc(e?.verdict ?? 'no table cell')}</b>${
      e?.classes?.length ? ` <span class="classes">[${esc(e.classes.join(', '))}]</span>` : ''
    } — ${esc(e?.why ?? '')}${e?.requires ? ` <span class="muted">(needs: ${esc(e.requires)})</span>` : ''}</p>`,
    `<p>Observed: ${esc(c.observed)}; ${esc(c.runs)} histories${c.foundBy ? `; found by ${esc(c.foundBy.join(' + '))}` : ''}</p>`,
  ];
  if (c.skipped) parts.push(`<p>Not run: ${esc(c.skipped)}</p>`);
  if (c.violation) parts.push(`<p>Found: ${esc(c.violation)}</p>`);
  if (c.error) parts.push(`<p class="st-error">Harness error: ${esc(c.error)}</p>`);
  if (c.attackFindings?.length)
    parts.push(`<h3>Attack catalog</h3><ul>${c.attackFindings.map((a) => `<li>${esc(a)}</li>`).join('')}</ul>`);
  if (f) parts.push(counterexampleHtml(f));
  return `<section class="cell" id="${cellId(c)}" data-panel="${esc(cellKey(c))}" hidden>${parts.join('\n')}</section>`;
}

function matrixHtml(r: CheckReport): string {
  const profiles = [...new Set(r.cells.map(column))];
  const rows = new Map<string, Map<string, CellReport>>();
  for (const c of r.cells) {
    const k = `${c.property}|${c.threat}`;
    if (!rows.has(k)) rows.set(k, new Map());
    rows.get(k)!.set(column(c), c);
  }
  const body = [...rows.entries()].map(([k, byProfile]) => {
    const [prop, threat] = k.split('|') as [string, string];
    const tds = profiles.map((p) => {
      const c = byProfile.get(p);
      if (!c) return '<td></td>';
      const why = c.expected ? `expected ${c.expected.verdict}: ${c.expected.why}` : 'no expectation';
      return `<td class="${statusClass(c.status)}" data-cell="${esc(cellKey(c))}" data-status="${esc(c.status)}" data-target="${cellId(c)}" title="${esc(why)}">${esc(SHORT_STATUS[c.status])}${c.foundBy ? ` <span class="muted">[${c.foundBy.map((x) => (x === 'model' ? 'm' : 'a')).join('')}]</span>` : ''}</td>`;
    });
    return `<tr><th>${esc(prop)}</th><th>${esc(threat)}</th>${tds.join('')}</tr>`;
  });
  return `<table class="matrix"><thead><tr><th>property</th><th>threat</th>${profiles.map((p) => `<th>${esc(p)}</th>`).join('')}</tr></thead><tbody>${body.join('\n')}</tbody></table>`;
}

const SCRIPT = `
function openCell(id) {
  document.querySelectorAll('section.cell').forEach(function (s) { s.hidden = s.id !== id; });
  document.querySelectorAll('td[data-cell]').forEach(function (td) { td.classList.toggle('selected', td.dataset.target === id); });
  var s = document.getElementById(id);
  if (s) s.scrollIntoView({ block: 'nearest' });
}
document.querySelectorAll('td[data-cell]').forEach(function (td) {
  td.addEventListener('click', function () { history.replaceState(null, '', '#' + td.dataset.target); openCell(td.dataset.target); });
});
document.querySelectorAll('a[data-open]').forEach(function (a) {
  a.addEventListener('click', function () { openCell(a.dataset.open); });
});
if (location.hash) openCell(location.hash.slice(1));
`;

function renderCheckHtml(r: CheckReport): string {
  const fileFor = (c: CellReport): CounterexampleFile | undefined =>
    r.counterexamples.find((f) => cellKey(f) === cellKey(c));
  const failing = r.cells.filter((c) => FAILING.has(c.status));
  const withCx = r.cells.filter((c) => fileFor(c) !== undefined);
  const body = `
<h1>ambient-lab check — world ${esc(r.world)}${r.mutant ? ` (positive control: mutant ${esc(r.mutant)})` : ''}</h1>
<p class="muted">seed ${esc(r.seed)}; ${esc(r.totals.histories)} histories over ${esc(r.totals.cells)} cells in ${esc(r.totals.seconds.toFixed(1))} s${
    r.budget.attacks ? ` + ${esc(r.totals.attackRuns)} attack-catalog runs` : ''
  }; replay any counterexample with the command in its panel.</p>
<p class="verdict ${r.ok ? 'st-holds' : 'st-error'}" data-ok="${r.ok}">${
    r.ok
      ? 'OK: every cell matches the expected table.'
      : `FAIL: ${esc(r.totals.mismatches)} cells differ from the expected table.`
  }</p>
<h2>Matrix</h2>
<p class="muted">holds / BYPASS: as the expected table says; !BYPASS: unexpected bypass; !holds: expected bypass not found; n/e: not evaluable in this world; [m] model-based histories, [a] attack catalog. Click a cell.</p>
${matrixHtml(r)}
${
  withCx.length > 0
    ? `<h2>Counterexamples</h2><ul class="cx-list">${withCx
        .map(
          (c) =>
            `<li><a href="#${cellId(c)}" data-open="${cellId(c)}">${esc(cellKey(c).replace(/\|/g, ' × '))}</a>: ${esc(fileFor(c)!.violation.message)}${FAILING.has(c.status) ? ' <b class="st-error">differs</b>' : ''}</li>`,
        )
        .join('')}</ul>`
    : ''
}
${failing.length > 0 ? `<p>${esc(failing.length)} cell(s) differ from the table: ${failing.map((c) => `<a href="#${cellId(c)}" data-open="${cellId(c)}">${esc(cellKey(c).replace(/\|/g, ' × '))}</a>`).join(', ')}</p>` : ''}
${r.cells.map((c) => cellPanel(c, fileFor(c))).join('\n')}
`;
  return page(`ambient-lab check — ${r.world}, seed ${r.seed}`, body, SCRIPT);
}

/** Write DIR/index.html (DIR made when missing); returns the file's path. */
export function writeCheckHtml(dir: string, r: CheckReport): string {
  fs.mkdirSync(dir, { recursive: true });
  const file = path.join(dir, 'index.html');
  fs.writeFileSync(file, renderCheckHtml(r));
  return file;
}
