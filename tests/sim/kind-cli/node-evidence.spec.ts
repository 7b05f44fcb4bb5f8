/**
 * The kind world's node-side observation (e2e/kind/node-evidence.ts): the node script runs under
 * a real `sh` with fake node tools on PATH (crictl, stat, nsenter, iptables-*-save, curl), so its
 * shell is checked, not only its parser: which sandboxes it reports, that the redirection is found
 * in either iptables backend, that host-network sandboxes are skipped, and how `redirected` and
 * `served` follow (served needs the proxy's netns to be the pod's CURRENT one).
 */
import { test, expect } from '@playwright/test';
import { execFile } from 'node:child_process';
import { chmod, writeFile } from 'node:fs/promises';
import * as path from 'node:path';
import { promisify } from 'node:util';
import { nodeEvidenceScript, parseNodeEvidence } from '../../../e2e/kind/node-evidence.js';
import { nodeSideOf } from '../../../e2e/kind/attribution.js';
import { makeFakes, type Fakes } from './fakes.js';

const run = promisify(execFile);
const URL = 'http://127.0.0.1:15000/status';

/** nsenter runs its command with FAKE_NETNS naming the namespace; the save tools print that namespace's rules. */
async function netnsFakes(
  f: Fakes,
  rules: Record<string, { nft?: string; legacy?: string; nftables?: string }>,
): Promise<void> {
  await writeFile(path.join(f.dir, 'nsenter'), '#!/bin/sh\nns="${1#--net=}"; shift; FAKE_NETNS="$ns" exec "$@"\n');
  const save = (backend: 'nft' | 'legacy'): string =>
    [
      '#!/bin/sh',
      'case "$FAKE_NETNS" in',
      ...Object.entries(rules).map(
        ([ns, r]) => `  ${ns}) printf '%s\\n' ${JSON.stringify(r[backend] ?? '# empty')} ;;`,
      ),
      '  *) echo "no such netns $FAKE_NETNS" >&2; exit 1 ;;',
      'esac',
      '',
    ].join('\n');
  await writeFile(path.join(f.dir, 'iptables-nft-save'), save('nft'));
  await writeFile(path.join(f.dir, 'iptables-legacy-save'), save('legacy'));
  for (const b of ['nsenter', 'iptables-nft-save', 'iptables-legacy-save']) await chmod(path.join(f.dir, b), 0o755);
  // `nft` only on a node some netns has nftables rules on (the others have no nft at all)
  if (!Object.values(rules).some((r) => r.nftables !== undefined)) return;
  const nft = [
    '#!/bin/sh',
    'case "$FAKE_NETNS" in',
    ...Object.entries(rules).map(([ns, r]) =>
      r.nftables === 'FAIL'
        ? `  ${ns}) echo "netlink: Error: cache initialization failed" >&2; exit 1 ;;`
        : `  ${ns}) printf '%s\\n' ${JSON.stringify(r.nftables ?? '')} ;;`,
    ),
    '  *) echo "no such netns $FAKE_NETNS" >&2; exit 1 ;;',
    'esac',
    '',
  ].join('\n');
  await writeFile(path.join(f.dir, 'nft'), nft);
  await chmod(path.join(f.dir, 'nft'), 0o755);
}

