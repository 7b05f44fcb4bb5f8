/**
 * The mechanism of `npm run mutate:impl` (scenarios/mutation/impl-mutants.ts): every mutant's
 * anchor occurs exactly once in the current build (so no mutant silently tests nothing), a
 * missing or repeated anchor is an error naming the mutant and the file, an applied mutant
 * changes exactly its file in a private copy, and the original dist/ is never written.
 */
import { test, expect } from '@playwright/test';
import {
  existsSync,
  lstatSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  rmSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import {
  IMPL_MUTANTS,
  MutantAnchorError,
  anchorCount,
  applyImplMutant,
  prepareMutantTree,
  type ImplMutant,
} from '../../../scenarios/mutation/impl-mutants.js';

const REPO = resolve(dirname(fileURLToPath(import.meta.url)), '..', '..', '..');
const DIST = join(REPO, 'dist');

test('every mutant anchor occurs exactly once in the current build', () => {
  for (const m of IMPL_MUTANTS) expect(anchorCount(DIST, m), `${m.name} in ${m.file}`).toBe(1);
});

test("mutant names are unique and cover the issue's areas", () => {
  const names = IMPL_MUTANTS.map((m) => m.name);
  expect(new Set(names).size).toBe(names.length);
  const areas = new Set(IMPL_MUTANTS.map((m) => m.area));
  for (const a of [
    'authorization engine',
    'enrollment',
    'CNI plugin fail-closed path',
    'ZDS peer check',
    'mesh CA node authorization',
    'repair',
    'inbound authorization',
    'original destination',
    'sim: NAT once',
    'sim: REDIRECT',
    'sim: SO_MARK permission',
    'sim: watch events',
  ])
    expect(areas.has(a), a).toBe(true);
});

test('a missing or repeated anchor is an error that names the mutant and the file', () => {
  const dir = mkdtempSync(join(tmpdir(), 'al-mutant-test-'));
  try {
    mkdirSync(join(dir, 'x'));
    writeFileSync(join(dir, 'x', 'f.js'), 'const a = 1;\nconst a = 1;\n');
    const missing: ImplMutant = {
      name: 'm-missing',
      area: 't',
      doc: 't',
      file: 'x/f.js',
      anchor: 'const b = 2;',
      replacement: '',
    };
    const twice: ImplMutant = { ...missing, name: 'm-twice', anchor: 'const a = 1;' };
    const nofile: ImplMutant = { ...missing, name: 'm-nofile', file: 'x/none.js' };
    expect(() => applyImplMutant(dir, missing)).toThrow(MutantAnchorError);
    expect(() => applyImplMutant(dir, missing)).toThrow(/m-missing.*0 time\(s\).*f\.js/);
    expect(() => applyImplMutant(dir, twice)).toThrow(/m-twice.*2 time\(s\)/);
    expect(() => applyImplMutant(dir, nofile)).toThrow(/m-nofile/);
    // A failed application leaves the file as it was.
    expect(readFileSync(join(dir, 'x', 'f.js'), 'utf8')).toBe('const a = 1;\nconst a = 1;\n');
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

test("a prepared tree differs from dist/ in exactly the mutant's file, and dist/ is untouched", () => {
  const m = IMPL_MUTANTS.find((x) => x.name === 'authz-allow-before-deny')!;
  const original = readFileSync(join(DIST, m.file), 'utf8');
  const other = readFileSync(join(DIST, 'impl/cni-plugin/cni-plugin.js'), 'utf8');
  const tree = prepareMutantTree(REPO, m);
  try {
    const mutated = readFileSync(join(tree.root, 'dist', m.file), 'utf8');
    expect(mutated).not.toBe(original);
    expect(mutated).toContain('mutant: allow first');
    expect(mutated.replace(m.replacement, m.anchor)).toBe(original);
    expect(readFileSync(join(tree.root, 'dist', 'impl/cni-plugin/cni-plugin.js'), 'utf8')).toBe(other);
    expect(lstatSync(join(tree.root, 'node_modules')).isSymbolicLink()).toBe(true);
    expect(existsSync(tree.cli)).toBe(true);
    expect(readFileSync(join(DIST, m.file), 'utf8')).toBe(original);
  } finally {
    tree.remove();
  }
  expect(existsSync(tree.root)).toBe(false);
});

test('a prepared tree with a bad anchor is removed and the error is thrown', () => {
  const bad: ImplMutant = { ...IMPL_MUTANTS[0]!, name: 'bad', anchor: 'this text is not in the engine' };
  const parent = mkdtempSync(join(tmpdir(), 'al-mutant-parent-'));
  try {
    expect(() => prepareMutantTree(REPO, bad, parent)).toThrow(/bad.*0 time\(s\)/);
    expect(readFileSync(join(DIST, bad.file), 'utf8')).not.toContain('mutant:');
    expect(readdirSync(parent)).toEqual([]);
  } finally {
    rmSync(parent, { recursive: true, force: true });
  }
});
