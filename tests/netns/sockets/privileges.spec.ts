/**
 * What an unprivileged process (uid 1000) may do with the addon, with and without single
 * capabilities: the threat models rest on SO_MARK and IP_TRANSPARENT needing CAP_NET_ADMIN,
 * AF_PACKET needing CAP_NET_RAW and entering another namespace needing CAP_SYS_ADMIN.
 */
import { test, expect } from '@playwright/test';
import * as os from 'node:os';
import { netnsWorld } from '../../worlds.js';
import { runAddonAs, withLab } from './fixture.js';

const w = netnsWorld();
test.skip(!w.available, w.reason);

interface Attempt {
  readonly ok: boolean;
  readonly code?: string;
  readonly syscall?: string;
  readonly message?: string;
}
interface Report {
  readonly uid: number;
  readonly mark: Attempt;
  readonly transparent: Attempt;
  readonly packet: Attempt;
  readonly setns: Attempt;
}

/** In namespace `ns` as uid 1000 with `caps`: try each privileged call once. */
function probe(ns: string, otherNs: string, caps: readonly string[]): Promise<Report> {
  return runAddonAs(
    ns,
    1000,
    caps,
    `
    const fd = addon.socket(null, 'inet', 'stream');
    const report = {
      uid: process.getuid(),
      mark: attempt(() => addon.setsockopt(fd, 'SO_MARK', 1337)),
      transparent: attempt(() => addon.setsockopt(fd, 'IP_TRANSPARENT', 1)),
      packet: attempt(() => addon.close(addon.socket(null, 'packet', 'raw'))),
      setns: attempt(() => addon.close(addon.socket(${JSON.stringify(otherNs)}, 'inet', 'stream'))),
    };
    console.log(JSON.stringify(report));
  `,
  ) as Promise<Report>;
}

test('as uid 1000 without capabilities: SO_MARK and IP_TRANSPARENT fail EPERM, AF_PACKET fails EPERM, setns fails EPERM', async () => {
  await withLab(async (lab) => {
    const a = await lab.ns('a');
    const b = await lab.ns('b');
    const r = await probe(a.name, b.id, []);
    expect(r.uid).toBe(1000);
    expect(r.mark).toMatchObject({ ok: false, code: 'EPERM', syscall: 'setsockopt' });
    expect(r.mark.message).toContain('setsockopt(SO_MARK=1337)');
    expect(r.transparent).toMatchObject({ ok: false, code: 'EPERM', syscall: 'setsockopt' });
    expect(r.packet).toMatchObject({ ok: false, code: 'EPERM', syscall: 'socket' });
    expect(r.setns).toMatchObject({ ok: false, code: 'EPERM', syscall: 'setns' });
    expect(r.setns.message).toContain(b.id);
  });
});

/** Kernel release as [major, minor]. */
function kernel(): [number, number] {
  const m = /^(\d+)\.(\d+)/.exec(os.release());
  return m ? [Number(m[1]), Number(m[2])] : [0, 0];
}

test('positive controls: each capability alone unlocks its calls for uid 1000', async () => {
  await withLab(async (lab) => {
    const a = await lab.ns('a');
    const b = await lab.ns('b');
    const admin = await probe(a.name, b.id, ['net_admin']);
    expect(admin).toMatchObject({
      uid: 1000,
      mark: { ok: true },
      transparent: { ok: true },
      packet: { ok: false, code: 'EPERM' },
      setns: { ok: false, code: 'EPERM' },
    });
  });
});

// Threat-model fact: since Linux 5.17 SO_MARK accepts CAP_NET_RAW as well as CAP_NET_ADMIN
// (socket(7); iputils/iputils#617), and IP_TRANSPARENT has accepted either since Linux 3.2
// (kernel commit 6cc7a765c298). NET_RAW is in container runtimes' default capability set, so on
// such kernels an app that keeps it can put the proxy's mark on its own sockets.
test('CAP_NET_RAW alone: AF_PACKET works, and on Linux >= 5.17 SO_MARK and IP_TRANSPARENT work too', async () => {
  const [major, minor] = kernel();
  const markWithRaw = major > 5 || (major === 5 && minor >= 17);
  await withLab(async (lab) => {
    const a = await lab.ns('a');
    const b = await lab.ns('b');
    const raw = await probe(a.name, b.id, ['net_raw']);
    expect(raw).toMatchObject({ uid: 1000, packet: { ok: true }, setns: { ok: false, code: 'EPERM' } });
    expect(raw.mark).toMatchObject(markWithRaw ? { ok: true } : { ok: false, code: 'EPERM' });
    expect(raw.transparent).toMatchObject({ ok: true });
  });
});

test('CAP_SYS_ADMIN alone: setns into another namespace works, the socket options still fail', async () => {
  await withLab(async (lab) => {
    const a = await lab.ns('a');
    const b = await lab.ns('b');
    const sysAdmin = await probe(a.name, b.id, ['sys_admin']);
    expect(sysAdmin).toMatchObject({
      uid: 1000,
      mark: { ok: false, code: 'EPERM' },
      packet: { ok: false, code: 'EPERM' },
      setns: { ok: true },
    });
  });
});
