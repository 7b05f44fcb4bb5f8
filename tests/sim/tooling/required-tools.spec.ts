/**
 * The real-kernel side's tool list (e2e/netns/required-tools.ts) and how it is used: missing
 * tools are named with their Debian package; under CI as root a missing tool fails loudly
 * (tests/worlds.ts) instead of skipping the netns project; conntrack's listing is parsed only
 * when its own summary agrees with what was parsed (so "no entry" is a checked state).
 * PATH is a shim directory here, so this runs on any machine.
 */
import { test, expect } from '@playwright/test';
import { chmod, mkdtemp, rm, writeFile } from 'node:fs/promises';
import * as os from 'node:os';
import * as path from 'node:path';
import {
  CNI_PLUGIN_DIR,
  locateTool,
  missingTools,
  missingToolsReason,
  packageOfCommand,
  REQUIRED_TOOLS,
  requiredPackages,
  requireTools,
  ToolFailure,
} from '../../../e2e/netns/required-tools.js';
import { parseConntrackList } from '../../../e2e/netns/observe.js';
import { netnsWorld } from '../../worlds.js';

const COMMANDS = REQUIRED_TOOLS.filter((t) => !t.name.includes('/'));

async function shimDir(names: readonly string[]): Promise<string> {
  const dir = await mkdtemp(path.join(os.tmpdir(), 'al-tools-'));
  for (const n of names) {
    await writeFile(path.join(dir, n), '#!/bin/sh\nexit 0\n');
    await chmod(path.join(dir, n), 0o755);
  }
  return dir;
}

test('the list names every tool the real-kernel side runs, each with its Debian package', () => {
  const byName = new Map(REQUIRED_TOOLS.map((t) => [t.name, t.pkg]));
  expect(byName.get('conntrack')).toBe('conntrack');
  expect(byName.get('ip')).toBe('iproute2');
  for (const t of ['iptables', 'iptables-save', 'iptables-restore', 'ip6tables', 'ip6tables-save', 'ip6tables-restore'])
    expect(byName.get(t), t).toBe('iptables');
  expect(byName.get('ipset')).toBe('ipset');
  expect(byName.get('nsenter')).toBe('util-linux');
  expect(byName.get('setpriv')).toBe('util-linux');
  for (const p of ['bridge', 'host-local', 'loopback'])
    expect(byName.get(`${CNI_PLUGIN_DIR}/${p}`), p).toBe('containernetworking-plugins');
  expect(requiredPackages()).toEqual(
    expect.arrayContaining([
      'iproute2',
      'iptables',
      'ipset',
      'conntrack',
      'util-linux',
      'procps',
      'containernetworking-plugins',
    ]),
  );
  expect(new Set(requiredPackages()).size).toBe(requiredPackages().length);
  expect(packageOfCommand('/usr/sbin/conntrack')).toBe('conntrack');
});

test('a command absent from PATH is missing and named with its package; present (executable) it is not', async () => {
  const all = await shimDir(COMMANDS.map((t) => t.name));
  const noConntrack = await shimDir(COMMANDS.map((t) => t.name).filter((n) => n !== 'conntrack'));
  try {
    // positive control: every command present → none of them missing
    expect(missingTools(all).filter((t) => !t.name.includes('/'))).toEqual([]);
    expect(locateTool('conntrack', all)).toBe(path.join(all, 'conntrack'));
    const missing = missingTools(noConntrack).filter((t) => !t.name.includes('/'));
    expect(missing.map((t) => t.name)).toEqual(['conntrack']);
    expect(missingToolsReason(missing)).toBe('missing conntrack: apt-get install -y conntrack');
    expect(() => requireTools('ambient-lab up', noConntrack)).toThrow(
      /ambient-lab up needs tools this machine lacks — missing conntrack(, \S+)*: apt-get install -y conntrack/,
    );
    // a file that is there but not executable does not count
    await chmod(path.join(all, 'conntrack'), 0o644);
    expect(locateTool('conntrack', all)).toBeUndefined();
  } finally {
    await rm(all, { recursive: true, force: true });
    await rm(noConntrack, { recursive: true, force: true });
  }
});

