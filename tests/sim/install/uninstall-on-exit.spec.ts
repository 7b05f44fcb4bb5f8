/**
 * The installer's exit (impl/node-agent/install.ts decideUninstallOnExit, as upstream istio-cni's
 * ShouldStopCleanup): with when-daemonset-gone the plugin stays while the owning DaemonSet exists
 * (an upgrade, a reboot) and is removed when the DaemonSet is gone, being deleted, or the API
 * refuses the installer's credentials; an API that cannot answer leaves it in place (fail closed).
 * Then the uninstall itself leaves no file of ours and the primary conflist as the primary wrote
 * it — a node on which pods start with the primary CNI alone.
 */
import { test, expect } from '@playwright/test';
import { VirtualClock } from '../../../sim/time/virtual-clock.js';
import { MemoryLogger } from '../../../sim/log/memory-logger.js';
import { settle } from '../../../sim/time/settle.js';
import {
  CniInstaller,
  decideUninstallOnExit,
  type OwnerState,
  type UninstallOnExit,
} from '../../../impl/node-agent/install.js';
import { installerSettings } from '../../../impl/linux/cni-installer-config.js';
import { MemoryFileSystem } from './memory-fs.js';

function decide(policy: UninstallOnExit, answers: ReadonlyArray<OwnerState | Error>) {
  const clock = new VirtualClock();
  const log = new MemoryLogger();
  let asked = 0;
  const owner = async (): Promise<OwnerState> => {
    const a = answers[Math.min(asked++, answers.length - 1)]!;
    if (a instanceof Error) throw a;
    return a;
  };
  return settle(clock, decideUninstallOnExit(policy, { owner, clock, log })).then((d) => ({ ...d, asked }));
}

test('when-daemonset-gone: present leaves the plugin; absent, deleting and refused credentials remove it', async () => {
  expect(await decide('when-daemonset-gone', ['present'])).toMatchObject({ uninstall: false, asked: 1 });
  for (const s of ['absent', 'deleting', 'unauthorized'] as const)
    expect(await decide('when-daemonset-gone', [s]), s).toMatchObject({ uninstall: true, asked: 1 });
});

test('when-daemonset-gone: an API error is retried; one that persists leaves the plugin in place (fail closed), saying why', async () => {
  expect(await decide('when-daemonset-gone', [new Error('connect ECONNREFUSED'), 'absent'])).toMatchObject({
    uninstall: true,
    asked: 2,
  });
  const stuck = await decide('when-daemonset-gone', [new Error('HTTP 503')]);
  expect(stuck).toMatchObject({ uninstall: false, asked: 3 });
  expect(stuck.why).toContain('HTTP 503');
});

test('never and always do not ask the API', async () => {
  expect(await decide('never', ['absent'])).toMatchObject({ uninstall: false, asked: 0 });
  expect(await decide('always', ['present'])).toMatchObject({ uninstall: true, asked: 0 });
});

test('--uninstall-on-exit: the three policies, true/false as always/never, anything else a usage error naming the flag', () => {
  expect(installerSettings(['--uninstall-on-exit', 'when-daemonset-gone'], {}).uninstallOnExit).toBe(
    'when-daemonset-gone',
  );
  expect(installerSettings(['--uninstall-on-exit'], {}).uninstallOnExit).toBe('always');
  expect(installerSettings([], { AMBIENT_LAB_UNINSTALL_ON_EXIT: 'false' }).uninstallOnExit).toBe('never');
  expect(() => installerSettings(['--uninstall-on-exit=maybe'], {})).toThrow(/--uninstall-on-exit must be never/);
  expect(installerSettings(['--system-namespace', 'mesh-system', '--daemonset', 'cni'], {}).owner).toEqual({
    namespace: 'mesh-system',
    name: 'cni',
  });
});

test('after the uninstall the CNI dirs hold the primary alone, as it wrote its file: no file of ours, no entry', async () => {
  const fs = new MemoryFileSystem();
  const primary = JSON.stringify({ cniVersion: '1.0.0', name: 'kindnet', plugins: [{ type: 'ptp' }] });
  fs.put('/host/etc/cni/net.d/10-kindnet.conflist', primary);
  fs.put('/app/cni/ambient-lab-cni', '#!/bin/sh\n', 0o755);
  fs.put('/app/node', 'ELF', 0o755);
  void fs.mkdirp('/host/opt/cni/bin');
  const clock = new VirtualClock();
  const before = new Set(fs.files.keys());
  const inst = new CniInstaller(installerSettings(['--payload', '/app/node:/host/opt/ambient-lab/node'], {}).config, {
    fs,
    clock,
    log: new MemoryLogger(),
    credentials: async () => ({ server: 'https://10.96.0.1', caPem: undefined, token: 't' }),
  });
  await inst.start();
  expect(fs.text('/host/etc/cni/net.d/10-kindnet.conflist')).toContain('ambient-lab-cni');
  const d = await decide('when-daemonset-gone', ['absent']);
  if (d.uninstall) await inst.uninstall();
  expect(new Set(fs.files.keys())).toEqual(before);
  expect(JSON.parse(fs.text('/host/etc/cni/net.d/10-kindnet.conflist')!)).toEqual(JSON.parse(primary));
});
