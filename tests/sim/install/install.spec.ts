/**
 * The CNI installer's logic over an in-memory FileSystem and virtual time: chained insert into
 * the primary conflist (unknown fields kept, idempotent, executables and kubeconfig before the
 * config), re-insert after the primary rewrites its file, waiting for a primary, own-conflist
 * mode, refusing configs that would block pods, and a clean, idempotent uninstall.
 */
import { test, expect } from '@playwright/test';
import { VirtualClock } from '../../../sim/time/virtual-clock.js';
import { MemoryLogger } from '../../../sim/log/memory-logger.js';
import {
  CniInstaller,
  pluginEntry,
  type CniInstallConfig,
  type PluginCredentials,
} from '../../../impl/node-agent/install.js';
import { parseConfList } from '../../../impl/api/cni.js';
import { MemoryFileSystem } from './memory-fs.js';
import { AGENT_SOCKET, BIN, CONF, installConfig, KUBECONFIG, PRIMARY } from './config.js';

const kindnet = {
  cniVersion: '0.3.1',
  name: 'kindnet',
  plugins: [
    {
      type: 'ptp',
      ipMasq: false,
      ipam: { type: 'host-local', dataDir: '/run/cni-ipam-state', ranges: [[{ subnet: '10.244.0.0/24' }]] },
      mtu: 1500,
    },
    { type: 'portmap', capabilities: { portMappings: true } },
  ],
  // a field we do not know must survive our edits
  'x-vendor': { keep: [1, 2, 3] },
};

/** The shared configuration with a payload file (the plugin's runtime) and an enrollment field our entry must carry. */
function config(over: Partial<CniInstallConfig> = {}): CniInstallConfig {
  return installConfig({
    payload: [{ from: '/app/cni/runtime.mjs', to: '/host/opt/ambient-lab/runtime.mjs', mode: 0o644 }],
    pluginFields: { ...installConfig().pluginFields, excludeNamespaces: ['kube-system'] },
    ...over,
  });
}

function rig(over: Partial<CniInstallConfig> = {}) {
  const fs = new MemoryFileSystem();
  fs.put('/app/cni/ambient-lab-cni', '#!/bin/sh\nexec node /opt/ambient-lab/runtime.mjs\n', 0o755);
  fs.put('/app/cni/runtime.mjs', 'console.log(1)\n');
  const clock = new VirtualClock();
  const log = new MemoryLogger();
  let creds: PluginCredentials = {
    server: 'https://10.96.0.1:443',
    caPem: '-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n',
    token: 'token-1',
  };
  const inst = new CniInstaller(config(over), { fs, clock, log, credentials: async () => creds });
  return {
    fs,
    clock,
    log,
    inst,
    setToken: (t: string) => {
      creds = { ...creds, token: t };
    },
  };
}

const flush = (): Promise<void> => new Promise((r) => setImmediate(r));
const plugins = (text: string | undefined) => parseConfList(text ?? '').plugins.map((p) => p.type);

test('chained install: executable, payload and kubeconfig first, then our entry appended to the primary with unknown fields kept', async () => {
  const r = rig();
  r.fs.put(PRIMARY, JSON.stringify(kindnet));
  const report = await r.inst.start();
  expect(report.state).toEqual({ phase: 'installed', confFile: '10-kindnet.conflist' });
  // order: nothing names the plugin before it and its credentials exist
  expect(r.fs.ops).toEqual([
    'write /host/opt/ambient-lab/runtime.mjs',
    `write ${BIN}/ambient-lab-cni`,
    `write ${KUBECONFIG}`,
    `write ${PRIMARY}`,
  ]);
  expect(r.fs.files.get(`${BIN}/ambient-lab-cni`)?.mode).toBe(0o755);
  expect(r.fs.files.get(KUBECONFIG)?.mode).toBe(0o600);
  const doc = JSON.parse(r.fs.text(PRIMARY)!) as Record<string, unknown>;
  expect(doc['x-vendor']).toEqual({ keep: [1, 2, 3] });
  expect(doc['cniVersion']).toBe('0.3.1');
  expect(plugins(r.fs.text(PRIMARY))).toEqual(['ptp', 'portmap', 'ambient-lab-cni']);
  const ours = (doc['plugins'] as Array<Record<string, unknown>>)[2];
  expect(ours).toEqual(pluginEntry(config().pluginFields));
  // the primary's own entries are untouched
  expect((doc['plugins'] as unknown[]).slice(0, 2)).toEqual(kindnet.plugins);
  r.inst.stop();
});

