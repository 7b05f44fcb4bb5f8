/** Lab files: the example runs as documented, and broken lab files fail with the place named. */
import { test, expect } from '@playwright/test';
import { spawnSync } from 'node:child_process';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { parseLab, LabError, LINUX_CAPABILITIES, modelledCaps } from '../../../sim/lab/lab-file.js';
import { SimKernel } from '../../../sim/kernel/kernel.js';
import { runLab } from '../../../sim/lab/run-lab.js';

const repo = path.resolve(import.meta.dirname, '..', '..', '..');
const example = fs.readFileSync(path.join(repo, 'fixtures/labs/inpod.yaml'), 'utf8');

test('the example lab shows capture, carve-outs and the return path', () => {
  const run = runLab(parseLab(example, 'inpod.yaml'), 'inpod.yaml');
  const by = Object.fromEntries(run.results.map((r) => [r.name, r]));
  expect(by['app-a-to-pod-b']).toMatchObject({
    outcome: 'established',
    acceptedBy: 'proxy-outbound',
    originalDst: '10.244.1.6:8080',
  });
  expect(by['pod-b-to-app-a']).toMatchObject({
    outcome: 'established',
    acceptedBy: 'proxy-inbound',
    originalDst: '10.244.1.5:8080',
  });
  expect(by['pod-b-to-hbone']).toMatchObject({ outcome: 'established', acceptedBy: 'proxy-hbone' });
  expect(by['kubelet-probe']).toMatchObject({ outcome: 'established', acceptedBy: 'app-a' });
  expect(by['kubelet-probe']!.sourceSeen).toMatch(/^169\.254\.7\.127:/);
  expect(by['proxy-upstream']).toMatchObject({ outcome: 'established', acceptedBy: 'app-b' });
  expect(by['proxy-to-app-spoofed']).toMatchObject({
    outcome: 'established',
    acceptedBy: 'app-a',
    sourceSeen: expect.stringMatching(/^10\.244\.1\.6:/),
  });
  expect(by['app-mark-spoof']!.outcome).toBe('error EPERM');
  expect(by['app-dns']).toMatchObject({ outcome: 'no-socket', localSeen: '127.0.0.1:15053' });
});

test('ambient-lab trace prints outcomes and traces, and --json is machine-readable', () => {
  const bin = path.join(repo, 'bin', 'ambient-lab.js');
  const lab = path.join(repo, 'fixtures/labs/inpod.yaml');
  const text = spawnSync(process.execPath, [bin, 'trace', lab], { encoding: 'utf8' });
  expect(text.status, text.stderr).toBe(0);
  expect(text.stdout).toContain('== app-a-to-pod-b: established');
  expect(text.stdout).toContain('accepted by:     proxy-outbound');
  expect(text.stdout).toMatch(/REDIRECT --to-ports 15001/);
  const json = spawnSync(process.execPath, [bin, 'trace', lab, '--json', '--only', 'pod-b-to-app-a'], {
    encoding: 'utf8',
  });
  expect(json.status, json.stderr).toBe(0);
  const doc = JSON.parse(json.stdout) as {
    attempts: { name: string; acceptedBy: string; trace: { kind: string }[] }[];
  };
  expect(doc.attempts).toHaveLength(1);
  expect(doc.attempts[0]!.acceptedBy).toBe('proxy-inbound');
  expect(doc.attempts[0]!.trace.some((e) => e.kind === 'table')).toBe(true);
});

function labError(text: string): LabError {
  try {
    const lab = parseLab(text, 'bad.yaml');
    runLab(lab, 'bad.yaml');
  } catch (e) {
    if (e instanceof LabError) return e;
    throw new Error(`expected a LabError, got ${String(e)}`, { cause: e });
  }
  throw new Error('expected the lab to fail');
}

const minimal = (extra: string): string => `version: 1\nnamespaces:\n  - name: a\n${extra}`;

