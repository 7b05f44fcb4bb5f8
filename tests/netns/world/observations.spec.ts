/**
 * A failed observation is a harness error, never a verdict: each way the netns world reads the
 * kernel, a tool, a file or a component fails here on a real world, and the World call throws
 * with what failed, on what, and what to do — next to a positive control that reads the same
 * thing successfully. Tools are broken with a PATH shim directory (a fake that exits 1 or prints
 * nothing, or a PATH without the tool), files by moving them aside, the proxy by SIGSTOP of the
 * pid this world started (SIGCONT after).
 */
import { test, expect } from '@playwright/test';
import { chmod, mkdtemp, rm, symlink, writeFile } from 'node:fs/promises';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { locateTool } from '../../../e2e/netns/required-tools.js';
import type { NetnsWorld } from '../../../e2e/netns/world.js';
import type { PodRef } from '../../../scenarios/world.js';
import { execIn } from '../../../e2e/netns/ip.js';
import { MESH, skipUnlessSuiteWorldAvailable, suiteWorld, withNetnsWorld } from './fixture.js';

skipUnlessSuiteWorldAvailable();
test.setTimeout(300_000);

const a: PodRef = { namespace: 'mesh', name: 'a' };

/** A directory of fake tools: name → shell script body. */
async function shims(tools: Record<string, string>, links: Record<string, string> = {}): Promise<string> {
  const dir = await mkdtemp(path.join(os.tmpdir(), 'al-shim-'));
  for (const [name, body] of Object.entries(tools)) {
    await writeFile(path.join(dir, name), `#!/bin/sh\n${body}\n`);
    await chmod(path.join(dir, name), 0o755);
  }
  for (const [name, target] of Object.entries(links)) await symlink(target, path.join(dir, name));
  return dir;
}

/** Run `fn` with PATH = `pathValue` (what `ip netns exec` and execFile look tools up on), then restore it. */
async function withPath<T>(pathValue: string, fn: () => Promise<T>): Promise<T> {
  const saved = process.env['PATH'];
  process.env['PATH'] = pathValue;
  try {
    return await fn();
  } finally {
    process.env['PATH'] = saved;
  }
}

async function meshPod(w: NetnsWorld): Promise<void> {
  await w.createNamespace('mesh', MESH);
  await w.createPod({ ...a, node: 'node-0', app: { uid: 1000, caps: [], tcpPorts: [8080] } });
  await w.settle();
}

test('raw SYN attribution: conntrack failing, absent, or printing nothing is a harness error naming the tool, the command and the package', async () => {
  const ip = locateTool('ip');
  expect(ip, 'ip on PATH').toBeDefined();
  const failing = await shims({
    conntrack: 'echo "conntrack v1.4.7 (conntrack-tools): Operation failed: invalid parameters" >&2; exit 1',
  });
  const silent = await shims({ conntrack: 'exit 0' });
  // Everything the attempt runs but conntrack: ip, and iptables-save (strict's raw-SYN
  // attribution reads the TPROXY rule counters before the conntrack table).
  const iptablesSave = locateTool('iptables-save');
  expect(iptablesSave, 'iptables-save on PATH').toBeDefined();
  const ipOnly = await shims({}, { ip: ip!, 'iptables-save': iptablesSave! });
  const full = process.env['PATH'] ?? '';
  try {
    await withNetnsWorld({ nodes: 1 }, async (w) => {
      await meshPod(w);
      const raw = (): ReturnType<NetnsWorld['connect']> =>
        w.connect({ kind: 'outside' }, { kind: 'pod', pod: a, port: 8080 }, { proto: 'tcp', raw: true });
      // positive control: the real conntrack says the SYN went to the inbound proxy (15006)
      const ok = await raw();
      expect(ok.trace).toContain('SYN-ACK from listener port 15006');
      expect(ok.acceptedBy).toBe('proxy-inbound');
      // the tool fails: never "no entry" (which would attribute port 8080 to the app)
      await withPath(`${failing}:${full}`, async () => {
        await expect(raw()).rejects.toThrow(
          /observation failed: `ip netns exec \S+ conntrack -L -f ipv4 -p tcp --orig-src 203\.0\.113\.10 .*exit 1: .*Operation failed.*check that `conntrack` works here \(Debian package conntrack\)/,
        );
      });
      // the tool is not installed
      await withPath(ipOnly, async () => {
        await expect(raw()).rejects.toThrow(
          /observation failed: `ip netns exec \S+ conntrack -L.*`conntrack` is not installed: apt-get install -y conntrack/,
        );
      });
      // exit 0 without conntrack's summary: not the tool's "0 entries"
      await withPath(`${silent}:${full}`, async () => {
        await expect(raw()).rejects.toThrow(/which listener answered the raw SYN .*conntrack printed no summary line/);
      });
      // and back to the real tool: the same answer as the control
      expect((await raw()).acceptedBy).toBe('proxy-inbound');
    });
  } finally {
    for (const d of [failing, silent, ipOnly]) await rm(d, { recursive: true, force: true });
  }
});

