/**
 * impl/api/cni.ts: the CNI vocabulary's validators fail with the spec's error codes and say
 * what is wrong; the derived plugin configuration injects what the spec says a runtime injects.
 */
import { test, expect } from '@playwright/test';
import {
  CniError,
  CniErrorCode,
  effectiveVersion,
  parseCniArgs,
  parseCniEnv,
  parseConfList,
  parseErrorJson,
  parseNetConf,
  parseResult,
  pluginNetConf,
} from '../../../impl/api/cni.js';

function codeOf(fn: () => unknown): { code: number; message: string } {
  try {
    fn();
  } catch (e) {
    if (e instanceof CniError) return { code: e.code, message: e.message };
    throw e;
  }
  throw new Error('expected a CniError');
}

test('config lists: JSON errors are code 6, invalid lists code 7 with the offending field named', () => {
  expect(codeOf(() => parseConfList('{"name": ')).code).toBe(CniErrorCode.DecodeFailure);
  const noVersion = codeOf(() => parseConfList({ name: 'net', plugins: [{ type: 'bridge' }] }));
  expect(noVersion.code).toBe(CniErrorCode.InvalidNetworkConfig);
  expect(noVersion.message).toContain('cniVersion');
  const badName = codeOf(() => parseConfList({ cniVersion: '1.0.0', name: '-net', plugins: [{ type: 'bridge' }] }));
  expect(badName.code).toBe(7);
  expect(badName.message).toContain('"-net"');
  expect(codeOf(() => parseConfList({ cniVersion: '1.0.0', name: 'n/x', plugins: [{ type: 'bridge' }] })).code).toBe(7);
  const single = codeOf(() => parseConfList({ cniVersion: '1.0.0', name: 'net', type: 'bridge' }));
  expect(single.message).toContain('plugins must be a list');
  expect(codeOf(() => parseConfList({ cniVersion: '1.0.0', name: 'net', plugins: [] })).message).toContain('empty');
  const noType = codeOf(() =>
    parseConfList({ cniVersion: '1.0.0', name: 'net', plugins: [{ type: 'bridge' }, { mtu: 1 }] }),
  );
  expect(noType.message).toContain('plugins[1]: type is required');
  expect(
    codeOf(() => parseConfList({ cniVersion: '1.0.0', name: 'net', plugins: [{ type: '../bin/x' }] })).message,
  ).toContain('invalid type');
  expect(
    codeOf(() => parseConfList({ cniVersion: '1.0.0', name: 'net', plugins: [{ type: 'bridge', ipam: {} }] })).message,
  ).toContain('ipam');
  const ok = parseConfList(
    '{"cniVersion":"1.0.0","name":"k8s-pod-network","plugins":[{"type":"bridge","custom":{"a":1}}]}',
  );
  expect(ok.plugins[0]!['custom']).toEqual({ a: 1 }); // unknown fields pass through
});

test('the derived plugin configuration: cniVersion and name injected, capabilities become runtimeConfig, prevResult set', () => {
  const list = parseConfList({
    cniVersion: '0.4.0',
    cniVersions: ['1.0.0', '9.9.9'],
    name: 'net',
    plugins: [
      { type: 'bridge', extra: true },
      { type: 'portmap', capabilities: { portMappings: true, bandwidth: false } },
    ],
  });
  expect(effectiveVersion(list)).toBe('1.0.0'); // highest supported of cniVersions
  const first = pluginNetConf(list, 0);
  expect(first).toEqual({ type: 'bridge', extra: true, cniVersion: '1.0.0', name: 'net' });
  const prev = { cniVersion: '1.0.0', ips: [{ address: '10.244.0.5/24' }] };
  const maps = [{ hostPort: 80, containerPort: 8080, protocol: 'tcp' }];
  const second = pluginNetConf(list, 1, {
    prevResult: prev,
    capabilityArgs: { portMappings: maps, bandwidth: { rate: 1 } },
  });
  expect(second['capabilities']).toBeUndefined();
  expect(second.runtimeConfig).toEqual({ portMappings: maps }); // only enabled capabilities
  expect(second.prevResult).toEqual(prev);
  expect(() => pluginNetConf(list, 2)).toThrow(/has no plugin 2/);
});