const broken: ReadonlyArray<[string, string, RegExp, number | undefined]> = [
  ['YAML syntax', 'version: 1\nnamespaces: [\n', /YAML syntax error/, undefined],
  ['missing version', 'namespaces: []\n', /version: 1/, undefined],
  ['unknown key', minimal('    colour: blue\n'), /unknown key 'colour'/, 4],
  [
    'bad address',
    minimal('    links:\n      - { name: br0, kind: bridge, addresses: [10.0.0.300/24] }\n'),
    /invalid IP address/,
    5,
  ],
  [
    'address without prefix',
    minimal('    links:\n      - { name: br0, kind: bridge, addresses: [10.0.0.1] }\n'),
    /needs a prefix length/,
    5,
  ],
  [
    'unknown namespace',
    'version: 1\nnamespaces: []\nsockets:\n  - { name: s, netns: nope, port: 80 }\n',
    /unknown namespace "nope"/,
    4,
  ],
  ['bad port', minimal('sockets:\n  - { name: s, netns: a, port: 70000 }\n'), /sockets\[0\]\.port/, 5],
  [
    'unknown capability',
    minimal('sockets:\n  - { name: s, netns: a, port: 80, caps: [NET_FOO] }\n'),
    /unknown capability "NET_FOO": expected a Linux capability name/,
    5,
  ],
  ['bad mark', minimal('    rules:\n      - { priority: 1, fwmark: 0xzz, table: 100 }\n'), /VALUE\[\/MASK\]/, 5],
  [
    'unsupported rule text',
    minimal('    iptables: |\n      *filter\n      -A INPUT -m frobnicate -j DROP\n      COMMIT\n'),
    /frobnicate/,
    6,
  ],
  ['unknown chain', minimal('    iptables: |\n      *filter\n      -A NOPE -j DROP\n      COMMIT\n'), /NOPE/, 6],
  [
    'gateway not on a link',
    minimal('    routes:\n      - { dst: default, via: 192.0.2.1 }\n'),
    /gateway is not reachable/,
    undefined,
  ],
  [
    'duplicate socket',
    minimal('sockets:\n  - { name: s, netns: a, port: 80 }\n  - { name: s, netns: a, port: 81 }\n'),
    /duplicate socket name/,
    6,
  ],
];

for (const [name, text, message, line] of broken) {
  test(`a broken lab file fails with a clear error naming the place: ${name}`, () => {
    const e = labError(text);
    expect(e.message).toMatch(message);
    expect(e.message.startsWith('bad.yaml')).toBe(true);
    if (line !== undefined) expect(e.line).toBe(line);
  });
}

test('ambient-lab trace on a missing file or broken lab exits 2 (usage) with the error', () => {
  const bin = path.join(repo, 'bin', 'ambient-lab.js');
  const r = spawnSync(process.execPath, [bin, 'trace', '/nonexistent/lab.yaml'], { encoding: 'utf8' });
  expect(r.status).toBe(2);
  expect(r.stderr).toContain('cannot read lab file /nonexistent/lab.yaml: ENOENT');
});

test('a YAML syntax error names its line and column, in the API and from trace', () => {
  // The unclosed flow sequence is detected where the next token should be: line 3, column 1.
  const e = labError('version: 1\nnamespaces: [\n');
  expect(e.line).toBe(3);
  expect(e.column).toBe(1);
  expect(e.message).toMatch(/^bad\.yaml:3:1: YAML syntax error: /);
  // A duplicate key: the second `version` at line 2, column 1.
  const dup = labError('version: 1\nversion: 1\n');
  expect([dup.line, dup.column]).toEqual([2, 1]);
  // An unclosed quote opened on line 4 is reported where the input ends: line 5, column 1.
  const quote = labError('version: 1\nnamespaces:\n  - name: a\n    iptables: "x\n');
  expect(quote.message).toMatch(/^bad\.yaml:5:1: YAML syntax error: Missing closing "quote/);
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'al-lab-'));
  try {
    const file = path.join(dir, 'broken.yaml');
    fs.writeFileSync(file, 'version: 1\nnamespaces:\n  - name: a\n   links: [\n');
    const bin = path.join(repo, 'bin', 'ambient-lab.js');
    const r = spawnSync(process.execPath, [bin, 'trace', file], { encoding: 'utf8' });
    expect(r.status, r.stderr).toBe(2);
    expect(r.stderr).toMatch(
      new RegExp(`${file.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')}:\\d+:\\d+: YAML syntax error: `),
    );
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
});