test('pods(): iptables-save failing, or a proxy that runs but does not answer /status, is an error — not "not redirected" or "not served"', async () => {
  const failing = await shims({ 'iptables-save': 'echo "iptables-save: fake failure" >&2; exit 1' });
  const full = process.env['PATH'] ?? '';
  try {
    await withNetnsWorld({ nodes: 1 }, async (w) => {
      await meshPod(w);
      // positive control
      const seen = (await w.pods()).find((p) => p.name === 'a');
      expect(seen).toMatchObject({ redirected: true, served: true });
      await withPath(`${failing}:${full}`, async () => {
        await expect(w.pods()).rejects.toThrow(
          /observation failed: `ip netns exec \S+ iptables-save` in netns \S+: exit 1: iptables-save: fake failure/,
        );
      });
      const proxy = w.lab.state.components['node-0/proxy'];
      expect(proxy, 'the proxy this world started').toBeDefined();
      // The bound on a silent /status is 30 s for a loaded machine; this test needs only its error.
      w.bounds = { ...w.bounds, statusAnswerMs: 3_000 };
      process.kill(proxy!.pid, 'SIGSTOP'); // our own process, by its pid; continued below
      try {
        await expect(w.pods()).rejects.toThrow(
          /the proxy on node-0 is running but its \/status did not answer within \d+ ms/,
        );
      } finally {
        process.kill(proxy!.pid, 'SIGCONT');
      }
      expect((await w.pods()).find((p) => p.name === 'a')).toMatchObject({ redirected: true, served: true });
    });
  } finally {
    await rm(failing, { recursive: true, force: true });
  }
});

test('connect(): a missing or unreadable connection log is an error — not "no proxy"', async () => {
  await withNetnsWorld({ nodes: 1 }, async (w) => {
    await meshPod(w);
    const attempt = (): ReturnType<NetnsWorld['connect']> =>
      w.connect({ kind: 'outside' }, { kind: 'pod', pod: a, port: 8080 }, { proto: 'tcp' });
    // positive control: through the inbound proxy, delivered to the app
    const ok = await attempt();
    expect(ok.outcome).toBe('established');
    expect(ok.acceptedBy).toBe('proxy-inbound');
    expect(ok.deliveries).toEqual([expect.objectContaining({ pod: a, port: 8080, viaProxy: true })]);

    // the proxy's connection log is gone
    const log = path.join(w.lab.nodeDir('node-0'), 'connections.jsonl');
    fs.renameSync(log, `${log}.aside`);
    try {
      await expect(attempt()).rejects.toThrow(
        /the connection log of the proxy on node-0 \(.*connections\.jsonl\) cannot be read: ENOENT/,
      );
    } finally {
      fs.renameSync(`${log}.aside`, log);
    }

    // a line the harness cannot read in the connection log, written during the attempt (connect
    // takes the log offsets synchronously, before its first await)
    const racing = attempt();
    fs.appendFileSync(log, 'garbage that is not JSON\n');
    await expect(racing).rejects.toThrow(
      /the connection log of the proxy on node-0 .* has lines the harness cannot read: line 1 after offset \d+: not JSON/,
    );
    // afterwards (offsets past the bad lines) the control reads again
    expect((await attempt()).acceptedBy).toBe('proxy-inbound');
  });
});

