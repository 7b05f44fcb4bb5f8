/**
 * The ports rule check (tools/ports-check.ts) must pass on the real tree and fail on each kind of
 * planted violation. Violations are planted in a temporary copy of impl/, never in the tree.
 */
import { test, expect } from '@playwright/test';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { execFileSync } from 'node:child_process';
import { checkPorts } from '../../../tools/ports-check.js';

const repo = path.resolve(import.meta.dirname, '..', '..', '..');

function withCopy(plant: Record<string, string>, fn: (root: string) => void): void {
  const root = fs.mkdtempSync(path.join(os.tmpdir(), 'al-ports-'));
  try {
    fs.cpSync(path.join(repo, 'impl'), path.join(root, 'impl'), { recursive: true });
    for (const [rel, text] of Object.entries(plant)) {
      fs.mkdirSync(path.dirname(path.join(root, rel)), { recursive: true });
      fs.writeFileSync(path.join(root, rel), text);
    }
    fn(root);
  } finally {
    fs.rmSync(root, { recursive: true, force: true });
  }
}

test('the real impl/ tree obeys the ports rule', () => {
  expect(checkPorts(repo)).toEqual([]);
});

const planted: ReadonlyArray<[string, string, RegExp]> = [
  ['import from sim/', `import { x } from '../../sim/kernel/netns.js';\nexport const y = x;\n`, /may not import from sim\//],
  ['import from scenarios/', `export * from '../../scenarios/properties.js';\n`, /may not import from scenarios\//],
  ['import from e2e/', `import type { T } from '../../e2e/netns/ip.js';\nexport type U = T;\n`, /may not import from e2e\//],
  ['setTimeout', `export function f(): void { setTimeout(() => {}, 10); }\n`, /global 'setTimeout'/],
  ['globalThis.setInterval', `export const h = globalThis.setInterval(() => {}, 10);\n`, /global 'setInterval'/],
  ['Date.now', `export const t = Date.now();\n`, /Date\.now/],
  ['new Date()', `export const t = new Date();\n`, /new Date\(\)/],
  ['Math.random', `export const r = Math.random();\n`, /Math\.random/],
  ['child_process', `import { spawn } from 'node:child_process';\nexport const s = spawn;\n`, /'node:child_process'/],
  ['net', `import * as net from 'net';\nexport const n = net;\n`, /'net'/],
  ['dgram', `import dgram from 'node:dgram';\nexport const d = dgram;\n`, /'node:dgram'/],
  ['fs', `import { readFileSync } from 'node:fs';\nexport const r = readFileSync;\n`, /'node:fs'/],
  ['process', `export const e = process.env['X'];\n`, /global 'process'/],
  ['crypto randomness', `import { randomBytes } from 'node:crypto';\nexport const b = randomBytes(4);\n`, /randomBytes/],
];

for (const [name, source, message] of planted) {
  test(`a planted violation is caught: ${name}`, () => {
    withCopy({ 'impl/node-agent/planted.ts': source }, (root) => {
      const v = checkPorts(root);
      expect(v.length).toBeGreaterThan(0);
      expect(v.map((x) => x.file)).toContain('impl/node-agent/planted.ts');
      expect(v.map((x) => x.message).join('\n')).toMatch(message);
    });
  });
}

test('look-alikes that are not the world are allowed', () => {
  const source = [
    `import { createHash } from 'node:crypto';`,
    `import type { Clock } from '../host/clock.js';`,
    `const setTimeout = (f: () => void): void => f();`,
    `export function f(clock: Clock): number { setTimeout(() => {}); return clock.now(); }`,
    `export const obj = { setTimeout: 1, process: 2 };`,
    `export const d = new Date(0).toISOString();`,
    `export const m = Math.max(1, 2);`,
    `export const h = createHash('sha256').update('x').digest('hex');`,
    ``,
  ].join('\n');
  withCopy({ 'impl/node-agent/lookalike.ts': source }, (root) => {
    expect(checkPorts(root)).toEqual([]);
  });
});

test('the adapters in impl/host and impl/linux may touch the world', () => {
  const source = `import { readFileSync } from 'node:fs';\nexport const t = Date.now() + Math.random();\nexport const r = readFileSync;\n`;
  withCopy({ 'impl/linux/planted.ts': source }, (root) => {
    expect(checkPorts(root)).toEqual([]);
  });
});

test('adapters still may not import from sim/', () => {
  withCopy({ 'impl/linux/planted.ts': `export * from '../../sim/kernel/netns.js';\n` }, (root) => {
    expect(checkPorts(root).map((v) => v.rule)).toEqual(['foreign-import']);
  });
});

test('the check:ports command exits non-zero on a planted violation and names it', () => {
  withCopy({ 'impl/ztunnel/planted.ts': `export const r = Math.random();\n` }, (root) => {
    let status = 0;
    let stderr = '';
    try {
      execFileSync(process.execPath, [path.join(repo, 'dist', 'tools', 'ports-check-cli.js'), root], { cwd: repo, stdio: 'pipe' });
    } catch (e) {
      const err = e as { status: number; stderr: Buffer };
      status = err.status;
      stderr = err.stderr.toString();
    }
    expect(status).toBe(1);
    expect(stderr).toContain('impl/ztunnel/planted.ts:1:');
    expect(stderr).toContain('Math.random');
  });
});
