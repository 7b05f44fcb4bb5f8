/**
 * A packet's path as a diagram: one lane per network namespace, one row per step (a netfilter
 * table at a hook with the rules it ran, conntrack, NAT, mark changes, routing, a device
 * crossing between lanes, delivery to a socket, a drop). NAT, marks and drops are coloured.
 *
 * Two sources give the same steps: the simulated kernel's trace events (`trace LAB --html`), and
 * the text renderTrace made of them, which is what a saved counterexample keeps (`check --html`).
 * Text lines of another shape (a real world's probe transcript) become plain notes.
 */
import { renderTrace, type TraceEvent } from '../../sim/kernel/trace.js';
import { esc } from './page.js';

type StepKind = TraceEvent['kind'] | 'note';

interface RuleLine {
  /** `CHAIN #N (line L)` or `CHAIN policy`. */
  readonly where: string;
  readonly text: string;
  readonly effect: string;
}

interface PathStep {
  readonly kind: StepKind;
  /** The lane; for a device crossing, the namespace it leaves. */
  readonly ns: string | undefined;
  /** A device crossing's destination namespace. */
  readonly toNs?: string;
  /** The step's line without its `[ns] ` prefix. */
  readonly text: string;
  readonly rules: readonly RuleLine[];
}

const HOOKS = 'PREROUTING|INPUT|FORWARD|OUTPUT|POSTROUTING';
const TABLES = 'raw|mangle|nat|filter|security';

function stepOfEvent(e: TraceEvent): PathStep {
  const [head = '', ...ruleLines] = renderTrace([e]).split('\n');
  const ns = e.kind === 'xmit' ? e.fromNs : e.ns;
  return {
    kind: e.kind,
    ns,
    ...(e.kind === 'xmit' ? { toNs: e.toNs } : {}),
    text: head.slice(`[${ns}] `.length),
    rules:
      e.kind === 'table' || e.kind === 'nft'
        ? ruleLines.map(parseRuleLine).filter((r): r is RuleLine => r !== undefined)
        : [],
  };
}

export function pathOfEvents(events: readonly TraceEvent[]): PathStep[] {
  return events.map(stepOfEvent);
}