test('connect(): a proxy still connecting upstream when the client gives up is the first hop (its \'accepted\' record), and a leg that never ends is an error past the bound — not "first hop was other"', async () => {
  // Blackholing the destination takes a rule in the destination pod's netns, which this test
  // names directly: the netns world's (the container world keeps pods inside node containers).
  test.skip(suiteWorld() !== 'netns', 'stages the blackhole with iptables in a pod netns of the netns world');
  await withNetnsWorld({ nodes: 1 }, async (w) => {
    await meshPod(w);
    await w.createNamespace('plain', {});
    const b: PodRef = { namespace: 'plain', name: 'b' };
    await w.createPod({ ...b, node: 'node-0', app: { uid: 1000, caps: [], tcpPorts: [8080] } });
    await w.settle();
    const attempt = (): ReturnType<NetnsWorld['connect']> =>
      w.connect({ kind: 'pod', pod: a }, { kind: 'pod', pod: b, port: 8080 }, { proto: 'tcp' });
    // positive control: a's outbound proxy passes it through to b's app
    const ok = await attempt();
    expect(ok.acceptedBy).toBe('proxy-outbound');
    expect(ok.deliveries).toEqual([expect.objectContaining({ pod: b, port: 8080, viaProxy: true })]);

    // b drops SYNs to 8080: the proxy's upstream connect runs to its timeout (10 s), long after the
    // client probe gave up (3 s); only the proxy's 'accepted' record says who took the connection
    const bNetns = Object.values(w.lab.state.pods).find((p) => p.name === 'b')?.netns;
    expect(bNetns, "b's netns").toBeDefined();
    await execIn(bNetns!, ['iptables', '-I', 'INPUT', '-p', 'tcp', '--dport', '8080', '-j', 'DROP']);
    const pending = await attempt();
    expect(pending.acceptedBy).toBe('proxy-outbound');
    expect(pending.acceptedIn).toEqual(a);
    expect(pending.deliveries).toEqual([]);
    expect(pending.proxyLog.map((e) => e.event)).toEqual(['accepted', 'error']);

    // the proxy stops (SIGSTOP, by the pid this world started) after taking the connection: its
    // leg never gets a final record, and connect() says so instead of judging half a record
    const proxy = w.lab.state.components['node-0/proxy'];
    expect(proxy, 'the proxy this world started').toBeDefined();
    const log = path.join(w.lab.nodeDir('node-0'), 'connections.jsonl');
    const before = fs.readFileSync(log, 'utf8').split('\n').length;
    // The bound on a missing final record is 30 s (room for the proxy's 10 s connect timeout, twice,
    // on a loaded machine); this attempt needs only its error.
    w.bounds = { ...w.bounds, attemptMs: 3_000 };
    const stuck = attempt();
    const outcome = stuck.then(
      () => 'resolved',
      (e: unknown) => e,
    );
    try {
      for (let i = 0; i < 200 && fs.readFileSync(log, 'utf8').split('\n').length === before; i++)
        await new Promise((r) => setTimeout(r, 20));
      process.kill(proxy!.pid, 'SIGSTOP');
      const e = await outcome;
      expect(e).toBeInstanceOf(Error);
      expect((e as Error).message).toMatch(
        /observing attempt \S+ failed: still incomplete after \d+ ms: proxy leg node-0 outbound from \S+ has no final record yet/,
      );
    } finally {
      process.kill(proxy!.pid, 'SIGCONT');
    }
  });
});
