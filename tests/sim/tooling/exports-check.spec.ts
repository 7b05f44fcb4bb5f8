/**
 * The exports check (tools/exports-check.ts): the real tree passes, and in a planted project an
 * export used only in its own file, one used nowhere, and a stale runtime entry are each found,
 * while imports by name, namespace imports, re-exports and import() count as uses.
 */
import { test, expect } from '@playwright/test';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { execFileSync } from 'node:child_process';
import { checkExports } from '../../../tools/exports-check.js';

const repo = path.resolve(import.meta.dirname, '..', '..', '..');
const cli = path.join(repo, 'dist', 'tools', 'exports-check-cli.js');

function withProject(files: Record<string, string>, fn: (root: string) => void): void {
  const root = fs.mkdtempSync(path.join(os.tmpdir(), 'al-exports-'));
  try {
    fs.writeFileSync(
      path.join(root, 'tsconfig.json'),
      JSON.stringify({
        compilerOptions: {
          target: 'ES2022',
          module: 'NodeNext',
          moduleResolution: 'NodeNext',
          strict: true,
          noEmit: true,
          types: [],
        },
        include: ['src'],
      }),
    );
    for (const [rel, text] of Object.entries(files)) {
      fs.mkdirSync(path.dirname(path.join(root, rel)), { recursive: true });
      fs.writeFileSync(path.join(root, rel), text);
    }
    fn(root);
  } finally {
    fs.rmSync(root, { recursive: true, force: true });
  }
}

const planted = {
  'src/a.ts': [
    'export const used = 1;',
    'export function local(): number { return 2; }',
    'export const dead = 3;',
    'export const total = local() + 1;',
    'export interface OnlyHere { x: number }',
    'const v: OnlyHere = { x: 1 };',
    'void v;',
  ].join('\n'),
  'src/b.ts': `import { used, total } from './a.js';\nimport * as all from './c.js';\nexport { reexported } from './d.js';\nexport const sum = used + total + all.one;\n`,
  'src/c.ts': 'export const one = 1;\nexport const two = 2;\n',
  'src/d.ts': 'export const reexported = 4;\n',
  'src/e.ts': `export async function load(): Promise<number> { return (await import('./f.js')).lazy; }\n`,
  'src/f.ts': 'export const lazy = 5;\nexport const alsoLazy = 6;\n',
  'src/main.ts': `import { sum } from './b.js';\nimport { load } from './e.js';\nimport { reexported } from './b.js';\nexport const out = [sum, load, reexported];\n`,
};

test('the real tree exports only what other modules import', () => {
  const { findings, stale } = checkExports(repo);
  expect(stale).toEqual([]);
  expect(findings.map((f) => `${f.file}:${f.line} ${f.name} (${f.kind})`)).toEqual([]);
});

test('a planted project: local and dead exports are found; imports, namespaces, re-exports and import() are uses', () => {
  withProject(planted, (root) => {
    const { findings } = checkExports(root);
    const got = findings.map((f) => `${f.file} ${f.name} ${f.kind}`).sort();
    // main.ts's `out` is an entry point's export: nothing imports it, and nothing uses it in its file.
    expect(got).toEqual([
      'src/a.ts OnlyHere local',
      'src/a.ts dead unused',
      'src/a.ts local local',
      'src/main.ts out unused',
    ]);
  });
});

test('an export loaded by name at run time is not a finding; a runtime entry naming no export is stale', () => {
  withProject(planted, (root) => {
    const { findings, stale } = checkExports(root, undefined, {
      'src/a.ts#dead': 'loaded by name in this test',
      'src/a.ts#gone': 'names nothing',
    });
    expect(findings.map((f) => f.name)).not.toContain('dead');
    expect(stale).toEqual(['src/a.ts#gone']);
  });
});

test('--fix drops `export` from own-file exports only, and the command exits 1 while dead exports remain', () => {
  withProject(planted, (root) => {
    let code = 0;
    let stderr = '';
    try {
      execFileSync(process.execPath, [cli, '--fix', root], { encoding: 'utf8', stdio: 'pipe' });
    } catch (e) {
      code = (e as { status: number }).status;
      stderr = String((e as { stderr: string }).stderr);
    }
    expect(code).toBe(1);
    expect(stderr).toMatch(/src\/a\.ts:3 {2}dead {2}exported and used nowhere/);
    const a = fs.readFileSync(path.join(root, 'src/a.ts'), 'utf8');
    expect(a).toContain('\nfunction local(): number');
    expect(a).toContain('\ninterface OnlyHere');
    expect(a).toContain('export const dead = 3;'); // never deletes code
    expect(
      checkExports(root)
        .findings.map((f) => f.name)
        .sort(),
    ).toEqual(['dead', 'out']);
  });
});

test('an unknown option is a usage error (exit 2) before any work', () => {
  let code = 0;
  try {
    execFileSync(process.execPath, [cli, '--fxi'], { encoding: 'utf8', stdio: 'pipe' });
  } catch (e) {
    code = (e as { status: number }).status;
  }
  expect(code).toBe(2);
});