test('the node script: ready sandboxes with their netns inode and redirection (either backend); host-network skipped; the proxy status', async () => {
  const f = await makeFakes(['crictl', 'stat', 'curl']);
  try {
    await f.setRules([
      { bin: 'crictl', has: ['pods', '-q'], stdout: 'sb-a\nsb-b\nsb-c\nsb-host\n' },
      { bin: 'crictl', has: ['inspectp', 'sb-a'], stdout: 'uid-a /var/run/netns/cni-a' },
      { bin: 'crictl', has: ['inspectp', 'sb-b'], stdout: 'uid-b /var/run/netns/cni-b' },
      { bin: 'crictl', has: ['inspectp', 'sb-c'], stdout: 'uid-c /var/run/netns/cni-c' },
      { bin: 'crictl', has: ['inspectp', 'sb-host'], stdout: 'uid-h ' },
      { bin: 'stat', has: ['/var/run/netns/cni-a'], stdout: '4026532001\n' },
      { bin: 'stat', has: ['/var/run/netns/cni-b'], stdout: '4026532002\n' },
      { bin: 'stat', has: ['/var/run/netns/cni-c'], stdout: '4026532003\n' },
      {
        bin: 'curl',
        has: [URL],
        stdout:
          '{"component":"proxy","pods":[\n{"uid":"uid-a","netns":"/proc/self/fd/21","identity":"4:4026532001"},{"uid":"uid-c","identity":"4:4026539999"}]}',
      },
    ]);
    await netnsFakes(f, {
      '/var/run/netns/cni-a': { nft: '-A ISTIO_OUTPUT -p tcp -j REDIRECT --to-ports 15001' },
      '/var/run/netns/cni-b': {
        nft: '-A OUTPUT -p tcp --dport 15001 -j ACCEPT',
        legacy: '-A X -j REDIRECT --to-ports 150010',
      },
      '/var/run/netns/cni-c': { legacy: '-A ISTIO_PRERT -p tcp -j TPROXY --on-port 15001 --on-ip 127.0.0.1' },
    });
    const { stdout } = await run('sh', ['-c', nodeEvidenceScript(URL)], { env: f.env });
    const ev = parseNodeEvidence(stdout);
    expect(ev.noise).toEqual([]);
    expect(Object.fromEntries(ev.sandboxes)).toEqual({
      'uid-a': { netnsInode: '4026532001', redirected: true },
      'uid-b': { netnsInode: '4026532002', redirected: false }, // 15001 as a port match or 150010 is not the jump
      'uid-c': { netnsInode: '4026532003', redirected: true }, // found in the legacy backend
    });
    expect(Object.fromEntries(ev.served ?? [])).toEqual({ 'uid-a': '4026532001', 'uid-c': '4026539999' });
    expect(nodeSideOf('uid-a', ev)).toEqual({ redirected: true, served: true });
    expect(nodeSideOf('uid-b', ev)).toEqual({ redirected: false, served: false });
    expect(nodeSideOf('uid-c', ev)).toEqual({ redirected: true, served: false }); // the proxy holds an older netns
    expect(nodeSideOf('uid-h', ev)).toEqual({ redirected: false, served: false });
  } finally {
    await f.dispose();
  }
});

test('the node script checks its reads: crictl failing fails the script; curl failing and unreadable rules are said, not left out', async () => {
  const f = await makeFakes(['crictl', 'stat', 'curl']);
  try {
    await f.setRules([{ bin: 'crictl', has: ['pods', '-q'], stderr: 'connect: connection refused', exit: 1 }]);
    await expect(run('sh', ['-c', nodeEvidenceScript(URL)], { env: f.env })).rejects.toMatchObject({
      code: 1,
      stderr: expect.stringContaining('crictl pods -q --state ready failed (exit 1)'),
    });
    await f.setRules([
      { bin: 'crictl', has: ['pods', '-q'], stdout: 'sb-a\nsb-z\n' },
      { bin: 'crictl', has: ['inspectp', 'sb-a'], stdout: 'uid-a /var/run/netns/cni-a' },
      { bin: 'crictl', has: ['inspectp', 'sb-z'], stdout: 'uid-z /var/run/netns/cni-z' },
      { bin: 'stat', has: ['/var/run/netns/cni-a'], stdout: '4026532001\n' },
      { bin: 'stat', has: ['/var/run/netns/cni-z'], stdout: '4026532009\n' },
      { bin: 'curl', has: [URL], exit: 7 },
    ]);
    await netnsFakes(f, { '/var/run/netns/cni-a': { nft: '-A ISTIO_OUTPUT -p tcp -j REDIRECT --to-ports 15001' } }); // cni-z: both saves fail
    const { stdout } = await run('sh', ['-c', nodeEvidenceScript(URL)], { env: f.env });
    const ev = parseNodeEvidence(stdout);
    expect(ev.statusError).toBe('curl exit 7');
    expect(ev.served).toBeUndefined();
    expect(Object.fromEntries(ev.sandboxes)).toEqual({ 'uid-a': { netnsInode: '4026532001', redirected: true } });
    expect(ev.unreadable.get('uid-z')).toMatch(
      /neither iptables-nft-save nor iptables-legacy-save could read netns \/var\/run\/netns\/cni-z/,
    );
    expect(ev.noise).toEqual([]);
  } finally {
    await f.dispose();
  }
});

