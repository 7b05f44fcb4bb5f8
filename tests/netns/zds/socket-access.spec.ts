/**
 * Who may reach the agent's ZDS socket when the proxy runs as a non-root uid (uid 1337, as
 * deploy/base/proxy.yaml): the agent gives the socket path group 1337, mode 0660
 * (LinuxZdsTransport `owner`/`mode`, agent flags --zds-socket-group/--zds-socket-mode). Then
 * - the proxy's uid connects and is served (file permission and the SO_PEERCRED check pass);
 * - a uid outside the group cannot even connect (EACCES from the file mode);
 * - a uid inside the group but not allowed connects and is rejected by the peer-uid check;
 * - a non-root agent process may set the group only when it is a member of it (the manifests
 *   give the agent supplementalGroups [1337] instead of CAP_CHOWN); otherwise the listen fails
 *   with an error that says what to do.
 * Clients are real processes run with setpriv; no network namespace is involved (a Unix socket
 * path is reached through the filesystem).
 */
import { test, expect } from '@playwright/test';
import { execFile } from 'node:child_process';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { promisify } from 'node:util';
import { netnsWorld } from '../../worlds.js';
import { encodeHello } from '../../../impl/api/zds/codec.js';
import type { Logger } from '../../../impl/host/log.js';
import { SystemClock } from '../../../impl/linux/clock.js';
import { LinuxZdsTransport } from '../../../impl/linux/zds-transport.js';
import { ZdsServer, type ZdsServerEvent } from '../../../impl/node-agent/zds-server.js';
import { addonPath, repo } from '../sockets/fixture.js';

const w = netnsWorld();
test.skip(!w.available, w.reason);

const run = promisify(execFile);
const quiet: Logger = { debug() {}, info() {}, warn() {}, error() {}, child: () => quiet };
const PROXY = 1337;

interface ClientOutcome {
  connect: string;
  eof?: boolean;
  bytes?: number;
  pid: number;
}

/** Connect as uid/gid (+ supplementary groups, no capabilities), say hello, report what came back. */
async function clientAs(sock: string, uid: number, gid: number, groups: readonly number[]): Promise<ClientOutcome> {
  const hello = Buffer.from(encodeHello({ version: 1 })).toString('hex');
  const script = `
    const addon = require(${JSON.stringify(addonPath)});
    const fd = addon.seqpacketSocket();
    try { addon.unixConnect(fd, ${JSON.stringify(sock)}); } catch (e) { console.log(JSON.stringify({ connect: e.code, pid: process.pid })); process.exit(0); }
    try { addon.seqpacketSend(fd, Buffer.from(${JSON.stringify(hello)}, 'hex'), null); } catch (e) { /* EPIPE: already rejected */ }
    const started = Date.now();
    const poll = () => {
      let r = null;
      try { r = addon.seqpacketRecv(fd, 4096); } catch (e) { console.log(JSON.stringify({ connect: 'ok', eof: true, error: e.code, pid: process.pid })); return; }
      if (r !== null) { console.log(JSON.stringify({ connect: 'ok', eof: r.eof, bytes: r.data.length, pid: process.pid })); return; }
      if (Date.now() - started > 5000) { console.log(JSON.stringify({ connect: 'ok', timeout: true, pid: process.pid })); return; }
      setTimeout(poll, 10);
    };
    poll();
  `;
  const priv = [
    'setpriv',
    `--reuid=${uid}`,
    `--regid=${gid}`,
    groups.length ? `--groups=${groups.join(',')}` : '--clear-groups',
    '--inh-caps=-all',
  ];
  const { stdout } = await run(priv[0]!, [...priv.slice(1), process.execPath, '-e', script], { timeout: 15_000 });
  return JSON.parse(stdout.trim()) as ClientOutcome;
}