test('netnsWorld(): a missing tool skips the world naming the package; with CI set, as root on Linux, it throws', async () => {
  const noConntrack = await shimDir(COMMANDS.map((t) => t.name).filter((n) => n !== 'conntrack'));
  try {
    const skipped = netnsWorld({ PATH: noConntrack }, 'linux', 0);
    expect(skipped.available).toBe(false);
    expect(skipped.reason).toContain('apt-get install -y conntrack');
    expect(() => netnsWorld({ PATH: noConntrack, CI: 'true' }, 'linux', 0)).toThrow(
      /CI is set and this is root on Linux, but .*missing conntrack.*apt-get install -y conntrack/,
    );
    // not root, or not Linux: skipped for that reason, also under CI (nothing could be installed)
    expect(netnsWorld({ PATH: noConntrack, CI: 'true' }, 'linux', 1000).reason).toMatch(/needs root/);
    expect(netnsWorld({ PATH: noConntrack, CI: 'true' }, 'darwin', 0).reason).toMatch(/needs Linux/);
  } finally {
    await rm(noConntrack, { recursive: true, force: true });
  }
});

test('netnsWorld(): positive control — every tool present (the CNI plugins are files, checked where they are) → available, also under CI', async () => {
  test.skip(
    REQUIRED_TOOLS.some((t) => t.name.includes('/') && locateTool(t.name) === undefined),
    `the CNI plugins are not installed in ${CNI_PLUGIN_DIR} on this machine`,
  );
  const all = await shimDir(COMMANDS.map((t) => t.name));
  try {
    expect(netnsWorld({ PATH: all, CI: 'true' }, 'linux', 0)).toMatchObject({ available: true });
  } finally {
    await rm(all, { recursive: true, force: true });
  }
});

test('ToolFailure names the command, where it ran, what it said, and the package to install when the tool is absent', () => {
  const absent = new ToolFailure(
    'al-no-such-tool',
    ['ip', 'netns', 'exec', 'al-x', 'al-no-such-tool', '-L'],
    'netns al-x',
    'exit 255: exec of "al-no-such-tool" failed: No such file or directory',
  );
  expect(absent.message).toContain('`ip netns exec al-x al-no-such-tool -L` in netns al-x');
  expect(absent.message).toContain('exit 255');
  expect(absent.message).toContain('is not installed: apt-get install -y');
  const present = new ToolFailure('sh', ['sh', '-c', 'exit 1'], 'the root namespace', 'exit 1: ');
  expect(present.message).toMatch(/check that `sh` works here/);
});

test('conntrack listing: parsed only when conntrack\'s own summary agrees; "0 entries" is a checked empty answer', () => {
  const line =
    'tcp      6 58 SYN_RECV src=203.0.113.10 dst=10.244.0.2 sport=20156 dport=8080 src=10.244.0.2 dst=203.0.113.10 sport=15006 dport=20156 mark=0 use=1';
  const summary = (n: number): string => `conntrack v1.4.7 (conntrack-tools): ${n} flow entries have been shown.\n`;
  // positive control: one entry, summary 1
  expect(parseConntrackList(`${line}\n`, summary(1), 'x')).toEqual([
    {
      orig: { src: '203.0.113.10', dst: '10.244.0.2', sport: 20156, dport: 8080 },
      reply: { src: '10.244.0.2', dst: '203.0.113.10', sport: 15006, dport: 20156 },
    },
  ]);
  expect(parseConntrackList('', summary(0), 'x')).toEqual([]);
  // what a missing or failing tool leaves: no summary → error, never "no entry"
  expect(() => parseConntrackList('', '', 'raw SYN')).toThrow(/raw SYN: conntrack printed no summary line/);
  expect(() => parseConntrackList('', 'ip: exec of "conntrack" failed: No such file or directory', 'raw SYN')).toThrow(
    /no summary line/,
  );
  // output the parser does not understand, or a count that does not match
  expect(() => parseConntrackList('garbage\n', summary(1), 'x')).toThrow(/without both tuples/);
  expect(() => parseConntrackList('', summary(1), 'x')).toThrow(/says 1 entries but 0 were parsed/);
});
