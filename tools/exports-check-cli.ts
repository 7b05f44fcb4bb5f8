/**
 * `npm run check:exports [-- --fix] [ROOT]`: exit 1 and name every export used only in its own
 * file or nowhere (tools/exports-check.ts); exit 0 with a one-line summary otherwise. `--fix`
 * drops `export` from declarations used only in their own file (never deletes code) and then
 * reports what is left.
 */
import * as fs from 'node:fs';
import * as path from 'node:path';
import { checkExports, formatFindings, type ExportFinding } from './exports-check.js';

const args = process.argv.slice(2);
const fix = args.includes('--fix');
const unknown = args.filter((a) => a.startsWith('-') && a !== '--fix');
if (unknown.length > 0) {
  console.error(`exports check: unknown option ${unknown.join(' ')}; usage: exports-check-cli [--fix] [ROOT]`);
  process.exit(2);
}
const root = path.resolve(args.find((a) => !a.startsWith('-')) ?? '.');

/** Remove each finding's `export ` keyword, last edit first so earlier offsets stay right. */
function dropExports(found: readonly ExportFinding[]): number {
  const byFile = new Map<string, Array<{ start: number; end: number }>>();
  for (const f of found)
    if (f.kind === 'local' && f.exportKeyword)
      (byFile.get(f.file) ?? byFile.set(f.file, []).get(f.file)!).push(f.exportKeyword);
  for (const [file, edits] of byFile) {
    const full = path.join(root, file);
    let text = fs.readFileSync(full, 'utf8');
    for (const e of [...edits].sort((a, b) => b.start - a.start)) text = text.slice(0, e.start) + text.slice(e.end);
    fs.writeFileSync(full, text);
  }
  return [...byFile.values()].reduce((n, e) => n + e.length, 0);
}

let { findings, stale } = checkExports(root);
if (fix && findings.length > 0) {
  console.log(`exports check: dropped \`export\` from ${dropExports(findings)} declaration(s)`);
  ({ findings, stale } = checkExports(root));
}
for (const k of stale)
  console.error(
    `${k}  listed in RUNTIME_EXPORTS (tools/exports-check.ts) but no such export is left; remove the entry`,
  );
if (findings.length > 0) console.error(formatFindings(findings));
if (findings.length > 0 || stale.length > 0) {
  console.error(
    `exports check: ${findings.length} export(s) to drop or delete, ${stale.length} stale runtime entr(ies) (${root})`,
  );
  process.exit(1);
}
console.log(`exports check: every export is imported by another module (${root})`);
