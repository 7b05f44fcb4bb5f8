/**
 * The repository stands on its own: no tracked file (source, doc, fixture) cites a document that
 * lives outside it. Design and bypass classes are in docs/design.md and docs/bypass-classes.md;
 * upstream is cited by public repository paths, issue numbers or RFCs.
 *
 * The outside names are assembled from parts below, so this file does not match itself.
 */
import { test, expect } from '@playwright/test';
import { execFileSync } from 'node:child_process';
import * as fs from 'node:fs';
import * as path from 'node:path';

const repo = path.resolve(import.meta.dirname, '..', '..', '..');

const SECTION = '\u00a7';
const md = (name: string): string => `${name}.md`;

const KERNEL_NOTES = ['kernel', 'cni', 'tooling'].join('-');
const NODE_NOTES = ['node', 'on', 'linux'].join('-');
/** Background documents that were never part of the repository. */
const OUTSIDE_DOCS = ['DESIGN', 'peers', 'istio-cni', 'ztunnel', KERNEL_NOTES, NODE_NOTES];

const RULES: ReadonlyArray<{ readonly name: string; readonly re: RegExp }> = [
  {
    name: 'an outside document',
    re: new RegExp(`(?<![\\w-])(?:${OUTSIDE_DOCS.map((d) => d.replace(/-/g, '\\-')).join('|')})\\.md\\b`),
  },
  { name: 'an outside document', re: new RegExp(`\\b(?:${KERNEL_NOTES}|${NODE_NOTES})\\b`) },
  { name: 'a path into the background notes', re: new RegExp('(?<![\\w-])reference' + '/') },
  { name: 'the shared folder', re: new RegExp('(?<![\\w-])shared' + '/') },
  { name: 'a peer-survey class', re: new RegExp('\\bpeers' + ' B\\d') },
];

/** A section sign is fine only where it follows an RFC number (RFC, number, sections, commas). */
const RFC_BEFORE_SECTION = new RegExp(`RFC \\d+(?: ${SECTION}[\\d.]+(?:,| and)?)* $`);

/** Every reason `line` cites something outside the repository (empty: it does not). */
function outsideCitations(line: string): string[] {
  const found = RULES.filter((r) => r.re.test(line)).map((r) => r.name);
  for (let i = line.indexOf(SECTION); i >= 0; i = line.indexOf(SECTION, i + 1)) {
    if (!RFC_BEFORE_SECTION.test(line.slice(0, i))) {
      found.push('a section of an outside document');
      break;
    }
  }
  return [...new Set(found)];
}

function scan(files: ReadonlyArray<{ readonly file: string; readonly text: string }>): string[] {
  const out: string[] = [];
  for (const { file, text } of files) {
    text.split('\n').forEach((line, i) => {
      const why = outsideCitations(line);
      if (why.length > 0) out.push(`${file}:${i + 1}: cites ${why.join(', ')}: ${line.trim().slice(0, 160)}`);
    });
  }
  return out;
}

function trackedTextFiles(): Array<{ file: string; text: string }> {
  // A failure to list the files must fail the test, not pass it on an empty list.
  const listed = execFileSync('git', ['ls-files', '-z'], { cwd: repo, encoding: 'utf8', maxBuffer: 64 * 1024 * 1024 });
  const files = listed.split('\0').filter((f) => f !== '');
  expect(files.length).toBeGreaterThan(100);
  const out: Array<{ file: string; text: string }> = [];
  for (const file of files) {
    const full = path.join(repo, file);
    if (!fs.existsSync(full) || !fs.statSync(full).isFile()) continue; // deleted in the work tree
    const bytes = fs.readFileSync(full);
    if (bytes.includes(0)) continue; // binary
    out.push({ file, text: bytes.toString('utf8') });
  }
  return out;
}

test('no tracked file cites a document outside the repository', () => {
  const files = trackedTextFiles();
  expect(files.map((f) => f.file)).toContain('docs/design.md');
  expect(scan(files)).toEqual([]);
});

test('positive control: the matcher flags each kind of outside citation', () => {
  const flagged = [
    `See \`../${['shared', md('DESIGN')].join('/')}\` for the design.`,
    ` * The World interface (${md('DESIGN')}): one cluster`,
    ` * (${md('peers')} ${SECTION}5 bypass classes B1-B14)`,
    `# Upstream in-pod ruleset (${md('istio-cni')} ${SECTION}3.2: default.golden).`,
    ` * Verification, as ztunnel (${md('ztunnel')} ${SECTION}2.4):`,
    ` * hook order (${md(KERNEL_NOTES)} ${SECTION}1.2)`,
    ` * hook order (${KERNEL_NOTES} 1.2)`,
    ` * see ${md(NODE_NOTES)}`,
    ` * Rules enforced (as upstream, ${['reference', md('ztunnel')].join('/')}):`,
    `  why: 'no in-pod rule can see them (${'peers'} B4)'`,
    `  why: 'UDP reaches the app without the proxy (${SECTION}6 i)'`,
    `  why: 'uncaptured (istio-cni ${SECTION}6 h)'`,
    `  // readiness (${SECTION} 1.9), after RFC 1035 ${SECTION}4.1`,
  ];
  for (const line of flagged) expect(outsideCitations(line), line).not.toEqual([]);
  const report = scan([{ file: 'impl/planted.ts', text: `export const x = 1;\n/** (${md('DESIGN')}) */\n` }]);
  expect(report).toHaveLength(1);
  expect(report[0]).toMatch(/^impl\/planted\.ts:2: cites an outside document/);
});

test('what the repository may cite is not flagged', () => {
  const allowed = [
    ' * A DNS message (RFC 1035 \u00a74.1): header, questions',
    ' * Domain names on the wire (RFC 1035 \u00a73.1, \u00a74.1.4): a sequence of labels',
    ' * RFC 4291 \u00a72.2 for parsing and RFC 5952 for the canonical output.',
    'See `docs/design.md` for the design.',
    " * (docs/design.md, 'Real-kernel safety'): nothing is created in the root namespace",
    "  why: 'no in-pod rule can see them (B4)'",
    ' * (docs/bypass-classes.md#finding-l)',
    ' * (upstream: istio/istio cni/pkg/iptables/testdata/hostprobe.golden)',
    "import { sharedCluster } from '../../e2e/kind/shared-cluster.js';",
  ];
  for (const line of allowed) expect(outsideCitations(line), line).toEqual([]);
});