test('the kubeconfig carries the agent service account (server, CA, token) and is rewritten when the token rotates', async () => {
  const r = rig();
  r.fs.put(PRIMARY, JSON.stringify(kindnet));
  await r.inst.start();
  const kc = JSON.parse(r.fs.text(KUBECONFIG)!) as {
    clusters: Array<{ cluster: Record<string, string> }>;
    users: Array<{ user: { token: string } }>;
    'current-context': string;
  };
  expect(kc.clusters[0]!.cluster['server']).toBe('https://10.96.0.1:443');
  expect(Buffer.from(kc.clusters[0]!.cluster['certificate-authority-data']!, 'base64').toString()).toContain(
    'BEGIN CERTIFICATE',
  );
  expect(kc.users[0]!.user.token).toBe('token-1');
  r.fs.ops.length = 0;
  r.setToken('token-2');
  r.clock.fireNext(); // periodic resync
  await flush();
  await r.inst.pass();
  expect(r.fs.ops).toEqual([`write ${KUBECONFIG}`]);
  expect(
    (JSON.parse(r.fs.text(KUBECONFIG)!) as { users: Array<{ user: { token: string } }> }).users[0]!.user.token,
  ).toBe('token-2');
  r.inst.stop();
});

test('a second pass writes nothing (idempotent), and our own write does not loop through the watch', async () => {
  const r = rig();
  r.fs.put(PRIMARY, JSON.stringify(kindnet));
  await r.inst.start();
  await flush();
  await r.inst.pass();
  r.fs.ops.length = 0;
  const again = await r.inst.ensure();
  expect(again.wrote).toEqual([]);
  expect(r.fs.ops).toEqual([]);
  // a restarted agent (new installer) over an installed node also writes nothing
  const second = new CniInstaller(config(), {
    fs: r.fs,
    clock: r.clock,
    log: r.log,
    credentials: async () => ({
      server: 'https://10.96.0.1:443',
      caPem: '-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n',
      token: 'token-1',
    }),
  });
  expect((await second.ensure()).wrote).toEqual([]);
  expect(plugins(r.fs.text(PRIMARY)).filter((t) => t === 'ambient-lab-cni')).toHaveLength(1);
  r.inst.stop();
});

test('the primary CNI rewriting its file (our entry gone) triggers a re-insert through the watch', async () => {
  const r = rig();
  r.fs.put(PRIMARY, JSON.stringify(kindnet));
  await r.inst.start();
  r.fs.put(PRIMARY, JSON.stringify({ ...kindnet, plugins: [kindnet.plugins[0]] })); // kindnet restarted and rewrote
  await flush();
  await r.inst.pass();
  expect(plugins(r.fs.text(PRIMARY))).toEqual(['ptp', 'ambient-lab-cni']);
  r.inst.stop();
});

test('a stale or duplicated entry of ours is replaced by exactly one current entry at the end', async () => {
  const r = rig();
  r.fs.put(
    PRIMARY,
    JSON.stringify({
      ...kindnet,
      plugins: [
        { type: 'ambient-lab-cni', agentSocket: '/old.sock', kubeconfig: '/old' },
        ...kindnet.plugins,
        { type: 'ambient-lab-cni', agentSocket: '/old.sock', kubeconfig: '/old' },
      ],
    }),
  );
  await r.inst.ensure();
  expect(plugins(r.fs.text(PRIMARY))).toEqual(['ptp', 'portmap', 'ambient-lab-cni']);
  const ours = parseConfList(r.fs.text(PRIMARY)!).plugins[2]!;
  expect(ours['agentSocket']).toBe(AGENT_SOCKET);
});

test('no primary config yet: waits, writes no config, and installs when the primary appears', async () => {
  const r = rig();
  const first = await r.inst.start();
  expect(first.state.phase).toBe('waiting-for-primary');
  expect([...r.fs.files.keys()].filter((f) => f.startsWith(CONF))).toEqual([]);
  r.fs.put(PRIMARY, JSON.stringify(kindnet));
  await flush();
  await r.inst.pass();
  expect(r.inst.state).toEqual({ phase: 'installed', confFile: '10-kindnet.conflist' });
  expect(plugins(r.fs.text(PRIMARY))).toContain('ambient-lab-cni');
  r.inst.stop();
});

test('the primary is the first conf file by name; our entry lives only there', async () => {
  const r = rig();
  r.fs.put(
    `${CONF}/20-other.conflist`,
    JSON.stringify({
      cniVersion: '1.0.0',
      name: 'other',
      plugins: [{ type: 'bridge' }, { type: 'ambient-lab-cni', agentSocket: '/s', kubeconfig: '/k' }],
    }),
  );
  r.fs.put(PRIMARY, JSON.stringify(kindnet));
  r.fs.put(`${CONF}/.10-kindnet.conflist.abc.tmp`, 'partial'); // a hidden temporary is never a candidate
  r.fs.put(`${CONF}/README`, 'not a config');
  const rep = await r.inst.ensure();
  expect(rep.state).toEqual({ phase: 'installed', confFile: '10-kindnet.conflist' });
  expect(plugins(r.fs.text(PRIMARY))).toEqual(['ptp', 'portmap', 'ambient-lab-cni']);
  expect(plugins(r.fs.text(`${CONF}/20-other.conflist`))).toEqual(['bridge']);
});

