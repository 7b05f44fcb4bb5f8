/**
 * `trace LAB --html FILE`: a lab run as one offline page — each listener's outcome, then each
 * attempt with its outcome, the socket that took it, the addresses it saw, why, and its packet
 * path drawn across the lab's namespaces (packet-path.ts).
 */
import type { AttemptResult, ListenerResult } from '../../sim/lab/run-lab.js';
import { esc, page } from './page.js';
import { pathOfEvents, renderPath } from './packet-path.js';

function attemptHtml(r: AttemptResult): string {
  const facts: [string, string | undefined][] = [
    ['accepted by', r.acceptedBy],
    ['original dst', r.originalDst],
    ['source seen', r.sourceSeen],
    ['local address', r.localSeen],
    ['why', r.reason],
  ];
  return `<section class="attempt" data-attempt="${esc(r.name)}" data-outcome="${esc(r.outcome)}">
<h2>${esc(r.name)}: ${esc(r.outcome)}</h2>
<table class="matrix">${facts
    .filter(([, v]) => v !== undefined)
    .map(([k, v]) => `<tr><th>${esc(k)}</th><td>${esc(v!)}</td></tr>`)
    .join('')}</table>
${r.trace.length > 0 ? `<h3>Packet path</h3>${renderPath(pathOfEvents(r.trace))}` : '<p class="muted">no packet trace</p>'}
</section>`;
}

export function renderTraceHtml(
  labfile: string,
  listeners: readonly ListenerResult[],
  results: readonly AttemptResult[],
): string {
  const ls =
    listeners.length === 0
      ? ''
      : `<h2>Listeners</h2><table class="matrix"><thead><tr><th>socket</th><th>outcome</th><th>expected</th></tr></thead><tbody>${listeners
          .map(
            (l) =>
              `<tr data-listener="${esc(l.name)}"><td>${esc(l.name)}</td><td class="${l.outcome === l.expected ? 'st-holds' : 'st-error'}">${esc(l.outcome)}${l.detail ? `: ${esc(l.detail)}` : ''}</td><td>${esc(l.expected)}</td></tr>`,
          )
          .join('')}</tbody></table>`;
  const body = `<h1>ambient-lab trace — ${esc(labfile)}</h1>
<p class="muted">the simulated kernel; every attempt with its packet path (lanes: network namespaces; rows: steps in order)</p>
${ls}
${results.map(attemptHtml).join('\n')}`;
  return page(`ambient-lab trace — ${labfile}`, body);
}
