/**
 * The agent's readiness follows the plugin's install state (impl/node-agent/install-check.ts), as
 * upstream istio-cni's /readyz follows its installer: not ready before the plugin is in the bin
 * dir and chained into the conflist the runtime uses, ready once the installer has put it there,
 * not ready again when the primary CNI rewrites its file without us (until the installer re-adds
 * it) or after an uninstall. Over an in-memory FileSystem and virtual time, with the real
 * installer (CniInstaller) doing the writing.
 */
import { test, expect } from '@playwright/test';
import { VirtualClock } from '../../../sim/time/virtual-clock.js';
import { MemoryLogger } from '../../../sim/log/memory-logger.js';
import { CniInstaller, type CniInstallConfig } from '../../../impl/node-agent/install.js';
import { PluginInstallCheck, pluginInstallState } from '../../../impl/node-agent/install-check.js';
import { MemoryFileSystem } from './memory-fs.js';
import { BIN, CONF, installConfig, PRIMARY } from './config.js';
import { AgentWorld } from '../node-agent/agent/harness.js';

const KINDNET = JSON.stringify({ cniVersion: '0.3.1', name: 'kindnet', plugins: [{ type: 'ptp' }] });

function rig(over: Partial<CniInstallConfig> = {}) {
  const fs = new MemoryFileSystem();
  fs.put('/app/cni/ambient-lab-cni', '#!/bin/sh\n', 0o755);
  void fs.mkdirp(CONF);
  void fs.mkdirp(BIN);
  const clock = new VirtualClock();
  const log = new MemoryLogger();
  const installer = new CniInstaller(installConfig(over), {
    fs,
    clock,
    log,
    credentials: async () => ({ server: 'https://10.96.0.1:443', caPem: undefined, token: 't' }),
  });
  const check = new PluginInstallCheck({ cniBinDir: BIN, cniConfDir: CONF, resyncMs: 5000 }, { fs, clock, log });
  return { fs, clock, installer, check };
}

/** Let the watch-triggered checks run (they are promise chains on the in-memory FileSystem). */
const flush = async (): Promise<void> => {
  for (let i = 0; i < 5; i++) await new Promise((r) => setImmediate(r));
};

test('not installed until the installer has chained the plugin; then installed; a primary rewrite without us and an uninstall make it not installed again', async () => {
  const r = rig();
  await r.check.start();
  expect(r.check.state).toMatchObject({
    installed: false,
    detail: expect.stringContaining('ambient-lab-cni is not installed'),
  });
  // a primary CNI config alone: the runtime would not call us
  r.fs.put(PRIMARY, KINDNET);
  await flush();
  expect(r.check.state.installed).toBe(false);
  await r.installer.start();
  await flush();
  expect(r.check.state).toEqual({
    installed: true,
    detail: `ambient-lab-cni installed and chained in ${PRIMARY}`,
  });
  // the primary CNI rewrites its file (kindnet does on restart): not ready until the installer's pass
  r.installer.stop();
  r.fs.put(PRIMARY, KINDNET);
  await flush();
  expect(r.check.state).toMatchObject({ installed: false, detail: expect.stringContaining('does not chain') });
  await r.installer.start();
  await flush();
  expect(r.check.state.installed).toBe(true);
  await r.installer.uninstall();
  await flush();
  expect(r.check.state.installed).toBe(false);
  r.check.stop();
});

test('what the runtime uses decides: our entry in a file that does not sort first does not count; own-conflist mode counts', async () => {
  const fs = new MemoryFileSystem();
  fs.put(`${BIN}/ambient-lab-cni`, '#!/bin/sh\n', 0o755);
  fs.put(`${CONF}/05-calico.conflist`, KINDNET);
  fs.put(
    `${CONF}/10-other.conflist`,
    JSON.stringify({ cniVersion: '1.0.0', name: 'x', plugins: [{ type: 'ambient-lab-cni' }] }),
  );
  const c = { cniBinDir: BIN, cniConfDir: CONF };
  expect(await pluginInstallState(fs, c)).toMatchObject({
    installed: false,
    detail: expect.stringContaining('05-calico.conflist'),
  });
  // own-conflist mode: our file sorts first and is what the runtime uses
  const r = rig({ mode: 'own-conflist' });
  r.fs.put(`${CONF}/10-kindnet.conflist`, KINDNET);
  await r.installer.start();
  expect(await pluginInstallState(r.fs, c)).toEqual({
    installed: true,
    detail: `ambient-lab-cni installed and chained in ${CONF}/01-ambient-lab.conflist`,
  });
  r.installer.stop();
  // a conf file that is not JSON: a reason, not a throw
  fs.put(`${CONF}/01-broken.conf`, '{');
  expect(await pluginInstallState(fs, c)).toMatchObject({
    installed: false,
    detail: expect.stringContaining('cannot tell'),
  });
});

test('a deleted executable is seen at the next resync, without a conf dir change', async () => {
  const r = rig();
  r.fs.put(PRIMARY, KINDNET);
  await r.installer.start();
  r.installer.stop();
  await r.check.start();
  expect(r.check.state.installed).toBe(true);
  // removed behind the watch's back (another mount): the bin dir watch may not fire on every node
  r.fs.files.delete(`${BIN}/ambient-lab-cni`);
  expect(r.check.state.installed).toBe(true);
  r.clock.advance(5000);
  await flush();
  expect(r.check.state).toMatchObject({ installed: false, detail: expect.stringContaining('not installed') });
  r.check.stop();
});

test("the agent's readiness: ready only while the plugin is installed and chained; the detail says why not", async () => {
  const r = rig();
  const w = new AgentWorld();
  w.installCheck = new PluginInstallCheck(
    { cniBinDir: BIN, cniConfDir: CONF },
    { fs: r.fs, clock: w.clock, log: w.log },
  );
  const agent = await w.startAgent();
  expect(agent.health()).toMatchObject({ live: true, ready: false, detail: expect.stringContaining('not installed') });
  r.fs.put(PRIMARY, KINDNET);
  await r.installer.start();
  await flush();
  expect(agent.health()).toMatchObject({ ready: true, detail: expect.stringContaining('installed and chained') });
  await r.installer.uninstall();
  await flush();
  expect(agent.health().ready).toBe(false);
  await w.stopAgent();
  // without an install check (a world with no conf dir), readiness is the agent's own
  const plain = new AgentWorld();
  expect((await plain.startAgent()).health().ready).toBe(true);
  await plain.stopAgent();
});