test('a semantic error in a lab file names line and column of the offending value', () => {
  const e = labError(minimal('    colour: blue\n'));
  expect([e.line, e.column]).toEqual([4, 13]);
  expect(e.message).toMatch(/^bad\.yaml:4:13 \(namespaces\[0\]\.colour\): unknown key 'colour'/);
});

test('every Linux capability name is accepted (CAP_ prefix and case optional); the model uses only the network ones', () => {
  const lab = parseLab(
    minimal(
      'sockets:\n  - { name: s, netns: a, port: 80, uid: 1000, caps: [CAP_SYS_ADMIN, net_raw, CHECKPOINT_RESTORE] }\n',
    ),
    'caps.yaml',
  );
  expect(lab.sockets[0]!.caps).toEqual(['SYS_ADMIN', 'NET_RAW', 'CHECKPOINT_RESTORE']);
  expect(modelledCaps(lab.sockets[0]!.caps)).toEqual(['NET_RAW']);
  expect(LINUX_CAPABILITIES).toHaveLength(41);
});

test('an ip rule without a priority gets the kernel automatic one: the second rule of its family minus one, or 0', () => {
  const rulesOf = (rules: string): string[] => {
    const lab = parseLab(minimal(`    rules:\n${rules}`), 'rules.yaml');
    const k = new SimKernel();
    k.addNetns('a');
    for (const r of lab.namespaces[0]!.rules)
      k.addRule('a', {
        family: r.family,
        ...(r.priority !== undefined ? { priority: r.priority } : {}),
        ...(r.fwmark ? { fwmark: r.fwmark.value, mask: r.fwmark.mask } : {}),
        ...(r.table !== undefined ? { table: r.table } : {}),
      });
    return k
      .netns('a')
      .rules.list(4)
      .map((r) => `${r.priority} ${r.fwmark?.value ?? '-'}`);
  };
  // As `ip rule` printed them on Linux 6.18 after the same adds.
  expect(rulesOf('      - { fwmark: 1, table: 100 }\n      - { fwmark: 2, table: 101 }\n')).toEqual([
    '0 -',
    '32764 2',
    '32765 1',
    '32766 -',
    '32767 -',
  ]);
  expect(rulesOf('      - { priority: 100, fwmark: 3, table: 102 }\n      - { fwmark: 4, table: 103 }\n')).toEqual([
    '0 -',
    '99 4',
    '100 3',
    '32766 -',
    '32767 -',
  ]);
  expect(rulesOf('      - { priority: 0, fwmark: 9, table: 109 }\n      - { fwmark: 4, table: 103 }\n')).toEqual([
    '0 -',
    '0 9',
    '0 4',
    '32766 -',
    '32767 -',
  ]);
});

test('on_sockopt_error: fail (default) ends the attempt with the errno; continue goes on without the option; anything else is refused', () => {
  const lab = (extra: string) =>
    parseLab(example.replace('uid: 1000, mark: 0x539 }', `uid: 1000, mark: 0x539${extra} }`), 'inpod.yaml');
  const outcome = (l: ReturnType<typeof lab>) =>
    runLab(l, 'inpod.yaml', { trace: false }).results.find((r) => r.name === 'app-mark-spoof');
  expect(outcome(lab(''))?.outcome).toBe('error EPERM');
  expect(outcome(lab(', on_sockopt_error: fail'))?.outcome).toBe('error EPERM');
  expect(outcome(lab(', on_sockopt_error: continue'))).toMatchObject({
    outcome: 'established',
    acceptedBy: 'proxy-outbound',
  });
  expect(() => lab(', on_sockopt_error: ignore')).toThrow(/on_sockopt_error.*fail or continue/);
});

/** inpod.yaml with these sockets added after its own. */
function withSockets(extra: string): string {
  return example.replace(
    '  - { name: app-b, netns: pod-b, port: 8080, uid: 1000 }\n',
    `  - { name: app-b, netns: pod-b, port: 8080, uid: 1000 }\n${extra}`,
  );
}

