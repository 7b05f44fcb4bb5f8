/**
 * The runtime-side chain (sim/cni/chain.ts) on the sim primary plugins (bridge + host-local +
 * loopback) in a bare SimKernel: ADD in order chaining prevResult, DEL in reverse with the
 * cached result, CHECK, VERSION, error JSON and codes, deterministic IPAM with release.
 */
import { test, expect } from '@playwright/test';
import {
  CniError,
  CniErrorCode,
  type CniConfList,
  type CniExecOutput,
  type CniExecRequest,
} from '../../../impl/api/cni.js';
import { SimKernel } from '../../../sim/kernel/kernel.js';
import { credentials } from '../../../sim/kernel/process.js';
import { CniChain, CniChainError, MemoryResultCache, type CniInvocation } from '../../../sim/cni/chain.js';
import { IpamDisk } from '../../../sim/cni/host-local.js';
import { FakeChainedPlugin, simPrimaryPlugins, type InProcessPlugins } from '../../../sim/cni/plugins.js';
import { simNetnsPath } from '../../../sim/cni/bridge.js';

const NET: CniConfList = {
  cniVersion: '1.0.0',
  name: 'podnet',
  plugins: [
    {
      type: 'bridge',
      bridge: 'cni0',
      isGateway: true,
      isDefaultGateway: true,
      ipam: { type: 'host-local', ranges: [[{ subnet: '10.244.0.0/24' }], [{ subnet: 'fd00:10:244::/64' }]] },
    },
    { type: 'chained' },
  ],
};

interface Rig {
  kernel: SimKernel;
  ipam: IpamDisk;
  plugins: InProcessPlugins;
  cache: MemoryResultCache;
  calls: CniInvocation[];
  chained: FakeChainedPlugin;
  chain(list?: CniConfList): CniChain;
  pod(name: string): { containerId: string; netns: string; ifname: string };
}

type Mode = 'exec' | 'in-process';

function rig(mode: Mode): Rig {
  const kernel = new SimKernel({ trace: false });
  kernel.addNetns('host');
  kernel.setLink('host', 'lo', true);
  const ipam = new IpamDisk();
  const plugins = simPrimaryPlugins({ kernel, hostNetns: 'host', ipam });
  const chained = new FakeChainedPlugin();
  plugins.register('chained', chained);
  const cache = new MemoryResultCache();
  const calls: CniInvocation[] = [];
  return {
    kernel,
    ipam,
    plugins,
    cache,
    calls,
    chained,
    chain: (list = NET) =>
      new CniChain(list, plugins, cache, {
        path: ['/opt/cni/bin'],
        observe: (c) => calls.push(c),
        inProcess: mode === 'in-process',
      }),
    pod: (name) => {
      kernel.addNetns(`cni-${name}`);
      return { containerId: `sb-${name}`, netns: simNetnsPath(`cni-${name}`), ifname: 'eth0' };
    },
  };
}