function socketDir(): { sock: string; dispose(): void } {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'al-zdsacc-'));
  fs.chmodSync(dir, 0o755); // traversable by the non-root clients
  // a directory that does not exist yet, as on a fresh node: the agent creates it
  return { sock: path.join(dir, 'zds', 'zds.sock'), dispose: () => fs.rmSync(dir, { recursive: true, force: true }) };
}

test('group 1337 mode 0660: the proxy uid is served, a uid outside the group cannot connect, a group member of another uid is rejected by SO_PEERCRED', async () => {
  const d = socketDir();
  const events: ZdsServerEvent[] = [];
  const server = new ZdsServer({
    transport: new LinuxZdsTransport({ owner: { gid: PROXY }, mode: 0o660 }),
    address: d.sock,
    clock: new SystemClock(),
    log: quiet,
    allowedUids: [PROXY],
    snapshot: () => [],
  });
  server.on((e) => events.push(e));
  await server.start();
  try {
    expect(fs.statSync(path.dirname(d.sock)).mode & 0o777).toBe(0o755);
    const st = fs.statSync(d.sock);
    expect({ socket: st.isSocket(), uid: st.uid, gid: st.gid, mode: st.mode & 0o777 }).toEqual({
      socket: true,
      uid: 0,
      gid: PROXY,
      mode: 0o660,
    });

    const outsider = await clientAs(d.sock, 1338, 1338, []);
    expect(outsider.connect).toBe('EACCES');

    const member = await clientAs(d.sock, 1338, 1338, [PROXY]);
    expect(member.connect).toBe('ok');
    expect(member.bytes ?? 0).toBe(0); // nothing of the snapshot
    expect(events.filter((e) => e.type === 'rejected')).toEqual([
      expect.objectContaining({ peer: expect.objectContaining({ uid: 1338, pid: member.pid }) }),
    ]);

    const proxy = await clientAs(d.sock, PROXY, PROXY, []);
    expect(proxy.connect).toBe('ok');
    expect(proxy.bytes ?? 0).toBeGreaterThan(0); // SnapshotSent arrived
    expect(events.filter((e) => e.type === 'connected')).toEqual([
      expect.objectContaining({ peer: expect.objectContaining({ uid: PROXY, pid: proxy.pid }) }),
    ]);
  } finally {
    await server.stop();
    d.dispose();
  }
});

test('a non-root agent sets the socket group only as a member of that group (no CAP_CHOWN); otherwise listen fails saying what to do', async () => {
  const built = path.join(repo, 'dist/impl/linux/zds-transport.js');
  test.skip(!fs.existsSync(built), `needs the compiled tree (${built}): run \`npx tsc -p .\``);
  const d = socketDir();
  fs.chmodSync(path.dirname(path.dirname(d.sock)), 0o777); // the uid-1000 "agent" creates its directory and socket here
  try {
    const script = `
      import(${JSON.stringify(built)}).then(async ({ LinuxZdsTransport }) => {
        try {
          const l = await new LinuxZdsTransport({ owner: { gid: ${PROXY} }, mode: 0o660 }).listen(${JSON.stringify(d.sock)});
          l.close();
          console.log(JSON.stringify({ ok: true }));
        } catch (e) { console.log(JSON.stringify({ ok: false, message: e.message })); }
      });
    `;
    const as = async (groups: string): Promise<{ ok: boolean; message?: string; gid?: number }> => {
      const { stdout } = await run(
        'setpriv',
        ['--reuid=1000', '--regid=1000', groups, '--inh-caps=-all', process.execPath, '-e', script],
        { timeout: 15_000 },
      );
      return JSON.parse(stdout.trim()) as { ok: boolean; message?: string };
    };
    const member = await as(`--groups=${PROXY}`);
    expect(member).toEqual({ ok: true });
    const outsider = await as('--clear-groups');
    expect(outsider.ok).toBe(false);
    expect(outsider.message).toMatch(/chown to \(unchanged\):1337 failed \(EPERM\).*supplementalGroups.*CAP_CHOWN/);
  } finally {
    d.dispose();
  }
});