test('expect on a socket: an expected bind error is recorded and the lab goes on; an unexpected one is still a lab error; bad values are refused', () => {
  const run = runLab(
    parseLab(
      withSockets(
        '  - { name: second-a, netns: pod-a, port: 8080, uid: 1000, expect: EADDRINUSE }\n' +
          '  - { name: not-there, netns: pod-a, address: 10.9.9.9, port: 9090, uid: 1000, expect: EADDRNOTAVAIL }\n' +
          '  - { name: free-port, netns: pod-a, port: 9091, uid: 1000, expect: EADDRINUSE }\n',
      ),
      'inpod.yaml',
    ),
    'inpod.yaml',
    { trace: false },
  );
  expect(run.listeners.map((l) => [l.name, l.outcome, l.expected])).toEqual([
    ['proxy-outbound', 'listening', 'listening'],
    ['proxy-inbound', 'listening', 'listening'],
    ['proxy-hbone', 'listening', 'listening'],
    ['app-a', 'listening', 'listening'],
    ['app-b', 'listening', 'listening'],
    ['second-a', 'EADDRINUSE', 'EADDRINUSE'],
    ['not-there', 'EADDRNOTAVAIL', 'EADDRNOTAVAIL'],
    ['free-port', 'listening', 'EADDRINUSE'],
  ]);
  expect(run.listeners.find((l) => l.name === 'second-a')?.detail).toMatch(/^bind: EADDRINUSE: /);
  // The failed socket is not there: the app's own listener still takes the inbound call.
  expect(run.results.find((r) => r.name === 'pod-b-to-app-a')).toMatchObject({
    outcome: 'established',
    acceptedBy: 'proxy-inbound',
  });
  // Without `expect` the same second bind is an error in the lab, naming the socket.
  expect(() =>
    runLab(
      parseLab(withSockets('  - { name: second-a, netns: pod-a, port: 8080, uid: 1000 }\n'), 'inpod.yaml'),
      'inpod.yaml',
    ),
  ).toThrow(/sockets\[5\].*EADDRINUSE/);
  expect(() =>
    parseLab(withSockets('  - { name: x, netns: pod-a, port: 1, uid: 1000, expect: ENOENT }\n'), 'inpod.yaml'),
  ).toThrow(/expect.*listening or one of EADDRINUSE, EADDRNOTAVAIL, EACCES, EPERM, EINVAL/);
});

test('trace lists every listener (text and JSON) and exits 1 when one is not as its expect says', () => {
  const bin = path.join(repo, 'bin', 'ambient-lab.js');
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'al-listeners-'));
  /** `trace` of inpod.yaml with `extra` sockets, with `flags`. */
  const trace = (extra: string, ...flags: string[]) => {
    const file = path.join(dir, 'lab.yaml');
    fs.writeFileSync(file, withSockets(extra));
    return spawnSync(process.execPath, [bin, 'trace', file, '--no-packets', ...flags], { encoding: 'utf8' });
  };
  const second = '  - { name: second-a, netns: pod-a, port: 8080, uid: 1000, expect: EADDRINUSE }\n';
  try {
    const text = trace(second);
    expect(text.status, text.stderr).toBe(0);
    expect(text.stdout).toMatch(/^== listeners\n {3}proxy-outbound +listening\n/);
    expect(text.stdout).toMatch(/\n {3}second-a +EADDRINUSE \(as expected\): bind: EADDRINUSE: /);
    const json = trace(second, '--json');
    expect(json.status, json.stderr).toBe(0);
    const doc = JSON.parse(json.stdout) as { listeners: { name: string; outcome: string; expected: string }[] };
    expect(doc.listeners.map((l) => `${l.name} ${l.outcome} ${l.expected}`)).toEqual([
      'proxy-outbound listening listening',
      'proxy-inbound listening listening',
      'proxy-hbone listening listening',
      'app-a listening listening',
      'app-b listening listening',
      'second-a EADDRINUSE EADDRINUSE',
    ]);
    const miss = trace('  - { name: free-port, netns: pod-a, port: 9091, uid: 1000, expect: EADDRINUSE }\n');
    expect(miss.status, miss.stderr).toBe(1);
    expect(miss.stdout).toMatch(/\n {3}free-port +listening — NOT AS EXPECTED: expect EADDRINUSE\n/);
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
});