test('environment: each command requires its variables (code 4, all missing ones named); VERSION needs only the command', () => {
  const add = codeOf(() => parseCniEnv({ CNI_COMMAND: 'ADD', CNI_IFNAME: 'eth0' }));
  expect(add.code).toBe(CniErrorCode.InvalidEnvironment);
  expect(add.message).toBe('required env variables [CNI_CONTAINERID,CNI_NETNS,CNI_PATH] missing for ADD');
  // DEL does not need the netns (it may be gone already).
  const del = parseCniEnv({
    CNI_COMMAND: 'DEL',
    CNI_CONTAINERID: 'abc',
    CNI_IFNAME: 'eth0',
    CNI_PATH: '/opt/cni/bin:/usr/lib/cni',
  });
  expect(del.netns).toBeUndefined();
  expect(del.path).toEqual(['/opt/cni/bin', '/usr/lib/cni']);
  expect(parseCniEnv({ CNI_COMMAND: 'VERSION' }).command).toBe('VERSION');
  expect(codeOf(() => parseCniEnv({})).message).toContain('CNI_COMMAND');
  expect(codeOf(() => parseCniEnv({ CNI_COMMAND: 'FROB' })).message).toContain('unknown CNI_COMMAND');
  const full = { CNI_COMMAND: 'ADD', CNI_NETNS: '/run/netns/x', CNI_PATH: '/opt/cni/bin' };
  expect(codeOf(() => parseCniEnv({ ...full, CNI_CONTAINERID: '_x', CNI_IFNAME: 'eth0' })).message).toContain(
    'CNI_CONTAINERID',
  );
  expect(codeOf(() => parseCniEnv({ ...full, CNI_CONTAINERID: 'x', CNI_IFNAME: 'a/b' })).message).toContain(
    'CNI_IFNAME',
  );
  expect(
    codeOf(() => parseCniEnv({ ...full, CNI_CONTAINERID: 'x', CNI_IFNAME: 'eth0', CNI_ARGS: 'A=1;broken' })).code,
  ).toBe(4);
  expect(parseCniArgs('IgnoreUnknown=1;K8S_POD_NAME=a=b')).toEqual([
    ['IgnoreUnknown', '1'],
    ['K8S_POD_NAME', 'a=b'],
  ]);
});

test('results: the 1.0.0 shape is checked field by field (code 6)', () => {
  const good = {
    cniVersion: '1.0.0',
    interfaces: [{ name: 'eth0', sandbox: '/run/netns/x' }],
    ips: [{ address: 'fd00:10:244::5/64', gateway: 'fd00:10:244::1', interface: 0 }],
    routes: [{ dst: '0.0.0.0/0' }],
  };
  expect(parseResult(JSON.stringify(good))).toEqual(good);
  const badIndex = codeOf(() => parseResult({ ...good, ips: [{ address: '10.0.0.1/24', interface: 1 }] }));
  expect(badIndex.code).toBe(CniErrorCode.DecodeFailure);
  expect(badIndex.message).toContain('ips[0].interface 1 is not an index');
  expect(codeOf(() => parseResult({ ...good, ips: [{ address: '10.0.0.1' }] })).message).toContain('CIDR');
  expect(codeOf(() => parseResult({ ...good, routes: [{ dst: '0.0.0.0/0', gw: 'x' }] })).message).toContain(
    'routes[0].gw',
  );
  expect(codeOf(() => parseResult({ ips: [] })).message).toContain('cniVersion');
  expect(
    codeOf(() =>
      parseNetConf(
        '{"cniVersion":"1.0.0","name":"n","type":"x","prevResult":{"cniVersion":"1.0.0","ips":[{"address":"bad"}]}}',
      ),
    ).message,
  ).toContain('prevResult');
});

test('error JSON', () => {
  expect(parseErrorJson('{"code": 999, "msg": "failed to open netns"}')).toEqual({
    cniVersion: '',
    code: 999,
    msg: 'failed to open netns',
  });
  expect(parseErrorJson('{"cniVersion":"1.0.0","ips":[]}')).toBeUndefined();
  expect(new CniError(7, 'bad', 'why').toJson('1.0.0')).toEqual({
    cniVersion: '1.0.0',
    code: 7,
    msg: 'bad',
    details: 'why',
  });
});