test('own-conflist mode: a copy of the primary list (same network name) plus ours, sorting first; the primary is untouched', async () => {
  const r = rig({ mode: 'own-conflist' });
  const primaryText = JSON.stringify(kindnet);
  r.fs.put(PRIMARY, primaryText);
  const rep = await r.inst.ensure();
  expect(rep.state).toEqual({ phase: 'installed', confFile: '01-ambient-lab.conflist' });
  expect(r.fs.text(PRIMARY)).toBe(primaryText);
  const own = parseConfList(r.fs.text(`${CONF}/01-ambient-lab.conflist`)!);
  expect(own.name).toBe('kindnet'); // host-local keys its address store by network name
  expect(own.plugins.map((p) => p.type)).toEqual(['ptp', 'portmap', 'ambient-lab-cni']);
  // the primary changes (new MTU): our copy follows
  r.fs.put(
    PRIMARY,
    JSON.stringify({ ...kindnet, plugins: [{ ...kindnet.plugins[0], mtu: 1400 }, kindnet.plugins[1]] }),
  );
  await r.inst.ensure();
  expect(parseConfList(r.fs.text(`${CONF}/01-ambient-lab.conflist`)!).plugins[0]!['mtu']).toBe(1400);
  // the primary disappears: our copy goes too (it must not outlive the network it copies)
  await r.fs.remove(PRIMARY);
  expect((await r.inst.ensure()).state.phase).toBe('waiting-for-primary');
  expect(r.fs.files.has(`${CONF}/01-ambient-lab.conflist`)).toBe(false);
});

test('own-conflist mode refuses a file name that would sort after the primary (the runtime would ignore it)', async () => {
  const r = rig({ mode: 'own-conflist', ownConfListName: '99-ambient-lab.conflist' });
  r.fs.put(PRIMARY, JSON.stringify(kindnet));
  const rep = await r.inst.ensure();
  expect(rep.state.phase).toBe('error');
  expect(rep.state.phase === 'error' && rep.state.error).toContain('sorts after the primary');
  expect(r.fs.files.has(`${CONF}/99-ambient-lab.conflist`)).toBe(false);
});

test('switching modes leaves our entry in exactly one place', async () => {
  const r = rig();
  r.fs.put(PRIMARY, JSON.stringify(kindnet));
  await r.inst.ensure();
  const own = rig({ mode: 'own-conflist' });
  for (const [k, v] of r.fs.files) own.fs.files.set(k, v);
  for (const d of r.fs.dirs) own.fs.dirs.add(d);
  await own.inst.ensure();
  expect(plugins(own.fs.text(PRIMARY))).toEqual(['ptp', 'portmap']);
  expect(plugins(own.fs.text(`${CONF}/01-ambient-lab.conflist`))).toEqual(['ptp', 'portmap', 'ambient-lab-cni']);
  // and back to chained
  const chained = rig();
  for (const [k, v] of own.fs.files) chained.fs.files.set(k, v);
  for (const d of own.fs.dirs) chained.fs.dirs.add(d);
  await chained.inst.ensure();
  expect(chained.fs.files.has(`${CONF}/01-ambient-lab.conflist`)).toBe(false);
  expect(plugins(chained.fs.text(PRIMARY))).toEqual(['ptp', 'portmap', 'ambient-lab-cni']);
});

test('configs that would block every pod are refused: unsupported primary version, single-plugin .conf when chaining, invalid JSON', async () => {
  for (const [name, text, expectMsg] of [
    [
      '10-new.conflist',
      JSON.stringify({ cniVersion: '1.1.0', name: 'n', plugins: [{ type: 'bridge' }] }),
      'cniVersion 1.1.0',
    ],
    ['10-single.conf', JSON.stringify({ cniVersion: '0.3.1', name: 'n', type: 'bridge' }), 'single-plugin'],
    ['10-bad.conflist', '{ not json', 'not valid JSON'],
  ] as const) {
    const r = rig();
    r.fs.put(`${CONF}/${name}`, text);
    const rep = await r.inst.ensure();
    expect(rep.state.phase, name).toBe('error');
    expect(rep.state.phase === 'error' && rep.state.error, name).toContain(expectMsg);
    expect(r.fs.text(`${CONF}/${name}`), name).toBe(text);
    expect(
      r.log.entries.some((e) => e.level === 'error' && e.msg === 'cni install failed'),
      name,
    ).toBe(true);
  }
});

