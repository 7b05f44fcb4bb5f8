/**
 * The shell of the offline HTML reports: one self-contained file (inline CSS and script, no
 * network, no fonts), and the escaping every value goes through before it reaches markup.
 */

/** Text → HTML text and attribute content (& < > " '). */
export function esc(s: string | number): string {
  return String(s)
    .replace(/&/g, '&amp;')
    .replace(/</g, '&lt;')
    .replace(/>/g, '&gt;')
    .replace(/"/g, '&quot;')
    .replace(/'/g, '&#39;');
}

const CSS = `
:root { --fg:#1d2433; --muted:#5b6477; --line:#d6dae3; --ok:#1f7a3d; --bad:#b42318; --warn:#b54708; --info:#175cd3; --bg2:#f5f7fa; }
* { box-sizing: border-box; }
body { font: 14px/1.45 system-ui, sans-serif; color: var(--fg); margin: 0; padding: 16px 24px; }
h1 { font-size: 20px; margin: 0 0 4px; } h2 { font-size: 16px; margin: 24px 0 8px; } h3 { font-size: 14px; margin: 16px 0 6px; }
.muted { color: var(--muted); } code, pre, .mono { font-family: ui-monospace, monospace; font-size: 12px; }
pre { background: var(--bg2); padding: 8px; overflow-x: auto; white-space: pre-wrap; }
table.matrix { border-collapse: collapse; } .matrix th, .matrix td { border: 1px solid var(--line); padding: 4px 8px; text-align: left; }
.matrix td[data-cell] { cursor: pointer; font-weight: 600; }
.st-holds { color: var(--ok); } .st-bypass-found { color: var(--warn); } .st-not-evaluated { color: var(--muted); }
.st-unexpected-bypass, .st-bypass-not-found, .st-no-expectation, .st-error { color: #fff; background: var(--bad); }
.matrix td.selected { outline: 3px solid var(--info); } .matrix td .muted { color: inherit; opacity: 0.8; }
section.cell { border: 1px solid var(--line); padding: 8px 16px 16px; margin-top: 12px; }
section.cell[hidden] { display: none; }
ol.history li { margin: 2px 0; }
.path { display: grid; gap: 4px 8px; margin-top: 8px; }
.lane-head { font-weight: 600; border-bottom: 2px solid var(--fg); padding: 2px 4px; font-family: ui-monospace, monospace; font-size: 12px; }
.step { border: 1px solid var(--line); border-left: 4px solid var(--line); padding: 3px 6px; background: #fff; font-family: ui-monospace, monospace; font-size: 12px; }
.step .n { color: var(--muted); margin-right: 6px; }
.step.k-table { border-left-color: #667085; } .step.k-xmit { background: var(--bg2); text-align: center; }
.step.c-nat { border-left-color: var(--warn); background: #fff6ed; } .step.c-mark { border-left-color: var(--info); background: #eff8ff; }
.step.c-drop { border-left-color: var(--bad); background: #fef3f2; } .step.c-deliver { border-left-color: var(--ok); background: #ecfdf3; }
.step ul.rules { margin: 2px 0 0; padding-left: 16px; } .step ul.rules li { margin: 1px 0; }
.effect-drop { color: var(--bad); font-weight: 600; } .effect-nat { color: var(--warn); font-weight: 600; } .effect-mark { color: var(--info); font-weight: 600; }
`;

export function page(title: string, body: string, script = ''): string {
  return `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>${esc(title)}</title>
<style>${CSS}</style>
</head>
<body>
${body}
${script ? `<script>${script}</script>` : ''}
</body>
</html>
`;
}
