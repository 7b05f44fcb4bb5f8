/**
 * The ports rule check (tools/ports-check.ts) must pass on the real tree and fail on each kind of
 * planted violation, ports rule and layering alike. Violations are planted in a temporary copy of
 * impl/ (and a planted file under sim/), never in the tree.
 */
import { test, expect } from '@playwright/test';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { execFileSync } from 'node:child_process';
import { checkPorts, LAYER_EXCEPTIONS } from '../../../tools/ports-check.js';

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
  [
    'import from sim/',
    `import { x } from '../../sim/kernel/netns.js';\nexport const y = x;\n`,
    /may not import from sim\//,
  ],
  ['import from scenarios/', `export * from '../../scenarios/properties.js';\n`, /may not import from scenarios\//],
  [
    'import from e2e/',
    `import type { T } from '../../e2e/netns/ip.js';\nexport type U = T;\n`,
    /may not import from e2e\//,
  ],
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
  [
    'crypto randomness',
    `import { randomBytes } from 'node:crypto';\nexport const b = randomBytes(4);\n`,
    /randomBytes/,
  ],
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

const layering: ReadonlyArray<[string, string, string, RegExp]> = [
  [
    'a port imports a component',
    'impl/host/planted.ts',
    `import type { Authorizer } from '../ztunnel/authz/authorizer.js';\nexport type A = Authorizer;\n`,
    /a port \(impl\/host\) may not import/,
  ],
  [
    'a port imports a Linux adapter',
    'impl/host/planted.ts',
    `export { NetnsRulesError } from '../linux/netns-rules.js';\n`,
    /a port \(impl\/host\) may not import/,
  ],
  [
    'a port imports a component through an import type',
    'impl/host/planted.ts',
    `export type C = import('../node-agent/node-agent.js').NodeAgentConfig;\n`,
    /a port \(impl\/host\) may not import/,
  ],
  [
    'the CNI plugin imports the node agent',
    'impl/cni-plugin/planted.ts',
    `import { NodeAgent } from '../node-agent/node-agent.js';\nexport const n = NodeAgent;\n`,
    /impl\/cni-plugin imports impl\/node-agent/,
  ],
  [
    'the node agent imports the proxy',
    'impl/node-agent/planted.ts',
    `import type { PodProxy } from '../ztunnel/pod-proxy.js';\nexport type P = PodProxy;\n`,
    /impl\/node-agent imports impl\/ztunnel/,
  ],
  [
    'the proxy imports the CNI plugin (nested folder)',
    'impl/ztunnel/authz/planted.ts',
    `export * from '../../cni-plugin/cni-plugin.js';\n`,
    /impl\/ztunnel imports impl\/cni-plugin/,
  ],
  [
    'impl/api imports a component',
    'impl/api/planted.ts',
    `export * from '../node-agent/profiles.js';\n`,
    /impl\/api is shared vocabulary/,
  ],
  [
    'sim/ imports impl/linux',
    'sim/kernel/planted.ts',
    `import { parseSave } from '../../impl/linux/netns-rules.js';\nexport const p = parseSave;\n`,
    /sim\/ may not import impl\/linux/,
  ],
  [
    'scenarios/ imports a world implementation',
    'scenarios/model/planted.ts',
    `import { netnsWorldFactory } from '../../e2e/netns/world.js';\nexport const f = netnsWorldFactory;\n`,
    /scenarios\/ may not import 'e2e\/netns\/world.js'/,
  ],
  [
    'scenarios/ loads a world implementation by dynamic import',
    'scenarios/model/planted.ts',
    `export const load = () => import('../../e2e/kind/shared-cluster.js');\n`,
    /scenarios\/ may not import 'e2e\/kind\/shared-cluster.js'/,
  ],
  [
    'scenarios/ imports the CLI',
    'scenarios/planted.ts',
    `export * from '../cli/commands/check.js';\n`,
    /scenarios\/ may not import 'cli\/commands\/check.js'/,
  ],
  [
    'bench/ imports a test fixture',
    'bench/planted.ts',
    `export * from '../tests/netns/world/fixture.js';\n`,
    /bench\/ may not import a test fixture/,
  ],
];

for (const [name, file, source, message] of layering) {
  test(`a planted layering violation is caught: ${name}`, () => {
    withCopy({ [file]: source }, (root) => {
      const v = checkPorts(root);
      expect(v.map((x) => [x.file, x.rule])).toContainEqual([file, 'layer-import']);
      expect(v.map((x) => x.message).join('\n')).toMatch(message);
    });
  });
}

test('what the layering allows: a port or component imports impl/api, a component itself, sim/ impl/api, scenarios/ sim/, bench/ sim/ and e2e/', () => {
  withCopy(
    {
      'impl/host/planted.ts': `import type { PeerIdentity } from '../api/identity.js';\nexport type P = PeerIdentity;\n`,
      'impl/ztunnel/planted.ts': `import type { PeerIdentity } from '../api/identity.js';\nimport type { Authorizer } from './authz/authorizer.js';\nexport type A = [Authorizer, PeerIdentity];\n`,
      'impl/linux/planted.ts': `export * from '../node-agent/node-agent.js';\n`,
      'sim/kernel/planted.ts': `export * from '../../impl/api/netns-rules-restore.js';\n`,
      'scenarios/model/planted.ts': `export * from '../../sim/kernel/kernel.js';\n`,
      'bench/planted.ts': `export * from '../sim/proxy-mesh/proxy-mesh.js';\nexport * from '../e2e/netns/proxy-mesh.js';\n`,
    },
    (root) => {
      expect(checkPorts(root)).toEqual([]);
    },
  );
});

test('a listed layering exception allows exactly its import, and a stale one is reported', () => {
  const from = 'impl/cni-plugin/planted.ts';
  const exception = { from, to: 'impl/node-agent/node-agent.ts', why: 'planted' };
  withCopy(
    { [from]: `import { NodeAgent } from '../node-agent/node-agent.js';\nexport const n = NodeAgent;\n` },
    (root) => {
      expect(checkPorts(root, [exception])).toEqual([]);
      expect(
        checkPorts(root, [{ ...exception, to: 'impl/node-agent/profiles.ts' }])
          .map((v) => v.rule)
          .sort(),
      ).toEqual(['layer-import', 'stale-exception']);
    },
  );
});

test('every layering exception says why', () => {
  for (const e of LAYER_EXCEPTIONS) expect(e.why.trim()).not.toBe('');
});

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
      execFileSync(process.execPath, [path.join(repo, 'dist', 'tools', 'ports-check-cli.js'), root], {
        cwd: repo,
        stdio: 'pipe',
      });
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