test('a single-plugin .conf primary works in own-conflist mode (wrapped into a list)', async () => {
  const r = rig({ mode: 'own-conflist' });
  r.fs.put(
    `${CONF}/10-bridge.conf`,
    JSON.stringify({
      cniVersion: '0.4.0',
      name: 'br',
      type: 'bridge',
      bridge: 'cni0',
      ipam: { type: 'host-local', subnet: '10.244.1.0/24' },
    }),
  );
  await r.inst.ensure();
  const own = parseConfList(r.fs.text(`${CONF}/01-ambient-lab.conflist`)!);
  expect(own).toMatchObject({ cniVersion: '0.4.0', name: 'br' });
  expect(own.plugins[0]).toEqual({
    type: 'bridge',
    bridge: 'cni0',
    ipam: { type: 'host-local', subnet: '10.244.1.0/24' },
  });
  expect(own.plugins[1]!.type).toBe('ambient-lab-cni');
});

test('a missing executable in the image fails the pass before any config names it', async () => {
  const r = rig({ pluginSource: '/app/cni/nope' });
  r.fs.put(PRIMARY, JSON.stringify(kindnet));
  const rep = await r.inst.ensure();
  expect(rep.state.phase === 'error' && rep.state.error).toContain('/app/cni/nope is missing');
  expect(plugins(r.fs.text(PRIMARY))).toEqual(['ptp', 'portmap']);
});

test('invalid plugin fields are rejected when the installer is built, naming the field', () => {
  const fs = new MemoryFileSystem();
  const deps = {
    fs,
    clock: new VirtualClock(),
    log: new MemoryLogger(),
    credentials: async () => ({ server: 'https://x', caPem: undefined, token: 't' }),
  };
  expect(
    () => new CniInstaller(config({ pluginFields: { agentSocket: '/s', kubeconfig: '/k', agentTimeoutMs: 5 } }), deps),
  ).toThrow(/agentTimeoutMs/);
  expect(
    () => new CniInstaller(config({ pluginFields: { agentSocket: '/s', kubeconfig: '/k', surprise: 1 } }), deps),
  ).toThrow(/surprise/);
  expect(
    () => new CniInstaller(config({ pluginFields: { type: 'other', agentSocket: '/s', kubeconfig: '/k' } }), deps),
  ).toThrow(/type/);
});

test('the binary removed from the node is restored on the periodic resync', async () => {
  const r = rig();
  r.fs.put(PRIMARY, JSON.stringify(kindnet));
  await r.inst.start();
  await r.fs.remove(`${BIN}/ambient-lab-cni`);
  r.clock.fireNext();
  await flush();
  await r.inst.pass();
  expect(r.fs.files.has(`${BIN}/ambient-lab-cni`)).toBe(true);
  r.inst.stop();
  expect(r.clock.nextDue()).toBeUndefined(); // stop() cancels the resync
});

test('uninstall: entry removed first, then kubeconfig and executables; the primary is back to its own plugins; idempotent; stop() alone removes nothing', async () => {
  const r = rig();
  r.fs.put(PRIMARY, JSON.stringify(kindnet));
  await r.inst.start();
  r.inst.stop();
  expect(plugins(r.fs.text(PRIMARY))).toContain('ambient-lab-cni');
  expect(r.fs.files.has(`${BIN}/ambient-lab-cni`)).toBe(true);
  r.fs.ops.length = 0;
  await r.inst.uninstall();
  expect(r.fs.ops).toEqual([
    `write ${PRIMARY}`,
    `remove ${KUBECONFIG}`,
    `remove ${BIN}/ambient-lab-cni`,
    'remove /host/opt/ambient-lab/runtime.mjs',
  ]);
  const doc = JSON.parse(r.fs.text(PRIMARY)!) as Record<string, unknown>;
  expect(doc).toEqual(kindnet);
  r.fs.ops.length = 0;
  await r.inst.uninstall();
  expect(r.fs.ops).toEqual([]);
  // the watch is closed: a later primary rewrite is not re-inserted into
  r.fs.put(PRIMARY, JSON.stringify(kindnet));
  await flush();
  expect(plugins(r.fs.text(PRIMARY))).toEqual(['ptp', 'portmap']);
});

test('uninstall in own-conflist mode removes our file and leaves the primary untouched', async () => {
  const r = rig({ mode: 'own-conflist' });
  const text = JSON.stringify(kindnet);
  r.fs.put(PRIMARY, text);
  await r.inst.ensure();
  await r.inst.uninstall();
  expect([...r.fs.files.keys()].filter((f) => f.startsWith(CONF))).toEqual([PRIMARY]);
  expect(r.fs.text(PRIMARY)).toBe(text);
});