// Every case runs with plugins called through exec (JSON text) and in process (values).
for (const mode of ['exec', 'in-process'] as const) {
  test(`${mode}: ADD runs the plugins in order, the second gets the first result as prevResult, and the pod is wired`, async () => {
    const r = rig(mode);
    const att = r.pod('a');
    const result = await r.chain().add(att);
    expect(r.calls.map((c) => `${c.command} ${c.type}`)).toEqual(['ADD bridge', 'ADD chained']);
    const first = JSON.parse(r.calls[0]!.output!.stdout);
    const secondIn = JSON.parse(r.calls[1]!.stdin);
    expect(JSON.parse(r.calls[0]!.stdin).prevResult).toBeUndefined();
    expect(secondIn.prevResult).toEqual(first);
    expect(secondIn).toMatchObject({ cniVersion: '1.0.0', name: 'podnet', type: 'chained' });
    expect(result.ips).toEqual([
      { address: '10.244.0.2/24', gateway: '10.244.0.1', interface: 2 },
      { address: 'fd00:10:244::2/64', gateway: 'fd00:10:244::1', interface: 2 },
    ]);
    expect(result.interfaces?.[2]).toMatchObject({ name: 'eth0', sandbox: att.netns });
    expect((await r.cache.get('podnet', att.containerId, 'eth0'))?.result).toEqual(result);

    // The wiring works: a socket in the pod reaches one on the node through the gateway.
    const k = r.kernel;
    const node = k.socket('host', 'tcp', 4, credentials(0, 0));
    k.bind(node, '10.244.0.1', 9000);
    k.listen(node);
    const c = k.connect(k.socket('cni-a', 'tcp', 4, credentials(1000, 1000)), '10.244.0.1', 9000);
    expect(c.outcome).toBe('established');
    expect(
      k
        .netns('host')
        .link('cni0')
        .addresses.map((a) => a.prefix.len),
    ).toEqual([24, 64]);
  });

  test(`${mode}: host-local allocates deterministically after the last reservation and releases on DEL; DEL repeats and survives a missing netns`, async () => {
    const r = rig(mode);
    const chain = r.chain();
    const a = r.pod('a');
    const b = r.pod('b');
    await chain.add(a);
    await chain.add(b);
    expect(r.ipam.allocatedCount('podnet')).toBe(4);
    await chain.del(a);
    expect(r.ipam.allocatedCount('podnet')).toBe(2);
    expect(r.kernel.netns('cni-a').links.has('eth0')).toBe(false);
    expect(await r.cache.get('podnet', a.containerId, 'eth0')).toBeUndefined();
    await chain.del(a); // again: nothing left, still success
    const c = r.pod('c');
    const rc = await chain.add(c);
    expect(rc.ips?.[0]?.address).toBe('10.244.0.4/24'); // .2 was freed, but host-local moves on from the last reserved (.3)
    r.kernel.deleteNetns('cni-b');
    await chain.del({ ...b, netns: undefined }); // netns gone: IPAM still releases
    expect(r.ipam.allocatedCount('podnet')).toBe(2);
  });

  test(`${mode}: DEL runs in reverse order, every plugin getting the cached final ADD result`, async () => {
    const r = rig(mode);
    const att = r.pod('a');
    const final = await r.chain().add(att);
    r.calls.length = 0;
    await r.chain().del(att);
    expect(r.calls.map((c) => `${c.command} ${c.type}`)).toEqual(['DEL chained', 'DEL bridge']);
    for (const c of r.calls) expect(JSON.parse(c.stdin).prevResult).toEqual(final);
    expect(r.calls[0]!.stdin).not.toContain('capabilities');
  });

  test(`${mode}: CHECK passes after ADD, fails when the pod interface is gone, is refused before ADD, and is skipped with disableCheck`, async () => {
    const r = rig(mode);
    const att = r.pod('a');
    await expect(r.chain().check(att)).rejects.toMatchObject({ code: CniErrorCode.UnknownContainer });
    await r.chain().add(att);
    await r.chain().check(att);
    expect(r.chained.calls.CHECK).toBe(1);
    r.kernel.removeLink(r.kernel.netns('cni-a'), 'eth0');
    const err = await r
      .chain()
      .check(att)
      .catch((e: unknown) => e);
    expect(err).toBeInstanceOf(CniChainError);
    expect((err as CniChainError).pluginType).toBe('bridge');
    expect((err as CniChainError).message).toContain('eth0 is missing');
    await r.chain({ ...NET, disableCheck: true }).check(att); // no plugin called
    expect(r.chained.calls.CHECK).toBe(1);
  });

  test(`${mode}: VERSION reports what each plugin supports; a config version no plugin supports fails with code 1`, async () => {
    const r = rig(mode);
    const versions = await r.chain().versions();
    expect(versions).toHaveLength(2);
    expect(versions[0]!.supportedVersions).toContain('1.0.0');
    expect(versions[0]!.supportedVersions).not.toContain('1.1.0');
    const att = r.pod('a');
    const err = (await r
      .chain({ ...NET, cniVersion: '1.1.0' })
      .add(att)
      .catch((e: unknown) => e)) as CniChainError;
    expect(err.code).toBe(CniErrorCode.IncompatibleVersion);
    expect(err.message).toContain('plugin type="bridge" name="podnet" failed (add): incompatible CNI versions');
    expect(r.ipam.allocatedCount('podnet')).toBe(0);
  });

  test(`${mode}: a failing chained plugin stops ADD with its error code and message; nothing is cached; the runtime DEL cleans up`, async () => {
    const r = rig(mode);
    r.chained.fail = (cmd) =>
      cmd === 'ADD'
        ? new CniError(
            CniErrorCode.TryAgainLater,
            'node agent unreachable',
            'dial unix /var/run/agent.sock: connection refused',
          )
        : undefined;
    const att = r.pod('a');
    const err = (await r
      .chain()
      .add(att)
      .catch((e: unknown) => e)) as CniChainError;
    expect(err).toBeInstanceOf(CniChainError);
    expect([err.code, err.pluginType, err.pluginIndex, err.command]).toEqual([11, 'chained', 1, 'ADD']);
    expect(err.message).toContain('node agent unreachable: dial unix');
    expect(await r.cache.get('podnet', att.containerId, 'eth0')).toBeUndefined();
    expect(r.ipam.allocatedCount('podnet')).toBe(2); // bridge's ADD had succeeded
    await r.chain().del(att);
    expect(r.ipam.allocatedCount('podnet')).toBe(0);
    expect(r.chained.calls.DEL).toBe(1);
  });

  test(`${mode}: a plugin that exits non-zero without error JSON, a missing plugin, and a malformed result are reported, not swallowed`, async () => {
    const r = rig(mode);
    r.plugins.register('chained', {
      exec: async (): Promise<CniExecOutput> => ({ exitCode: 2, stdout: '', stderr: 'panic: oops' }),
    });
    const e1 = (await r
      .chain()
      .add(r.pod('a'))
      .catch((e: unknown) => e)) as CniChainError;
    expect(e1.message).toContain('exited with code 2 without error JSON: panic: oops');
    const missing = (await r
      .chain({ ...NET, plugins: [{ type: 'nope' }] })
      .add(r.pod('b'))
      .catch((e: unknown) => e)) as CniChainError;
    expect(missing.message).toContain('failed to find plugin "nope"');
    r.plugins.register('chained', {
      exec: async (req: CniExecRequest): Promise<CniExecOutput> => ({
        exitCode: 0,
        stdout: JSON.stringify({ cniVersion: '1.0.0', ips: [{ address: req.env['CNI_IFNAME'] ?? '' }] }),
        stderr: '',
      }),
    });
    const bad = (await r
      .chain()
      .add(r.pod('c'))
      .catch((e: unknown) => e)) as CniChainError;
    expect(bad.code).toBe(CniErrorCode.DecodeFailure);
    expect(bad.message).toContain('ips[0].address');
  });

  test(`${mode}: the loopback plugin brings lo up on ADD and down on DEL`, async () => {
    const r = rig(mode);
    const att = { ...r.pod('a'), ifname: 'lo' };
    const lo = new CniChain(
      { cniVersion: '1.0.0', name: 'cni-loopback', plugins: [{ type: 'loopback' }] },
      r.plugins,
      r.cache,
      { path: ['/x'], inProcess: mode === 'in-process' },
    );
    expect(r.kernel.netns('cni-a').link('lo').up).toBe(false);
    const res = await lo.add(att);
    expect(res.interfaces?.[0]?.name).toBe('lo');
    expect(r.kernel.netns('cni-a').link('lo').up).toBe(true);
    await lo.check(att);
    await lo.del(att);
    expect(r.kernel.netns('cni-a').link('lo').up).toBe(false);
  });
}