test('a proxy that does not answer serves nothing; unknown lines are kept as noise, not guessed', () => {
  const ev = parseNodeEvidence('al-status \nal-pod uid-a 7 1\nkubectl: warning\n');
  expect(ev.served).toBeUndefined();
  expect(ev.statusError).toBe('the proxy answered /status with nothing');
  expect(nodeSideOf('uid-a', ev)).toEqual({ redirected: true, served: false });
  expect(ev.noise).toEqual(['kubectl: warning']);
  expect(nodeSideOf('uid-a', undefined)).toEqual({ redirected: false, served: false });
  // no status line: not the script's output (it did not run) — an error, not "no sandboxes"
  expect(() => parseNodeEvidence('', 'n1')).toThrow(/the node evidence script on n1 printed no status line/);
  expect(() => parseNodeEvidence('al-pod uid-a 7 1\n', 'n1')).toThrow(/printed no status line/);
});

test('the node script reads the nftables ruleset too (the nftables backend): its redirect counts, a failing nft is unreadable, not "not redirected"', async () => {
  const f = await makeFakes(['crictl', 'stat', 'curl']);
  try {
    await f.setRules([
      { bin: 'crictl', has: ['pods', '-q'], stdout: 'sb-a\nsb-b\nsb-c\n' },
      { bin: 'crictl', has: ['inspectp', 'sb-a'], stdout: 'uid-a /var/run/netns/cni-a' },
      { bin: 'crictl', has: ['inspectp', 'sb-b'], stdout: 'uid-b /var/run/netns/cni-b' },
      { bin: 'crictl', has: ['inspectp', 'sb-c'], stdout: 'uid-c /var/run/netns/cni-c' },
      { bin: 'stat', has: ['/var/run/netns/cni-a'], stdout: '4026532001\n' },
      { bin: 'stat', has: ['/var/run/netns/cni-b'], stdout: '4026532002\n' },
      { bin: 'stat', has: ['/var/run/netns/cni-c'], stdout: '4026532003\n' },
      { bin: 'curl', has: [URL], stdout: '{"pods":[]}' },
    ]);
    await netnsFakes(f, {
      '/var/run/netns/cni-a': {
        nftables: 'table ip istio-ambient-nat {\n\tip daddr != 127.0.0.1 meta l4proto tcp redirect to :15001\n}',
      },
      '/var/run/netns/cni-b': { nftables: 'table ip t {\n\ttcp dport 15001 accept\n}' },
      '/var/run/netns/cni-c': { nft: '# empty', nftables: 'FAIL' },
    });
    const ev = parseNodeEvidence((await run('sh', ['-c', nodeEvidenceScript(URL)], { env: f.env })).stdout);
    expect(ev.noise).toEqual([]);
    expect(Object.fromEntries(ev.sandboxes)).toEqual({
      'uid-a': { netnsInode: '4026532001', redirected: true },
      'uid-b': { netnsInode: '4026532002', redirected: false },
    });
    expect(ev.unreadable.get('uid-c')).toMatch(/nft -s list ruleset failed in netns \/var\/run\/netns\/cni-c: .*cache/);
  } finally {
    await f.dispose();
  }
});