function parseRuleLine(line: string): RuleLine | undefined {
  const m = /^ {6}(\S+ (?:policy|#\d+(?: \(line \d+\))?)): (.*?) {2}=> (.*)$/.exec(line);
  return m ? { where: m[1]!, text: m[2]!, effect: m[3]! } : undefined;
}

/** One line of renderTrace's text → its kind (undefined: not a trace line). */
function kindOfLine(rest: string): StepKind {
  if (/^xmit \S+ -> \[/.test(rest)) return 'xmit';
  if (rest.startsWith('conntrack: ')) return 'conntrack';
  if (/^mark 0x[0-9a-f]+ -> 0x[0-9a-f]+ /.test(rest)) return 'mark';
  if (rest.startsWith('route: ')) return 'route';
  if (rest.startsWith('delivered to ')) return 'deliver';
  if (rest.startsWith('DROPPED: ')) return 'drop';
  if (rest.startsWith('LOG ')) return 'log';
  // a NAT rewrite reads "<HOOK> nat: destination|source a -> b"; a table "<HOOK> <table>: <verdict>"
  if (new RegExp(`^(${HOOKS}) nat: (destination|source) `).test(rest)) return 'nat';
  if (new RegExp(`^(${HOOKS}) (${TABLES}): `).test(rest)) return 'table';
  // an nft base chain reads "<HOOK> nft <family> <table> <chain> (<type>, priority <n>): <verdict>"
  if (new RegExp(`^(${HOOKS}) nft \\S+ \\S+ \\S+ \\(`).test(rest)) return 'nft';
  return 'packet';
}

export function pathOfText(text: string): PathStep[] {
  const steps: PathStep[] = [];
  for (const line of text.split('\n')) {
    if (line.trim() === '') continue;
    const rule = parseRuleLine(line);
    const last = steps[steps.length - 1];
    if (rule && (last?.kind === 'table' || last?.kind === 'nft')) {
      steps[steps.length - 1] = { ...last, rules: [...last.rules, rule] };
      continue;
    }
    const m = /^\[([^\]]+)\] (.*)$/.exec(line);
    if (!m) {
      steps.push({ kind: 'note', ns: undefined, text: line.trim(), rules: [] });
      continue;
    }
    const ns = m[1]!;
    const rest = m[2]!;
    const kind = kindOfLine(rest);
    const to = kind === 'xmit' ? /-> \[([^\]]+)\]/.exec(rest)?.[1] : undefined;
    steps.push({ kind, ns, ...(to !== undefined ? { toNs: to } : {}), text: rest, rules: [] });
  }
  return steps;
}

/** What a step did, for its colour: a rewrite, a mark, a drop, a delivery, or nothing special. */
function classOf(s: PathStep): string {
  if (s.kind === 'drop') return 'c-drop';
  if (s.kind === 'deliver') return 'c-deliver';
  if (s.kind === 'nat') return 'c-nat';
  if (s.kind === 'mark') return 'c-mark';
  if (s.kind === 'table' || s.kind === 'nft') {
    const verdict = s.text.slice(
      s.text.indexOf('): ') >= 0 && s.kind === 'nft' ? s.text.indexOf('): ') + 3 : s.text.indexOf(': ') + 2,
    );
    if (/^(DROP|REJECT)/.test(verdict)) return 'c-drop';
    if (/^(NAT|TPROXY)/.test(verdict)) return 'c-nat';
    if (s.rules.some((r) => /^(MARK|CONNMARK|meta mark set|ct mark set)/.test(r.effect))) return 'c-mark';
  }
  return '';
}

function effectClass(effect: string): string {
  // iptables targets are upper case; nft statements (drop, redirect to :P, meta mark set ...) lower case
  if (/^(DROP|REJECT|drop|reject)/.test(effect)) return 'effect-drop';
  if (/^(DNAT|SNAT|REDIRECT|MASQUERADE|TPROXY|dnat|snat|redirect|masquerade|tproxy)/.test(effect)) return 'effect-nat';
  if (/^(MARK|CONNMARK|meta mark set|ct mark set)/.test(effect)) return 'effect-mark';
  return '';
}

/** The diagram: a grid of lanes (namespaces in order of first appearance) and one row per step. */
export function renderPath(steps: readonly PathStep[]): string {
  const lanes: string[] = [];
  const lane = (ns: string | undefined): void => {
    if (ns !== undefined && !lanes.includes(ns)) lanes.push(ns);
  };
  for (const s of steps) {
    lane(s.ns);
    lane(s.toNs);
  }
  if (lanes.length === 0) lanes.push('trace');
  const col = (ns: string | undefined): number => (ns === undefined ? 0 : lanes.indexOf(ns));
  const cells: string[] = lanes.map(
    (l, i) => `<div class="lane-head" style="grid-row:1;grid-column:${i + 1}" data-lane="${esc(l)}">${esc(l)}</div>`,
  );
  steps.forEach((s, i) => {
    const row = i + 2;
    let span: string;
    if (s.kind === 'xmit' && s.toNs !== undefined) {
      const a = col(s.ns);
      const b = col(s.toNs);
      span = `${Math.min(a, b) + 1} / ${Math.max(a, b) + 2}`;
    } else if (s.ns === undefined) span = `1 / ${lanes.length + 1}`;
    else span = String(col(s.ns) + 1);
    const arrow = s.kind === 'xmit' ? (col(s.toNs) >= col(s.ns) ? ' ⟶' : ' ⟵') : '';
    const rules =
      s.rules.length > 0
        ? `<ul class="rules">${s.rules
            .map(
              (r) =>
                `<li><span class="muted">${esc(r.where)}</span> ${esc(r.text)} ⇒ <span class="${effectClass(r.effect)}">${esc(r.effect)}</span></li>`,
            )
            .join('')}</ul>`
        : '';
    cells.push(
      `<div class="step k-${s.kind} ${classOf(s)}" style="grid-row:${row};grid-column:${span}" data-step="${i + 1}" data-kind="${s.kind}"${
        s.ns !== undefined ? ` data-ns="${esc(s.ns)}"` : ''
      }${s.toNs !== undefined ? ` data-to-ns="${esc(s.toNs)}"` : ''}><span class="n">${i + 1}</span>${esc(s.text)}${arrow}${rules}</div>`,
    );
  });
  return `<div class="path" style="grid-template-columns:repeat(${lanes.length}, minmax(220px, 1fr))" data-steps="${steps.length}">${cells.join('')}</div>`;
}