test('in process and through exec, the same ADD/CHECK/DEL gives the same plugin inputs, outputs, result and state', async () => {
  const runs = [];
  for (const mode of ['exec', 'in-process'] as const) {
    const r = rig(mode);
    const a = r.pod('a');
    const b = r.pod('b');
    const results = [await r.chain().add(a), await r.chain().add(b)];
    await r.chain().check(a);
    await r.chain().del(a);
    runs.push({
      results: JSON.stringify(results),
      calls: r.calls.map((c) => ({
        what: `${c.command} ${c.type} ${c.containerId}`,
        stdin: c.stdin,
        stdout: c.output?.stdout,
        exit: c.output?.exitCode,
      })),
      allocated: r.ipam.allocatedCount('podnet'),
      links: [...r.kernel.netns('host').links.keys()].sort(),
    });
  }
  expect(runs[1]).toEqual(runs[0]);
  expect(runs[0]!.calls.length).toBe(8);
});

test('in process: results are shared frozen copies; a plugin without an in-process entry still gets JSON text on stdin', async () => {
  const r = rig('in-process');
  const seen: string[] = [];
  // An exec-only plugin (as our CNI plugin is): passes prevResult through, from the text it was given.
  r.plugins.register('chained', {
    exec: async (req: CniExecRequest): Promise<CniExecOutput> => {
      seen.push(req.stdin);
      return {
        exitCode: 0,
        stdout: JSON.stringify((JSON.parse(req.stdin) as { prevResult: unknown }).prevResult),
        stderr: '',
      };
    },
  });
  const att = r.pod('a');
  const result = await r.chain().add(att);
  expect(seen).toHaveLength(1);
  expect(JSON.parse(seen[0]!)).toMatchObject({
    type: 'chained',
    name: 'podnet',
    prevResult: { ips: [{ address: '10.244.0.2/24' }, { address: 'fd00:10:244::2/64' }] },
  });
  // A result taken as a value (the bridge's, alone in its list) is frozen: the cache and chained plugins share it.
  const r2 = rig('in-process');
  const frozen = await r2.chain({ ...NET, plugins: [NET.plugins[0]!] }).add(r2.pod('y'));
  expect(Object.isFrozen(frozen) && Object.isFrozen(frozen.ips?.[0])).toBe(true);
  expect(() => {
    (frozen.ips as unknown[]).push({});
  }).toThrow(TypeError);
  // The list the plugins were configured from was not frozen along the way.
  expect(Object.isFrozen(NET.plugins[0]!.ipam)).toBe(false);
  expect(result.ips?.[0]?.address).toBe('10.244.0.2/24');
});
