/**
 * Fake command-line tools on PATH for the kind world's tests: each fake records its argv (one
 * JSON line) and answers by the first rule whose `has` words all occur in its argv — print a
 * text, print a file's current content, exit with a code, or exec a real program with stdin,
 * stdout and stderr passed through (how `kubectl exec -i ... node probe-program.js` runs the
 * real probe program here). Rules are re-read on every call, so a test can change answers
 * between steps.
 */
import { chmod, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import * as os from 'node:os';
import * as path from 'node:path';

export interface FakeRule {
  readonly bin: string;
  /** Every word must be an element of argv, or (with a leading '~') a substring of some element. */
  readonly has?: readonly string[];
  readonly stdout?: string;
  readonly stderr?: string;
  /** Print this file's content at call time (missing file: nothing). */
  readonly stdoutFile?: string;
  readonly exit?: number;
  /** Run this argv instead (stdio inherited); the fake exits with its code. */
  readonly exec?: readonly string[];
}

export interface Fakes {
  readonly dir: string;
  readonly env: NodeJS.ProcessEnv;
  setRules(rules: readonly FakeRule[]): Promise<void>;
  calls(): Promise<string[][]>;
  /** What each call whose argv ends in `-` read on stdin (e.g. `kubectl apply -f -`), in order. */
  stdins(): Promise<string[]>;
  dispose(): Promise<void>;
}

export async function makeFakes(
  bins: readonly string[],
  extraPath: readonly string[] = ['/usr/bin', '/bin'],
): Promise<Fakes> {
  const dir = await mkdtemp(path.join(os.tmpdir(), 'al-fakebin-'));
  const log = path.join(dir, 'calls.jsonl');
  const rulesFile = path.join(dir, 'rules.json');
  const script = `#!${process.execPath}
const fs = require('node:fs');
const { spawnSync } = require('node:child_process');
const name = require('node:path').basename(process.argv[1]);
const argv = process.argv.slice(2);
fs.appendFileSync(${JSON.stringify(log)}, JSON.stringify([name, ...argv]) + '\\n');
if (argv[argv.length - 1] === '-') fs.appendFileSync(${JSON.stringify(log)} + '.stdin', JSON.stringify(fs.readFileSync(0, 'utf8')) + '\\n');
let rules = [];
try { rules = JSON.parse(fs.readFileSync(${JSON.stringify(rulesFile)}, 'utf8')); } catch {}
const matches = (w) => (w.startsWith('~') ? argv.some((a) => a.includes(w.slice(1))) : argv.includes(w));
const rule = rules.find((r) => r.bin === name && (r.has || []).every(matches));
if (!rule) { process.exit(0); }
if (rule.exec) {
  const r = spawnSync(rule.exec[0], rule.exec.slice(1), { stdio: 'inherit' });
  process.exit(r.status === null ? 1 : r.status);
}
if (rule.stdout) process.stdout.write(rule.stdout);
if (rule.stderr) process.stderr.write(rule.stderr);
if (rule.stdoutFile) { try { process.stdout.write(fs.readFileSync(rule.stdoutFile)); } catch {} }
process.exit(rule.exit || 0);
`;
  for (const b of bins) {
    await writeFile(path.join(dir, b), script);
    await chmod(path.join(dir, b), 0o755);
  }
  return {
    dir,
    env: { PATH: [dir, ...extraPath].join(':') },
    setRules: (rules) => writeFile(rulesFile, JSON.stringify(rules)),
    calls: async () =>
      (await readFile(log, 'utf8').catch(() => ''))
        .split('\n')
        .filter(Boolean)
        .map((l) => JSON.parse(l) as string[]),
    stdins: async () =>
      (await readFile(`${log}.stdin`, 'utf8').catch(() => ''))
        .split('\n')
        .filter(Boolean)
        .map((l) => JSON.parse(l) as string),
    dispose: () => rm(dir, { recursive: true, force: true }),
  };
}
