/**
 * The kind world's rogue ZDS client script (e2e/kind/zds-rogue.ts), run here with `node -e` as
 * the kind world runs it in a node's host-probe pod (the repo standing for the image's /app),
 * against a real ZdsServer on the Linux transport: with its uid allowed it is served like the
 * proxy (the snapshot's Add with a netns fd, acked; SnapshotSent); with another uid allowed the
 * agent closes it without a word. Needs the compiled tree (`npx tsc -p .`) and the native addon.
 */
import { test, expect } from '@playwright/test';
import { execFile } from 'node:child_process';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { promisify } from 'node:util';
import { fileURLToPath } from 'node:url';
import { netnsWorld } from '../../worlds.js';
import { netnsId, podUid } from '../../../impl/api/ids.js';
import type { Logger } from '../../../impl/host/log.js';
import { SystemClock } from '../../../impl/linux/clock.js';
import { LinuxZdsTransport } from '../../../impl/linux/zds-transport.js';
import { ZdsServer, type ZdsServerEvent } from '../../../impl/node-agent/zds-server.js';
import { parseZdsRogueOutput, zdsRogueScript } from '../../../e2e/kind/zds-rogue.js';

const w = netnsWorld();
test.skip(!w.available, w.reason);
const repo = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../../..');
test.skip(!fs.existsSync(path.join(repo, 'dist/impl/api/zds/codec.js')), 'needs the compiled tree: run `npx tsc -p .`');

const run = promisify(execFile);
const quiet: Logger = { debug() {}, info() {}, warn() {}, error() {}, child: () => quiet };

async function against(
  allowedUids: number[],
): Promise<{ attempt: ReturnType<typeof parseZdsRogueOutput>; events: ZdsServerEvent[] }> {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'al-rogue-'));
  const sock = path.join(dir, 'zds', 'zds.sock');
  const events: ZdsServerEvent[] = [];
  const server = new ZdsServer({
    transport: new LinuxZdsTransport({ mode: 0o600 }),
    address: sock,
    clock: new SystemClock(),
    log: quiet,
    allowedUids,
    snapshot: () => [
      {
        uid: podUid('pod-1'),
        info: { name: 'a', namespace: 'mesh', serviceAccount: 'default' },
        netns: netnsId('/proc/self/ns/net'),
      },
    ],
  });
  server.on((e) => events.push(e));
  await server.start();
  try {
    const { stdout } = await run(process.execPath, ['-e', zdsRogueScript(sock, repo, 800)], { timeout: 20_000 });
    return { attempt: parseZdsRogueOutput(stdout), events };
  } finally {
    await server.stop();
    fs.rmSync(dir, { recursive: true, force: true });
  }
}

test('an allowed uid is served like the proxy: the Add with its netns fd, acked, then SnapshotSent', async () => {
  const { attempt, events } = await against([process.getuid!()]);
  expect(attempt.accepted).toBe(true);
  expect(attempt.workloads).toBe(1);
  expect(attempt.detail).toMatch(/2 frame\(s\), 1 pod netns handle/);
  expect(events.map((e) => e.type)).toContain('connected');
  expect(events.some((e) => e.type === 'nack')).toBe(false); // the rogue acked like the proxy
});

test('another uid is closed without a word: nothing of the snapshot, the agent records the rejection', async () => {
  const { attempt, events } = await against([1337]);
  expect(attempt).toMatchObject({ accepted: false, workloads: 0 });
  expect(attempt.detail).toMatch(/rejected/);
  expect(events.filter((e) => e.type === 'rejected')).toHaveLength(1);
});

test('no result line is an error that quotes the output', () => {
  expect(() => parseZdsRogueOutput('node: bad option\n')).toThrow(/printed no result: node: bad option/);
});
